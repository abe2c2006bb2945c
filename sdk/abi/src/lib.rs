//! The Tessera plugin ABI, version 1: the byte layouts and constants shared by the proxy (host)
//! and plugins (guests, through `tessera-plugin-sdk`). `sdk/ABI.md` is the prose description and
//! `sdk/wit/tessera-plugin.wit` the normative interface; this crate is the one implementation of
//! the layouts both sides use, so they cannot drift apart.
//!
//! Everything is little-endian. All offsets are relative to the start of the region they are in.
//! Readers never panic on malformed input: they return `None` / `Err`.

#![cfg_attr(not(test), no_std)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod batch;
mod commands;
pub use commands::{COMMAND_NAMES, cmd};

/// ABI major version. The guest exports a function named [`ABI_MARKER`]; the host refuses a
/// module without it before looking at anything else.
pub const ABI_VERSION: u32 = 1;

/// Export name of the version marker (a function `() -> ()`, never called).
pub const ABI_MARKER: &str = "tessera_plugin_abi_v1";

/// Module name of every host import.
pub const IMPORT_MODULE: &str = "tessera";

/// Export names (besides the marker and `memory`).
pub mod export {
    /// `() -> i32`: address of the 16-byte arena descriptor ([`super::Arena`]).
    pub const ARENA: &str = "tp_arena";
    /// `(in_len: i32, out_len: i32) -> i32`: grow the arena so `in` holds at least `in_len`
    /// bytes (and `out` at least `out_len`); 0 ok, negative refused. The host re-reads the
    /// descriptor afterwards.
    pub const RESERVE: &str = "tp_reserve";
    /// `(cfg_len: i32) -> i64`: config bytes are in `in`; result [`super::INIT_OK`] with the
    /// manifest in `out`, or [`super::INIT_ERROR`] with a message.
    pub const INIT: &str = "tp_init";
    /// `(conn: i64, cmd: i32, nargs: i32) -> i64`: the command table is in `in`.
    pub const ON_COMMAND: &str = "tp_on_command";
    /// `(conn: i64, ctx: i64, nreplies: i32) -> i64`: the reply table is in `in`.
    pub const ON_REPLY: &str = "tp_on_reply";
    /// `(conn: i64, n: i32) -> i64`, optional: `n` commands of one connection in one call
    /// (a batch table in `in`, see [`super::batch`]); the result packs `count` = commands
    /// done and `out_len` = the bytes of `out` used. Without it the host calls
    /// `tp_on_command` once per command.
    pub const ON_COMMANDS: &str = "tp_on_commands";
    /// `(conn: i64) -> ()`, optional: a client connection closed.
    pub const ON_CLOSE: &str = "tp_on_close";
    /// `() -> ()`, optional: called every `tick_ms` of the manifest.
    pub const ON_TICK: &str = "tp_on_tick";
}

/// Import names (module [`IMPORT_MODULE`]). Signatures in `sdk/ABI.md`.
pub mod import {
    pub const LOG: &str = "log";
    pub const LOG_ENABLED: &str = "log_enabled";
    pub const METRIC_DEFINE: &str = "metric_define";
    pub const METRIC_SERIES: &str = "metric_series";
    pub const COUNTER_ADD: &str = "counter_add";
    pub const GAUGE_SET: &str = "gauge_set";
    pub const GAUGE_ADD: &str = "gauge_add";
    pub const HISTOGRAM_OBSERVE: &str = "histogram_observe";
    pub const STATE_GET: &str = "state_get";
    pub const STATE_SET: &str = "state_set";
    pub const STATE_DELETE: &str = "state_delete";
    pub const STATE_INCR: &str = "state_incr";
    pub const STATE_GET_VERSIONED: &str = "state_get_versioned";
    pub const STATE_SET_IF_VERSION: &str = "state_set_if_version";
    pub const RATELIMIT_ACQUIRE: &str = "ratelimit_acquire";
    pub const CLIENT_INFO: &str = "client_info";
    pub const NOW_MS: &str = "now_ms";
    pub const NOW_US: &str = "now_us";
    pub const STAGE_US: &str = "stage_us";
}

/// Status codes returned by imports (negative).
pub mod status {
    pub const NOT_FOUND: i64 = -1;
    pub const BAD_ARGUMENT: i64 = -2;
    pub const BUFFER_TOO_SMALL: i64 = -3;
    pub const INVALID_MEMORY: i64 = -6;
    pub const NOT_ALLOWED: i64 = -10;
    pub const UNIMPLEMENTED: i64 = -12;
}

