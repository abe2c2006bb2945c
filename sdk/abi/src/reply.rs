//! Finds where each RESP reply ends without building it: RESP2 and RESP3 types, nested
//! aggregates, attributes. Resumable, so a huge reply arriving in many reads is scanned once.
//! Also the few helpers that look inside a reply (integers, aggregate elements, errors, nils),
//! shared by the proxy's merges and the SDK's fake host. Moved here from the proxy's `resp`
//! module, which re-exports it under the same names.

use alloc::vec::Vec;
use core::fmt;

/// A byte stream that is not RESP. The connection (or the plugin output) cannot be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyError {
    /// The first byte of an item is not a RESP type.
    InvalidType(u8),
    /// A length, number or terminator is malformed (which one is named).
    Invalid(&'static str),
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidType(b) => write!(f, "invalid reply type byte {b:#04x}"),
            Self::Invalid(what) => write!(f, "invalid {what} in reply"),
        }
    }
}

impl core::error::Error for ReplyError {}

/// Open aggregate levels: eight inline (every reply Redis sends in practice), deeper ones on
/// the heap, so scanning a flat or shallow reply never allocates.
#[derive(Debug, Default)]
struct Stack {
    inline: [u64; 8],
    depth: usize,
    spill: Vec<u64>,
}

impl Stack {
    fn push(&mut self, v: u64) {
        if self.depth < self.inline.len() {
            self.inline[self.depth] = v;
        } else {
            self.spill.push(v);
        }
        self.depth += 1;
    }

    fn last_mut(&mut self) -> Option<&mut u64> {
        match self.depth {
            0 => None,
            d if d <= self.inline.len() => Some(&mut self.inline[d - 1]),
            _ => self.spill.last_mut(),
        }
    }

    fn pop(&mut self) {
        if self.depth > self.inline.len() {
            self.spill.pop();
        }
        self.depth = self.depth.saturating_sub(1);
    }
}

/// Scans a stream of replies; remembers how far into an incomplete reply it got.
#[derive(Debug, Default)]
pub struct ReplyScanner {
    pos: usize,
    /// Elements still expected at each open aggregate level.
    stack: Stack,
}

/// One item's header: how many bytes it took and how many child items follow.
struct Item {
    len: usize,
    children: u64,
}

impl ReplyScanner {
    /// Length of the first complete reply in `buf`, or `None` if it is not all there yet.
    /// Call again with the same buffer (grown) after `None`; after `Some(n)` the caller takes
    /// `n` bytes off the front and the scanner starts afresh.
    ///
    /// # Errors
    /// The bytes are not RESP; the connection cannot be trusted.
    pub fn next_len(&mut self, buf: &[u8]) -> Result<Option<usize>, ReplyError> {
        loop {
            let Some(item) = scan_item(buf, self.pos)? else {
                return Ok(None);
            };
            self.pos += item.len;
            if item.children > 0 {
                self.stack.push(item.children);
                continue;
            }
            loop {
                match self.stack.last_mut() {
                    None => {
                        let n = self.pos;
                        self.pos = 0;
                        return Ok(Some(n));
                    }
                    Some(left) => {
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        self.stack.pop();
                    }
                }
            }
        }
    }
}

/// Whether `b` is exactly one complete RESP reply (what the host requires of a plugin's
/// REPLY and REPLACE output).
pub fn is_one_reply(b: &[u8]) -> bool {
    matches!(ReplyScanner::default().next_len(b), Ok(Some(n)) if n == b.len())
}

