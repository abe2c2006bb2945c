//! RESP2/RESP3 wire format: the incremental request decoder, the reply scanner that finds
//! reply boundaries without building a tree, and the `Frame` type for replies the proxy
//! writes itself. Pure: no I/O, no tokio.
//!
//! Requests are parsed only as far as the proxy needs (argument ranges into one `Bytes`), and
//! backend replies are forwarded as the bytes the server sent, so the common path never
//! re-encodes anything.

mod frame;
mod reply;
mod request;

pub use frame::{Frame, Proto};
pub use reply::{ReplyScanner, parse_integer, split_aggregate};
pub use request::{Limits, Request, RequestDecoder, encode_request};

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
    /// A request longer than allowed before authentication (Redis's wording).
    #[error("unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// An argument longer than allowed before authentication (Redis's wording).
    #[error("unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// A bulk string's payload not followed by `\r\n`.
    #[error("expected '\\r\\n' after bulk data")]
    UnterminatedBulk,
    #[error("too big inline request")]
    InlineTooBig,
    /// Redis never finishes reading such a line; we refuse it at once.
    #[error("NUL byte in inline request")]
    NulInInline,
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("invalid reply type byte {0:#04x}")]
    InvalidReplyType(u8),
    #[error("invalid {0} in reply")]
    InvalidReply(&'static str),
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

/// Parses a decimal integer exactly as Redis's `string2ll` does: an optional `-`, then `0`
/// alone or digits without a leading zero, within `i64`. No `+`, spaces, `-0` or `007`, so a
/// number means the same here as in Redis (command arguments such as numkeys, reply lengths).
#[inline]
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    match digits {
        [] => return None,
        [b'0'] if !neg => return Some(0),
        [b'0', ..] => return None,
        _ if digits.len() > 19 => return None,
        _ => {}
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if neg {
        // -(2^63) is i64::MIN; wrapping_neg of its u64 bits gives exactly that.
        (v <= 1 << 63).then(|| (v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_accepts_what_string2ll_accepts() {
        for (s, v) in [
            ("0", 0),
            ("7", 7),
            ("-7", -7),
            ("10", 10),
            ("-10", -10),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), Some(v), "{s}");
        }
        for s in [
            "",
            "-",
            "+1",
            "01",
            "-0",
            "-01",
            "00",
            " 1",
            "1 ",
            "1\0",
            "0x1",
            "9223372036854775808",
            "-9223372036854775809",
            "10000000000000000000",
        ] {
            assert_eq!(parse_i64(s.as_bytes()), None, "{s:?}");
        }
    }
}
