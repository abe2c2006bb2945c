//! Stage 6 of the data path: the replies of a split or fanned-out command become the one reply
//! the client expects. The merges a plugin's rewrite can ask for are the plugin ABI's, and are
//! implemented once, in `tessera_plugin_abi::merge`, for the proxy and the SDK's fake host
//! alike; this module adds the merges only the proxy makes (MGET order, SCAN cursors, INFO …).
//!
//! Every merge sees the parts' replies as the exact bytes the backends sent. If any part is an
//! error reply, that (the first) error is the client's reply.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use tessera_plugin_abi::reply::{is_error_reply, is_nil};

use super::info::{self, InfoRequest};
use tessera_model::error::DataError;
use tessera_model::router::{BackendIdx, SlotTable};
use tessera_resp::{Frame, Proto, parse_integer, split_aggregate};

/// Which keys a backend's listing may show the client: those of the slots it owns under the
/// table the command was planned with. During a migration a group also holds keys of slots
/// it does not own — the target its copies before the handoff, the source its old keys until
/// their cleanup — which the client must see once, where they are served.
#[derive(Debug, Clone)]
pub struct Owners(Arc<SlotTable>);

impl Owners {
    pub fn new(table: Arc<SlotTable>) -> Self {
        Self(table)
    }

    /// Whether `key`, listed by `backend`, is served from there.
    fn owns(&self, backend: BackendIdx, key: &[u8]) -> bool {
        self.0.slot(self.0.slot_of(key)).master == Some(backend)
    }

    /// Appends to `out` the elements of `reply` (an array of bulk strings, as listed by
    /// `backend`) that it owns; how many.
    fn keep<'r>(
        &self,
        backend: BackendIdx,
        reply: &'r [u8],
        what: &'static str,
        out: &mut Vec<&'r [u8]>,
    ) -> Result<(), DataError> {
        let elems = split_aggregate(reply).ok_or(DataError::UnexpectedReply(what))?;
        for e in elems {
            let key = bulk_bytes(e).ok_or(DataError::UnexpectedReply(what))?;
            if self.owns(backend, key) {
                out.push(e);
            }
        }
        Ok(())
    }
}

/// How the parts of a gathered command become one reply.
#[derive(Debug)]
pub enum Merge {
    /// MGET: element `i` of the result is element `.1` of part `.0`.
    Mget(Vec<(u16, u32)>),
    /// Every part must be +OK (MSET, FLUSHALL, SCRIPT FLUSH …).
    AllOk,
    /// Integer replies summed (DEL, EXISTS, DBSIZE …).
    Sum,
    /// The first part's reply (SCRIPT LOAD: the same SHA from every backend).
    First,
    /// Arrays concatenated (plugin rewrites' CONCAT).
    Concat,
    /// KEYS: every backend's keys (one part per backend, in `BackendIdx` order) that it owns.
    Keys(Owners),
    /// SCRIPT EXISTS: element-wise AND of integer arrays.
    AllExist,
    /// One SCAN step on backend `backend` of `backends`; rewrites the cursor and keeps the
    /// keys the backend owns.
    Scan {
        backend: u64,
        backends: u64,
        owners: Owners,
    },
    /// RANDOMKEY (one part per backend): the first key a backend owns, from part `start` on.
    RandomKey { start: usize, owners: Owners },
    /// INFO: backend sections merged under the proxy's own.
    Info(Box<InfoRequest>),
    /// SCRIPT KILL / FUNCTION KILL: OK if any backend killed one, else the first error.
    AnyOk,
    /// PUBSUB CHANNELS / SHARDCHANNELS: the arrays' union, each element once, first seen first.
    Union,
    /// PUBSUB NUMSUB / SHARDNUMSUB: `[channel, count, …]` arrays, counts summed per position.
    NumSub,
    /// PUBSUB NUMPAT: the largest integer (each master counts its unique patterns, and every
    /// hub subscribes each of its patterns on every master).
    Max,
    /// A plugin rewrite's merge code (`tessera_plugin_abi::merge::*`, other than PLUGIN).
    Abi(u32),
}

