//! [`Manifest`]: what a plugin hooks, returned by `init`. The host compiles it into a
//! per-command bitmap, so an unhooked command never enters the plugin.

use tessera_plugin_abi::{
    Gate, HOOK_VALUES, MF_ALL, MF_CLASS_VALUES, MF_OBSERVE_HEADS, MF_WANT_CLOSE, ManifestBuilder,
};

/// The hook declaration. A command is hooked when it is listed ([`Manifest::hook`]), when it
/// has a hooked class ([`Manifest::hook_class`]) or with [`Manifest::hook_all`]. Only names and
/// keys are copied into the plugin unless values are asked for.
///
/// ```
/// use tessera_plugin_sdk::{class, cmd, Manifest};
/// let m = Manifest::new()
///     .hook(cmd::FLUSHALL)              // name and keys only
///     .hook_with_values(cmd::SET)       // SET's value bytes too
///     .hook_class(class::ADMIN)
///     .prefix("big:");                  // only commands with a key starting with "big:"
/// # let _ = m;
/// ```
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    inner: ManifestBuilder,
}

impl Manifest {
    /// Hooks nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(mut self, id: u16, flags: u16) -> Self {
        match self.inner.commands.iter_mut().find(|(c, _)| *c == id) {
            Some((_, f)) => *f |= flags,
            None => self.inner.commands.push((id, flags)),
        }
        self
    }

    /// Hooks command `id` ([`crate::cmd`]); its values are elided (lengths only).
    pub fn hook(self, id: u16) -> Self {
        self.add(id, 0)
    }

    /// Hooks command `id` with the bytes of every argument.
    pub fn hook_with_values(self, id: u16) -> Self {
        self.add(id, HOOK_VALUES)
    }

    /// Hooks every command with one of the `class::*` bits.
    pub fn hook_class(mut self, bits: u32) -> Self {
        self.inner.classes |= bits;
        self
    }

    /// Hooks every command.
    pub fn hook_all(mut self) -> Self {
        self.inner.flags |= MF_ALL;
        self
    }

    /// Copies values for commands hooked through [`Manifest::hook_class`] or
    /// [`Manifest::hook_all`].
    pub fn class_values(mut self) -> Self {
        self.inner.flags |= MF_CLASS_VALUES;
        self
    }

    /// Asks for only the head and size of each reply it observes: `on_reply` gets a reply's
    /// first line (its type, and a bulk string's length or an aggregate's count, or a simple
    /// reply's value; at most 64 bytes) through [`crate::Replies::get`], and its full size
    /// through [`crate::Replies::size`], instead of a copy of the whole reply. For plugins that
    /// count or time replies: a large reply then costs them nothing, and never exceeds their
    /// input limit. A rewrite's merge still gets whole replies.
    pub fn observe_heads(mut self) -> Self {
        self.inner.flags |= MF_OBSERVE_HEADS;
        self
    }

    /// Asks for `on_close` when a client connection closes.
    pub fn want_close(mut self) -> Self {
        self.inner.flags |= MF_WANT_CLOSE;
        self
    }

    /// Asks for `on_tick` every `ms` milliseconds (0: never).
    pub fn tick_ms(mut self, ms: u32) -> Self {
        self.inner.tick_ms = ms;
        self
    }

    /// Restricts every hook to commands with a key starting with `prefix` (checked by the host;
    /// several prefixes: any of them).
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.inner.prefixes.push(prefix.as_ref().to_vec());
        self
    }

    /// Declares that the plugin refuses command `name` to every client, unconditionally:
    /// `"FLUSHALL"`, or `"CONFIG|SET"` for one subcommand. The proxy then keeps backend
    /// scripts (`EVAL`, `FCALL`) from running it too. A declaration, not a hook: hook and deny
    /// the command as well. Declare only rules that hold for every client, user, address, key
    /// and value; leaving one out is always safe, declaring a conditional one is not (scripts
    /// would lose a command some clients may run). The host refuses unknown commands.
    ///
    /// ```
    /// use tessera_plugin_sdk::{cmd, Manifest};
    /// let m = Manifest::new()
    ///     .hook(cmd::FLUSHALL)
    ///     .deny_to_all("FLUSHALL")
    ///     .hook_with_values(cmd::CONFIG)
    ///     .deny_to_all("CONFIG|SET");
    /// # let _ = m;
    /// ```
    pub fn deny_to_all(mut self, name: &str) -> Self {
        let name = name.to_ascii_uppercase().into_bytes();
        if !self.inner.denied.contains(&name) {
            self.inner.denied.push(name);
        }
        self
    }

    /// Declares that the plugin refuses every command of these `class::*` bits to every
    /// client, unconditionally (as [`Manifest::deny_to_all`]).
    pub fn deny_classes_to_all(mut self, bits: u32) -> Self {
        self.inner.denied_classes |= bits;
        self
    }

    /// Gates the commands hooked only through these `class::*` bits (not listed by id, not
    /// through [`Manifest::hook_all`] or another hooked class): the host calls the plugin for
    /// one of them only when a key starts with a [`Manifest::gate_prefix`], or a value is
    /// longer than [`Manifest::gate_max_value`]. For rules the host can check without the
    /// plugin: a write filter that protects keys under some prefixes and refuses large values
    /// is then entered only for the writes it may refuse, not for every write. Without a
    /// prefix or a bound, a gated command never reaches the plugin.
    ///
    /// ```
    /// use tessera_plugin_sdk::{class, Manifest};
    /// let m = Manifest::new()
    ///     .hook_class(class::WRITE)
    ///     .gate_classes(class::WRITE)
    ///     .gate_prefix("frozen:")
    ///     .gate_max_value(1 << 20);
    /// # let _ = m;
    /// ```
    pub fn gate_classes(mut self, bits: u32) -> Self {
        self.gate().classes |= bits;
        self
    }

    /// Opens the gate for a command with a key starting with `prefix`.
    pub fn gate_prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.gate().prefixes.push(prefix.as_ref().to_vec());
        self
    }

    /// Opens the gate for a command with a value longer than `bytes`.
    pub fn gate_max_value(mut self, bytes: u32) -> Self {
        self.gate().max_value = bytes;
        self
    }

    fn gate(&mut self) -> &mut Gate {
        self.inner.gate.get_or_insert_with(|| Gate {
            classes: 0,
            max_value: u32::MAX,
            prefixes: Vec::new(),
        })
    }

    /// Whether the manifest hooks no command at all.
    pub fn hooks_nothing(&self) -> bool {
        self.inner.commands.is_empty() && self.inner.classes == 0 && self.inner.flags & MF_ALL == 0
    }

    /// Appends the ABI encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.inner.encode(out);
    }
}
