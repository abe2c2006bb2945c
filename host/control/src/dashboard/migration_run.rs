//! A migration as a whole, for the status (`MigrationRun`): the slots the driver took from
//! the moment it had none until it has none again, each with its key count taken when it
//! was queued and its first copy as the copies report it. One definition of done, keys left
//! and percent, which the console and the CLI show as they are.
//!
//! Why a snapshot: the source's key count cannot say what is left of a slot. Its copied keys
//! stay on it until the handoff, and are deleted after it (its cleanup). Before, the count
//! of keys left came from the source's key count per owned slot minus the keys moved, and
//! read 0 from about half way through draining a group.

use std::collections::BTreeMap;

use crate::migrate::progress::FirstCopy;
use tessera_model::router::GroupId;
use tessera_wire::migration::{MigrationPhase, MigrationRun};

/// The running (or last) migration.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunLedger {
    pub(crate) started_unix_ms: u64,
    pub(crate) ended_unix_ms: Option<u64>,
    /// (keys, bytes) the copies had moved when it started, and when it ended.
    pub(crate) moved_at_start: (u64, u64),
    pub(crate) moved_at_end: Option<(u64, u64)>,
    pub(crate) slots: BTreeMap<u16, RunSlot>,
    /// The longest write pause of its handoffs.
    pub(crate) peak_pause_ms: Option<f64>,
}

/// One slot of a run, as last seen.
#[derive(Debug, Clone)]
pub(crate) struct RunSlot {
    pub(crate) source: GroupId,
    pub(crate) target: GroupId,
    /// Its keys as counted when it was queued; `None` when they could not be counted.
    pub(crate) expected: Option<u64>,
    pub(crate) first: FirstCopy,
    /// Keys written during its last round (past round 0), to copy again.
    pub(crate) recopy: u64,
    pub(crate) aborted: bool,
    /// Routed to its target: in cleanup, or finished.
    pub(crate) done: bool,
}

impl Default for RunSlot {
    fn default() -> Self {
        Self {
            source: GroupId(0),
            target: GroupId(0),
            expected: None,
            first: FirstCopy::default(),
            recopy: 0,
            aborted: false,
            done: false,
        }
    }
}

impl RunSlot {
    /// (its keys, of them copied once): a finished slot has all of its keys copied.
    fn keys(&self) -> (Option<u64>, u64) {
        let f = self.first;
        let total = if f.scanned {
            Some(f.copied)
        } else {
            self.expected.map(|e| e.max(f.copied))
        };
        if self.done {
            let t = total.unwrap_or(f.copied);
            return (Some(t), t);
        }
        (total, total.map_or(f.copied, |t| f.copied.min(t)))
    }
}

/// Whether a slot in `phase` is routed to its target already.
pub(crate) fn is_done(phase: MigrationPhase) -> bool {
    matches!(phase, MigrationPhase::Cleanup | MigrationPhase::Done)
}

