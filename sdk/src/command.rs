//! [`Command`]: the host's command table as a plugin reads it. Names and keys are always there;
//! other arguments may be elided (only their length is real) unless the manifest asked for
//! values.

use tessera_plugin_abi::{CMD_VALUES_ELIDED, CommandView};

pub use tessera_plugin_abi::Arg;

/// One client command, borrowed from the arena for the duration of the hook.
#[derive(Debug, Clone, Copy)]
pub struct Command<'a> {
    view: CommandView<'a>,
    id: u16,
}

impl<'a> Command<'a> {
    /// Wraps a parsed command table and the ABI command id the host passed.
    pub fn new(view: CommandView<'a>, id: u16) -> Self {
        Self { view, id }
    }

    /// The ABI command id ([`crate::cmd`]); 0 for a command the host does not know.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Whether this is the command `id` (e.g. `cmd.is(cmd::SET)`). Subcommands carry their
    /// container's id: `CONFIG GET` is `cmd::CONFIG`.
    pub fn is(&self, id: u16) -> bool {
        self.id == id
    }

    /// The command name exactly as the client sent it (any case).
    pub fn name(&self) -> &'a [u8] {
        self.bytes(0).unwrap_or_default()
    }

    /// The `class::*` bits of the command.
    pub fn class(&self) -> u32 {
        self.view.class()
    }

    /// Whether the command has any of the `class::*` bits in `bits`.
    pub fn has_class(&self, bits: u32) -> bool {
        self.view.class() & bits != 0
    }

    /// Number of arguments, the name included.
    pub fn len(&self) -> usize {
        self.view.len()
    }

    /// Whether the table is empty (never for a real command).
    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    /// Argument `i` (0 is the name); `None` past the end.
    pub fn arg(&self, i: usize) -> Option<Arg<'a>> {
        self.view.arg(i)
    }

    /// The bytes of argument `i`; `None` past the end or when the host elided them.
    pub fn bytes(&self, i: usize) -> Option<&'a [u8]> {
        self.view.arg(i).and_then(|a| a.bytes)
    }

    /// The length of argument `i`, real even when its bytes were elided.
    pub fn arg_len(&self, i: usize) -> Option<usize> {
        self.view.arg(i).map(|a| a.len as usize)
    }

    /// Whether argument `i` is a key.
    pub fn is_key(&self, i: usize) -> bool {
        self.view.arg(i).is_some_and(|a| a.key)
    }

    /// All arguments in order, the name first.
    pub fn args(&self) -> impl Iterator<Item = Arg<'a>> + 'a {
        let view = self.view;
        (0..view.len()).filter_map(move |i| view.arg(i))
    }

    /// The keys with their argument index.
    pub fn keys(&self) -> Keys<'a> {
        Keys {
            view: self.view,
            next: 1,
        }
    }

    /// The first key, if the command has one.
    pub fn first_key(&self) -> Option<&'a [u8]> {
        self.keys().next().map(|(_, k)| k)
    }

    /// Whether the host elided the bytes of some argument.
    pub fn values_elided(&self) -> bool {
        self.view.flags() & CMD_VALUES_ELIDED != 0
    }

    /// The longest argument that is neither the name nor a key (0 if none): what a value-size
    /// limit checks, available even when values are elided.
    pub fn max_value_len(&self) -> usize {
        self.args()
            .skip(1)
            .filter(|a| !a.key)
            .map(|a| a.len as usize)
            .max()
            .unwrap_or(0)
    }
}

/// Iterator over the keys of a [`Command`]: `(argument index, key bytes)`.
#[derive(Debug, Clone)]
pub struct Keys<'a> {
    view: CommandView<'a>,
    next: usize,
}

impl<'a> Iterator for Keys<'a> {
    type Item = (usize, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.view.len() {
            let i = self.next;
            self.next += 1;
            if let Some(Arg {
                key: true,
                bytes: Some(b),
                ..
            }) = self.view.arg(i)
            {
                return Some((i, b));
            }
        }
        None
    }
}
