//! What a migration has copied, shared by its copies and read by the status: keys and bytes
//! per slot and in all, and the slowest command it sent (how long it may have blocked a
//! server).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

/// Keys moved per slot, shared with whoever reports progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// Per slot in flight (cleared when the slot is done).
    pub moved: Mutex<HashMap<u16, u64>>,
    /// Keys moved since the dashboard started.
    pub total: std::sync::atomic::AtomicU64,
    /// Their size: the DUMP payloads of small keys, the source's `MEMORY USAGE` of big ones.
    pub bytes: std::sync::atomic::AtomicU64,
    /// The slowest command the mover sent (milliseconds, and which), since the dashboard
    /// started: how long it may have blocked a server.
    pub slowest: Mutex<Option<(f64, String)>>,
}

impl Progress {
    /// Per-slot counts only; `add_total` counts keys moved.
    pub(crate) fn add_slots(&self, slots: impl Iterator<Item = u16>) {
        let mut moved = self.moved.lock().expect("progress lock poisoned");
        for slot in slots {
            *moved.entry(slot).or_default() += 1;
        }
    }

    pub(crate) fn add_total(&self, n: u64, bytes: u64) {
        self.total
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        self.bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Forgets the per-slot counts of `slots` (their copy is over).
    pub(crate) fn forget(&self, slots: &BTreeSet<u16>) {
        let mut moved = self.moved.lock().expect("progress lock poisoned");
        for s in slots {
            moved.remove(s);
        }
    }

    pub(crate) fn took(&self, what: &str, since: Instant) {
        let ms = since.elapsed().as_secs_f64() * 1000.0;
        let mut s = self.slowest.lock().expect("progress lock poisoned");
        if s.as_ref().is_none_or(|(worst, _)| ms > *worst) {
            *s = Some((ms, what.to_string()));
        }
    }
}
