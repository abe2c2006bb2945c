//! The opt-in proxy-side cache of hot keys (`[hot_cache]`, docs/hotkeys.md): per worker, the
//! `$` bulk replies of plain GETs of keys that are hot and under a configured prefix, for at
//! most `ttl_ms`, within `max_bytes`. Kept true by the worker's hub: every backend reports
//! every write to it (`CLIENT TRACKING ON BCAST`); an invalidation removes its key, a flush or
//! a broken tracking link empties the cache, and the cache serves nothing until every master's
//! tracking link is confirmed up again. A reply is filled only if no invalidation arrived
//! between sending its GET and its reply (`Ticket`). The proxy's own writes move counters every
//! worker's cache checks on each hit (`writes`), so a client reads its own writes; an entry
//! never outlives its key's TTL (the fill asks for it).

mod writes;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use tessera_wire::telemetry::HotCacheFigures;

pub use writes::{Stamp, Stripe, Writes, Written};

/// `[hot_cache]` in proxy.toml.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotCacheConfig {
    /// Key prefixes whose hot keys are cached; empty: the cache is off.
    pub prefixes: Vec<String>,
    /// How long an entry is served at most.
    pub ttl_ms: u64,
    /// Bytes (keys and replies) the cache of one worker holds at most.
    pub max_bytes: usize,
    /// A reply larger than this is not cached.
    pub max_value_bytes: usize,
}

impl Default for HotCacheConfig {
    fn default() -> Self {
        Self {
            prefixes: Vec::new(),
            ttl_ms: 200,
            max_bytes: 16 << 20,
            max_value_bytes: 64 << 10,
        }
    }
}

/// Longest `ttl_ms`: the cache is for bursts on hot keys, not a store.
pub const MAX_TTL_MS: u64 = 5_000;

impl HotCacheConfig {
    /// # Errors
    /// A setting out of its range, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if self.prefixes.iter().any(String::is_empty) {
            return Err(
                "hot_cache.prefixes must not hold an empty prefix (it would cache every key)"
                    .into(),
            );
        }
        if self.prefixes.len() > 64 {
            return Err("hot_cache.prefixes holds at most 64 prefixes".into());
        }
        if !(1..=MAX_TTL_MS).contains(&self.ttl_ms) {
            return Err(format!("hot_cache.ttl_ms must be in 1..={MAX_TTL_MS}"));
        }
        if !(1024..=1 << 30).contains(&self.max_bytes) {
            return Err("hot_cache.max_bytes must be in 1024..=1073741824".into());
        }
        if self.max_value_bytes == 0 || self.max_value_bytes > self.max_bytes {
            return Err("hot_cache.max_value_bytes must be in 1..=max_bytes".into());
        }
        Ok(())
    }

    pub fn on(&self) -> bool {
        !self.prefixes.is_empty()
    }
}

/// What the workers' caches share: their figures, and the proxy's writes they check.
#[derive(Default)]
pub struct HotCacheShared {
    pub stats: HotCacheStats,
    pub writes: Writes,
}

/// The proxy's cache figures, summed over its workers.
#[derive(Default)]
pub struct HotCacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
    fills: AtomicU64,
    invalidations: AtomicU64,
    entries: AtomicI64,
    bytes: AtomicI64,
}

impl HotCacheStats {
    pub fn figures(&self, enabled: bool) -> HotCacheFigures {
        HotCacheFigures {
            enabled,
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            fills: self.fills.load(Relaxed),
            invalidations: self.invalidations.load(Relaxed),
            entries: self.entries.load(Relaxed).max(0) as u64,
            bytes: self.bytes.load(Relaxed).max(0) as u64,
        }
    }