/// Finds `\r\n` at or after `from`; returns the index of `\r`. Only header lines are searched
/// (bulk bodies are skipped by length), so a plain loop is as fast as `memchr` here.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let i = at + buf.get(at..)?.iter().position(|&b| b == b'\n')?;
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
pub fn parse_i64(s: &[u8]) -> Option<i64> {
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

fn leaf(len: usize) -> Result<Option<Item>, ReplyError> {
    Ok(Some(Item { len, children: 0 }))
}

fn scan_item(buf: &[u8], pos: usize) -> Result<Option<Item>, ReplyError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some(end) = find_crlf(buf, pos + 1) else {
        return Ok(None);
    };
    let line = &buf[pos + 1..end];
    let head = end + 2 - pos;
    let count = |per: u64| -> Result<Option<Item>, ReplyError> {
        match parse_i64(line) {
            Some(n) if n >= 0 => Ok(Some(Item {
                len: head,
                children: (n as u64).saturating_mul(per),
            })),
            Some(-1) => leaf(head),
            _ => Err(ReplyError::Invalid("aggregate length")),
        }
    };
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => leaf(head),
        b'$' | b'=' | b'!' => match parse_i64(line) {
            Some(-1) => leaf(head),
            Some(n) if n >= 0 => {
                let Some(total) = head.checked_add(n as usize).and_then(|t| t.checked_add(2))
                else {
                    return Err(ReplyError::Invalid("bulk length"));
                };
                if buf.len() - pos < total {
                    Ok(None)
                } else if &buf[pos + total - 2..pos + total] != b"\r\n" {
                    Err(ReplyError::Invalid("bulk terminator"))
                } else {
                    leaf(total)
                }
            }
            _ => Err(ReplyError::Invalid("bulk length")),
        },
        b'*' | b'~' | b'>' => count(1),
        b'%' => count(2),
        // An attribute map is followed by the reply it describes: count that reply as a child.
        b'|' => count(2).map(|i| {
            i.map(|i| Item {
                children: i.children.saturating_add(1),
                ..i
            })
        }),
        other => Err(ReplyError::InvalidType(other)),
    }
}

/// The integer of a `:n` reply.
pub fn parse_integer(reply: &[u8]) -> Option<i64> {
    let rest = reply.strip_prefix(b":")?;
    parse_i64(rest.strip_suffix(b"\r\n")?)
}