impl Merge {
    /// Writes the merged reply into `out`.
    ///
    /// # Errors
    /// A part's reply is not what the merge needs (`UnexpectedReply`), or a sum overflows.
    pub fn finish(
        self,
        replies: &[Bytes],
        proto: Proto,
        out: &mut BytesMut,
    ) -> Result<(), DataError> {
        if let Merge::AnyOk = self {
            return match replies
                .iter()
                .find(|r| &r[..] == b"+OK\r\n")
                .or(replies.first())
            {
                Some(r) => {
                    out.extend_from_slice(r);
                    Ok(())
                }
                None => Err(DataError::UnexpectedReply("SCRIPT KILL")),
            };
        }
        if let Some(err) = replies.iter().find(|r| is_error_reply(r)) {
            out.extend_from_slice(err);
            return Ok(());
        }
        match self {
            Merge::Mget(order) => mget(&order, replies, out),
            Merge::AllOk => abi_merge(tessera_plugin_abi::merge::ALL_OK, replies, proto, out),
            Merge::Sum => abi_merge(tessera_plugin_abi::merge::SUM, replies, proto, out),
            Merge::First => abi_merge(tessera_plugin_abi::merge::FIRST, replies, proto, out),
            Merge::Concat => abi_merge(tessera_plugin_abi::merge::CONCAT, replies, proto, out),
            Merge::Abi(code) => abi_merge(code, replies, proto, out),
            Merge::AllExist => all_exist(replies, proto, out),
            Merge::Union => union(replies, out),
            Merge::NumSub => numsub(replies, out),
            Merge::Max => max(replies, out),
            Merge::Keys(owners) => {
                let mut keep = Vec::new();
                for (b, r) in replies.iter().enumerate() {
                    owners.keep(b as BackendIdx, r, "KEYS", &mut keep)?;
                }
                array_header(out, keep.len());
                keep.iter().for_each(|e| out.extend_from_slice(e));
                Ok(())
            }
            Merge::Scan {
                backend,
                backends,
                owners,
            } => scan(backend, backends, &owners, replies, proto, out),
            Merge::RandomKey { start, owners } => {
                let n = replies.len();
                let owned = (0..n).map(|i| (start + i) % n).find(|&b| {
                    let r = &replies[b];
                    !is_nil(r) && bulk_bytes(r).is_some_and(|k| owners.owns(b as BackendIdx, k))
                });
                match owned {
                    Some(b) => out.extend_from_slice(&replies[b]),
                    None => Frame::Null.encode(proto, out),
                }
                Ok(())
            }
            Merge::Info(req) => {
                let texts: Vec<String> = replies
                    .iter()
                    .map(|r| bulk_text(r).ok_or(DataError::UnexpectedReply("INFO")))
                    .collect::<Result<_, _>>()?;
                Frame::Verbatim(Bytes::from(info::merge(&req, &texts))).encode(proto, out);
                Ok(())
            }
            Merge::AnyOk => unreachable!("handled above"),
        }
    }
}

fn mget(order: &[(u16, u32)], replies: &[Bytes], out: &mut BytesMut) -> Result<(), DataError> {
    let parts: Vec<Vec<&[u8]>> = replies
        .iter()
        .map(|r| split_aggregate(r).ok_or(DataError::UnexpectedReply("MGET")))
        .collect::<Result<_, _>>()?;
    array_header(out, order.len());
    for &(p, i) in order {
        let elem = parts
            .get(p as usize)
            .and_then(|v| v.get(i as usize))
            .ok_or(DataError::UnexpectedReply("MGET"))?;
        out.extend_from_slice(elem);
    }
    Ok(())
}

fn all_exist(replies: &[Bytes], proto: Proto, out: &mut BytesMut) -> Result<(), DataError> {
    let parts: Vec<Vec<&[u8]>> = replies
        .iter()
        .map(|r| split_aggregate(r).ok_or(DataError::UnexpectedReply("SCRIPT EXISTS")))
        .collect::<Result<_, _>>()?;
    let n = parts.first().map_or(0, Vec::len);
    let all = (0..n)
        .map(|i| {
            let every = parts
                .iter()
                .all(|p| p.get(i).and_then(|e| parse_integer(e)) == Some(1));
            Frame::Integer(every as i64)
        })
        .collect();
    Frame::Array(all).encode(proto, out);
    Ok(())
}

