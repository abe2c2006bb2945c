//! Turns a dump's values into the ordinary commands that rebuild them through a proxy, so
//! every key takes the proxy's slot routing and plugins: SET (with PXAT), RPUSH, SADD, ZADD,
//! HSET, XADD + XSETID + XGROUP CREATE/CREATECONSUMER + XCLAIM, then PEXPIREAT. Collections
//! go in chunks ([`CHUNK_ITEMS`] elements or [`CHUNK_BYTES`] bytes a command), big strings as
//! SET then APPENDs, so no command comes near the proxy's request limits. A collection is
//! deleted first, so an import replaces a key instead of merging into it.

use bytes::Bytes;

use super::value::{Entry, Group, Stream, Value};
use tessera_resp::encode_request;

/// Most elements in one command.
pub const CHUNK_ITEMS: usize = 512;
/// Most value bytes in one command (a string's slice, or a chunk's elements together).
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// One encoded command.
pub fn encode(args: &[&[u8]]) -> Bytes {
    let size = args.iter().map(|a| a.len()).sum();
    encode_request(args.len(), args.iter().copied(), size)
}

fn num(n: impl itoa::Integer) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

/// A score as ZADD takes it (`inf`, `-inf`; NaN cannot be stored by Redis).
fn score(f: f64) -> Vec<u8> {
    if f.is_infinite() {
        return if f > 0.0 {
            b"inf".to_vec()
        } else {
            b"-inf".to_vec()
        };
    }
    // Rust's shortest round-trip form; Redis parses it back to the same double.
    format!("{f:?}").into_bytes()
}

/// The commands that rebuild `entry`, or `None` if it has already expired at `now_ms`.
pub fn commands(entry: &Entry, now_ms: u64) -> Option<Vec<Bytes>> {
    if entry.expire_ms.is_some_and(|t| t <= now_ms) {
        return None;
    }
    let key = &entry.key[..];
    let mut out = Vec::new();
    match &entry.value {
        Value::String(v) => {
            string(key, v, entry.expire_ms, &mut out);
            return Some(out);
        }
        Value::List(items) => {
            out.push(encode(&[b"DEL", key]));
            chunked(
                &mut out,
                &[b"RPUSH", key],
                items.iter().map(|i| vec![&i[..]]),
            );
        }
        Value::Set(items) => {
            out.push(encode(&[b"DEL", key]));
            chunked(
                &mut out,
                &[b"SADD", key],
                items.iter().map(|i| vec![&i[..]]),
            );
        }
        Value::ZSet(items) => {
            out.push(encode(&[b"DEL", key]));
            let scores: Vec<Vec<u8>> = items.iter().map(|(_, s)| score(*s)).collect();
            let pairs = items
                .iter()
                .zip(&scores)
                .map(|((m, _), s)| vec![&s[..], &m[..]]);
            chunked(&mut out, &[b"ZADD", key], pairs);
        }
        Value::Hash(items) => {
            out.push(encode(&[b"DEL", key]));
            let pairs = items.iter().map(|(f, v)| vec![&f[..], &v[..]]);
            chunked(&mut out, &[b"HSET", key], pairs);
        }
        Value::Stream(s) => {
            out.push(encode(&[b"DEL", key]));
            stream(key, s, &mut out);
        }
    }
    if let Some(t) = entry.expire_ms {
        out.push(encode(&[b"PEXPIREAT", key, &num(t)]));
    }
    Some(out)
}

/// `SET key value [PXAT t]`, or for a big string `SET` of its first slice then `APPEND`s and
/// a `PEXPIREAT`.
fn string(key: &[u8], v: &[u8], expire_ms: Option<u64>, out: &mut Vec<Bytes>) {
    let t = expire_ms.map(num);
    if v.len() <= CHUNK_BYTES {
        out.push(match &t {
            Some(t) => encode(&[b"SET", key, v, b"PXAT", t]),
            None => encode(&[b"SET", key, v]),
        });
        return;
    }
    let mut slices = v.chunks(CHUNK_BYTES);
    out.push(encode(&[b"SET", key, slices.next().unwrap_or_default()]));
    out.extend(slices.map(|s| encode(&[b"APPEND", key, s])));
    if let Some(t) = &t {
        out.push(encode(&[b"PEXPIREAT", key, t]));
    }
}

