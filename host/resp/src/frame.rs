//! Replies the proxy composes itself (HELLO, CLIENT, INFO, errors, merged results), encoded
//! for the protocol version the client negotiated.

use bytes::{BufMut, Bytes, BytesMut};

use super::request::put_header;

/// The protocol a session speaks, set by `HELLO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Proto {
    #[default]
    Resp2,
    Resp3,
}

/// A reply value. RESP3-only types degrade to their RESP2 forms on a RESP2 session, exactly as
/// Redis does: maps flatten, sets become arrays, doubles become bulk strings, booleans integers.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(&'static str),
    Error(String),
    Integer(i64),
    Bulk(Bytes),
    Null,
    Array(Vec<Frame>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Double(f64),
    Boolean(bool),
    Verbatim(Bytes),
    /// Already-encoded bytes in the session's protocol (e.g. a backend reply).
    Raw(Bytes),
}

impl Frame {
    pub fn ok() -> Self {
        Frame::Simple("OK")
    }

    /// An error reply; `msg` must start with its code (`ERR`, `NOAUTH`, …).
    pub fn error(msg: impl Into<String>) -> Self {
        Frame::Error(msg.into())
    }

    pub fn bulk(b: impl Into<Bytes>) -> Self {
        Frame::Bulk(b.into())
    }

    pub fn encode(&self, proto: Proto, out: &mut BytesMut) {
        let r3 = proto == Proto::Resp3;
        match self {
            Frame::Simple(s) => line(out, b'+', s.as_bytes()),
            Frame::Error(s) => {
                // An error text must stay on one line.
                let clean: String = s
                    .chars()
                    .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                    .collect();
                line(out, b'-', clean.as_bytes())
            }
            Frame::Integer(n) => line(out, b':', itoa::Buffer::new().format(*n).as_bytes()),
            Frame::Bulk(b) => bulk(out, b'$', b),
            Frame::Null if r3 => out.put_slice(b"_\r\n"),
            Frame::Null => out.put_slice(b"$-1\r\n"),
            Frame::Array(items) => {
                put_header(out, b'*', items.len());
                items.iter().for_each(|f| f.encode(proto, out));
            }
            Frame::Set(items) => {
                put_header(out, if r3 { b'~' } else { b'*' }, items.len());
                items.iter().for_each(|f| f.encode(proto, out));
            }
            Frame::Map(pairs) => {
                if r3 {
                    put_header(out, b'%', pairs.len());
                } else {
                    put_header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Frame::Double(d) => {
                let text = format_double(*d);
                if r3 {
                    line(out, b',', text.as_bytes())
                } else {
                    bulk(out, b'$', text.as_bytes())
                }
            }
            Frame::Boolean(b) if r3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Frame::Boolean(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Frame::Verbatim(b) if r3 => {
                put_header(out, b'=', b.len() + 4);
                out.put_slice(b"txt:");
                out.put_slice(b);
                out.put_slice(b"\r\n");
            }
            Frame::Verbatim(b) => bulk(out, b'$', b),
            Frame::Raw(b) => out.put_slice(b),
        }
    }

    /// Encodes into a fresh buffer.
    pub fn to_bytes(&self, proto: Proto) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out.freeze()
    }
}

fn line(out: &mut BytesMut, kind: u8, s: &[u8]) {
    out.put_u8(kind);
    out.put_slice(s);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, kind: u8, b: &[u8]) {
    put_header(out, kind, b.len());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

fn format_double(d: f64) -> String {
    if d.is_infinite() {
        if d > 0.0 { "inf".into() } else { "-inf".into() }
    } else if d.is_nan() {
        "nan".into()
    } else {
        format!("{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp3_types_degrade_to_resp2_like_redis() {
        let f = Frame::Map(vec![
            (Frame::bulk("a"), Frame::Double(1.5)),
            (
                Frame::bulk("b"),
                Frame::Set(vec![Frame::Boolean(true), Frame::Null]),
            ),
        ]);
        assert_eq!(
            &f.to_bytes(Proto::Resp3)[..],
            b"%2\r\n$1\r\na\r\n,1.5\r\n$1\r\nb\r\n~2\r\n#t\r\n_\r\n"
        );
        assert_eq!(
            &f.to_bytes(Proto::Resp2)[..],
            b"*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n*2\r\n:1\r\n$-1\r\n"
        );
    }

    #[test]
    fn error_text_stays_on_one_line() {
        assert_eq!(
            &Frame::error("ERR a\r\nb").to_bytes(Proto::Resp2)[..],
            b"-ERR a  b\r\n"
        );
    }
}
