//! [`Replies`]: the reply table handed to `on_reply`, raw RESP per reply.

use tessera_plugin_abi::RepliesView;

use crate::resp::{self, Value};

/// The replies of an observed command (one) or of a rewrite (one per command, in order).
#[derive(Debug, Clone, Copy)]
pub struct Replies<'a> {
    view: RepliesView<'a>,
}

impl<'a> Replies<'a> {
    /// Wraps a parsed reply table.
    pub fn new(view: RepliesView<'a>) -> Self {
        Self { view }
    }

    /// Number of replies.
    pub fn len(&self) -> usize {
        self.view.len()
    }

    /// Whether there is no reply.
    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    /// Reply `i` as raw RESP; only its head (first line, at most 64 bytes) when the plugin
    /// asked for heads ([`crate::Manifest::observe_heads`], see [`Replies::heads`]).
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        self.view.get(i)
    }

    /// Whether these are heads only.
    pub fn heads(&self) -> bool {
        self.view.heads()
    }

    /// Reply `i`'s full size in bytes (also when only its head was passed).
    pub fn size(&self, i: usize) -> Option<usize> {
        self.view.size(i)
    }

    /// Reply `i` parsed; `None` past the end or if it is not one valid RESP value (a head of
    /// a bulk string or an aggregate is not).
    pub fn value(&self, i: usize) -> Option<Value<'a>> {
        resp::parse(self.get(i)?).ok().map(|(v, _)| v)
    }

    /// The replies as raw RESP, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let view = self.view;
        (0..view.len()).filter_map(move |i| view.get(i))
    }

    /// The first reply that is an error (`-…`), raw: what a merge usually answers with.
    pub fn first_error(&self) -> Option<&'a [u8]> {
        self.iter().find(|r| r.first() == Some(&b'-'))
    }
}
