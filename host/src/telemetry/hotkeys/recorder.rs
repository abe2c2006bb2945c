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
    window: RefCell<Window>,
    /// The by-ops table's keys (hashes) of the sub-window last closed, so a key stays hot
    /// across a rotation.
    was_hot: RefCell<rustc_hash::FxHashSet<u64>>,
}

impl HotKeyRecorder {
    pub fn new(hot: Arc<HotKeys>) -> Self {
        let c = &hot.config;
        let window = Window::new(c.top, c.sketch_width, c.sketch_depth, c.max_key_bytes);
        Self {
            shard: hot.take_shard(),
            countdown: Cell::new(0),
            window: RefCell::new(window),
            was_hot: RefCell::default(),
            hot,
        }
    }

    /// Whether the next command is to be recorded (one in `sample_one_in`; never when off).
    #[inline]
    pub fn wants(&self) -> bool {
        if !self.hot.config.enabled {
            return false;
        }
        match self.countdown.get() {
            0 => {
                self.countdown.set(self.hot.config.sample_one_in.max(1) - 1);
                true
            }
            n => {
                self.countdown.set(n - 1);
                false
            }
        }
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