/// Log levels of the `log` import.
pub mod level {
    pub const TRACE: i32 = 0;
    pub const DEBUG: i32 = 1;
    pub const INFO: i32 = 2;
    pub const WARN: i32 = 3;
    pub const ERROR: i32 = 4;
}

/// Metric kinds of `metric_define`.
pub mod metric_kind {
    pub const COUNTER: i32 = 0;
    pub const GAUGE: i32 = 1;
    pub const HISTOGRAM: i32 = 2;
}

/// Command classes, passed with every command and usable as hooks in the manifest.
pub mod class {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    /// Server administration (Redis's `admin` flag or `@admin` category).
    pub const ADMIN: u32 = 1 << 2;
    pub const PUBSUB: u32 = 1 << 3;
    pub const BLOCKING: u32 = 1 << 4;
    pub const SCRIPTING: u32 = 1 << 5;
    pub const TRANSACTION: u32 = 1 << 6;
    pub const CONNECTION: u32 = 1 << 7;
    /// The command names no key.
    pub const KEYLESS: u32 = 1 << 8;
    /// The command may name more than one key.
    pub const MULTI_KEY: u32 = 1 << 9;
    pub const FAST: u32 = 1 << 10;
    /// Redis's `@dangerous` category (FLUSHALL, KEYS, CONFIG …).
    pub const DANGEROUS: u32 = 1 << 11;

    /// Class names as plugin configs spell them.
    pub const NAMES: &[(&str, u32)] = &[
        ("read", READ),
        ("write", WRITE),
        ("admin", ADMIN),
        ("pubsub", PUBSUB),
        ("blocking", BLOCKING),
        ("scripting", SCRIPTING),
        ("transaction", TRANSACTION),
        ("connection", CONNECTION),
        ("keyless", KEYLESS),
        ("multi-key", MULTI_KEY),
        ("fast", FAST),
        ("dangerous", DANGEROUS),
    ];

    /// The bit of a class name (case-insensitive).
    pub fn by_name(name: &str) -> Option<u32> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, bit)| bit)
    }
}

/// The ABI id of a command name (case-insensitive; `CONFIG|GET` → id of `CONFIG`), 0 if unknown.
pub fn command_id(name: &str) -> u16 {
    let top = name.split('|').next().unwrap_or(name);
    if top.is_empty() || top.len() > 32 {
        return 0;
    }
    let mut upper = [0u8; 32];
    for (dst, src) in upper.iter_mut().zip(top.bytes()) {
        *dst = src.to_ascii_uppercase();
    }
    let upper = &upper[..top.len()];
    COMMAND_NAMES[1..]
        .binary_search_by(|probe| probe.as_bytes().cmp(upper))
        .map(|i| (i + 1) as u16)
        .unwrap_or(0)
}

/// The name of an ABI command id ("" if unknown).
pub fn command_name(id: u16) -> &'static str {
    COMMAND_NAMES.get(id as usize).copied().unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// Results: one packed i64.

/// `on_command` actions.
pub mod action {
    /// Forward the command unchanged.
    pub const PASS: u8 = 0;
    /// Reply with an error: `out` holds the text without `-` and CRLF, e.g. `ERR not allowed`.
    pub const DENY: u8 = 1;
    /// Reply directly: `out` holds one complete RESP reply.
    pub const REPLY: u8 = 2;
    /// Replace by `count` commands: `out` holds a rewrite block.
    pub const REWRITE: u8 = 3;
    /// Forward unchanged and call `on_reply` with its reply: `out` holds the u64 ctx.
    pub const OBSERVE: u8 = 4;
}

/// `on_reply` actions.
pub mod reply_action {
    /// Send the (single) reply on unchanged.
    pub const PASS: u8 = 0;
    /// Send `out` instead: one complete RESP reply.
    pub const REPLACE: u8 = 1;
    /// Send an error: `out` holds the text without `-` and CRLF.
    pub const ERROR: u8 = 2;
}

/// `tp_init` result codes (in the action field).
pub const INIT_OK: u8 = 0;
pub const INIT_ERROR: u8 = 1;

pub mod merge;

/// Packs a result: `action:8 | count:24 | out_len:32`.
pub const fn pack(action: u8, count: u32, out_len: u32) -> i64 {
    (((action as u64) << 56) | (((count & 0xFF_FFFF) as u64) << 32) | out_len as u64) as i64
}