impl RunLedger {
    /// The status's view, with the copies' totals now (keys, bytes).
    pub(crate) fn summary(&self, moved_now: (u64, u64)) -> MigrationRun {
        let live: Vec<&RunSlot> = self.slots.values().filter(|s| !s.aborted).collect();
        let slots = live.len();
        let slots_done = live.iter().filter(|s| s.done).count();
        let mut keys_total = Some(0u64);
        let mut keys_copied = 0;
        for s in &live {
            let (total, copied) = s.keys();
            keys_total = keys_total.zip(total).map(|(a, b)| a + b);
            keys_copied += copied;
        }
        let keys_recopy = live.iter().filter(|s| !s.done).map(|s| s.recopy).sum();
        let running = self.ended_unix_ms.is_none();
        let percent_done = if slots > 0 && slots_done == slots {
            100.0
        } else if slots == 0 {
            0.0
        } else {
            match keys_total {
                Some(t) if t > 0 => {
                    (((keys_copied as f64 / t as f64) * 1000.0).floor() / 10.0).min(99.9)
                }
                _ => ((slots_done as f64 / slots as f64) * 1000.0).floor() / 10.0,
            }
        };
        let (k, b) = self.moved_at_end.unwrap_or(moved_now);
        MigrationRun {
            running,
            started_unix_ms: self.started_unix_ms,
            ended_unix_ms: self.ended_unix_ms,
            slots,
            slots_done,
            slots_aborted: self.slots.len() - slots,
            keys_total,
            keys_copied,
            keys_left: keys_total.map(|t| t.saturating_sub(keys_copied)),
            keys_recopy,
            percent_done,
            keys_moved: k.saturating_sub(self.moved_at_start.0),
            bytes_moved: b.saturating_sub(self.moved_at_start.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(expected: Option<u64>, copied: u64, scanned: bool, done: bool) -> RunSlot {
        RunSlot {
            expected,
            first: FirstCopy { copied, scanned },
            done,
            ..RunSlot::default()
        }
    }

    fn run(slots: Vec<RunSlot>) -> RunLedger {
        RunLedger {
            slots: slots
                .into_iter()
                .enumerate()
                .map(|(i, s)| (i as u16, s))
                .collect(),
            ..RunLedger::default()
        }
    }

    #[test]
    fn keys_left_count_the_snapshot_less_the_first_copy_and_not_the_source_now() {
        // Two slots of 100 keys each: one half copied, one not started.
        let r = run(vec![
            slot(Some(100), 50, false, false),
            slot(Some(100), 0, false, false),
        ])
        .summary((0, 0));
        assert_eq!(r.keys_total, Some(200));
        assert_eq!(r.keys_copied, 50);
        assert_eq!(r.keys_left, Some(150));
        assert_eq!(r.percent_done, 25.0);
        assert!(r.running);
    }

    #[test]
    fn a_scanned_slot_counts_what_its_scan_found_and_a_done_one_counts_whole() {
        // Keys were added after the snapshot: the scan found 120, and copied them all.
        let r = run(vec![
            slot(Some(100), 120, true, false),
            slot(None, 30, true, true),
        ])
        .summary((0, 0));
        assert_eq!(r.keys_total, Some(150));
        assert_eq!(r.keys_left, Some(0));
        assert_eq!(r.percent_done, 99.9, "not 100 while a slot still moves");
        assert_eq!((r.slots, r.slots_done), (2, 1));
    }

    #[test]
    fn an_unknown_count_leaves_keys_unknown_and_percent_by_slots() {
        let r = run(vec![
            slot(None, 5, false, false),
            slot(Some(10), 10, true, true),
        ])
        .summary((0, 0));
        assert_eq!(r.keys_total, None);
        assert_eq!(r.keys_left, None);
        assert_eq!(r.percent_done, 50.0);
    }

    #[test]
    fn aborted_slots_leave_the_totals_and_an_ended_run_keeps_its_counts() {
        let mut l = run(vec![
            slot(Some(10), 10, true, true),
            RunSlot {
                aborted: true,
                ..slot(Some(1000), 3, false, false)
            },
        ]);
        l.moved_at_start = (100, 1000);
        l.moved_at_end = Some((112, 1500));
        l.ended_unix_ms = Some(1);
        let r = l.summary((999, 9999));
        assert_eq!((r.slots, r.slots_done, r.slots_aborted), (1, 1, 1));
        assert_eq!(r.percent_done, 100.0);
        assert_eq!((r.keys_moved, r.bytes_moved), (12, 500));
        assert!(!r.running);
    }

    #[test]
    fn a_run_of_empty_slots_is_measured_by_slots() {
        let r = run(vec![
            slot(Some(0), 0, true, true),
            slot(Some(0), 0, false, false),
        ])
        .summary((0, 0));
        assert_eq!(r.keys_total, Some(0));
        assert_eq!(r.percent_done, 50.0);
    }
}
