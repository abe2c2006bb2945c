//! What a migration has copied, shared by its copies and read by the status: keys and bytes
//! per slot and in all, each slot's first copy (the keys its round 0 found and copied, which
//! the status counts against the slot's key count taken when it was queued), and the
//! slowest command it sent (how long it may have blocked a server).

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
    /// Per slot, its current first copy (round 0): reset when a copy of the slot starts.
    pub first: Mutex<HashMap<u16, FirstCopy>>,
}

/// A slot's first copy: the keys round 0's SCAN found and the target has acknowledged, and
/// whether the round is over (then `copied` is every key the slot held as it was scanned).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FirstCopy {
    pub copied: u64,
    pub scanned: bool,
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

    /// A first copy of `slots` starts (again): nothing of it is on the target.
    pub(crate) fn start_first(&self, slots: impl Iterator<Item = u16>) {
        let mut first = self.first.lock().expect("progress lock poisoned");
        for s in slots {
            first.insert(s, FirstCopy::default());
        }
    }

    /// Keys of round 0 the targets acknowledged, one entry per key.
    pub(crate) fn add_first(&self, slots: impl Iterator<Item = u16>) {
        let mut first = self.first.lock().expect("progress lock poisoned");
        for s in slots {
            first.entry(s).or_default().copied += 1;
        }
    }

    /// `slot`'s round 0 is over.
    pub(crate) fn scanned(&self, slot: u16) {
        let mut first = self.first.lock().expect("progress lock poisoned");
        first.entry(slot).or_default().scanned = true;
    }

    /// `slot`'s first copy as it stands.
    pub(crate) fn first_of(&self, slot: u16) -> FirstCopy {
        self.first
            .lock()
            .expect("progress lock poisoned")
            .get(&slot)
            .copied()
            .unwrap_or_default()
    }

    pub(crate) fn took(&self, what: &str, since: Instant) {
        let ms = since.elapsed().as_secs_f64() * 1000.0;
        let mut s = self.slowest.lock().expect("progress lock poisoned");
        if s.as_ref().is_none_or(|(worst, _)| ms > *worst) {
            *s = Some((ms, what.to_string()));
        }
    }
}