/// Unpacks a result into `(action, count, out_len)`.
pub const fn unpack(result: i64) -> (u8, u32, u32) {
    let r = result as u64;
    ((r >> 56) as u8, ((r >> 32) & 0xFF_FFFF) as u32, r as u32)
}

// ---------------------------------------------------------------------------------------------
// Little-endian helpers.

#[inline]
fn get_u32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline]
fn get_u16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

#[inline]
fn get_u64(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

#[inline]
fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// The arena descriptor.

/// Where the guest's two buffers are: `in` (host writes) and `out` (guest writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Arena {
    pub in_off: u32,
    pub in_cap: u32,
    pub out_off: u32,
    pub out_cap: u32,
}

impl Arena {
    pub const SIZE: usize = 16;

    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(Self {
            in_off: get_u32(b, 0)?,
            in_cap: get_u32(b, 4)?,
            out_off: get_u32(b, 8)?,
            out_cap: get_u32(b, 12)?,
        })
    }

    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        put_u32(&mut b, 0, self.in_off);
        put_u32(&mut b, 4, self.in_cap);
        put_u32(&mut b, 8, self.out_off);
        put_u32(&mut b, 12, self.out_cap);
        b
    }
}

// ---------------------------------------------------------------------------------------------
// The command table (host → guest).

/// Header size of a command table: `u32 nargs, u32 flags, u32 class, u32 reserved`.
pub const CMD_HEADER: usize = 16;
/// Size of one argument entry: `u32 off, u32 len_flags`.
pub const ARG_ENTRY: usize = 8;
/// Argument flag: this argument is a key.
pub const ARG_KEY: u32 = 1 << 31;
/// Argument flag: the bytes were not copied (the plugin did not ask for values); `len` is real.
pub const ARG_ELIDED: u32 = 1 << 30;
/// Argument flag in a rewrite: the low 30 bits are the index of an input argument to reuse.
pub const ARG_REF: u32 = 1 << 31;
/// Mask of the length (or index) bits.
pub const LEN_MASK: u32 = (1 << 30) - 1;
/// Command-table flag: at least one argument was elided.
pub const CMD_VALUES_ELIDED: u32 = 1;

/// One argument as the host describes it.
#[derive(Debug, Clone, Copy)]
pub struct ArgIn<'a> {
    pub bytes: &'a [u8],
    pub key: bool,
    /// Copy only the length.
    pub elide: bool,
}

/// Bytes [`encode_command`] needs for these arguments.
pub fn command_size<'a>(args: impl Iterator<Item = ArgIn<'a>>) -> usize {
    let mut n = CMD_HEADER;
    for a in args {
        n += ARG_ENTRY + if a.elide { 0 } else { a.bytes.len() };
    }
    n
}

/// Writes a command table into `dst` (sized with [`command_size`]); returns the bytes written.
/// Arguments longer than [`LEN_MASK`] are refused (`None`).
pub fn encode_command<'a>(
    dst: &mut [u8],
    class: u32,
    nargs: usize,
    args: impl Iterator<Item = ArgIn<'a>>,
) -> Option<usize> {
    let table_end = CMD_HEADER + nargs * ARG_ENTRY;
    if dst.len() < table_end {
        return None;
    }
    let mut data = table_end;
    let mut flags = 0;
    let mut i = 0;
    for a in args {
        if i == nargs || a.bytes.len() > LEN_MASK as usize {
            return None;
        }
        let mut len = a.bytes.len() as u32;
        if a.key {
            len |= ARG_KEY;
        }
        let entry = CMD_HEADER + i * ARG_ENTRY;
        if a.elide {
            flags |= CMD_VALUES_ELIDED;
            put_u32(dst, entry, 0);
            put_u32(dst, entry + 4, len | ARG_ELIDED);
        } else {
            let end = data + a.bytes.len();
            dst.get_mut(data..end)?.copy_from_slice(a.bytes);
            put_u32(dst, entry, data as u32);
            put_u32(dst, entry + 4, len);
            data = end;
        }
        i += 1;
    }
    if i != nargs {
        return None;
    }
    put_u32(dst, 0, nargs as u32);
    put_u32(dst, 4, flags);
    put_u32(dst, 8, class);
    put_u32(dst, 12, 0);
    Some(data)
}

