//! Tessera's slot function, written again from the spec so the tests can tell which backend
//! should hold a key: crc32 (IEEE) of the hash key, modulo 1024; static mode splits the slots
//! evenly, in order, over the listed backends.

/// Number of slots in tessera's keyspace.
pub(crate) const SLOTS: u32 = 1024;

/// The slot of `key`: the hash key is the bytes between the first `{` and the first `}` after
/// it, even when empty; else the whole key.
pub(crate) fn slot(key: &[u8]) -> u32 {
    crc32fast::hash(hash_key(key)) % SLOTS
}

fn hash_key(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            return &rest[..close];
        }
    }
    key
}

/// Index of the backend that owns `key` when `backends` backends split the slots evenly.
pub(crate) fn backend_of(key: &str, backends: usize) -> usize {
    let per_backend = SLOTS as usize / backends;
    (slot(key.as_bytes()) as usize / per_backend).min(backends - 1)
}

/// `count` distinct keys `{prefix}N` owned by backend `index` out of two.
pub(crate) fn keys_on(index: usize, prefix: &str, count: usize) -> Vec<String> {
    (0..10_000)
        .map(|n| format!("{prefix}{n}"))
        .filter(|k| backend_of(k, 2) == index)
        .take(count)
        .collect()
}

#[test]
fn slot_matches_the_spec_examples() {
    assert_eq!(slot(b"foo"), 289);
    assert_eq!(slot(b"{foo}bar"), 289);
    assert_eq!(slot(b"x{foo}y{z}"), 289);
    assert_eq!(slot(b"{}foo"), crc32fast::hash(b"") % SLOTS);
    assert_eq!(slot(b"{foo"), crc32fast::hash(b"{foo") % SLOTS);
    assert_eq!(backend_of("foo", 2), 0);
    assert_eq!(backend_of("{a}x", 2), 1);
}
