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

pub use tessera_plugin_abi::reply::parse_i64;

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
