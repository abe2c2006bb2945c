//! Bucket key names and field placement.
//!
//! Bucket `i` of key `K` is `{tb<i>.<crc32(K) as 8 hex digits>}K`. Redis Cluster and Tessera
//! hash only the first `{…}` of a key when it is non-empty, and here it is always the first
//! bytes of the name, so the slot of a bucket is `crc32("tb<i>.<hex>") % 1024` whatever `K`
//! contains, hash tags included: the buckets of one key spread over slots (and so over groups)
//! even when `K` is `{user:1}:friends`, and two keys' buckets do not pile onto the same slots.
//! A field goes to bucket `crc32(field) % N`.

/// A configured key pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) prefix: Vec<u8>,
    pub(crate) buckets: u32,
}

/// The bucket a field or member belongs to.
pub(crate) fn field_bucket(field: &[u8], buckets: u32) -> u32 {
    crc32fast::hash(field) % buckets
}

/// The `{tb<i>.<hex>}` head of a bucket name, built on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BucketHead {
    buf: [u8; 24],
    len: usize,
}

impl BucketHead {
    /// The head of bucket `i` of the key whose crc32 is `key_crc`.
    pub(crate) fn new(i: u32, key_crc: u32) -> Self {
        let mut buf = [0u8; 24];
        buf[..3].copy_from_slice(b"{tb");
        let mut len = 3;
        let mut digits = [0u8; 10];
        let mut n = 0;
        let mut v = i;
        loop {
            digits[n] = b'0' + (v % 10) as u8;
            n += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        for d in digits[..n].iter().rev() {
            buf[len] = *d;
            len += 1;
        }
        buf[len] = b'.';
        len += 1;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for shift in (0..8).rev() {
            buf[len] = HEX[((key_crc >> (shift * 4)) & 0xf) as usize];
            len += 1;
        }
        buf[len] = b'}';
        len += 1;
        Self { buf, len }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The full name of bucket `i` of `key` (the plugin itself writes the head and the key as two
/// pieces).
#[cfg(test)]
pub(crate) fn bucket_key(key: &[u8], i: u32) -> Vec<u8> {
    let mut v = BucketHead::new(i, crc32fast::hash(key)).as_bytes().to_vec();
    v.extend_from_slice(key);
    v
}

/// The slot of a key as Tessera and Redis Cluster compute it (first non-empty `{…}`),
/// modulo `slots`.
#[cfg(test)]
pub(crate) fn slot(key: &[u8], slots: u32) -> u32 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc32fast::hash(tagged) % slots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_lead_with_their_own_hash_tag() {
        let k = b"big:{user:1}:friends";
        let name = bucket_key(k, 12);
        let hex = format!("{:08x}", crc32fast::hash(k));
        assert_eq!(
            name,
            format!("{{tb12.{hex}}}big:{{user:1}}:friends").into_bytes()
        );
        assert_eq!(
            slot(&name, 1024),
            crc32fast::hash(format!("tb12.{hex}").as_bytes()) % 1024
        );
    }

    #[test]
    fn buckets_of_a_tagged_key_spread_over_slots() {
        let slots: std::collections::HashSet<u32> = (0..16)
            .map(|i| slot(&bucket_key(b"big:{same}", i), 1024))
            .collect();
        assert!(slots.len() >= 14, "{slots:?}");
    }
}
