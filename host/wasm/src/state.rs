//! Shared state of one plugin: a key-value namespace with TTLs and versions, atomic counters and
//! token buckets, shared by the plugin's instances on every worker thread and kept across hot
//! reloads. Sharded mutexes: a call holds one shard for a few hundred nanoseconds at most.
//!
//! Both maps are bounded, because their keys often come from clients (the filter's bucket is
//! `rl:<client ip>`): a full key-value shard refuses new keys after dropping expired ones; a
//! full bucket shard drops the buckets that have refilled (indistinguishable from new ones),
//! then the least recently used eighth, so it never grows past its bound and never rescans on
//! every call.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

const SHARDS: usize = 16;
/// Entries per plugin (all shards); a set beyond it evicts expired entries first, then fails.
const MAX_ENTRIES: usize = 1_000_000;
/// Token buckets per plugin (all shards).
const MAX_BUCKETS: usize = 1_000_000;

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
    /// The refill rate and size of the last acquire (to tell when it is full again).
    per_second: u32,
    burst: u32,
}

impl Bucket {
    /// Whether the bucket has refilled to its burst: dropping it changes nothing.
    fn is_full(&self, now: Instant) -> bool {
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second as f64;
        self.tokens + refill >= self.burst as f64
    }
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
    /// Bounds per shard.
    max_entries: usize,
    max_buckets: usize,
}

impl Default for SharedState {
    fn default() -> Self {
        Self::with_bounds(MAX_ENTRIES, MAX_BUCKETS)
    }
}

fn ttl(ms: i64, now: Instant) -> Option<Instant> {
    (ms > 0).then(|| now + Duration::from_millis(ms as u64))
}

impl SharedState {
    /// A namespace holding at most about `entries` keys and `buckets` token buckets (split
    /// evenly over the shards, at least one each).
    pub fn with_bounds(entries: usize, buckets: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next_version: std::sync::atomic::AtomicU64::new(1),
            max_entries: (entries / SHARDS).max(1),
            max_buckets: (buckets / SHARDS).max(1),
        }
    }

    /// Token buckets held now (all shards).
    pub fn bucket_count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).buckets.len())
            .sum()
    }

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
        if shard.map.len() < self.max_entries {
            return true;
        }
        shard.map.retain(|_, e| e.live(now));
        shard.map.len() < self.max_entries
    }

    /// Makes room for one more bucket: drop the refilled ones; if none was, the least
    /// recently used eighth (so the next eighth of new buckets costs no scan).
    fn bucket_room(&self, shard: &mut Shard, now: Instant) {
        if shard.buckets.len() < self.max_buckets {
            return;
        }
        shard.buckets.retain(|_, b| !b.is_full(now));
        if shard.buckets.len() < self.max_buckets {
            return;
        }
        let mut ages: Vec<Instant> = shard.buckets.values().map(|b| b.last).collect();
        let evict = (ages.len() / 8).max(1);
        let (_, cutoff, _) = ages.select_nth_unstable(evict - 1);
        let cutoff = *cutoff;
        let mut left = evict;
        shard.buckets.retain(|_, b| {
            if left > 0 && b.last <= cutoff {
                left -= 1;
                false
            } else {
                true
            }
        });
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
        self.acquire_at(bucket, cost, per_second, burst, Instant::now())
    }

    fn acquire_at(
        &self,
        bucket: &[u8],
        cost: u32,
        per_second: u32,
        burst: u32,
        now: Instant,
    ) -> bool {
        let mut shard = self.shard(bucket);
        if !shard.buckets.contains_key(bucket) {
            self.bucket_room(&mut shard, now);
        }
        let b = shard.buckets.entry(bucket.to_vec()).or_insert(Bucket {
            tokens: burst as f64,
            last: now,
            per_second,
            burst,
        });
        b.per_second = per_second;
        b.burst = burst;
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

    #[test]
    fn token_buckets_stay_within_their_bound_and_keep_the_active_ones() {
        // 16 shards × 4 buckets.
        let s = SharedState::with_bounds(64, 64);
        let t0 = Instant::now();
        // An active bucket, drained: it must survive the flood below.
        assert!(s.acquire_at(b"victim", 1, 1, 1, t0));
        assert!(!s.acquire_at(b"victim", 1, 1, 1, t0));
        // A flood of distinct buckets (a client per address), each drained at once.
        for i in 0..10_000u32 {
            let key = format!("rl:{i}");
            let now = t0 + Duration::from_micros(u64::from(i) + 1);
            s.acquire_at(key.as_bytes(), 1, 1, 1, now);
            // The victim stays in use (an active client sends all the time).
            let _ = s.acquire_at(b"victim", 1, 1, 1, now);
            assert!(
                s.bucket_count() <= 64,
                "{} buckets after {i}",
                s.bucket_count()
            );
        }
        // Still drained: it was never evicted (a fresh bucket would let it through).
        let late = t0 + Duration::from_micros(10_001);
        assert!(!s.acquire_at(b"victim", 1, 1, 1, late));
        // Refilled buckets are the first to go.
        let s = SharedState::with_bounds(16, 16);
        for i in 0..16u32 {
            s.acquire_at(format!("a{i}").as_bytes(), 1, 1000, 1, t0);
        }
        let later = t0 + Duration::from_secs(1);
        for i in 0..100u32 {
            s.acquire_at(format!("b{i}").as_bytes(), 1, 1, 1, later);
            assert!(s.bucket_count() <= 16);
        }
    }
}
