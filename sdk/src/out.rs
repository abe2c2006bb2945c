//! What a hook answers. [`Out`] and [`ReplyOut`] borrow the arena's output buffer and write the
//! answer straight into it; the [`Action`] / [`ReplyAction`] they return is the packed result
//! the host reads. Nothing here allocates once the buffer has grown to its working size.

use std::fmt;
use std::io::Write as _;

use tessera_plugin_abi::{RewriteWriter, action, merge, pack, reply_action};

use crate::resp::RespWriter;

/// The result of `on_command`, made by [`Out`]'s builders (or [`Action::PASS`]).
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action(i64);

impl Action {
    /// Forward the command unchanged (the packed value 0: the host reads no memory).
    pub const PASS: Action = Action(0);

    /// The packed ABI result.
    pub fn raw(self) -> i64 {
        self.0
    }
}

/// The result of `on_reply`, made by [`ReplyOut`]'s builders (or [`ReplyAction::PASS`]).
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyAction(i64);

impl ReplyAction {
    /// Send the (single) reply on unchanged.
    pub const PASS: ReplyAction = ReplyAction(0);

    /// The packed ABI result.
    pub fn raw(self) -> i64 {
        self.0
    }
}

/// How the host combines the replies of a rewrite. For every merge but [`Merge::Plugin`], the
/// first error reply, if any, is the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Merge {
    /// Call `on_reply` with every reply, in command order.
    Plugin = merge::PLUGIN,
    /// Concatenate arrays (or sets, or maps).
    Concat = merge::CONCAT,
    /// Sum integers.
    Sum = merge::SUM,
    /// `+OK` when every reply is `+OK`.
    AllOk = merge::ALL_OK,
    /// The first reply that is not nil (nil if all are).
    FirstNonNil = merge::FIRST_NON_NIL,
    /// The last command's reply.
    Last = merge::LAST,
    /// The first command's reply.
    First = merge::FIRST,
}

impl Merge {
    /// The merge with ABI code `code`.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            merge::PLUGIN => Self::Plugin,
            merge::CONCAT => Self::Concat,
            merge::SUM => Self::Sum,
            merge::ALL_OK => Self::AllOk,
            merge::FIRST_NON_NIL => Self::FirstNonNil,
            merge::LAST => Self::Last,
            merge::FIRST => Self::First,
            _ => return None,
        })
    }
}

fn len32(buf: &[u8]) -> u32 {
    buf.len() as u32
}

/// The output of `on_command`. Consumed by the builder that makes the [`Action`].
#[derive(Debug)]
pub struct Out<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> Out<'a> {
    /// Wraps the (cleared) output buffer.
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        buf.clear();
        Self { buf }
    }

    /// Forward the command unchanged.
    pub fn pass(self) -> Action {
        Action::PASS
    }

    /// Answer with the error `-<msg>\r\n`; `msg` starts with an error code, e.g.
    /// `ERR not allowed` (the host replaces CR/LF).
    pub fn deny(self, msg: &str) -> Action {
        self.deny_bytes(msg.as_bytes())
    }

    /// [`Out::deny`] with raw bytes.
    pub fn deny_bytes(self, msg: &[u8]) -> Action {
        self.buf.extend_from_slice(msg);
        Action(pack(action::DENY, 0, len32(self.buf)))
    }

    /// [`Out::deny`] with a formatted message: `out.deny_fmt(format_args!("ERR {x}"))`.
    pub fn deny_fmt(self, args: fmt::Arguments<'_>) -> Action {
        let _ = self.buf.write_fmt(args);
        Action(pack(action::DENY, 0, len32(self.buf)))
    }

    /// Answer directly with one RESP reply written by `f` (e.g. `|w| w.int(3)`); the command
    /// never reaches a backend.
    pub fn reply(self, f: impl FnOnce(&mut RespWriter<'_>)) -> Action {
        f(&mut RespWriter::new(self.buf));
        Action(pack(action::REPLY, 0, len32(self.buf)))
    }

    /// Answer directly with `resp`, one complete RESP reply.
    pub fn reply_raw(self, resp: &[u8]) -> Action {
        self.buf.extend_from_slice(resp);
        Action(pack(action::REPLY, 0, len32(self.buf)))
    }

    /// Forward unchanged, and call `on_reply` with its reply and `ctx`.
    pub fn observe(self, ctx: u64) -> Action {
        self.buf.extend_from_slice(&ctx.to_le_bytes());
        Action(pack(action::OBSERVE, 0, 8))
    }

    /// Replace the command by one or more commands, each routed by its own keys, whose
    /// replies are combined by `merge` (`ctx` goes to `on_reply` for [`Merge::Plugin`]).
    pub fn rewrite(self, merge: Merge, ctx: u64) -> Rewrite<'a> {
        Rewrite {
            w: RewriteWriter::begin(self.buf, merge as u32, ctx),
        }
    }
}

