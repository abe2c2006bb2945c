//! Stream values of an RDB file (types STREAM_LISTPACKS 1, 2 and 3): the listpacks of
//! entries (a master entry, then entries stored as deltas against it), the stream's last ID,
//! greatest deleted ID and entries added, and its consumer groups with their pending entries
//! and consumers. Deleted entries are dropped here.

use super::encoding;
use super::input::{Input, RdbError, printable};
use super::value::{Consumer, Group, Pending, Stream, StreamEntry, StreamId};

/// Entry flags in a stream listpack.
const DELETED: i64 = 1;
const SAME_FIELDS: i64 = 2;

/// Reads a stream value of RDB type `kind` (15, 19 or 21) for `key`.
///
/// # Errors
/// Malformed listpacks, IDs or counts.
pub(crate) fn read(input: &mut Input<'_>, kind: u8, key: &[u8]) -> Result<Stream, RdbError> {
    let mut stream = Stream::default();
    let nodes = input.count()?;
    for _ in 0..nodes {
        let at = input.at();
        let master = input.string()?;
        let master = raw_id(&master).ok_or_else(|| bad(at, "stream node key is not an ID"))?;
        let blob = input.string()?;
        let flat = encoding::listpack(&blob).map_err(|source| RdbError::Encoding {
            key: printable(key),
            source,
        })?;
        decode_node(master, &flat, &mut stream.entries).map_err(|what| bad(at, what))?;
    }
    input.len()?; // length: the entries decoded say it
    stream.last_id = id(input)?;
    if kind >= 19 {
        id(input)?; // first ID: follows from the entries
        stream.max_deleted_id = Some(id(input)?);
        stream.entries_added = Some(input.len()?);
    }
    let groups = input.count()?;
    for _ in 0..groups {
        stream.groups.push(group(input, kind)?);
    }
    Ok(stream)
}

fn bad(at: usize, what: &str) -> RdbError {
    RdbError::Malformed {
        at,
        what: format!("stream: {what}"),
    }
}

fn id(input: &mut Input<'_>) -> Result<StreamId, RdbError> {
    Ok(StreamId {
        ms: input.len()?,
        seq: input.len()?,
    })
}

/// A 16-byte big-endian `ms, seq` ID (node keys and pending entries).
fn raw_id(b: &[u8]) -> Option<StreamId> {
    let b: &[u8; 16] = b.try_into().ok()?;
    Some(StreamId {
        ms: u64::from_be_bytes(b[..8].try_into().ok()?),
        seq: u64::from_be_bytes(b[8..].try_into().ok()?),
    })
}

fn group(input: &mut Input<'_>, kind: u8) -> Result<Group, RdbError> {
    let name = input.string()?;
    let last_id = id(input)?;
    // -1 (stored as u64::MAX) means "not known".
    let entries_read = if kind >= 19 {
        Some(input.len()?).filter(|&n| n != u64::MAX)
    } else {
        None
    };
    let mut pending = Vec::new();
    for _ in 0..input.count()? {
        let at = input.at();
        let id = raw_id(input.take(16)?).ok_or_else(|| bad(at, "pending ID"))?;
        let delivery_time_ms = input.u64_le()?;
        let delivery_count = input.len()?;
        pending.push(Pending {
            id,
            delivery_time_ms,
            delivery_count,
        });
    }
    let mut consumers = Vec::new();
    for _ in 0..input.count()? {
        let name = input.string()?;
        input.u64_le()?; // seen time
        if kind >= 21 {
            input.u64_le()?; // active time
        }
        let mut ids = Vec::new();
        for _ in 0..input.count()? {
            let at = input.at();
            ids.push(raw_id(input.take(16)?).ok_or_else(|| bad(at, "consumer pending ID"))?);
        }
        consumers.push(Consumer { name, pending: ids });
    }
    Ok(Group {
        name,
        last_id,
        entries_read,
        pending,
        consumers,
    })
}

fn int(v: Option<&Vec<u8>>) -> Result<i64, &'static str> {
    v.and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
        .ok_or("expected an integer")
}

/// Decodes one node's listpack:
/// `count, deleted, n, field×n, 0` (master entry), then per entry
/// `flags, ms-delta, seq-delta, [n, (field, value)×n | value×n], lp-count`.
fn decode_node(
    master: StreamId,
    flat: &[Vec<u8>],
    out: &mut Vec<StreamEntry>,
) -> Result<(), &'static str> {
    let mut it = flat.iter();
    let live = int(it.next())?;
    let deleted = int(it.next())?;
    let n_master = usize::try_from(int(it.next())?).map_err(|_| "negative field count")?;
    if n_master > flat.len() {
        return Err("master field count exceeds the node");
    }
    let master_fields: Vec<&Vec<u8>> = it.by_ref().take(n_master).collect();
    int(it.next())?; // master entry terminator
    let total = live.checked_add(deleted).ok_or("entry count")?;
    for _ in 0..total {
        let flags = int(it.next())?;
        let ms = master.ms.wrapping_add(int(it.next())? as u64);
        let seq = master.seq.wrapping_add(int(it.next())? as u64);
        let mut fields = Vec::new();
        if flags & SAME_FIELDS != 0 {
            for f in &master_fields {
                fields.push(((*f).clone(), it.next().ok_or("entry ends early")?.clone()));
            }
        } else {
            let n = int(it.next())?;
            for _ in 0..n {
                let f = it.next().ok_or("entry ends early")?;
                let v = it.next().ok_or("entry ends early")?;
                fields.push((f.clone(), v.clone()));
            }
        }
        int(it.next())?; // lp-count
        if flags & DELETED == 0 {
            out.push(StreamEntry {
                id: StreamId { ms, seq },
                fields,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_node_decodes_same_field_entries_own_field_entries_and_skips_deleted_ones() {
        let master = StreamId { ms: 100, seq: 0 };
        // 2 live, 1 deleted; master fields [a, b]; then three entries.
        let flat = t(&[
            "2", "1", "2", "a", "b", "0", // master entry
            "2", "0", "0", "1", "2", "6", // same fields: a=1 b=2, ID 100-0
            "3", "5", "1", "x", "y", "8", // deleted, same fields
            "0", "7", "3", "1", "c", "9", "7", // own fields: c=9, ID 107-3
        ]);
        let mut out = Vec::new();
        decode_node(master, &flat, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].id, StreamId { ms: 100, seq: 0 });
        assert_eq!(
            out[0].fields,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
        assert_eq!(out[1].id, StreamId { ms: 107, seq: 3 });
        assert_eq!(out[1].fields, vec![(b"c".to_vec(), b"9".to_vec())]);
    }

    #[test]
    fn a_short_or_garbled_node_is_an_error() {
        let master = StreamId::default();
        let mut out = Vec::new();
        assert!(decode_node(master, &t(&["1", "0", "1", "a", "0", "2", "0"]), &mut out).is_err());
        assert!(decode_node(master, &t(&["x"]), &mut out).is_err());
        assert!(decode_node(master, &t(&["1", "0", "99999"]), &mut out).is_err());
    }
}
