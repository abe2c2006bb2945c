//! Replies that are not ready yet, and how replies of split or fanned-out commands are merged
//! back into the one reply the client expects.

use bytes::{BufMut, Bytes, BytesMut};

use super::info;
pub(crate) use super::migrate::Moved;
use crate::backend::{ReplyResult, ReplyRx};
use crate::resp::{Frame, Proto, parse_integer, split_aggregate};

/// A reply slot in a session's ordered queue.
pub(crate) enum Pending {
    /// Encoded already (proxy-answered commands, errors).
    Ready(Bytes),
    /// One backend's reply, forwarded as is.
    One(ReplyRx),
    /// A command on a migrating slot: its keys are moved first, then it runs on the target.
    Moved(Box<Moved>),
    /// Several backend replies, merged.
    Gather(Gather),
    /// The commands a plugin rewrote this one into, merged.
    Plugin(Box<super::plugins::Rewritten>),
    /// A reply plugins observe (and may replace) before the client gets it.
    Observed(Box<super::plugins::Observed>),
}

/// One part of a gathered command.
pub(crate) enum Part {
    Sent(ReplyRx),
    Moved(Box<Moved>),
}

impl Part {
    async fn reply(self) -> Result<Bytes, Frame> {
        match self {
            Part::Sent(rx) => flatten(rx.await),
            Part::Moved(m) => m.reply().await,
        }
    }
}

pub(crate) struct Gather {
    pub(crate) parts: Vec<Part>,
    pub(crate) merge: Merge,
    /// The session's protocol when the command was read (a later HELLO must not change it).
    pub(crate) proto: Proto,
}

/// How the parts of a gathered command become one reply.
pub(crate) enum Merge {
    /// MGET: element `i` of the result is element `.1` of part `.0`.
    Mget(Vec<(u16, u32)>),
    /// Every part must be +OK.
    AllOk,
    /// Integer replies summed (DEL, EXISTS, DBSIZE …).
    Sum,
    /// The first part's reply.
    First,
    /// Arrays concatenated.
    Concat,
    /// SCRIPT EXISTS: element-wise AND of integer arrays.
    AllExist,
    /// One SCAN step on backend `backend` of `backends`; rewrites the cursor.
    Scan { backend: u64, backends: u64 },
    /// RANDOMKEY: the first non-nil reply, starting at part `start`.
    RandomKey { start: usize },
    /// INFO: backend sections merged under the proxy's own.
    Info(info::InfoRequest),
}

impl Pending {
    pub(crate) fn frame(f: Frame, proto: Proto) -> Self {
        Pending::Ready(f.to_bytes(proto))
    }

    /// Waits for the reply and appends it to `out`.
    pub(crate) async fn write_into(self, out: &mut BytesMut) {
        // Error replies are encoded alike in RESP2 and RESP3.
        match self {
            Pending::Ready(b) => out.extend_from_slice(&b),
            Pending::One(rx) => match flatten(rx.await) {
                Ok(b) => out.extend_from_slice(&b),
                Err(f) => f.encode(Proto::Resp2, out),
            },
            Pending::Moved(m) => match m.reply().await {
                Ok(b) => out.extend_from_slice(&b),
                Err(f) => f.encode(Proto::Resp2, out),
            },
            Pending::Plugin(p) => p.write_into(out).await,
            Pending::Observed(o) => o.write_into(out).await,
            Pending::Gather(g) => {
                let proto = g.proto;
                let mut replies = Vec::with_capacity(g.parts.len());
                let mut failed = None;
                for part in g.parts {
                    match part.reply().await {
                        Ok(b) => replies.push(b),
                        Err(f) => {
                            failed.get_or_insert(f);
                        }
                    }
                }
                if let Some(f) = failed {
                    return f.encode(proto, out);
                }
                if let Some(err) = replies
                    .iter()
                    .find(|r| matches!(r.first(), Some(b'-' | b'!')))
                {
                    return out.extend_from_slice(err);
                }
                if let Err(f) = g.merge.finish(&replies, proto, out) {
                    f.encode(proto, out);
                }
            }
        }
    }
}

pub(super) fn flatten(
    r: Result<ReplyResult, tokio::sync::oneshot::error::RecvError>,
) -> Result<Bytes, Frame> {
    match r {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err(Frame::error(format!("ERR {e}"))),
        Err(_) => Err(Frame::error("ERR backend connection dropped the request")),
    }
}

fn unexpected(what: &str) -> Frame {
    Frame::error(format!("ERR unexpected reply from backend to {what}"))
}