/// A rewrite being written: per command, [`Rewrite::command`] with its argument count, then
/// exactly that many [`Rewrite::arg`] / [`Rewrite::input`] / [`Rewrite::arg_parts`]; then
/// [`Rewrite::finish`]. A block with no command, or with an argument count that does not match,
/// is refused by the host.
///
/// ```
/// # use tessera_plugin_sdk::{Merge, Out, Action};
/// # fn f(out: Out<'_>) -> Action {
/// let mut rw = out.rewrite(Merge::Sum, 0);
/// rw.command(3).input(0).arg(b"{tb0.1234abcd}big:k").input(2);
/// rw.command(3).input(0).arg(b"{tb1.1234abcd}big:k").input(3);
/// rw.finish()
/// # }
/// ```
#[derive(Debug)]
pub struct Rewrite<'a> {
    w: RewriteWriter<'a>,
}

impl Rewrite<'_> {
    /// Starts a command of `nargs` arguments (the name included).
    pub fn command(&mut self, nargs: usize) -> &mut Self {
        self.w.command(nargs as u32);
        self
    }

    /// An argument given as bytes.
    pub fn arg(&mut self, bytes: &[u8]) -> &mut Self {
        self.w.arg(bytes);
        self
    }

    /// An argument made of several pieces (no temporary).
    pub fn arg_parts(&mut self, parts: &[&[u8]]) -> &mut Self {
        self.w.arg_parts(parts);
        self
    }

    /// Reuses argument `i` of the client's command as is (even if it was elided).
    pub fn input(&mut self, i: usize) -> &mut Self {
        self.w.input(i as u32);
        self
    }

    /// Commands written so far.
    pub fn count(&self) -> usize {
        self.w.count() as usize
    }

    /// Ends the block.
    pub fn finish(self) -> Action {
        Action(pack(action::REWRITE, self.w.count(), self.w.len() as u32))
    }
}

/// The output of `on_reply`. Consumed by the builder that makes the [`ReplyAction`].
#[derive(Debug)]
pub struct ReplyOut<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> ReplyOut<'a> {
    /// Wraps the (cleared) output buffer.
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        buf.clear();
        Self { buf }
    }

    /// Send the single reply on unchanged.
    pub fn pass(self) -> ReplyAction {
        ReplyAction::PASS
    }

    /// Send one RESP reply written by `f`.
    pub fn replace(self, f: impl FnOnce(&mut RespWriter<'_>)) -> ReplyAction {
        f(&mut RespWriter::new(self.buf));
        ReplyAction(pack(reply_action::REPLACE, 0, len32(self.buf)))
    }

    /// Send `resp`, one complete RESP reply (e.g. one of the replies, as is).
    pub fn replace_raw(self, resp: &[u8]) -> ReplyAction {
        self.buf.extend_from_slice(resp);
        ReplyAction(pack(reply_action::REPLACE, 0, len32(self.buf)))
    }

    /// Send the error `-<msg>\r\n`.
    pub fn error(self, msg: &str) -> ReplyAction {
        self.buf.extend_from_slice(msg.as_bytes());
        ReplyAction(pack(reply_action::ERROR, 0, len32(self.buf)))
    }

    /// [`ReplyOut::error`] with a formatted message.
    pub fn error_fmt(self, args: fmt::Arguments<'_>) -> ReplyAction {
        let _ = self.buf.write_fmt(args);
        ReplyAction(pack(reply_action::ERROR, 0, len32(self.buf)))
    }
}