/// A command table as the guest reads it.
#[derive(Debug, Clone, Copy)]
pub struct CommandView<'a> {
    buf: &'a [u8],
    nargs: u32,
    flags: u32,
    class: u32,
}

/// One argument of a [`CommandView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg<'a> {
    /// The bytes, or `None` when the host elided them.
    pub bytes: Option<&'a [u8]>,
    pub len: u32,
    pub key: bool,
}

impl<'a> CommandView<'a> {
    /// Parses and validates the table (every entry inside `buf`).
    pub fn parse(buf: &'a [u8]) -> Option<Self> {
        let view = Self::parse_lazy(buf)?;
        for i in 0..view.nargs as usize {
            let off = get_u32(buf, CMD_HEADER + i * ARG_ENTRY)? as usize;
            let lf = get_u32(buf, CMD_HEADER + i * ARG_ENTRY + 4)?;
            if lf & ARG_ELIDED == 0 {
                let end = off.checked_add((lf & LEN_MASK) as usize)?;
                if end > buf.len() {
                    return None;
                }
            }
        }
        Some(view)
    }

    /// Checks only the header and that the argument entries lie inside `buf`; each entry's
    /// range is checked when [`CommandView::arg`] reads it (a range outside `buf` is `None`
    /// there). For the guest's hot path: a hook that reads two arguments of a long command
    /// does not pay for validating all of them.
    pub fn parse_lazy(buf: &'a [u8]) -> Option<Self> {
        let nargs = get_u32(buf, 0)?;
        let flags = get_u32(buf, 4)?;
        let class = get_u32(buf, 8)?;
        let table_end = CMD_HEADER.checked_add((nargs as usize).checked_mul(ARG_ENTRY)?)?;
        if buf.len() < table_end {
            return None;
        }
        Some(Self {
            buf,
            nargs,
            flags,
            class,
        })
    }

    pub fn len(&self) -> usize {
        self.nargs as usize
    }

    pub fn is_empty(&self) -> bool {
        self.nargs == 0
    }

    pub fn flags(&self) -> u32 {
        self.flags
    }

    pub fn class(&self) -> u32 {
        self.class
    }

