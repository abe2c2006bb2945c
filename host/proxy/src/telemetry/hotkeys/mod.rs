//! Hot keys of one proxy: the top keys by operations and by bytes over a sliding window, in
//! memory bounded by configuration whatever keys clients send. Each worker thread counts in
//! its own sketch (`recorder`, `sketch`); every sub-window it publishes its top entries here,
//! and `view` merges the shards' published sub-windows that are still in the window.
//! Read by `GET /api/proxy/hotkeys`; the dashboard merges the proxies' views. docs/hotkeys.md.

mod recorder;
mod sketch;

pub use recorder::HotKeyRecorder;

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use sketch::{Counted, KeyId, Window};
use tessera_model::router::SlotId;
use tessera_wire::telemetry::{HotKey, HotKeysView};

/// `[hotkeys]` in proxy.toml.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotKeysConfig {
    /// Count keys at all.
    pub enabled: bool,
    /// Keys kept per ranking (ops, bytes) per worker and sub-window: the K of top-K.
    pub top: usize,
    /// Count-Min sketch cells per row (rounded up to a power of two) and rows.
    pub sketch_width: usize,
    pub sketch_depth: usize,
    /// The window the view covers, and the sub-windows it slides by.
    pub window_secs: u64,
    pub sub_windows: u32,
    /// Bytes of a key kept for display; longer keys are shown cut, with their full length.
    pub max_key_bytes: usize,
    /// Record one command in this many, on average (each counted with weight
    /// `sample_one_in`). Every command recorded cost ~3–8 % of the proxy's requests per
    /// CPU-second at c50 P16 (docs/hotkeys.md).
    pub sample_one_in: u32,
}

impl Default for HotKeysConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            top: 32,
            sketch_width: 1024,
            sketch_depth: 4,
            window_secs: 10,
            sub_windows: 5,
            max_key_bytes: 128,
            sample_one_in: 8,
        }
    }
}

impl HotKeysConfig {
    /// # Errors
    /// A setting out of its range, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        let bad = |what: &str| Err(format!("hotkeys.{what}"));
        if !(1..=1024).contains(&self.top) {
            return bad("top must be in 1..=1024");
        }
        if !(16..=1 << 20).contains(&self.sketch_width) {
            return bad("sketch_width must be in 16..=1048576");
        }
        if !(1..=sketch::MAX_DEPTH).contains(&self.sketch_depth) {
            return bad("sketch_depth must be in 1..=8");
        }
        if !(1..=3600).contains(&self.window_secs) || !(1..=60).contains(&self.sub_windows) {
            return bad("window_secs must be in 1..=3600 and sub_windows in 1..=60");
        }
        if !(1..=4096).contains(&self.max_key_bytes) {
            return bad("max_key_bytes must be in 1..=4096");
        }
        if self.sample_one_in == 0 {
            return bad("sample_one_in must be >= 1");
        }
        Ok(())
    }

    fn sub_window(&self) -> Duration {
        (Duration::from_secs(self.window_secs) / self.sub_windows.max(1))
            .max(Duration::from_millis(100))
    }

    /// Heap bytes of one published sub-window at most (both tables full, no key shared).
    fn published_size(&self) -> usize {
        2 * self.top * (std::mem::size_of::<Counted>() + self.max_key_bytes)
    }
}

/// The proxy's published sub-windows, one list per worker shard.
pub struct HotKeys {
    config: HotKeysConfig,
    shards: Box<[Mutex<VecDeque<Published>>]>,
    next_shard: AtomicUsize,
    started: Instant,
}

struct Published {
    at: Instant,
    entries: Vec<Counted>,
}

impl HotKeys {
    /// Published lists for `shards` worker threads (at least one).
    pub fn new(config: HotKeysConfig, shards: usize) -> Self {
        Self {
            config,
            shards: (0..shards.max(1)).map(|_| Mutex::default()).collect(),
            next_shard: AtomicUsize::new(0),
            started: Instant::now(),
        }
    }

    pub fn config(&self) -> &HotKeysConfig {
        &self.config
    }

    fn take_shard(&self) -> usize {
        self.next_shard.fetch_add(1, Relaxed) % self.shards.len()
    }

    /// Keeps a closed sub-window of a shard and lets go of those past the window.
    fn publish(&self, shard: usize, entries: Vec<Counted>) {
        let now = Instant::now();
        let window = Duration::from_secs(self.config.window_secs);
        let mut list = self.shards[shard].lock().expect("hot keys lock poisoned");
        list.push_back(Published { at: now, entries });
        // A shard shared by two workers (more workers than shards) still holds at most
        // `sub_windows` per worker; the age check bounds it as well.
        let most = self.config.sub_windows as usize * self.workers_per_shard();
        while list.len() > most || list.front().is_some_and(|p| now - p.at > window) {
            list.pop_front();
        }
    }

    fn workers_per_shard(&self) -> usize {
        self.next_shard
            .load(Relaxed)
            .div_ceil(self.shards.len())
            .max(1)
    }