/// The raw bytes of each element of an array/set/push reply (`*n`, `~n`, `>n`); `None` for
/// anything else, including a null array.
pub fn split_aggregate(reply: &[u8]) -> Option<Vec<&[u8]>> {
    if !matches!(reply.first(), Some(b'*' | b'~' | b'>')) {
        return None;
    }
    let end = find_crlf(reply, 1)?;
    let n = usize::try_from(parse_i64(&reply[1..end])?).ok()?;
    let mut rest = &reply[end + 2..];
    // Every element takes at least 3 bytes: a hostile count cannot make this allocate more
    // than the reply itself.
    let mut out = Vec::with_capacity(n.min(rest.len() / 3));
    for _ in 0..n {
        let len = ReplyScanner::default().next_len(rest).ok()??;
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    Some(out)
}

/// An aggregate reply's type byte, element count (a map's pairs count twice) and the bytes
/// after its header line; `None` unless `reply` is exactly one non-null array, set, map or
/// push reply.
pub(crate) fn aggregate_body(reply: &[u8]) -> Option<(u8, u64, &[u8])> {
    let kind = *reply.first()?;
    let per = match kind {
        b'*' | b'~' | b'>' => 1,
        b'%' => 2,
        _ => return None,
    };
    if !is_one_reply(reply) {
        return None;
    }
    let end = find_crlf(reply, 1)?;
    let n = u64::try_from(parse_i64(&reply[1..end])?).ok()?;
    Some((kind, n.checked_mul(per)?, &reply[end + 2..]))
}

/// Whether `reply` is an error reply: a simple error (`-ERR …`) or a RESP3 blob error
/// (`!<len>`). Both are errors to a client; the proxy treats them alike everywhere.
pub fn is_error_reply(reply: &[u8]) -> bool {
    matches!(reply.first(), Some(b'-' | b'!'))
}

/// Whether `reply` is a nil: RESP2 null bulk (`$-1`), null array (`*-1`), RESP3 null (`_`).
pub fn is_nil(reply: &[u8]) -> bool {
    matches!(reply, b"$-1\r\n" | b"*-1\r\n" | b"_\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    fn lens(stream: &[u8]) -> Vec<usize> {
        let mut s = ReplyScanner::default();
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(n) = s.next_len(&stream[at..]).unwrap() {
            out.push(n);
            at += n;
        }
        out
    }

    #[test]
    fn scans_every_resp2_and_resp3_type() {
        let replies: [&[u8]; 15] = [
            b"+OK\r\n",
            b"-ERR x\r\n",
            b":42\r\n",
            b"$3\r\nfoo\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
            b"_\r\n",
            b",3.14\r\n",
            b"#t\r\n",
            b"(12345678901234567890\r\n",
            b"=8\r\ntxt:abcd\r\n",
            b"%2\r\n+a\r\n:1\r\n+b\r\n~1\r\n#f\r\n",
            b"|1\r\n+ttl\r\n:3\r\n$2\r\nok\r\n",
            b"!5\r\nERR x\r\n",
        ];
        let stream: Vec<u8> = replies.concat();
        assert_eq!(
            lens(&stream),
            replies.iter().map(|r| r.len()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn byte_by_byte_arrival_finds_the_same_boundary() {
        let r = b"*3\r\n$5\r\nhello\r\n%1\r\n+k\r\n*0\r\n:7\r\n";
        let mut s = ReplyScanner::default();
        for i in 1..r.len() {
            assert_eq!(s.next_len(&r[..i]).unwrap(), None, "at {i}");
        }
        assert_eq!(s.next_len(r).unwrap(), Some(r.len()));
    }

    #[test]
    fn nesting_deeper_than_the_inline_stack_still_scans() {
        let mut r = Vec::new();
        for _ in 0..40 {
            r.extend_from_slice(b"*1\r\n");
        }
        r.extend_from_slice(b":1\r\n");
        r.extend_from_slice(b"+next\r\n");
        assert_eq!(lens(&r), vec![40 * 4 + 4, 7]);
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        assert_eq!(
            ReplyScanner::default().next_len(b"?x\r\n"),
            Err(ReplyError::InvalidType(b'?'))
        );
        assert!(ReplyScanner::default().next_len(b"$3\r\nabcde").is_err());
        // Huge claimed lengths wait for more bytes; nothing overflows.
        assert_eq!(
            ReplyScanner::default().next_len(b"$9223372036854775807\r\nx"),
            Ok(None)
        );
        assert_eq!(
            ReplyScanner::default().next_len(b"*9223372036854775807\r\n:1\r\n"),
            Ok(None)
        );
        assert_eq!(
            std::format!("{}", ReplyError::Invalid("bulk terminator")),
            "invalid bulk terminator in reply"
        );
    }

    #[test]
    fn aggregate_elements_integers_errors_and_nils() {
        assert_eq!(
            split_aggregate(b"*2\r\n$1\r\na\r\n$-1\r\n").unwrap(),
            vec![&b"$1\r\na\r\n"[..], b"$-1\r\n"]
        );
        assert_eq!(split_aggregate(b"*-1\r\n"), None);
        assert_eq!(split_aggregate(b"*1000000000\r\n:1\r\n"), None);
        assert_eq!(parse_integer(b":-12\r\n"), Some(-12));
        assert_eq!(parse_integer(b"+OK\r\n"), None);
        assert!(is_error_reply(b"-ERR x\r\n") && is_error_reply(b"!1\r\nx\r\n"));
        assert!(!is_error_reply(b"+OK\r\n") && !is_error_reply(b""));
        assert!(is_nil(b"_\r\n") && is_nil(b"*-1\r\n") && !is_nil(b"*0\r\n"));
        assert!(is_one_reply(b"+OK\r\n") && !is_one_reply(b"+OK\r\n+OK\r\n"));
        assert_eq!(
            aggregate_body(b"%1\r\n+a\r\n:1\r\n"),
            Some((b'%', 2, &b"+a\r\n:1\r\n"[..]))
        );
        assert_eq!(aggregate_body(b"*1\r\n:1\r\n:2\r\n"), None);
    }
}