    /// Argument `i` (0 is the command name). Panic-free: out of range is `None`.
    pub fn arg(&self, i: usize) -> Option<Arg<'a>> {
        if i >= self.nargs as usize {
            return None;
        }
        let off = get_u32(self.buf, CMD_HEADER + i * ARG_ENTRY)? as usize;
        let lf = get_u32(self.buf, CMD_HEADER + i * ARG_ENTRY + 4)?;
        let len = lf & LEN_MASK;
        let bytes = if lf & ARG_ELIDED != 0 {
            None
        } else {
            // Checked here, not trusted from `parse_lazy`: outside `buf` is no argument.
            Some(self.buf.get(off..off.checked_add(len as usize)?)?)
        };
        Some(Arg {
            bytes,
            len,
            key: lf & ARG_KEY != 0,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Reply tables (host → guest, for on_reply): `u32 n, u32 flags, n × {u32 off, u32 len}`, bytes.
// With flag REPLIES_HEADS (an observer whose manifest has MF_OBSERVE_HEADS): each entry is the
// reply's head only, and `n × u32` full reply sizes follow the entries, before the bytes.

pub const REPLIES_HEADER: usize = 8;
/// Reply-table flag: the entries are heads ([`reply_head`]); the full sizes follow them.
pub const REPLIES_HEADS: u32 = 1 << 0;
/// Most bytes of a reply's head.
pub const REPLY_HEAD_MAX: usize = 64;

/// A reply's head: its first line with its CRLF (the type, and the length of a bulk string or
/// the count of an aggregate, or the value of a simple string, error or number), cut at
/// [`REPLY_HEAD_MAX`] bytes.
pub fn reply_head(reply: &[u8]) -> &[u8] {
    let cut = &reply[..reply.len().min(REPLY_HEAD_MAX)];
    match cut.windows(2).position(|w| w == b"\r\n") {
        Some(i) => &cut[..i + 2],
        None => cut,
    }
}

/// Bytes [`encode_reply_heads`] needs.
pub fn reply_heads_size(replies: &[&[u8]]) -> usize {
    replies.iter().fold(REPLIES_HEADER, |n, r| {
        n + ARG_ENTRY + 4 + reply_head(r).len()
    })
}

/// Writes a reply table of heads (flag [`REPLIES_HEADS`]); returns the bytes written.
pub fn encode_reply_heads(dst: &mut [u8], replies: &[&[u8]]) -> Option<usize> {
    let n = replies.len();
    let sizes = REPLIES_HEADER + n * ARG_ENTRY;
    let mut data = sizes + n * 4;
    if dst.len() < data {
        return None;
    }
    for (i, r) in replies.iter().enumerate() {
        let head = reply_head(r);
        let end = data + head.len();
        dst.get_mut(data..end)?.copy_from_slice(head);
        put_u32(dst, REPLIES_HEADER + i * ARG_ENTRY, data as u32);
        put_u32(dst, REPLIES_HEADER + i * ARG_ENTRY + 4, head.len() as u32);
        put_u32(dst, sizes + i * 4, u32::try_from(r.len()).ok()?);
        data = end;
    }
    put_u32(dst, 0, n as u32);
    put_u32(dst, 4, REPLIES_HEADS);
    Some(data)
}

/// Bytes [`encode_replies`] needs.
pub fn replies_size<'a>(replies: impl Iterator<Item = &'a [u8]>) -> usize {
    replies.fold(REPLIES_HEADER, |n, r| n + ARG_ENTRY + r.len())
}

/// Writes a reply table; returns the bytes written.
pub fn encode_replies<'a>(
    dst: &mut [u8],
    n: usize,
    replies: impl Iterator<Item = &'a [u8]>,
) -> Option<usize> {
    let table_end = REPLIES_HEADER + n * ARG_ENTRY;
    if dst.len() < table_end {
        return None;
    }
    let mut data = table_end;
    let mut i = 0;
    for r in replies {
        if i == n {
            return None;
        }
        let end = data + r.len();
        dst.get_mut(data..end)?.copy_from_slice(r);
        put_u32(dst, REPLIES_HEADER + i * ARG_ENTRY, data as u32);
        put_u32(dst, REPLIES_HEADER + i * ARG_ENTRY + 4, r.len() as u32);
        data = end;
        i += 1;
    }
    if i != n {
        return None;
    }
    put_u32(dst, 0, n as u32);
    put_u32(dst, 4, 0);
    Some(data)
}

/// A reply table as the guest reads it: raw RESP per reply (or each reply's head, with
/// [`REPLIES_HEADS`]).
#[derive(Debug, Clone, Copy)]
pub struct RepliesView<'a> {
    buf: &'a [u8],
    n: u32,
    flags: u32,
}

impl<'a> RepliesView<'a> {
    pub fn parse(buf: &'a [u8]) -> Option<Self> {
        let n = get_u32(buf, 0)?;
        let flags = get_u32(buf, 4)?;
        let mut table_end = REPLIES_HEADER.checked_add((n as usize).checked_mul(ARG_ENTRY)?)?;
        if flags & REPLIES_HEADS != 0 {
            table_end = table_end.checked_add((n as usize).checked_mul(4)?)?;
        }
        if buf.len() < table_end {
            return None;
        }
        for i in 0..n as usize {
            let off = get_u32(buf, REPLIES_HEADER + i * ARG_ENTRY)? as usize;
            let len = get_u32(buf, REPLIES_HEADER + i * ARG_ENTRY + 4)? as usize;
            if off.checked_add(len)? > buf.len() {
                return None;
            }
        }
        Some(Self { buf, n, flags })
    }

    pub fn len(&self) -> usize {
        self.n as usize
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether the entries are heads ([`REPLIES_HEADS`]) rather than whole replies.
    pub fn heads(&self) -> bool {
        self.flags & REPLIES_HEADS != 0
    }

    /// Reply `i`'s bytes as the table holds them (the whole reply, or its head).
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.n as usize {
            return None;
        }
        let off = get_u32(self.buf, REPLIES_HEADER + i * ARG_ENTRY)? as usize;
        let len = get_u32(self.buf, REPLIES_HEADER + i * ARG_ENTRY + 4)? as usize;
        self.buf.get(off..off + len)
    }

    /// Reply `i`'s full size in bytes, whether the table holds it whole or its head.
    pub fn size(&self, i: usize) -> Option<usize> {
        if !self.heads() {
            return self.get(i).map(<[u8]>::len);
        }
        if i >= self.n as usize {
            return None;
        }
        let sizes = REPLIES_HEADER + self.n as usize * ARG_ENTRY;
        get_u32(self.buf, sizes + i * 4).map(|s| s as usize)
    }
}