    /// Appends the `tessera_hot_cache_*` series to a Prometheus text exposition.
    pub fn render(&self, enabled: bool, out: &mut String) {
        use std::fmt::Write;
        let f = self.figures(enabled);
        let series: [(&str, &str, &str, u64); 6] = [
            (
                "hits_total",
                "counter",
                "GETs answered from the hot-key cache",
                f.hits,
            ),
            (
                "misses_total",
                "counter",
                "GETs of hot keys the cache could not answer",
                f.misses,
            ),
            (
                "fills_total",
                "counter",
                "Replies stored in the hot-key cache",
                f.fills,
            ),
            (
                "invalidations_total",
                "counter",
                "Cache entries removed by a write, a flush or a broken tracking link",
                f.invalidations,
            ),
            (
                "entries",
                "gauge",
                "Entries in the hot-key cache",
                f.entries,
            ),
            ("bytes", "gauge", "Bytes held by the hot-key cache", f.bytes),
        ];
        for (name, kind, help, v) in series {
            let _ = writeln!(out, "# HELP tessera_hot_cache_{name} {help}");
            let _ = writeln!(out, "# TYPE tessera_hot_cache_{name} {kind}");
            let _ = writeln!(out, "tessera_hot_cache_{name} {v}");
        }
    }
}

struct Entry {
    reply: Bytes,
    until: Instant,
    /// The proxy's write counters of the key when its GET was sent.
    stamp: Stamp,
}

/// What a cacheable GET took when it was sent: its key, the invalidation count and the
/// proxy's write counters then, and when.
#[derive(Debug)]
pub struct Ticket {
    pub key: Bytes,
    seen: u64,
    stamp: Stamp,
    sent: Instant,
}

/// What the backend said of the key's time to live, asked right after the GET (`PTTL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTtl {
    /// No expiry.
    Persistent,
    /// Expires this many milliseconds after the PTTL ran (so no earlier than after the GET
    /// was sent).
    Ms(u64),
    /// Gone, or the answer was not a TTL: not cached.
    Unknown,
}

impl KeyTtl {
    /// Reads a `PTTL` reply (`:-1`, `:-2`, `:N`; anything else is `Unknown`).
    pub fn from_reply(reply: &[u8]) -> Self {
        match tessera_resp::parse_integer(reply) {
            Some(-1) => KeyTtl::Persistent,
            Some(n) if n > 0 => KeyTtl::Ms(n as u64),
            _ => KeyTtl::Unknown,
        }
    }
}

/// One worker's cache.
pub struct HotCache {
    config: HotCacheConfig,
    prefixes: Vec<Bytes>,
    shared: Arc<HotCacheShared>,
    map: RefCell<FxHashMap<Bytes, Entry>>,
    /// Keys in fill order, for eviction (a key may appear again after a refill; stale
    /// positions are skipped).
    order: RefCell<VecDeque<Bytes>>,
    bytes: Cell<usize>,
    /// Bumped by every invalidation, flush and change of a link: a reply whose GET was sent
    /// before is not filled.
    generation: Cell<u64>,
    /// Backends whose tracking link is confirmed up.
    up: RefCell<FxHashSet<Arc<str>>>,
    /// The hub has been asked to track for the cache.
    pub(crate) started: Cell<bool>,
}

/// Bookkeeping bytes charged per entry besides its key and reply.
const ENTRY_OVERHEAD: usize = 64;

impl HotCache {
    pub fn new(config: HotCacheConfig, shared: Arc<HotCacheShared>) -> Self {
        let prefixes = config
            .prefixes
            .iter()
            .map(|p| Bytes::copy_from_slice(p.as_bytes()))
            .collect();
        Self {
            config,
            prefixes,
            shared,
            map: RefCell::default(),
            order: RefCell::default(),
            bytes: Cell::new(0),
            generation: Cell::new(0),
            up: RefCell::default(),
            started: Cell::new(false),
        }
    }

    pub fn on(&self) -> bool {
        self.config.on()
    }

    pub fn prefixes(&self) -> Vec<Bytes> {
        self.prefixes.clone()
    }