/// `head` followed by groups of arguments, split into commands of bounded size.
fn chunked<'a>(out: &mut Vec<Bytes>, head: &[&[u8]], groups: impl Iterator<Item = Vec<&'a [u8]>>) {
    let mut args: Vec<&[u8]> = head.to_vec();
    let (mut items, mut bytes) = (0, 0);
    for g in groups {
        bytes += g.iter().map(|a| a.len()).sum::<usize>();
        args.extend(g);
        items += 1;
        if items >= CHUNK_ITEMS || bytes >= CHUNK_BYTES {
            out.push(encode(&args));
            args.truncate(head.len());
            (items, bytes) = (0, 0);
        }
    }
    if items > 0 {
        out.push(encode(&args));
    }
}

/// Entries with their IDs, the stream's counters, then its groups.
fn stream(key: &[u8], s: &Stream, out: &mut Vec<Bytes>) {
    if s.entries.is_empty() {
        // An empty stream: made by a group created with MKSTREAM, then dropped again.
        let tmp = b"tessera-port-tmp";
        out.push(encode(&[b"XGROUP", b"CREATE", key, tmp, b"0", b"MKSTREAM"]));
        out.push(encode(&[b"XGROUP", b"DESTROY", key, tmp]));
    }
    for e in &s.entries {
        let id = e.id.text();
        let mut args: Vec<&[u8]> = vec![b"XADD", key, &id];
        for (f, v) in &e.fields {
            args.extend([&f[..], &v[..]]);
        }
        out.push(encode(&args));
    }
    let last = s.last_id.text();
    let added = s.entries_added.map(num);
    let max_deleted = s.max_deleted_id.map(|i| i.text());
    let mut args: Vec<&[u8]> = vec![b"XSETID", key, &last];
    if let (Some(n), Some(d)) = (&added, &max_deleted) {
        args.extend([&b"ENTRIESADDED"[..], n, b"MAXDELETEDID", d]);
    }
    out.push(encode(&args));
    for g in &s.groups {
        group(key, g, out);
    }
}

/// `XGROUP CREATE`, its consumers, and each pending entry claimed by its consumer with its
/// delivery time and count (`XCLAIM … TIME … RETRYCOUNT … FORCE JUSTID`).
fn group(key: &[u8], g: &Group, out: &mut Vec<Bytes>) {
    let last = g.last_id.text();
    let read = g.entries_read.map(num);
    let mut create: Vec<&[u8]> = vec![b"XGROUP", b"CREATE", key, &g.name, &last];
    if let Some(n) = &read {
        create.extend([&b"ENTRIESREAD"[..], n]);
    }
    out.push(encode(&create));
    for c in &g.consumers {
        out.push(encode(&[
            b"XGROUP",
            b"CREATECONSUMER",
            key,
            &g.name,
            &c.name,
        ]));
        for id in &c.pending {
            let Some(p) = g.pending.iter().find(|p| p.id == *id) else {
                continue;
            };
            let (id, time, count) = (id.text(), num(p.delivery_time_ms), num(p.delivery_count));
            out.push(encode(&[
                b"XCLAIM",
                key,
                &g.name,
                &c.name,
                b"0",
                &id,
                b"TIME",
                &time,
                b"RETRYCOUNT",
                &count,
                b"FORCE",
                b"JUSTID",
            ]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(value: Value, expire_ms: Option<u64>) -> Entry {
        Entry {
            db: 0,
            key: b"k".to_vec(),
            expire_ms,
            value,
        }
    }

    #[test]
    fn expired_keys_are_skipped_and_ttls_are_absolute() {
        let v = Value::String(b"v".to_vec());
        assert!(commands(&entry(v.clone(), Some(10)), 10).is_none());
        let cmds = commands(&entry(v, Some(5000)), 10).unwrap();
        assert_eq!(
            &cmds[0][..],
            b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$4\r\nPXAT\r\n$4\r\n5000\r\n"
        );
    }

    #[test]
    fn big_collections_and_strings_are_split() {
        let items: Vec<Vec<u8>> = (0..1300).map(num).collect();
        let cmds = commands(&entry(Value::List(items), None), 0).unwrap();
        assert_eq!(cmds.len(), 1 + 3, "DEL, then 512 + 512 + 276");
        let big = vec![b'x'; CHUNK_BYTES * 2 + 1];
        let cmds = commands(&entry(Value::String(big), Some(99)), 0).unwrap();
        assert_eq!(cmds.len(), 1 + 2 + 1, "SET, two APPENDs, PEXPIREAT");
    }

    #[test]
    fn scores_round_trip_as_text() {
        assert_eq!(score(1.5), b"1.5");
        assert_eq!(score(f64::NEG_INFINITY), b"-inf");
        assert_eq!(score(0.1 + 0.2), b"0.30000000000000004");
    }
}