    /// Heap bytes the counting may hold at most.
    fn memory_limit(&self) -> usize {
        let c = &self.config;
        if !c.enabled {
            return 0;
        }
        let workers = self.next_shard.load(Relaxed).max(self.shards.len());
        let window = Window::size_of(c.top, c.sketch_width, c.sketch_depth, c.max_key_bytes);
        workers * (window + c.sub_windows as usize * c.published_size())
    }

    /// The top `limit` keys by ops and by bytes over the window, every shard merged.
    pub fn view(&self, limit: usize) -> HotKeysView {
        let c = &self.config;
        let now = Instant::now();
        let window = Duration::from_secs(c.window_secs);
        let mut sums: HashMap<KeyId, (u64, u64)> = HashMap::new();
        let workers = self.next_shard.load(Relaxed).max(self.shards.len());
        let fixed = Window::size_of(c.top, c.sketch_width, c.sketch_depth, c.max_key_bytes);
        let mut memory = if c.enabled { workers * fixed } else { 0 };
        let mut oldest = now;
        for shard in self.shards.iter() {
            let list = shard.lock().expect("hot keys lock poisoned");
            for p in list.iter() {
                memory += p.entries.capacity() * std::mem::size_of::<Counted>()
                    + p.entries.iter().map(|e| e.key.head.len()).sum::<usize>();
                if now - p.at > window {
                    continue;
                }
                // `checked_sub`: an hour-long sub-window on a host up for less would underflow.
                oldest = oldest.min(p.at.checked_sub(c.sub_window()).unwrap_or(p.at));
                for e in &p.entries {
                    let s = sums.entry(e.key.clone()).or_default();
                    s.0 += e.ops;
                    s.1 += e.bytes;
                }
            }
        }
        let mut all: Vec<HotKey> = sums
            .into_iter()
            .map(|(k, (ops, bytes))| HotKey {
                key: escape(&k.head),
                key_len: k.len,
                truncated: (k.head.len() as u64) < k.len,
                slot: ((k.head.len() as u64) == k.len).then(|| SlotId::of_key(&k.head).0),
                ops,
                bytes,
            })
            .collect();
        let by = |all: &mut Vec<HotKey>, f: fn(&HotKey) -> u64| {
            all.sort_by(|a, b| f(b).cmp(&f(a)).then_with(|| a.key.cmp(&b.key)));
            all.iter().take(limit).cloned().collect::<Vec<_>>()
        };
        let by_ops = by(&mut all, |k| k.ops);
        let by_bytes = by(&mut all, |k| k.bytes);
        let span = now.duration_since(oldest.max(self.started)).min(window);
        HotKeysView {
            enabled: c.enabled,
            window_secs: span.as_secs_f64(),
            sub_window_secs: c.sub_window().as_secs_f64(),
            sample_one_in: c.sample_one_in,
            by_ops,
            by_bytes,
            memory_bytes: memory as u64,
            memory_limit_bytes: self.memory_limit() as u64,
            max_key_bytes: c.max_key_bytes,
            hot_cache: Default::default(),
        }
    }
}

/// A key as text: printable ASCII as is, `\` doubled, every other byte as `\xHH` (so two
/// different keys never read the same).
pub fn escape(key: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(key.len());
    for &b in key {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_view_merges_workers_and_stays_within_its_bound() {
        // `record` directly: every call counts once.
        let config = HotKeysConfig {
            top: 4,
            max_key_bytes: 8,
            sample_one_in: 1,
            ..HotKeysConfig::default()
        };
        let hot = Arc::new(HotKeys::new(config, 2));
        let (a, b) = (
            HotKeyRecorder::new(hot.clone()),
            HotKeyRecorder::new(hot.clone()),
        );
        for i in 0..5_000u32 {
            let long = vec![b'k'; 1000 + i as usize];
            a.record(&long, 10, 10);
            a.record(b"split", 10, 10);
            b.record(b"split", 10, 10);
            b.record(format!("cold{i}").as_bytes(), 10, 10);
        }
        a.rotate();
        b.rotate();
        let v = hot.view(3);
        assert_eq!(v.by_ops[0].key, "split");
        assert_eq!(v.by_ops[0].ops, 10_000);
        assert!(
            v.by_ops
                .iter()
                .all(|k| k.key.len() <= 8 || k.key.contains('\\'))
        );
        assert!(v.memory_bytes <= v.memory_limit_bytes, "{v:?}");
        assert!(v.memory_limit_bytes < 1 << 20);
    }

    #[test]
    fn escaped_keys_are_unambiguous() {
        assert_eq!(escape(b"a\\x01\x01\xff"), "a\\\\x01\\x01\\xff");
    }

    #[test]
    fn every_setting_out_of_range_is_refused() {
        assert!(HotKeysConfig::default().validate().is_ok());
        let top = HotKeysConfig {
            top: 0,
            ..HotKeysConfig::default()
        };
        assert!(top.validate().unwrap_err().contains("top"));
        let sample = HotKeysConfig {
            sample_one_in: 0,
            ..HotKeysConfig::default()
        };
        assert!(sample.validate().is_err());
    }
}