// ---------------------------------------------------------------------------------------------
// Rewrite blocks (guest → host): `u32 merge, u32 reserved, u64 ctx`, then per command
// `u32 nargs` and per argument `u32 len_flags` + bytes (or ARG_REF | input index, no bytes).

pub const REWRITE_HEADER: usize = 16;

/// An argument of a rewritten command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteArg<'a> {
    Bytes(&'a [u8]),
    /// Reuse input argument `i` (no copy through the guest).
    Input(u32),
}

/// A rewrite block as the host reads it.
#[derive(Debug, Clone, Copy)]
pub struct RewriteView<'a> {
    pub merge: u32,
    pub ctx: u64,
    body: &'a [u8],
    count: u32,
}

/// Why a rewrite block was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteError {
    Truncated,
    BadMerge,
    EmptyCommand,
    NoCommands,
}

impl<'a> RewriteView<'a> {
    /// Validates the whole block: `count` commands, each with at least one argument, nothing
    /// past the end.
    pub fn parse(buf: &'a [u8], count: u32) -> Result<Self, RewriteError> {
        let merge = get_u32(buf, 0).ok_or(RewriteError::Truncated)?;
        let ctx = get_u64(buf, 8).ok_or(RewriteError::Truncated)?;
        if merge > merge::MAX {
            return Err(RewriteError::BadMerge);
        }
        if count == 0 {
            return Err(RewriteError::NoCommands);
        }
        let body = &buf[REWRITE_HEADER..];
        let view = Self {
            merge,
            ctx,
            body,
            count,
        };
        let mut it = view.commands();
        for _ in 0..count {
            let cmd = it.next().ok_or(RewriteError::Truncated)??;
            if cmd.nargs == 0 {
                return Err(RewriteError::EmptyCommand);
            }
            for a in cmd {
                a?;
            }
        }
        Ok(view)
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The commands in order.
    pub fn commands(&self) -> RewriteCommands<'a> {
        RewriteCommands {
            body: self.body,
            at: 0,
            left: self.count,
        }
    }
}

/// Iterator over the commands of a [`RewriteView`].
#[derive(Debug, Clone)]
pub struct RewriteCommands<'a> {
    body: &'a [u8],
    at: usize,
    left: u32,
}

impl<'a> Iterator for RewriteCommands<'a> {
    type Item = Result<RewriteArgs<'a>, RewriteError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let Some(nargs) = get_u32(self.body, self.at) else {
            self.left = 0;
            return Some(Err(RewriteError::Truncated));
        };
        // Walk the arguments to find where the next command starts.
        let start = self.at + 4;
        let mut at = start;
        for _ in 0..nargs {
            let Some(lf) = get_u32(self.body, at) else {
                self.left = 0;
                return Some(Err(RewriteError::Truncated));
            };
            at += 4;
            if lf & ARG_REF == 0 {
                at += lf as usize;
                if at > self.body.len() {
                    self.left = 0;
                    return Some(Err(RewriteError::Truncated));
                }
            }
        }
        self.at = at;
        Some(Ok(RewriteArgs {
            body: self.body,
            at: start,
            left: nargs,
            nargs,
        }))
    }
}

/// The arguments of one rewritten command.
#[derive(Debug, Clone)]
pub struct RewriteArgs<'a> {
    body: &'a [u8],
    at: usize,
    left: u32,
    pub nargs: u32,
}

