//! Shared state of one plugin: a key-value namespace with TTLs and versions, atomic counters and
//! token buckets, shared by the plugin's instances on every worker thread and kept across hot
//! reloads. Sharded mutexes: a call holds one shard for a few hundred nanoseconds at most.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

const SHARDS: usize = 16;
/// Entries per plugin (all shards); a set beyond it evicts expired entries first, then fails.
const MAX_ENTRIES: usize = 1_000_000;

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    version: u64,
    expires: Option<Instant>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|e| e > now)
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Default, Debug)]
struct Shard {
    map: FxHashMap<Vec<u8>, Entry>,
    buckets: FxHashMap<Vec<u8>, Bucket>,
}

/// One plugin's state namespace.
#[derive(Debug)]
pub struct SharedState {
    shards: Vec<Mutex<Shard>>,
    next_version: std::sync::atomic::AtomicU64,
}

impl Default for SharedState {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next_version: std::sync::atomic::AtomicU64::new(1),
        }
    }
}

fn ttl(ms: i64, now: Instant) -> Option<Instant> {
    (ms > 0).then(|| now + Duration::from_millis(ms as u64))
}

impl SharedState {
    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, Shard> {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        let i = (h.finish() as usize) % SHARDS;
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn version(&self) -> u64 {
        self.next_version
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The value and its version, if present and not expired.
    pub fn get_versioned(&self, key: &[u8], f: impl FnOnce(&[u8], u64)) -> bool {
        let now = Instant::now();
        let shard = self.shard(key);
        match shard.map.get(key) {
            Some(e) if e.live(now) => {
                f(&e.value, e.version);
                true
            }
            _ => false,
        }
    }

    pub fn set(&self, key: &[u8], value: &[u8], ttl_ms: i64) -> bool {
        let now = Instant::now();
        let version = self.version();
        let mut shard = self.shard(key);
        if !shard.map.contains_key(key) && !self.room(&mut shard, now) {
            return false;
        }
        shard.map.insert(
            key.to_vec(),
            Entry {
                value: value.to_vec(),
                version,
                expires: ttl(ttl_ms, now),
            },
        );
        true
    }

    /// Makes room for one more entry in this shard.
    fn room(&self, shard: &mut Shard, now: Instant) -> bool {
        if shard.map.len() < MAX_ENTRIES / SHARDS {
            return true;
        }
        shard.map.retain(|_, e| e.live(now));
        shard.map.len() < MAX_ENTRIES / SHARDS
    }

    pub fn delete(&self, key: &[u8]) -> bool {
        let now = Instant::now();
        let mut shard = self.shard(key);
        matches!(shard.map.remove(key), Some(e) if e.live(now))
    }

    /// Adds `delta` to the integer stored at `key` (missing or non-integer: 0); the TTL applies
    /// when the key is created. Returns the new value.
    pub fn incr(&self, key: &[u8], delta: i64, ttl_ms: i64) -> i64 {
        let now = Instant::now();
        let version = self.version();
        let mut shard = self.shard(key);
        let current = match shard.map.get(key) {
            Some(e) if e.live(now) => Some(
                e.value
                    .as_slice()
                    .try_into()
                    .map(i64::from_le_bytes)
                    .unwrap_or(0),
            ),
            _ => None,
        };
        let value = current.unwrap_or(0).wrapping_add(delta);
        if current.is_none() && !self.room(&mut shard, now) {
            return value;
        }
        let expires = match (current, shard.map.get(key)) {
            (Some(_), Some(e)) => e.expires,
            _ => ttl(ttl_ms, now),
        };
        shard.map.insert(
            key.to_vec(),
            Entry {
                value: value.to_le_bytes().to_vec(),
                version,
                expires,
            },
        );
        value
    }

    /// Sets `value` if the stored version is `version` (0: the key must be absent).
    pub fn set_if_version(&self, key: &[u8], value: &[u8], version: u64) -> bool {
        let now = Instant::now();
        let next = self.version();
        let mut shard = self.shard(key);
        let current = match shard.map.get(key) {
            Some(e) if e.live(now) => e.version,
            _ => 0,
        };
        if current != version {
            return false;
        }
        if current == 0 && !self.room(&mut shard, now) {
            return false;
        }
        let expires = shard.map.get(key).and_then(|e| e.expires);
        shard.map.insert(
            key.to_vec(),
            Entry {
                value: value.to_vec(),
                version: next,
                expires: if current == 0 { None } else { expires },
            },
        );
        true
    }

    /// Token bucket: takes `cost` tokens if there are that many; refills at `per_second` up to
    /// `burst`.
    pub fn acquire(&self, bucket: &[u8], cost: u32, per_second: u32, burst: u32) -> bool {
        let now = Instant::now();
        let mut shard = self.shard(bucket);
        if !shard.buckets.contains_key(bucket) && shard.buckets.len() >= MAX_ENTRIES / SHARDS {
            // Full: forget buckets idle long enough to be full again.
            shard
                .buckets
                .retain(|_, b| now.duration_since(b.last) < Duration::from_secs(60));
        }
        let b = shard.buckets.entry(bucket.to_vec()).or_insert(Bucket {
            tokens: burst as f64,
            last: now,
        });
        let refill = now.duration_since(b.last).as_secs_f64() * per_second as f64;
        b.tokens = (b.tokens + refill).min(burst as f64);
        b.last = now;
        if b.tokens >= cost as f64 {
            b.tokens -= cost as f64;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_counters_and_buckets() {
        let s = SharedState::default();
        assert!(!s.get_versioned(b"k", |_, _| ()));
        assert!(s.set_if_version(b"k", b"a", 0));
        let mut v = 0;
        assert!(s.get_versioned(b"k", |val, ver| {
            assert_eq!(val, b"a");
            v = ver;
        }));
        assert!(!s.set_if_version(b"k", b"b", v + 100));
        assert!(s.set_if_version(b"k", b"b", v));
        assert_eq!(s.incr(b"n", 5, 0), 5);
        assert_eq!(s.incr(b"n", -2, 0), 3);
        assert!(s.delete(b"n"));
        assert_eq!(s.incr(b"n", 1, 0), 1);
        assert!(s.acquire(b"b", 1, 1, 2));
        assert!(s.acquire(b"b", 1, 1, 2));
        assert!(!s.acquire(b"b", 1, 1, 2));
        s.set(b"t", b"x", 1);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!s.get_versioned(b"t", |_, _| ()));
    }
}