fn union(replies: &[Bytes], out: &mut BytesMut) -> Result<(), DataError> {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut elems = Vec::new();
    for r in replies {
        let parts = split_aggregate(r).ok_or(DataError::UnexpectedReply("PUBSUB CHANNELS"))?;
        elems.extend(parts.into_iter().filter(|e| seen.insert(*e)));
    }
    array_header(out, elems.len());
    elems.iter().for_each(|e| out.extend_from_slice(e));
    Ok(())
}

fn max(replies: &[Bytes], out: &mut BytesMut) -> Result<(), DataError> {
    let mut max: Option<i64> = None;
    for r in replies {
        let n = parse_integer(r).ok_or(DataError::UnexpectedReply("PUBSUB NUMPAT"))?;
        max = Some(max.map_or(n, |m| m.max(n)));
    }
    let n = max.ok_or(DataError::UnexpectedReply("PUBSUB NUMPAT"))?;
    out.put_u8(b':');
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
    Ok(())
}

fn numsub(replies: &[Bytes], out: &mut BytesMut) -> Result<(), DataError> {
    let unexpected = || DataError::UnexpectedReply("PUBSUB NUMSUB");
    let parts: Vec<Vec<&[u8]>> = replies
        .iter()
        .map(|r| split_aggregate(r).ok_or_else(unexpected))
        .collect::<Result<_, _>>()?;
    let first = parts.first().ok_or_else(unexpected)?;
    if first.len() % 2 != 0 || parts.iter().any(|p| p.len() != first.len()) {
        return Err(unexpected());
    }
    array_header(out, first.len());
    for i in (0..first.len()).step_by(2) {
        let mut sum: i64 = 0;
        for p in &parts {
            sum = sum.saturating_add(parse_integer(p[i + 1]).ok_or_else(unexpected)?);
        }
        out.extend_from_slice(first[i]);
        out.put_u8(b':');
        out.put_slice(itoa::Buffer::new().format(sum).as_bytes());
        out.put_slice(b"\r\n");
    }
    Ok(())
}

fn scan(
    backend: u64,
    backends: u64,
    owners: &Owners,
    replies: &[Bytes],
    proto: Proto,
    out: &mut BytesMut,
) -> Result<(), DataError> {
    let unexpected = || DataError::UnexpectedReply("SCAN");
    let reply = replies.first().ok_or_else(unexpected)?;
    let parts = split_aggregate(reply)
        .filter(|p| p.len() == 2)
        .ok_or_else(unexpected)?;
    let cursor = bulk_text(parts[0])
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or_else(unexpected)?;
    let next = if cursor != 0 {
        let c = (cursor as u128) * (backends as u128) + backend as u128;
        u64::try_from(c).map_err(|_| DataError::CursorOutOfRange)?
    } else if backend + 1 < backends {
        backend + 1
    } else {
        0
    };
    let mut keep = Vec::new();
    owners.keep(backend as BackendIdx, parts[1], "SCAN", &mut keep)?;
    out.extend_from_slice(b"*2\r\n");
    Frame::bulk(Bytes::from(next.to_string())).encode(proto, out);
    array_header(out, keep.len());
    keep.iter().for_each(|e| out.extend_from_slice(e));
    Ok(())
}