impl Merge {
    fn finish(self, replies: &[Bytes], proto: Proto, out: &mut BytesMut) -> Result<(), Frame> {
        match self {
            Merge::Mget(order) => {
                let parts: Vec<Vec<&[u8]>> = replies
                    .iter()
                    .map(|r| split_aggregate(r).ok_or_else(|| unexpected("MGET")))
                    .collect::<Result<_, _>>()?;
                array_header(out, order.len());
                for (p, i) in order {
                    let elem = parts
                        .get(p as usize)
                        .and_then(|v| v.get(i as usize))
                        .ok_or_else(|| unexpected("MGET"))?;
                    out.extend_from_slice(elem);
                }
            }
            Merge::AllOk => {
                if replies.iter().any(|r| &r[..] != b"+OK\r\n") {
                    return Err(unexpected("an admin command"));
                }
                out.extend_from_slice(b"+OK\r\n");
            }
            Merge::Sum => {
                let mut sum = 0i64;
                for r in replies {
                    sum += parse_integer(r).ok_or_else(|| unexpected("a counting command"))?;
                }
                Frame::Integer(sum).encode(proto, out);
            }
            Merge::First => {
                out.extend_from_slice(replies.first().ok_or_else(|| unexpected("a command"))?)
            }
            Merge::Concat => {
                let parts: Vec<Vec<&[u8]>> = replies
                    .iter()
                    .map(|r| split_aggregate(r).ok_or_else(|| unexpected("KEYS")))
                    .collect::<Result<_, _>>()?;
                array_header(out, parts.iter().map(Vec::len).sum());
                parts
                    .iter()
                    .flatten()
                    .for_each(|e| out.extend_from_slice(e));
            }
            Merge::AllExist => {
                let parts: Vec<Vec<&[u8]>> = replies
                    .iter()
                    .map(|r| split_aggregate(r).ok_or_else(|| unexpected("SCRIPT EXISTS")))
                    .collect::<Result<_, _>>()?;
                let n = parts.first().map_or(0, Vec::len);
                let all: Vec<Frame> = (0..n)
                    .map(|i| {
                        Frame::Integer(
                            parts
                                .iter()
                                .all(|p| p.get(i).and_then(|e| parse_integer(e)) == Some(1))
                                as i64,
                        )
                    })
                    .collect();
                Frame::Array(all).encode(proto, out);
            }
            Merge::Scan { backend, backends } => {
                let reply = replies.first().ok_or_else(|| unexpected("SCAN"))?;
                let parts = split_aggregate(reply)
                    .filter(|p| p.len() == 2)
                    .ok_or_else(|| unexpected("SCAN"))?;
                let cursor = bulk_text(parts[0])
                    .and_then(|c| c.parse::<u64>().ok())
                    .ok_or_else(|| unexpected("SCAN"))?;
                let next = if cursor != 0 {
                    let c = (cursor as u128) * (backends as u128) + backend as u128;
                    u64::try_from(c).map_err(|_| {
                        Frame::error("ERR SCAN cursor out of range for this cluster")
                    })?
                } else if backend + 1 < backends {
                    backend + 1
                } else {
                    0
                };
                out.extend_from_slice(b"*2\r\n");
                Frame::bulk(Bytes::from(next.to_string())).encode(proto, out);
                out.extend_from_slice(parts[1]);
            }
            Merge::RandomKey { start } => {
                let n = replies.len();
                let pick = (0..n)
                    .map(|i| &replies[(start + i) % n])
                    .find(|r| !is_null(r));
                match pick {
                    Some(r) => out.extend_from_slice(r),
                    None => Frame::Null.encode(proto, out),
                }
            }
            Merge::Info(req) => {
                let texts: Vec<String> = replies
                    .iter()
                    .map(|r| bulk_text(r).ok_or_else(|| unexpected("INFO")))
                    .collect::<Result<_, _>>()?;
                let text = info::merge(&req, &texts);
                Frame::Verbatim(Bytes::from(text)).encode(proto, out);
            }
        }
        Ok(())
    }
}

fn is_null(r: &[u8]) -> bool {
    matches!(r, b"$-1\r\n" | b"_\r\n" | b"*-1\r\n")
}

/// The text of a bulk or verbatim string reply.
fn bulk_text(r: &[u8]) -> Option<String> {
    let kind = *r.first()?;
    if kind != b'$' && kind != b'=' {
        return None;
    }
    let start = memchr::memchr(b'\n', r)? + 1;
    let body = r.get(start..r.len().checked_sub(2)?)?;
    let body = if kind == b'=' { body.get(4..)? } else { body };
    Some(String::from_utf8_lossy(body).into_owned())
}

/// Appends `*n\r\n`.
pub(crate) fn array_header(out: &mut BytesMut, n: usize) {
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}
