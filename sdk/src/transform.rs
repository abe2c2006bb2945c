//! Rewriting replies: [`Node`] parses one RESP reply into a tree whose bulk strings can be
//! replaced or whose elements can be dropped, and writes it back as the server sent it (same
//! protocol, same types: a RESP3 map stays a map, `_` stays `_`; see [`Node::write`]). For
//! plugins that change keys or values on their way back to the client (namespaces,
//! compression). Reading is [`crate::resp`]'s job; this module only builds on it.

use std::borrow::Cow;

use crate::resp::{self, RespError, Value};

/// Deepest nesting [`Node::parse`] accepts. Redis's own replies nest a few levels (XREAD:
/// 4); only a script's reply could go deeper, and a limit keeps the parse off the guest's
/// small stack.
pub const MAX_DEPTH: usize = 64;

/// One reply as a tree borrowed from the raw bytes.
///
/// ```text
/// *2\r\n$1\r\na\r\n:1\r\n   →   Agg(b'*', [Bulk("a"), Raw(":1\r\n")])
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node<'a> {
    /// A value that is neither a bulk string nor an aggregate (simple string, error, integer,
    /// nil, double, boolean, big number, verbatim string), kept as its raw RESP.
    Raw(&'a [u8]),
    /// A bulk string (`$`), borrowed or replaced.
    Bulk(Cow<'a, [u8]>),
    /// An aggregate: its type byte (`*`, `%`, `~`, `>`) and its elements (a map's keys and
    /// values alternate, as on the wire).
    Agg(u8, Vec<Node<'a>>),
}

impl<'a> Node<'a> {
    /// Parses the one reply at the start of `raw`; returns it and the bytes it took.
    ///
    /// # Errors
    /// [`RespError`] if `raw` does not start with a complete RESP value, or nests deeper than
    /// [`MAX_DEPTH`] (reported as `Invalid`).
    pub fn parse(raw: &'a [u8]) -> Result<(Node<'a>, usize), RespError> {
        let end = resp::value_end(raw, 0)?;
        let node = Self::from_raw(&raw[..end], 0)?;
        Ok((node, end))
    }

    fn from_raw(raw: &'a [u8], depth: usize) -> Result<Node<'a>, RespError> {
        if depth > MAX_DEPTH {
            return Err(RespError::Invalid);
        }
        let (v, _) = resp::parse(raw)?;
        Ok(match v {
            Value::Bulk(b) if raw.first() == Some(&b'$') => Node::Bulk(Cow::Borrowed(b)),
            Value::Array(s) | Value::Map(s) | Value::Set(s) | Value::Push(s) => {
                let mut items = Vec::with_capacity(s.len().min(4096));
                for item in s.raw_items() {
                    items.push(Self::from_raw(item, depth + 1)?);
                }
                if items.len() != s.len() {
                    return Err(RespError::Invalid);
                }
                Node::Agg(raw[0], items)
            }
            _ => Node::Raw(raw),
        })
    }

    /// A bulk string node owning `bytes`.
    pub fn bulk(bytes: Vec<u8>) -> Node<'static> {
        Node::Bulk(Cow::Owned(bytes))
    }

    /// The bytes of a bulk string.
    pub fn as_bulk(&self) -> Option<&[u8]> {
        match self {
            Node::Bulk(b) => Some(b),
            _ => None,
        }
    }

    /// Whether this is a nil (`$-1`, `*-1` or `_`).
    pub fn is_nil(&self) -> bool {
        matches!(self, Node::Raw(r) if matches!(*r, b"$-1\r\n" | b"*-1\r\n" | b"_\r\n"))
    }

    /// Whether this is an error reply (`-…` or RESP3 `!…`).
    pub fn is_error(&self) -> bool {
        matches!(self, Node::Raw(r) if matches!(r.first(), Some(b'-' | b'!')))
    }

    /// The elements of an aggregate.
    pub fn items(&self) -> Option<&[Node<'a>]> {
        match self {
            Node::Agg(_, items) => Some(items),
            _ => None,
        }
    }

    /// The elements of an aggregate, to change, drop or add some.
    pub fn items_mut(&mut self) -> Option<&mut Vec<Node<'a>>> {
        match self {
            Node::Agg(_, items) => Some(items),
            _ => None,
        }
    }

    /// Whether this is a RESP3 map (`%`): its elements are key, value, key, value ….
    pub fn is_map(&self) -> bool {
        matches!(self, Node::Agg(b'%', _))
    }

    /// Applies `f` to every bulk string of the tree, depth first; stops at the first error.
    ///
    /// # Errors
    /// The first error `f` returns.
    pub fn try_for_each_bulk<E>(
        &mut self,
        f: &mut impl FnMut(&mut Cow<'a, [u8]>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Node::Bulk(b) => f(b),
            Node::Agg(_, items) => items.iter_mut().try_for_each(|n| n.try_for_each_bulk(f)),
            Node::Raw(_) => Ok(()),
        }
    }

    /// The size of [`Node::write`]'s output.
    pub fn encoded_len(&self) -> usize {
        match self {
            Node::Raw(r) => r.len(),
            Node::Bulk(b) => b.len() + 3 + 20 + 2,
            Node::Agg(_, items) => 3 + 20 + items.iter().map(Node::encoded_len).sum::<usize>(),
        }
    }

    /// Appends the tree as RESP to `out`: [`Node::Raw`] values byte for byte, bulk strings and
    /// aggregates with their own type byte and their current length in canonical decimal, as
    /// Redis writes them (a map counts pairs).
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Node::Raw(r) => out.extend_from_slice(r),
            Node::Bulk(b) => {
                out.push(b'$');
                resp::push_int(out, b.len() as i64);
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Node::Agg(t, items) => {
                let n = if *t == b'%' {
                    items.len() / 2
                } else {
                    items.len()
                };
                out.push(*t);
                resp::push_int(out, n as i64);
                out.extend_from_slice(b"\r\n");
                for item in items {
                    item.write(out);
                }
            }
        }
    }

    /// [`Node::write`] into a new buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.write(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_replies_are_written_back_byte_for_byte() {
        for raw in [
            &b"$3\r\nabc\r\n"[..],
            b"$-1\r\n",
            b"*-1\r\n",
            b"_\r\n",
            b"-ERR x\r\n",
            b"*3\r\n$1\r\na\r\n:1\r\n*2\r\n+s\r\n,1.5\r\n",
            b"%2\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nk2\r\n_\r\n",
            b"~1\r\n$1\r\nm\r\n",
            b">2\r\n$7\r\nmessage\r\n=7\r\ntxt:abc\r\n",
            b"*0\r\n",
        ] {
            let (n, used) = Node::parse(raw).unwrap();
            assert_eq!(used, raw.len());
            assert_eq!(n.to_vec(), raw, "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn bulks_can_be_replaced_and_elements_dropped() {
        let raw = b"%2\r\n$4\r\nns:a\r\n$1\r\n1\r\n$4\r\nxx:b\r\n$1\r\n2\r\n";
        let (mut n, _) = Node::parse(raw).unwrap();
        assert!(n.is_map());
        let items = n.items_mut().unwrap();
        items.drain(2..4);
        if let Node::Bulk(b) = &mut items[0] {
            *b = Cow::Owned(b[3..].to_vec());
        }
        assert_eq!(n.to_vec(), b"%1\r\n$1\r\na\r\n$1\r\n1\r\n");
        let (mut n, _) = Node::parse(b"*2\r\n$1\r\na\r\n*1\r\n$1\r\nb\r\n").unwrap();
        n.try_for_each_bulk(&mut |b| {
            *b = Cow::Owned(b.to_ascii_uppercase());
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(n.to_vec(), b"*2\r\n$1\r\nA\r\n*1\r\n$1\r\nB\r\n");
    }

    #[test]
    fn mutated_replies_never_panic_and_parsed_ones_write_back_the_same() {
        let seed = b"*4\r\n$3\r\nabc\r\n%1\r\n+k\r\n*2\r\n:1\r\n_\r\n~1\r\n,1.5\r\n$-1\r\n";
        let mut x: u32 = 0x9E37_79B9;
        for _ in 0..20_000 {
            let mut m = seed.to_vec();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let at = x as usize % m.len();
                match x % 3 {
                    0 => m[at] = (x >> 8) as u8,
                    1 => m.truncate(at),
                    _ => m.insert(at, b"*$:%\r\n-1"[(x >> 8) as usize % 8]),
                }
                if m.is_empty() {
                    break;
                }
            }
            if let Ok((n, _)) = Node::parse(&m) {
                let again = n.to_vec();
                assert_eq!(Node::parse(&again).map(|(n, _)| n), Ok(n));
            }
        }
    }

    #[test]
    fn malformed_or_too_deep_replies_are_errors() {
        assert!(Node::parse(b"*2\r\n$1\r\na\r\n").is_err());
        assert!(Node::parse(b"$5\r\nab\r\n").is_err());
        let deep: Vec<u8> = b"*1\r\n"
            .repeat(MAX_DEPTH + 2)
            .into_iter()
            .chain(*b":1\r\n")
            .collect();
        assert_eq!(Node::parse(&deep), Err(RespError::Invalid));
        let ok: Vec<u8> = b"*1\r\n"
            .repeat(MAX_DEPTH)
            .into_iter()
            .chain(*b":1\r\n")
            .collect();
        assert!(Node::parse(&ok).is_ok());
    }
}