/// The plugin ABI's merges: one implementation, shared with the SDK's fake host.
fn abi_merge(
    code: u32,
    replies: &[Bytes],
    proto: Proto,
    out: &mut BytesMut,
) -> Result<(), DataError> {
    Ok(tessera_plugin_abi::merge::merge(
        code,
        replies,
        proto.into(),
        out,
    )?)
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

/// The body of a bulk string reply (`$n\r\n…\r\n`).
fn bulk_bytes(r: &[u8]) -> Option<&[u8]> {
    if r.first() != Some(&b'$') {
        return None;
    }
    let start = memchr::memchr(b'\n', r)? + 1;
    r.get(start..r.len().checked_sub(2)?)
}

/// Appends `*n\r\n`.
fn array_header(out: &mut BytesMut, n: usize) {
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(m: Merge, replies: &[&[u8]]) -> Result<String, DataError> {
        let replies: Vec<Bytes> = replies.iter().map(|r| Bytes::copy_from_slice(r)).collect();
        let mut out = BytesMut::new();
        m.finish(&replies, Proto::Resp2, &mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Two backends: a:1 owns slots 0-511, b:2 the rest.
    fn owners() -> Owners {
        Owners::new(Arc::new(SlotTable::split_evenly(&[
            "a:1".into(),
            "b:2".into(),
        ])))
    }

    fn bulk(k: &str) -> String {
        format!("${}\r\n{k}\r\n", k.len())
    }

    fn array(keys: &[&str]) -> Vec<u8> {
        let mut s = format!("*{}\r\n", keys.len());
        keys.iter().for_each(|k| s.push_str(&bulk(k)));
        s.into_bytes()
    }

    #[test]
    fn numpat_is_the_largest_count_and_refuses_what_is_not_one() {
        assert_eq!(
            merged(Merge::Max, &[b":3\r\n", b":5\r\n"]).unwrap(),
            ":5\r\n"
        );
        assert!(matches!(
            merged(Merge::Max, &[b":3\r\n", b"+OK\r\n"]),
            Err(DataError::UnexpectedReply(_))
        ));
        assert!(matches!(
            merged(Merge::Max, &[]),
            Err(DataError::UnexpectedReply(_))
        ));
    }

    #[test]
    fn listed_keys_are_those_each_backend_owns() {
        // slot("foo") = 289 (a:1's), slot("qux") = 968 (b:2's): each is also listed by the
        // other backend (a copy of a moving slot, or one left for its cleanup).
        let a = array(&["foo", "qux"]);
        let b = array(&["qux", "foo"]);
        assert_eq!(
            merged(Merge::Keys(owners()), &[&a, &b]).unwrap(),
            format!("*2\r\n{}{}", bulk("foo"), bulk("qux"))
        );
        let page = [b"*2\r\n$2\r\n17\r\n".to_vec(), array(&["foo", "qux"])].concat();
        let scan = |backend| Merge::Scan {
            backend,
            backends: 2,
            owners: owners(),
        };
        assert_eq!(
            merged(scan(1), &[&page]).unwrap(),
            format!("*2\r\n$2\r\n35\r\n*1\r\n{}", bulk("qux"))
        );
        let random = |start| Merge::RandomKey {
            start,
            owners: owners(),
        };
        let (foo, qux) = (bulk("foo"), bulk("qux"));
        // Backend 0 names b:2's key: the next backend's own key is the answer.
        assert_eq!(
            merged(random(0), &[qux.as_bytes(), qux.as_bytes()]).unwrap(),
            qux
        );
        assert_eq!(
            merged(random(0), &[qux.as_bytes(), foo.as_bytes()]).unwrap(),
            "$-1\r\n"
        );
        assert_eq!(
            merged(random(1), &[b"$-1\r\n", foo.as_bytes()]).unwrap(),
            "$-1\r\n"
        );
    }

    #[test]
    fn pubsub_channels_are_a_union_and_numsub_counts_are_summed() {
        let a: &[u8] = b"*2\r\n$1\r\na\r\n$1\r\nb\r\n";
        let b: &[u8] = b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n";
        assert_eq!(
            merged(Merge::Union, &[a, b]).unwrap(),
            "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(merged(Merge::Union, &[b"*0\r\n"]).unwrap(), "*0\r\n");
        let a: &[u8] = b"*4\r\n$1\r\nx\r\n:1\r\n$1\r\ny\r\n:0\r\n";
        let b: &[u8] = b"*4\r\n$1\r\nx\r\n:2\r\n$1\r\ny\r\n:5\r\n";
        assert_eq!(
            merged(Merge::NumSub, &[a, b]).unwrap(),
            "*4\r\n$1\r\nx\r\n:3\r\n$1\r\ny\r\n:5\r\n"
        );
        assert!(merged(Merge::NumSub, &[a, b"*2\r\n$1\r\nx\r\n:1\r\n"]).is_err());
        assert!(merged(Merge::NumSub, &[b"*1\r\n$1\r\nx\r\n"]).is_err());
        assert!(merged(Merge::Union, &[b":1\r\n"]).is_err());
    }
}