impl<'a> Iterator for RewriteArgs<'a> {
    type Item = Result<RewriteArg<'a>, RewriteError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let Some(lf) = get_u32(self.body, self.at) else {
            self.left = 0;
            return Some(Err(RewriteError::Truncated));
        };
        self.at += 4;
        if lf & ARG_REF != 0 {
            return Some(Ok(RewriteArg::Input(lf & LEN_MASK)));
        }
        let end = self.at + lf as usize;
        match self.body.get(self.at..end) {
            Some(b) => {
                self.at = end;
                Some(Ok(RewriteArg::Bytes(b)))
            }
            None => {
                self.left = 0;
                Some(Err(RewriteError::Truncated))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

// ---------------------------------------------------------------------------------------------
// The manifest (guest → host, from tp_init).
//
// `u32 version, u32 flags, u32 classes, u32 tick_ms, u32 ncommands, u32 nprefixes,
//  ncommands × {u16 id, u16 hook_flags}, nprefixes × {u32 len, bytes}`
// then, only with flag MF_DENIES, the "denied to every client" section:
// `u32 denied_classes, u32 nnames, nnames × {u32 len, bytes}` (names: `FLUSHALL`, `CONFIG|SET`).
// Hosts before the section ignore bytes after the prefixes, so it is backward compatible both
// ways: an old plugin declares nothing, an old host reads a new plugin's hooks as before.
// Then, only with flag MF_GATE (after the denies section when there is one), the gate:
// `u32 gated_classes, u32 max_value, u32 nprefixes, nprefixes × {u32 len, bytes}` (see
// [`Gate`]; `max_value` u32::MAX: no bound on values).

pub const MANIFEST_HEADER: usize = 24;
/// Manifest flag: call `tp_on_close` when a client connection closes.
pub const MF_WANT_CLOSE: u32 = 1 << 0;
/// Manifest flag: hook every command.
pub const MF_ALL: u32 = 1 << 1;
/// Manifest flag: copy values for commands hooked through `MF_ALL` or `classes`.
pub const MF_CLASS_VALUES: u32 = 1 << 2;
/// Manifest flag: the "denied to every client" section follows the prefixes.
pub const MF_DENIES: u32 = 1 << 3;
/// Manifest flag: an observed reply reaches `on_reply` as its head and size only (a reply table
/// with [`REPLIES_HEADS`]), not copied whole. A rewrite's merge still gets whole replies.
pub const MF_OBSERVE_HEADS: u32 = 1 << 4;
/// Manifest flag: the gate section follows ([`Gate`]).
pub const MF_GATE: u32 = 1 << 5;
/// Hook flag: copy the values of this command's arguments (otherwise only lengths).
pub const HOOK_VALUES: u16 = 1 << 0;
/// Most names a "denied to every client" section may list.
pub const MAX_DENIED_NAMES: usize = 512;
/// Longest name in that section (`CONTAINER|SUBCOMMAND`).
pub const MAX_DENIED_NAME_LEN: usize = 64;
/// Most key prefixes a gate may list.
pub const MAX_GATE_PREFIXES: usize = 256;
/// Longest key prefix in a gate.
pub const MAX_GATE_PREFIX_LEN: usize = 1024;

/// The manifest as the host reads it.
#[derive(Debug, Clone, Copy)]
pub struct ManifestView<'a> {
    pub version: u32,
    pub flags: u32,
    pub classes: u32,
    pub tick_ms: u32,
    ncommands: u32,
    nprefixes: u32,
    /// Command classes (`class::*` bits) the plugin denies to every client (flag
    /// [`MF_DENIES`]; 0 without it).
    pub denied_classes: u32,
    ndenied: u32,
    /// Where the denied names start (after the prefixes and the section header).
    denied_at: usize,
    /// Classes whose hooks the gate applies to (flag [`MF_GATE`]; 0 without it).
    pub gated_classes: u32,
    /// The gate's bound on values (u32::MAX without one).
    pub gate_max_value: u32,
    ngate: u32,
    /// Where the gate's prefixes start.
    gate_at: usize,
    buf: &'a [u8],
}

impl<'a> ManifestView<'a> {
    pub fn parse(buf: &'a [u8]) -> Option<Self> {
        let v = Self {
            version: get_u32(buf, 0)?,
            flags: get_u32(buf, 4)?,
            classes: get_u32(buf, 8)?,
            tick_ms: get_u32(buf, 12)?,
            ncommands: get_u32(buf, 16)?,
            nprefixes: get_u32(buf, 20)?,
            denied_classes: 0,
            ndenied: 0,
            denied_at: 0,
            gated_classes: 0,
            gate_max_value: u32::MAX,
            ngate: 0,
            gate_at: 0,
            buf,
        };
        let mut at = MANIFEST_HEADER.checked_add((v.ncommands as usize).checked_mul(4)?)?;
        if at > buf.len() {
            return None;
        }
        at = skip_strings(buf, at, v.nprefixes, usize::MAX)?;
        let mut v = v;
        if v.flags & MF_DENIES != 0 {
            v = Self {
                denied_classes: get_u32(buf, at)?,
                ndenied: get_u32(buf, at.checked_add(4)?)?,
                denied_at: at.checked_add(8)?,
                ..v
            };
            if v.ndenied as usize > MAX_DENIED_NAMES {
                return None;
            }
            at = skip_strings(buf, v.denied_at, v.ndenied, MAX_DENIED_NAME_LEN)?;
        }
        if v.flags & MF_GATE != 0 {
            v = Self {
                gated_classes: get_u32(buf, at)?,
                gate_max_value: get_u32(buf, at.checked_add(4)?)?,
                ngate: get_u32(buf, at.checked_add(8)?)?,
                gate_at: at.checked_add(12)?,
                ..v
            };
            if v.ngate as usize > MAX_GATE_PREFIXES {
                return None;
            }
            skip_strings(buf, v.gate_at, v.ngate, MAX_GATE_PREFIX_LEN)?;
        }
        Some(v)
    }

    /// The gate's key prefixes (flag [`MF_GATE`]).
    pub fn gate_prefixes(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        strings(self.buf, self.gate_at, self.ngate)
    }

    /// Command names the plugin denies to every client, unconditionally (flag
    /// [`MF_DENIES`]): `FLUSHALL`, or `CONFIG|SET` for one subcommand. Raw bytes as the
    /// plugin wrote them; the host checks and normalizes them.
    pub fn denied_names(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        strings(self.buf, self.denied_at, self.ndenied)
    }

    /// `(command id, hook flags)` pairs.
    pub fn commands(&self) -> impl Iterator<Item = (u16, u16)> + 'a {
        let buf = self.buf;
        (0..self.ncommands as usize).filter_map(move |i| {
            let at = MANIFEST_HEADER + i * 4;
            Some((get_u16(buf, at)?, get_u16(buf, at + 2)?))
        })
    }

    /// Key prefixes: when there are any, the hook runs only for commands with a key that
    /// starts with one of them.
    pub fn prefixes(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let buf = self.buf;
        strings(
            buf,
            MANIFEST_HEADER + self.ncommands as usize * 4,
            self.nprefixes,
        )
    }
}

