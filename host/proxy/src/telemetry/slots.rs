//! Per-slot traffic counters of a proxy: operations, request bytes in and reply bytes out for
//! each of the 1024 slots, cumulative since start. Read by `GET /api/proxy/slots`; the
//! dashboard turns successive reads into rates (`dashboard::slot_stats`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use tessera_model::router::SLOTS;
use tessera_wire::telemetry::SlotCounts;

/// One slot's counters in one shard: ops, bytes in, bytes out.
type Cells = [AtomicU64; 3];

/// Counters per slot, in one shard per worker thread.
///
/// Each thread writes only its own shard (picked once per thread), so the hot path is three
/// relaxed `fetch_add`s on lines no other thread writes: no lock, no allocation, no false
/// sharing between workers. Readers sum the shards.
pub struct SlotStats {
    shards: Box<[Box<[Cells]>]>,
}

/// Threads take shards round robin, in the order they first record.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

impl SlotStats {
    /// Counters for `shards` worker threads (at least one).
    pub fn new(shards: usize) -> Self {
        let shards = (0..shards.max(1))
            .map(|_| (0..SLOTS).map(|_| Cells::default()).collect())
            .collect();
        Self { shards }
    }

    /// Counts one command on `slot` with its request and reply sizes.
    #[inline]
    pub fn record(&self, slot: u16, bytes_in: usize, bytes_out: usize) {
        let Some(c) = self.shard().get(slot as usize) else {
            return;
        };
        c[0].fetch_add(1, Relaxed);
        c[1].fetch_add(bytes_in as u64, Relaxed);
        c[2].fetch_add(bytes_out as u64, Relaxed);
    }

    #[inline]
    fn shard(&self) -> &[Cells] {
        let mut i = SHARD.get();
        if i == usize::MAX {
            i = NEXT_SHARD.fetch_add(1, Relaxed);
            SHARD.set(i);
        }
        &self.shards[i % self.shards.len()]
    }

    /// The sums over the shards, for the slots with any operation.
    pub fn counts(&self) -> SlotCounts {
        let mut out = SlotCounts::default();
        for slot in 0..SLOTS {
            let mut sum = [0u64; 3];
            for shard in &self.shards {
                for (s, c) in sum.iter_mut().zip(&shard[slot]) {
                    *s += c.load(Relaxed);
                }
            }
            if sum[0] > 0 {
                out.slots.push(slot as u16);
                out.ops.push(sum[0]);
                out.bytes_in.push(sum[1]);
                out.bytes_out.push(sum[2]);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_the_threads_and_list_only_busy_slots() {
        let stats = std::sync::Arc::new(SlotStats::new(2));
        let s2 = stats.clone();
        std::thread::spawn(move || s2.record(7, 10, 4))
            .join()
            .unwrap();
        stats.record(7, 5, 1);
        stats.record(1023, 1, 1);
        stats.record(1024, 1, 1); // out of range: ignored
        let c = stats.counts();
        assert_eq!(c.slots, vec![7, 1023]);
        assert_eq!(c.ops, vec![2, 1]);
        assert_eq!(c.bytes_in, vec![15, 1]);
        assert_eq!(c.bytes_out, vec![5, 1]);
    }
}
