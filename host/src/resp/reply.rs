//! Finds where each backend reply ends without building it: RESP2 and RESP3 types, nested
//! aggregates, attributes. Resumable, so a huge reply arriving in many reads is scanned once.
//! Also the few helpers that look inside a reply when the proxy merges split commands.

use smallvec::SmallVec;

use super::{ProtocolError, find_crlf, parse_i64};

/// Scans a stream of replies; remembers how far into an incomplete reply it got.
#[derive(Debug, Default)]
pub struct ReplyScanner {
    pos: usize,
    /// Elements still expected at each open aggregate level.
    stack: SmallVec<[u64; 8]>,
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
    /// The backend sent something that is not RESP; the connection cannot be trusted.
    pub fn next_len(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
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

fn scan_item(buf: &[u8], pos: usize) -> Result<Option<Item>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some(end) = find_crlf(buf, pos + 1) else {
        return Ok(None);
    };
    let line = &buf[pos + 1..end];
    let head = end + 2 - pos;
    let count = |per: u64| -> Result<Option<Item>, ProtocolError> {
        match parse_i64(line) {
            Some(n) if n >= 0 => Ok(Some(Item {
                len: head,
                children: n as u64 * per,
            })),
            Some(-1) => Ok(Some(Item {
                len: head,
                children: 0,
            })),
            _ => Err(ProtocolError::InvalidReply("aggregate length")),
        }
    };
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Ok(Some(Item {
            len: head,
            children: 0,
        })),
        b'$' | b'=' | b'!' => match parse_i64(line) {
            Some(-1) => Ok(Some(Item {
                len: head,
                children: 0,
            })),
            Some(n) if n >= 0 => {
                let total = head + n as usize + 2;
                if buf.len() < pos + total {
                    Ok(None)
                } else if &buf[pos + total - 2..pos + total] != b"\r\n" {
                    Err(ProtocolError::InvalidReply("bulk terminator"))
                } else {
                    Ok(Some(Item {
                        len: total,
                        children: 0,
                    }))
                }
            }
            _ => Err(ProtocolError::InvalidReply("bulk length")),
        },
        b'*' | b'~' | b'>' => count(1),
        b'%' => count(2),
        // An attribute map is followed by the reply it describes: count that reply as a child.
        b'|' => count(2).map(|i| {
            i.map(|i| Item {
                children: i.children + 1,
                ..i
            })
        }),
        other => Err(ProtocolError::InvalidReplyType(other)),
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
    let n = parse_i64(&reply[1..end])?;
    if n < 0 {
        return None;
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut rest = &reply[end + 2..];
    for _ in 0..n {
        let len = ReplyScanner::default().next_len(rest).ok()??;
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let replies: [&[u8]; 14] = [
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
    fn garbage_is_an_error() {
        assert!(ReplyScanner::default().next_len(b"?x\r\n").is_err());
        assert!(ReplyScanner::default().next_len(b"$3\r\nabcde").is_err());
    }

    #[test]
    fn aggregate_elements_and_integers() {
        assert_eq!(
            split_aggregate(b"*2\r\n$1\r\na\r\n$-1\r\n").unwrap(),
            vec![&b"$1\r\na\r\n"[..], b"$-1\r\n"]
        );
        assert_eq!(split_aggregate(b"*-1\r\n"), None);
        assert_eq!(parse_integer(b":-12\r\n"), Some(-12));
        assert_eq!(parse_integer(b"+OK\r\n"), None);
    }
}
