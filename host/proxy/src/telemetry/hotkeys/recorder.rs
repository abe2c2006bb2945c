//! A worker thread's hot-key recorder: samples commands, counts them in the thread's own
//! sub-window (no lock, no atomic), and every sub-window hands the window's top entries to
//! the proxy's `HotKeys` and starts afresh.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::HotKeys;
use super::sketch::{Window, hash_key};

/// Per worker thread; lives in the worker, driven by its sessions and its own tick.
pub struct HotKeyRecorder {
    hot: Arc<HotKeys>,
    shard: usize,
    /// Commands left until the next sampled one.
    countdown: Cell<u32>,
    /// xorshift64 state for the gaps between samples.
    rng: Cell<u64>,
    window: RefCell<Window>,
    /// The by-ops table's keys (hashes) of the sub-window last closed, so a key stays hot
    /// across a rotation.
    was_hot: RefCell<rustc_hash::FxHashSet<u64>>,
}

impl HotKeyRecorder {
    pub fn new(hot: Arc<HotKeys>) -> Self {
        let c = &hot.config;
        let window = Window::new(c.top, c.sketch_width, c.sketch_depth, c.max_key_bytes);
        let shard = hot.take_shard();
        Self {
            shard,
            countdown: Cell::new(0),
            // Any nonzero seed will do; the shard keeps the workers' sequences apart.
            rng: Cell::new(0x9e37_79b9_7f4a_7c15 ^ shard as u64),
            window: RefCell::new(window),
            was_hot: RefCell::default(),
            hot,
        }
    }

    /// Whether the next command is to be recorded (one in `sample_one_in` on average; never
    /// when off). The gaps between samples are random, uniform in `0..2N-1` commands: a
    /// fixed gap would alias with a client's repeating pattern (one cycling through two keys,
    /// sampled one in two, would show only one of them).
    #[inline]
    pub fn wants(&self) -> bool {
        if !self.hot.config.enabled {
            return false;
        }
        match self.countdown.get() {
            0 => {
                self.countdown.set(self.next_gap());
                true
            }
            n => {
                self.countdown.set(n - 1);
                false
            }
        }
    }

    /// Commands to skip before the next sample: mean `sample_one_in - 1`.
    fn next_gap(&self) -> u32 {
        let n = self.hot.config.sample_one_in.max(1);
        if n == 1 {
            return 0;
        }
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        (x % (2 * u64::from(n) - 1)) as u32
    }

    /// Counts one sampled command on `key` with its request and reply sizes.
    #[inline]
    pub fn record(&self, key: &[u8], bytes_in: usize, bytes_out: usize) {
        let n = u64::from(self.hot.config.sample_one_in.max(1));
        let bytes = (bytes_in as u64).saturating_add(bytes_out as u64);
        if let Ok(mut w) = self.window.try_borrow_mut() {
            w.record(hash_key(key), key, n, bytes.saturating_mul(n));
        }
    }

    /// Whether `key` is in the worker's by-ops table now or was at the last sub-window's end.
    pub fn is_hot(&self, key: &[u8]) -> bool {
        let h = hash_key(key);
        self.was_hot.borrow().contains(&h) || self.window.try_borrow().is_ok_and(|w| w.hot(h))
    }

    /// Closes the sub-window: its entries go to the shared view.
    pub fn rotate(&self) {
        {
            let w = self.window.borrow();
            let mut was = self.was_hot.borrow_mut();
            was.clear();
            was.extend(w.hot_hashes());
        }
        let entries = self.window.borrow_mut().take();
        self.hot.publish(self.shard, entries);
    }

    /// Rotates every sub-window, for as long as the worker runs.
    pub async fn run(self: Rc<Self>) {
        if !self.hot.config.enabled {
            return;
        }
        let every = self.hot.config.sub_window();
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.rotate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::hotkeys::HotKeysConfig;

    fn recorder(sample_one_in: u32) -> HotKeyRecorder {
        let config = HotKeysConfig {
            sample_one_in,
            ..HotKeysConfig::default()
        };
        HotKeyRecorder::new(Arc::new(HotKeys::new(config, 1)))
    }

    #[test]
    fn one_in_n_on_average_and_no_aliasing_with_a_repeating_pattern() {
        let r = recorder(8);
        // A client cycling through two keys: a fixed gap of 8 would only ever see one.
        let mut seen = [0u32; 2];
        for i in 0..80_000 {
            if r.wants() {
                seen[i % 2] += 1;
            }
        }
        let total = seen[0] + seen[1];
        assert!((9_000..11_000).contains(&total), "{total} samples of 80000");
        assert!(seen.iter().all(|&n| n > 4_000), "{seen:?}");
    }

    #[test]
    fn one_in_one_records_everything() {
        let r = recorder(1);
        assert!((0..1000).all(|_| r.wants()));
    }
}