    /// Under a configured prefix.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.prefixes.iter().any(|p| key.starts_with(p))
    }

    /// Every one of `masters` has its tracking link confirmed up.
    pub fn serving(&self, masters: &[Arc<str>]) -> bool {
        let up = self.up.borrow();
        !masters.is_empty() && masters.iter().all(|m| up.contains(m))
    }

    /// A GET the cache would have taken went to Redis because a tracking link is down.
    pub fn count_miss(&self) {
        self.shared.stats.misses.fetch_add(1, Relaxed);
    }

    /// The cached reply of `key`, if fresh and no write of this proxy moved its counters since
    /// its GET was sent; a miss counts and gives the ticket to fill with.
    pub fn lookup(&self, key: &[u8]) -> Result<Bytes, Ticket> {
        let now = Instant::now();
        let stamp = self.shared.writes.stamp(key);
        {
            let map = self.map.borrow();
            if let Some(e) = map.get(key)
                && e.until > now
                && e.stamp == stamp
            {
                self.shared.stats.hits.fetch_add(1, Relaxed);
                return Ok(e.reply.clone());
            }
        }
        self.remove(key, false);
        self.shared.stats.misses.fetch_add(1, Relaxed);
        Err(Ticket {
            key: Bytes::copy_from_slice(key),
            seen: self.generation.get(),
            stamp,
            sent: now,
        })
    }

    /// A write of this proxy is sent, or its reply came in: entries it may have changed are
    /// not served again (every worker checks the counters on each hit).
    pub fn wrote(&self, w: &Written) {
        self.shared.writes.bump(w);
    }

    /// What a command writes, as the caches count it (see [`Written`]): its keys under a
    /// cached prefix when it is a write with keys, everything when it may write keys it does
    /// not name.
    pub fn written<'k>(
        &self,
        write: bool,
        writes_anything: bool,
        mut keys: impl Iterator<Item = &'k [u8]>,
    ) -> Written {
        if writes_anything {
            return Written::All;
        }
        if !write {
            return Written::Nothing;
        }
        let mut stripes = smallvec::SmallVec::new();
        let mut any = false;
        for k in keys.by_ref() {
            any = true;
            if self.covers(k) {
                stripes.push(Writes::stripe(k));
            }
        }
        match (any, stripes.is_empty()) {
            (false, _) => Written::All,
            (true, true) => Written::Nothing,
            (true, false) => Written::Stripes(stripes),
        }
    }

    /// Whether a miss's reply could be stored at all (checked before the fill asks for the
    /// key's TTL).
    pub fn may_fill(&self, t: &Ticket, reply: &[u8]) -> bool {
        t.seen == self.generation.get()
            && reply.starts_with(b"$")
            && !reply.starts_with(b"$-1")
            && reply.len() <= self.config.max_value_bytes
            && t.key.len() + reply.len() + ENTRY_OVERHEAD <= self.config.max_bytes
    }

    /// Stores `reply` for the ticket's key: only a `$` bulk string under `max_value_bytes`,
    /// only if nothing was invalidated or written through this proxy since the GET was sent
    /// and the links are still up, and never past the key's own expiry (`ttl`).
    pub fn fill(&self, t: Ticket, reply: &[u8], masters: &[Arc<str>], ttl: KeyTtl) {
        if !self.may_fill(&t, reply)
            || self.shared.writes.stamp(&t.key) != t.stamp
            || !self.serving(masters)
        {
            return;
        }
        let mut until = t.sent + Duration::from_millis(self.config.ttl_ms);
        match ttl {
            KeyTtl::Persistent => {}
            KeyTtl::Ms(ms) => until = until.min(t.sent + Duration::from_millis(ms)),
            KeyTtl::Unknown => return,
        }
        if until <= Instant::now() {
            return;
        }
        let size = t.key.len() + reply.len() + ENTRY_OVERHEAD;
        self.remove(&t.key, false);
        while self.bytes.get() + size > self.config.max_bytes {
            let Some(old) = self.order.borrow_mut().pop_front() else {
                break;
            };
            self.remove(&old, false);
        }
        self.map.borrow_mut().insert(
            t.key.clone(),
            Entry {
                reply: Bytes::copy_from_slice(reply),
                until,
                stamp: t.stamp,
            },
        );
        self.order.borrow_mut().push_back(t.key);
        self.account(size as i64, 1);
        self.shared.stats.fills.fetch_add(1, Relaxed);
        // Positions of keys refilled or removed are skipped; keep the queue bounded by them.
        let len = self.map.borrow().len();
        if self.order.borrow().len() > 2 * len + 64 {
            let map = self.map.borrow();
            let mut seen = FxHashSet::default();
            let mut order = self.order.borrow_mut();
            let mut kept: VecDeque<Bytes> = order
                .iter()
                .rev()
                .filter(|k| map.contains_key(*k) && seen.insert((*k).clone()))
                .cloned()
                .collect();
            kept.make_contiguous().reverse();
            *order = kept;
        }
    }

    fn account(&self, bytes: i64, entries: i64) {
        self.bytes
            .set((self.bytes.get() as i64 + bytes).max(0) as usize);
        self.shared.stats.bytes.fetch_add(bytes, Relaxed);
        self.shared.stats.entries.fetch_add(entries, Relaxed);
    }

    fn remove(&self, key: &[u8], invalidated: bool) {
        if let Some(e) = self.map.borrow_mut().remove(key) {
            self.account(-((key.len() + e.reply.len() + ENTRY_OVERHEAD) as i64), -1);
            if invalidated {
                self.shared.stats.invalidations.fetch_add(1, Relaxed);
            }
        }
    }

    /// A backend reported a write of `key`.
    pub fn invalidate(&self, key: &[u8]) {
        if !self.covers(key) {
            return;
        }
        self.generation.set(self.generation.get() + 1);
        self.remove(key, true);
    }

    /// Everything goes (a flush, a lost link).
    pub fn clear(&self) {
        self.generation.set(self.generation.get() + 1);
        let mut map = self.map.borrow_mut();
        let n = map.len() as u64;
        let bytes: usize = map
            .iter()
            .map(|(k, e)| k.len() + e.reply.len() + ENTRY_OVERHEAD)
            .sum();
        map.clear();
        drop(map);
        self.order.borrow_mut().clear();
        self.account(-(bytes as i64), -(n as i64));
        self.shared.stats.invalidations.fetch_add(n, Relaxed);
    }

    /// The tracking link to `addr` broke: nothing is served until it is confirmed again.
    pub fn link_down(&self, addr: &Arc<str>) {
        self.up.borrow_mut().remove(addr);
        self.clear();
    }

    /// The tracking link to `addr` is confirmed (`CLIENT TRACKING ON` answered).
    pub fn link_up(&self, addr: &Arc<str>) {
        self.generation.set(self.generation.get() + 1);
        self.up.borrow_mut().insert(addr.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(max_bytes: usize) -> (HotCache, Vec<Arc<str>>) {
        let c = HotCache::new(
            HotCacheConfig {
                prefixes: vec!["h:".into()],
                ttl_ms: 1000,
                max_bytes,
                max_value_bytes: 100,
            },
            Arc::default(),
        );
        let m: Vec<Arc<str>> = vec!["a:1".into()];
        c.link_up(&m[0]);
        (c, m)
    }

    #[test]
    fn a_reply_racing_an_invalidation_is_not_filled() {
        let (c, m) = cache(4096);
        let t = c.lookup(b"h:1").unwrap_err();
        c.invalidate(b"h:1");
        c.fill(t, b"$1\r\nx\r\n", &m, KeyTtl::Persistent);
        assert!(c.lookup(b"h:1").is_err());
        let t = c.lookup(b"h:1").unwrap_err();
        c.fill(t, b"$1\r\nx\r\n", &m, KeyTtl::Persistent);
        assert_eq!(
            c.lookup(b"h:1").unwrap(),
            Bytes::from_static(b"$1\r\nx\r\n")
        );
        c.invalidate(b"h:1");
        assert!(c.lookup(b"h:1").is_err());
    }

    #[test]
    fn nothing_is_kept_or_served_with_a_link_down_and_memory_is_bounded() {
        let (c, m) = cache(2048);
        for i in 0..1000 {
            let k = format!("h:{i}");
            let t = c.lookup(k.as_bytes()).unwrap_err();
            c.fill(t, b"$10\r\n0123456789\r\n", &m, KeyTtl::Persistent);
            assert!(c.bytes.get() <= 2048);
        }
        assert!(c.order.borrow().len() <= 2 * c.map.borrow().len() + 64);
        c.link_down(&m[0]);
        assert_eq!(c.bytes.get(), 0);
        assert!(!c.serving(&m));
        let t = c.lookup(b"h:1").unwrap_err();
        c.fill(t, b"$1\r\nx\r\n", &m, KeyTtl::Persistent);
        assert!(c.map.borrow().is_empty());
        let big = format!("${}\r\n{}\r\n", 200, "x".repeat(200));
        c.link_up(&m[0]);
        let t = c.lookup(b"h:1").unwrap_err();
        c.fill(t, big.as_bytes(), &m, KeyTtl::Persistent);
        assert!(c.map.borrow().is_empty());
    }

    #[test]
    fn a_write_through_the_proxy_ends_hits_and_refuses_a_racing_fill() {
        let (c, m) = cache(4096);
        let t = c.lookup(b"h:1").unwrap_err();
        c.fill(t, b"$2\r\nv1\r\n", &m, KeyTtl::Persistent);
        assert!(c.lookup(b"h:1").is_ok());
        // Sent: no hit from now on, on any worker sharing the counters.
        let w = c.written(true, false, [&b"h:1"[..], b"other"].into_iter());
        assert!(matches!(&w, Written::Stripes(s) if s.len() == 1));
        c.wrote(&w);
        let t = c.lookup(b"h:1").unwrap_err();
        // A GET that was sent before the write's reply came in does not fill.
        c.wrote(&w);
        c.fill(t, b"$2\r\nv1\r\n", &m, KeyTtl::Persistent);
        assert!(c.lookup(b"h:1").is_err());
        // A write without keys, a script, a transaction: everything.
        assert_eq!(c.written(true, false, std::iter::empty()), Written::All);
        assert_eq!(c.written(false, true, std::iter::empty()), Written::All);
        assert_eq!(
            c.written(false, false, [&b"h:1"[..]].into_iter()),
            Written::Nothing
        );
        assert_eq!(
            c.written(true, false, [&b"other"[..]].into_iter()),
            Written::Nothing
        );
        let t = c.lookup(b"h:2").unwrap_err();
        c.fill(t, b"$1\r\nx\r\n", &m, KeyTtl::Persistent);
        assert!(c.lookup(b"h:2").is_ok());
        c.wrote(&Written::All);
        assert!(c.lookup(b"h:2").is_err());
    }

    #[test]
    fn an_entry_never_outlives_its_key() {
        let (c, m) = cache(4096);
        let t = c.lookup(b"h:1").unwrap_err();
        c.fill(t, b"$1\r\nx\r\n", &m, KeyTtl::Ms(1));
        std::thread::sleep(Duration::from_millis(5));
        assert!(c.lookup(b"h:1").is_err(), "expired with its key");
        let t = c.lookup(b"h:1").unwrap_err();
        c.fill(t, b"$1\r\nx\r\n", &m, KeyTtl::Unknown);
        assert!(c.lookup(b"h:1").is_err(), "gone or unknown: not cached");
        assert_eq!(KeyTtl::from_reply(b":-1\r\n"), KeyTtl::Persistent);
        assert_eq!(KeyTtl::from_reply(b":-2\r\n"), KeyTtl::Unknown);
        assert_eq!(KeyTtl::from_reply(b":1500\r\n"), KeyTtl::Ms(1500));
        assert_eq!(KeyTtl::from_reply(b"-NOPERM x\r\n"), KeyTtl::Unknown);
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        assert!(HotCacheConfig::default().validate().is_ok());
        let c = HotCacheConfig {
            ttl_ms: 60_000,
            ..HotCacheConfig::default()
        };
        assert!(c.validate().unwrap_err().contains("ttl_ms"));
        let c = HotCacheConfig {
            prefixes: vec![String::new()],
            ..HotCacheConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
