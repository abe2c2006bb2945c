//! Replica reads: the cluster's read policy, how fresh this proxy's probes last proved each
//! replica, and which server of a group a read-only command goes to. The probes run in
//! `proxy::replica_probe`; why a fresh replica never answers older than the bound is argued
//! in docs/replica-reads.md.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use super::{BackendIdx, GroupId};

pub use tessera_wire::read_policy::{
    DEFAULT_MAX_LAG_MS, MAX_MAX_LAG_MS, MIN_MAX_LAG_MS, PROBE_INTERVAL_MS, ReadMode, ReadPolicy,
    ReplicaSeen, ReplicasSeen,
};

// === the proxy's clock ===

static BASE: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Microseconds on this process's monotonic clock (never 0: 0 means "never proven").
#[inline]
pub fn now_us() -> u64 {
    BASE.elapsed().as_micros() as u64 + 1
}

// === impl Freshness ===

/// How fresh one replica is known to be: the instant this proxy *sent* a probe of the
/// master whose offset the replica was then seen to have reached. Every write acknowledged
/// before that instant is on the replica, so it may serve reads until that instant plus
/// the bound.
#[derive(Debug, Default)]
pub struct Freshness {
    /// `now_us()` of that master probe; 0 when nothing is proven.
    proven_at: AtomicU64,
    /// Proofs from master probes sent before this instant are refused (a slot arrived in
    /// the group, or its master changed, after them). Proofs and resets take this lock, so
    /// a reset is never overtaken by a proof made before it.
    not_before: Mutex<u64>,
}

impl Freshness {
    /// The replica reached the offset the master had when probed at `master_probe_sent_us`.
    pub fn prove(&self, master_probe_sent_us: u64) {
        let nb = self.not_before.lock().expect("freshness lock poisoned");
        // Strictly after: a probe sent in the very microsecond of a reset may have been sent
        // before it.
        if master_probe_sent_us > *nb {
            self.proven_at
                .fetch_max(master_probe_sent_us, Ordering::Release);
        }
    }

    /// Nothing proven any more (its link is down, it stopped answering, it is not a replica).
    pub fn revoke(&self) {
        let _nb = self.not_before.lock().expect("freshness lock poisoned");
        self.proven_at.store(0, Ordering::Release);
    }

    /// Revokes, and refuses proofs from master probes sent before now.
    pub fn reset(&self) {
        let mut nb = self.not_before.lock().expect("freshness lock poisoned");
        *nb = now_us();
        self.proven_at.store(0, Ordering::Release);
    }

    /// The master probe last proven, if any.
    pub fn proven_at(&self) -> Option<u64> {
        match self.proven_at.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }

    /// Whether a read routed at `now` may go to this replica.
    #[inline]
    pub fn fresh(&self, now: u64, max_lag_us: u64) -> bool {
        let p = self.proven_at.load(Ordering::Acquire);
        p != 0 && now < p.saturating_add(max_lag_us)
    }
}

/// Every replica's `Freshness`, by address: tables built one after another share them, and
/// the probes update them.
#[derive(Debug, Default)]
pub struct ReplicaRegistry {
    by_addr: Mutex<HashMap<Arc<str>, Arc<Freshness>>>,
}

impl ReplicaRegistry {
    /// The freshness of the replica at `addr` (created unproven).
    pub fn get(&self, addr: &str) -> Arc<Freshness> {
        let mut m = self.by_addr.lock().expect("registry lock poisoned");
        // Forget replicas no table or probe holds any more (bounded by the topology).
        m.retain(|_, f| Arc::strong_count(f) > 1);
        m.entry(addr.into()).or_default().clone()
    }
}

// === impl ReplicaSet ===

/// A group's replicas, as one table routes to them.
#[derive(Debug)]
pub struct ReplicaSet {
    pub group: GroupId,
    /// Each replica's backend index in the table and its freshness.
    pub members: Box<[(BackendIdx, Arc<Freshness>)]>,
    /// Round robin over the fresh ones.
    next: AtomicUsize,
}

impl ReplicaSet {
    pub fn new(group: GroupId, members: Vec<(BackendIdx, Arc<Freshness>)>) -> Self {
        Self {
            group,
            members: members.into_boxed_slice(),
            next: AtomicUsize::new(0),
        }
    }

    /// A replica fresh at `now` under `max_lag_us`, taking turns among the fresh ones.
    #[inline]
    pub fn pick(&self, now: u64, max_lag_us: u64) -> Option<BackendIdx> {
        let n = self.members.len();
        if n == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n)
            .map(|i| &self.members[(start + i) % n])
            .find(|(_, f)| f.fresh(now, max_lag_us))
            .map(|(b, _)| *b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_expires_after_the_bound_and_a_reset_refuses_older_proofs() {
        let f = Freshness::default();
        assert!(!f.fresh(now_us(), 1_000_000), "unproven");
        let sent = now_us();
        f.prove(sent);
        assert!(f.fresh(sent + 999_999, 1_000_000));
        assert!(
            !f.fresh(sent + 1_000_000, 1_000_000),
            "expired at the bound"
        );
        f.reset();
        assert!(!f.fresh(sent + 1, 1_000_000));
        f.prove(sent);
        assert_eq!(
            f.proven_at(),
            None,
            "a probe sent before the reset proves nothing"
        );
        // The clock has microseconds; a probe in the reset's own microsecond proves nothing.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let later = now_us();
        f.prove(later);
        assert_eq!(f.proven_at(), Some(later));
        f.revoke();
        assert_eq!(f.proven_at(), None);
    }

    #[test]
    fn the_fresh_replicas_take_turns() {
        let (a, b, c) = (
            Arc::new(Freshness::default()),
            Arc::new(Freshness::default()),
            Arc::new(Freshness::default()),
        );
        let now = now_us();
        a.prove(now);
        c.prove(now);
        let set = ReplicaSet::new(GroupId(1), vec![(5, a), (6, b), (7, c)]);
        let picks: Vec<_> = (0..4).map(|_| set.pick(now, 1000).unwrap()).collect();
        assert!(picks.contains(&5) && picks.contains(&7) && !picks.contains(&6));
        assert_eq!(set.pick(now + 1000, 1000), None);
    }

    #[test]
    fn the_policy_parses_kebab_case_and_checks_its_bound() {
        let p: ReadPolicy = serde_json::from_str(r#"{"mode":"prefer-replica"}"#).unwrap();
        assert_eq!(p.mode, ReadMode::PreferReplica);
        assert_eq!(p.max_lag_ms, DEFAULT_MAX_LAG_MS);
        assert!(p.validate().is_ok());
        let low = ReadPolicy {
            max_lag_ms: 50,
            ..p
        };
        assert!(low.validate().unwrap_err().contains("between 200"));
    }
}