/// `n` length-prefixed strings (`{u32 len, bytes}`) from `at`: where they end, or `None` when
/// one is longer than `max` or runs past the end.
fn skip_strings(buf: &[u8], mut at: usize, n: u32, max: usize) -> Option<usize> {
    for _ in 0..n {
        let len = get_u32(buf, at)? as usize;
        if len > max {
            return None;
        }
        at = at.checked_add(4)?.checked_add(len)?;
        if at > buf.len() {
            return None;
        }
    }
    Some(at)
}

/// The `n` length-prefixed strings from `at` (checked by [`ManifestView::parse`]).
fn strings(buf: &[u8], mut at: usize, n: u32) -> impl Iterator<Item = &[u8]> {
    (0..n).filter_map(move |_| {
        let len = get_u32(buf, at)? as usize;
        let p = buf.get(at + 4..at + 4 + len)?;
        at += 4 + len;
        Some(p)
    })
}

#[cfg(feature = "alloc")]
pub mod reply;
#[cfg(feature = "alloc")]
pub use reply::{
    ReplyError, ReplyScanner, is_error_reply, is_nil, is_one_reply, parse_integer, split_aggregate,
};

#[cfg(feature = "alloc")]
mod gate;
#[cfg(feature = "alloc")]
pub use gate::Gate;
#[cfg(feature = "alloc")]
mod write;
#[cfg(feature = "alloc")]
pub use write::{ManifestBuilder, RewriteWriter, encode_string_list};

/// Decodes a string list (`{u32 len, bytes}*`) as used by `metric_define` and `metric_series`.
pub fn string_list(buf: &[u8]) -> impl Iterator<Item = Option<&[u8]>> + '_ {
    let mut at = 0;
    core::iter::from_fn(move || {
        if at >= buf.len() {
            return None;
        }
        let Some(len) = get_u32(buf, at) else {
            at = buf.len();
            return Some(None);
        };
        let start = at + 4;
        let end = start.saturating_add(len as usize);
        match buf.get(start..end) {
            Some(s) => {
                at = end;
                Some(Some(s))
            }
            None => {
                at = buf.len();
                Some(None)
            }
        }
    })
}

/// Client facts as `client_info` serializes them:
/// `u32 db, u32 flags, {u32 len, bytes}` × (addr, user, name); flags bit 0 = has user,
/// bit 1 = has name.
pub mod client_info {
    pub const HAS_USER: u32 = 1;
    pub const HAS_NAME: u32 = 2;
}

#[cfg(test)]
mod tests;
