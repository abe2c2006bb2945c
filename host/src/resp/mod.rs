//! RESP2/RESP3 wire format: the incremental request decoder, the reply scanner that finds
//! reply boundaries without building a tree, and the `Frame` type for replies the proxy
//! writes itself. Pure: no I/O, no tokio.
//!
//! Requests are parsed only as far as the proxy needs (argument ranges into one `Bytes`), and
//! backend replies are forwarded as the bytes the server sent, so the common path never
//! re-encodes anything.

mod frame;
mod request;

pub use frame::{Frame, Proto};
// The reply scanner and helpers live in the plugin ABI crate, with the merges the proxy and
// the plugin SDK share; re-exported here under their old names.
pub use request::{Limits, Request, RequestDecoder, encode_request};
pub use tessera_plugin_abi::reply::{ReplyError, ReplyScanner, parse_integer, split_aggregate};

/// A malformed byte stream. The session answers `-ERR Protocol error: …` and closes the
/// connection, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("expected '{expected}', got '{got}'")]
    UnexpectedByte { expected: char, got: char },
    #[error("invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("invalid bulk length")]
    InvalidBulkLength,
    #[error("too big inline request")]
    InlineTooBig,
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("invalid reply type byte {0:#04x}")]
    InvalidReplyType(u8),
    #[error("invalid {0} in reply")]
    InvalidReply(&'static str),
}

impl From<ReplyError> for ProtocolError {
    fn from(e: ReplyError) -> Self {
        match e {
            ReplyError::InvalidType(b) => Self::InvalidReplyType(b),
            ReplyError::Invalid(what) => Self::InvalidReply(what),
        }
    }
}

/// The protocol as the shared merges (`tessera_plugin_abi::merge`) name it.
impl From<Proto> for tessera_plugin_abi::merge::Resp {
    fn from(p: Proto) -> Self {
        match p {
            Proto::Resp2 => Self::V2,
            Proto::Resp3 => Self::V3,
        }
    }
}

/// Finds `\r\n` at or after `from`; returns the index of `\r`.
#[inline]
pub(crate) fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let i = at + memchr::memchr(b'\n', buf.get(at..)?)?;
        if i > from && buf[i - 1] == b'\r' {
            return Some(i - 1);
        }
        at = i + 1;
    }
}

/// Parses a decimal integer the way Redis writes lengths: optional `-`, digits only.
#[inline]
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}
