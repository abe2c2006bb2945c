//! The slot table: for each slot, the group that owns it, the address of its master, and,
//! while the slot moves, the master it moves from. Backend addresses are interned into a
//! dense list, so a proxy worker keeps its connections by `BackendIdx` and never hashes an
//! address on the hot path.
//!
//! Past the cluster's 1024 slots, a table may hold one slot per key prefix routed to another
//! cluster (`router::prefix`): its master is that cluster's proxy this one forwards to. A
//! prefix's slot number is its own for the life of the process (`RouteTargets::slot_index`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::prefix::Target;
use super::replicas::{
    Freshness, ReadMode, ReadPolicy, ReplicaRegistry, ReplicaSeen, ReplicaSet, ReplicasSeen, now_us,
};
use super::{GroupId, SLOTS, SlotId};
use crate::error::DataError;
use crate::login::Login;

/// Index into `SlotTable::backends`.
pub type BackendIdx = u16;

/// One slot's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotEntry {
    pub group: GroupId,
    /// Master of the owning group; `None` while the slot is not served.
    pub master: Option<BackendIdx>,
    /// The dashboard found the group's master down: commands get a clear error instead of
    /// waiting on a dead server.
    pub down: bool,
    /// Held for a migration's first barrier phase: commands get -TRYAGAIN.
    pub blocked: bool,
}

/// An immutable routing table; a change builds a new one and swaps it in.
#[derive(Debug)]
pub struct SlotTable {
    pub epoch: u64,
    slots: Box<[SlotEntry]>,
    /// The masters first (`backends()`), then the replicas (reached only by `read_route`).
    backends: Vec<Arc<str>>,
    masters: usize,
    /// Where read-only commands go (docs/replica-reads.md).
    pub read: ReadPolicy,
    replica_sets: Vec<ReplicaSet>,
    /// Per slot: index into `replica_sets`, or `NO_REPLICAS` for a slot held by a handoff.
    slot_replicas: Box<[u16]>,
    /// Key prefixes routed to other clusters, longest first, with their slots.
    routes: Box<[(Box<[u8]>, SlotId)]>,
    /// Per slot past `SLOTS`: its prefix route, if it is one of this table's.
    routed: Box<[Option<RoutedPrefix>]>,
    /// The first backend index of the routes' targets (after every master and replica):
    /// backend `routes_from + i` is a target, logged in with `target_logins[i]`.
    routes_from: usize,
    target_logins: Box<[Login]>,
}

/// A key prefix routed to another cluster, as a table holds it.
#[derive(Debug)]
struct RoutedPrefix {
    prefix: Box<[u8]>,
    cluster: Arc<str>,
}

/// What a slot past the table's end (a prefix route of a table swapped out since) reads as.
const UNSERVED: SlotEntry = SlotEntry {
    group: GroupId(0),
    master: None,
    down: false,
    blocked: false,
};

const NO_REPLICAS: u16 = u16::MAX;

impl SlotTable {
    /// Static mode: the 1024 slots split evenly, in order, over `addrs` (group i+1 = addr i).
    pub fn split_evenly(addrs: &[String]) -> Self {
        let mut b = SlotTableBuilder::default();
        let n = addrs.len().max(1);
        for slot in 0..SLOTS {
            let i = slot * n / SLOTS;
            if let Some(addr) = addrs.get(i) {
                b.assign(SlotId(slot as u16), GroupId(i as u32 + 1), addr);
            }
        }
        b.build(1)
    }

    #[inline]
    pub fn slot(&self, slot: SlotId) -> &SlotEntry {
        self.slots.get(slot.0 as usize).unwrap_or(&UNSERVED)
    }

    /// The slot of `key`: its prefix route's, or `crc32(hash key) % 1024`.
    #[inline]
    pub fn slot_of(&self, key: &[u8]) -> SlotId {
        if self.routes.is_empty() {
            return SlotId::of_key(key);
        }
        self.routed_slot(key).unwrap_or_else(|| SlotId::of_key(key))
    }

    fn routed_slot(&self, key: &[u8]) -> Option<SlotId> {
        let r = self.routes.iter().find(|(p, _)| key.starts_with(p))?;
        Some(r.1)
    }

    /// The prefix and cluster of a slot that is one of this table's prefix routes.
    pub fn routed(&self, slot: SlotId) -> Option<(&[u8], &Arc<str>)> {
        let r = self
            .routed
            .get((slot.0 as usize).checked_sub(SLOTS)?)?
            .as_ref()?;
        Some((&r.prefix, &r.cluster))
    }

    /// Whether `slot` is past the cluster's own (a prefix route's, in force or not).
    #[inline]
    pub fn is_routed(slot: SlotId) -> bool {
        slot.0 as usize >= SLOTS
    }

    /// Where a slot's keys live, for an error: `'user:' → b` for a prefix route, else this
    /// cluster.
    pub fn describe_cluster(&self, slot: SlotId) -> String {
        match self.routed(slot) {
            Some((prefix, cluster)) => {
                format!("'{}' → {cluster}", String::from_utf8_lossy(prefix))
            }
            None if Self::is_routed(slot) => "a route removed since".to_string(),
            None => "others → this cluster".to_string(),
        }
    }

    /// Each prefix route's target with its login and prefix (routes without a target left
    /// out).
    pub fn route_targets(&self) -> impl Iterator<Item = (&Arc<str>, &Login, &[u8])> {
        self.slots[SLOTS.min(self.slots.len())..]
            .iter()
            .zip(self.routed.iter())
            .filter_map(|(e, r)| {
                let r = r.as_ref()?;
                let b = e.master?;
                let login = &self.target_logins[b as usize - self.routes_from];
                Some((self.backend_addr(b), login, &r.prefix[..]))
            })
    }

    /// Whether this table routes any key prefix to another cluster.
    pub fn has_routes(&self) -> bool {
        !self.routes.is_empty()
    }

    /// The login for a request to `backend`: a route target's own, else `session`'s.
    #[inline]
    pub fn login_for<'a>(&'a self, backend: BackendIdx, session: &'a Login) -> &'a Login {
        match (backend as usize).checked_sub(self.routes_from) {
            Some(i) => self.target_logins.get(i).unwrap_or(session),
            None => session,
        }
    }

    /// Whether `backend` is a prefix route's target (another cluster's proxy).
    pub fn is_route_target(&self, backend: BackendIdx) -> bool {
        (backend as usize) >= self.routes_from
    }

    /// Every distinct master address, in `BackendIdx` order (replicas are not among them:
    /// commands sent to every backend go to every master).
    pub fn backends(&self) -> &[Arc<str>] {
        &self.backends[..self.masters]
    }

    /// Each group's replicas, as this table routes reads to them.
    pub fn replica_sets(&self) -> &[ReplicaSet] {
        &self.replica_sets
    }

    pub fn backend_addr(&self, idx: BackendIdx) -> &Arc<str> {
        &self.backends[idx as usize]
    }

    /// The backend serving `slot` now.
    ///
    /// # Errors
    /// The slot has no owner, is held for a migration's barrier (`TRYAGAIN`), or its group's
    /// master is down.
    #[inline]
    pub fn route(&self, slot: SlotId) -> Result<BackendIdx, DataError> {
        let entry = self.slot(slot);
        match entry.master {
            Some(_) if entry.blocked => Err(DataError::SlotBlocked(slot.0)),
            Some(b) if !entry.down => Ok(b),
            Some(b) => Err(DataError::MasterDown {
                group: entry.group.0,
                addr: self.backend_addr(b).clone(),
            }),
            None => Err(self.unserved(slot)),
        }
    }

    #[cold]
    fn unserved(&self, slot: SlotId) -> DataError {
        match self.routed(slot) {
            Some((prefix, cluster)) => DataError::RouteUnreachable {
                prefix: String::from_utf8_lossy(prefix).into_owned(),
                cluster: cluster.clone(),
            },
            None => DataError::SlotNotServed(slot.0),
        }
    }

    /// The backend a read-only command on `slot` goes to under the read policy: a fresh
    /// replica of the owning group (taking turns), else the master (`prefer-replica`), or an
    /// error (`replica-only`). A slot a handoff holds is refused as `route` refuses it.
    ///
    /// # Errors
    /// Those of [`SlotTable::route`]; under `replica-only`, no replica is fresh.
    #[inline]
    pub fn read_route(&self, slot: SlotId) -> Result<BackendIdx, DataError> {
        let master = self.route(slot)?;
        if self.read.mode == ReadMode::Master {
            return Ok(master);
        }
        let set = self.slot_replicas.get(slot.0 as usize);
        let Some(set) = set.and_then(|&r| self.replica_sets.get(r as usize)) else {
            return Ok(master);
        };
        match set.pick(now_us(), self.read.max_lag_ms.saturating_mul(1000)) {
            Some(replica) => Ok(replica),
            None if self.read.mode == ReadMode::PreferReplica => Ok(master),
            None => Err(DataError::NoFreshReplica {
                group: set.group.0,
                max_lag_ms: self.read.max_lag_ms,
            }),
        }
    }

    /// Every replica of this table and whether a read routed now may go to it.
    pub fn replicas_seen(&self) -> ReplicasSeen {
        let now = now_us();
        let max_lag_us = self.read.max_lag_ms.saturating_mul(1000);
        let replicas = self
            .replica_sets
            .iter()
            .flat_map(|set| {
                set.members.iter().map(move |(b, f)| ReplicaSeen {
                    group: set.group,
                    addr: self.backend_addr(*b).to_string(),
                    fresh: self.read.mode != ReadMode::Master && f.fresh(now, max_lag_us),
                    proven_ms_ago: f.proven_at().map(|p| now.saturating_sub(p) / 1000),
                })
            })
            .collect();
        ReplicasSeen {
            policy: self.read,
            replicas,
        }
    }

    /// Replicas whose freshness proofs predate what this table asks of them: their group's
    /// master differs from `old`'s, or the group owns a slot here that it did not serve
    /// settled in `old` (the moved keys reached the master after those proofs), or the
    /// replica was not in its group's set in `old` (a proof may be another group's).
    fn arrivals(&self, old: &SlotTable) -> Vec<&Arc<Freshness>> {
        let mut sets: Vec<&ReplicaSet> = Vec::new();
        for (i, e) in self
            .slots
            .iter()
            .enumerate()
            .take(SLOTS.min(old.slots.len()))
        {
            let Some(set) = self.replica_sets.get(self.slot_replicas[i] as usize) else {
                continue;
            };
            if sets.iter().any(|s| s.group == set.group) {
                continue;
            }
            let o = &old.slots[i];
            let same_master = match (e.master, o.master) {
                (Some(n), Some(p)) => self.backend_addr(n) == old.backend_addr(p),
                _ => false,
            };
            if !same_master || o.group != e.group || o.blocked {
                sets.push(set);
            }
        }
        let mut out: Vec<&Arc<Freshness>> = sets
            .iter()
            .flat_map(|s| s.members.iter().map(|(_, f)| f))
            .collect();
        for set in &self.replica_sets {
            let before = old.replica_sets.iter().find(|o| o.group == set.group);
            for (_, f) in set.members.iter() {
                let known =
                    before.is_some_and(|o| o.members.iter().any(|(_, g)| Arc::ptr_eq(f, g)));
                if !known {
                    out.push(f);
                }
            }
        }
        out
    }
}

/// Builds a `SlotTable`, interning addresses.
#[derive(Debug, Default)]
pub struct SlotTableBuilder {
    slots: Vec<Option<(GroupId, BackendIdx)>>,
    backends: Vec<Arc<str>>,
    down: Vec<GroupId>,
    blocked: Vec<SlotId>,
    read: ReadPolicy,
    replicas: Vec<(GroupId, Vec<PendingReplica>)>,
    /// Prefix, its slot index past `SLOTS`, cluster, and the target when one is known.
    routes: Vec<(String, usize, Arc<str>, Option<Target>)>,
}

/// A replica's address and freshness, interned at `build` (after every master).
type PendingReplica = (String, Arc<Freshness>);

impl SlotTableBuilder {
    fn intern(&mut self, addr: &str) -> BackendIdx {
        match self.backends.iter().position(|a| &**a == addr) {
            Some(i) => i as BackendIdx,
            None => {
                self.backends.push(addr.into());
                (self.backends.len() - 1) as BackendIdx
            }
        }
    }

    /// Gives `slot` to `group`, served by its `master`.
    pub fn assign(&mut self, slot: SlotId, group: GroupId, master: &str) -> &mut Self {
        if self.slots.is_empty() {
            self.slots = vec![None; SLOTS];
        }
        let idx = self.intern(master);
        self.slots[slot.0 as usize] = Some((group, idx));
        self
    }

    /// Holds a slot (first phase of a migration's barrier).
    pub fn blocked(&mut self, slot: SlotId) -> &mut Self {
        self.blocked.push(slot);
        self
    }

    /// Routes reads by `policy` (the default: every read to the master).
    pub fn read_policy(&mut self, policy: ReadPolicy) -> &mut Self {
        self.read = policy;
        self
    }

    /// Gives `group` its replicas, whose freshness is kept in `registry`.
    pub fn replicas(
        &mut self,
        group: GroupId,
        addrs: &[String],
        registry: &ReplicaRegistry,
    ) -> &mut Self {
        let members = addrs.iter().map(|a| (a.clone(), registry.get(a))).collect();
        self.replicas.push((group, members));
        self
    }

    /// Routes keys starting with `prefix` to `cluster` as slot `SLOTS + index`, through
    /// `target` (none known: its commands get `RouteUnreachable`).
    pub fn prefix_route(
        &mut self,
        prefix: &str,
        index: usize,
        cluster: &str,
        target: Option<Target>,
    ) -> &mut Self {
        self.routes
            .push((prefix.into(), index, cluster.into(), target));
        self
    }

    /// Marks a group's master as down.
    pub fn group_down(&mut self, group: GroupId) -> &mut Self {
        self.down.push(group);
        self
    }

    pub fn build(mut self, epoch: u64) -> SlotTable {
        let mut slots = vec![UNSERVED; SLOTS];
        // Replicas after every master, so `backends()` is the masters alone. An address that
        // is some group's master is never taken as a replica.
        let masters = self.backends.len();
        let mut replica_sets = Vec::new();
        for (group, members) in std::mem::take(&mut self.replicas) {
            let mut set = Vec::new();
            for (addr, fresh) in members {
                if self.backends[..masters].iter().any(|m| **m == *addr) {
                    continue;
                }
                set.push((self.intern(&addr), fresh));
            }
            replica_sets.push(ReplicaSet::new(group, set));
        }
        let mut slot_replicas = vec![NO_REPLICAS; SLOTS];
        for (i, s) in self.slots.into_iter().enumerate() {
            if let Some((group, master)) = s {
                let down = self.down.contains(&group);
                let blocked = self.blocked.contains(&SlotId(i as u16));
                slots[i] = SlotEntry {
                    group,
                    master: Some(master),
                    down,
                    blocked,
                };
                if !blocked && let Some(r) = replica_sets.iter().position(|r| r.group == group) {
                    slot_replicas[i] = r as u16;
                }
            }
        }
        // The routes' targets after every master and replica, one index each (a route's login
        // is found by its index), even when two routes share a target.
        let routes_from = self.backends.len();
        let routes = std::mem::take(&mut self.routes);
        let extra = routes.iter().map(|r| r.1 + 1).max().unwrap_or(0);
        slots.resize(SLOTS + extra, UNSERVED);
        slot_replicas.resize(SLOTS + extra, NO_REPLICAS);
        let mut routed: Vec<Option<RoutedPrefix>> = (0..extra).map(|_| None).collect();
        let mut order = Vec::with_capacity(routes.len());
        let mut target_logins = Vec::new();
        for (prefix, index, cluster, target) in routes {
            let master = target.map(|t| {
                self.backends.push(t.addr);
                target_logins.push(t.login);
                (self.backends.len() - 1) as BackendIdx
            });
            slots[SLOTS + index] = SlotEntry { master, ..UNSERVED };
            let prefix = prefix.into_bytes().into_boxed_slice();
            order.push((prefix.clone(), SlotId((SLOTS + index) as u16)));
            routed[index] = Some(RoutedPrefix { prefix, cluster });
        }
        // Longest first: the first prefix a key starts with is its longest.
        order.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        SlotTable {
            epoch,
            slots: slots.into_boxed_slice(),
            backends: self.backends,
            masters,
            read: self.read,
            replica_sets,
            slot_replicas: slot_replicas.into_boxed_slice(),
            routes: order.into_boxed_slice(),
            routed: routed.into_boxed_slice(),
            routes_from,
            target_logins: target_logins.into_boxed_slice(),
        }
    }
}

/// The live table, shared by every worker; `swap` replaces it atomically.
#[derive(Debug)]
pub struct Router {
    table: ArcSwap<SlotTable>,
    /// The epoch of each table swapped in, for those who follow changes (the pub/sub hubs).
    swapped: tokio::sync::watch::Sender<u64>,
    /// Followers' progress: the epoch each has caught up with (see [`Router::follow`]).
    followers: std::sync::Mutex<Vec<std::sync::Weak<AtomicU64>>>,
    /// Whether this proxy may route at all (cluster mode: while its registration is sure).
    pub fence: Arc<crate::fence::Fence>,
    /// The replicas' freshness, shared by the tables swapped in and the probes.
    pub replicas: ReplicaRegistry,
    /// Where each key prefix routed to another cluster goes now (`proxy::routes`).
    pub targets: super::prefix::RouteTargets,
}

impl Router {
    pub fn new(table: SlotTable) -> Self {
        let (swapped, _) = tokio::sync::watch::channel(table.epoch);
        Self {
            table: ArcSwap::from_pointee(table),
            swapped,
            followers: Default::default(),
            fence: Default::default(),
            replicas: Default::default(),
            targets: Default::default(),
        }
    }

    /// Registers a follower of table swaps: it stores in the returned counter each epoch it
    /// has caught up with, and [`Router::followers_at`] tells when all have. Dropping the
    /// counter unregisters it.
    pub fn follow(&self) -> (tokio::sync::watch::Receiver<u64>, Arc<AtomicU64>) {
        let rx = self.swapped.subscribe();
        let at = Arc::new(AtomicU64::new(*rx.borrow()));
        let mut f = self.followers.lock().expect("followers lock poisoned");
        f.retain(|w| w.strong_count() > 0);
        f.push(Arc::downgrade(&at));
        (rx, at)
    }

    /// The epoch of each table swapped in, for those who only watch (no barrier waits on
    /// them, unlike [`Router::follow`]).
    pub fn swapped(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Whether every follower has caught up with `epoch`.
    pub fn followers_at(&self, epoch: u64) -> bool {
        let f = self.followers.lock().expect("followers lock poisoned");
        f.iter()
            .filter_map(std::sync::Weak::upgrade)
            .all(|at| at.load(Ordering::Acquire) >= epoch)
    }

    /// The current table. Cheap; hold it for one command, not across awaits of a session.
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<SlotTable>> {
        self.table.load()
    }

    pub fn load_full(&self) -> Arc<SlotTable> {
        self.table.load_full()
    }

    /// Installs a new table.
    pub fn swap(&self, table: SlotTable) {
        // Before the new table is visible: a replica whose group just gained a slot or a
        // master is proven afresh, by probes sent after this point.
        for fresh in table.arrivals(&self.table.load()) {
            fresh.reset();
        }
        let epoch = table.epoch;
        self.table.store(Arc::new(table));
        self.swapped.send_replace(epoch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_split_is_even_and_in_order() {
        let t = SlotTable::split_evenly(&["a:1".into(), "b:2".into()]);
        assert_eq!(t.slot(SlotId(0)).master, Some(0));
        assert_eq!(t.slot(SlotId(511)).master, Some(0));
        assert_eq!(t.slot(SlotId(512)).master, Some(1));
        assert_eq!(t.slot(SlotId(1023)).master, Some(1));
        let t = SlotTable::split_evenly(&["a:1".into(), "b:2".into(), "c:3".into()]);
        let counts: Vec<usize> = (0..3)
            .map(|b| {
                (0..1024)
                    .filter(|&s| t.slot(SlotId(s)).master == Some(b))
                    .count()
            })
            .collect();
        assert_eq!(counts, [342, 341, 341]);
        assert_eq!(t.slot(SlotId(1023)).group, GroupId(3));
    }

    /// Slots 0-511 to group 1 (master m:1, replica r:1), 512-1023 to group 2 (m:2, no
    /// replica), except slot 7: still group 2's while it is copied to group 1; slot 8 held.
    fn with_replicas(mode: ReadMode, reg: &ReplicaRegistry) -> SlotTable {
        let mut b = SlotTableBuilder::default();
        for s in 0..SLOTS as u16 {
            let (g, m) = if s < 512 && s != 7 {
                (1, "m:1")
            } else {
                (2, "m:2")
            };
            b.assign(SlotId(s), GroupId(g), m);
        }
        b.blocked(SlotId(8))
            .replicas(GroupId(1), &["r:1".into()], reg)
            .replicas(GroupId(2), &[], reg)
            .read_policy(ReadPolicy {
                mode,
                max_lag_ms: 1000,
            });
        b.build(1)
    }

    #[test]
    fn reads_go_to_a_fresh_replica_only_as_the_policy_says() {
        let reg = ReplicaRegistry::default();
        let t = with_replicas(ReadMode::PreferReplica, &reg);
        assert_eq!(t.backends().len(), 2, "replicas are not among the masters");
        let addr = |b| t.backend_addr(b).to_string();
        assert_eq!(
            addr(t.read_route(SlotId(1)).unwrap()),
            "m:1",
            "unproven: master"
        );
        reg.get("r:1").prove(now_us());
        assert_eq!(addr(t.read_route(SlotId(1)).unwrap()), "r:1");
        assert_eq!(addr(t.route(SlotId(1)).unwrap()), "m:1", "writes stay");
        assert_eq!(
            addr(t.read_route(SlotId(7)).unwrap()),
            "m:2",
            "a copying slot reads from its source"
        );
        assert!(matches!(
            t.read_route(SlotId(8)),
            Err(DataError::SlotBlocked(8))
        ));
        assert_eq!(
            addr(t.read_route(SlotId(600)).unwrap()),
            "m:2",
            "no replica"
        );
        let master = with_replicas(ReadMode::Master, &reg);
        assert_eq!(
            master
                .backend_addr(master.read_route(SlotId(1)).unwrap())
                .as_ref(),
            "m:1"
        );
        let only = with_replicas(ReadMode::ReplicaOnly, &reg);
        assert_eq!(
            only.backend_addr(only.read_route(SlotId(1)).unwrap())
                .as_ref(),
            "r:1"
        );
        reg.get("r:1").revoke();
        assert_eq!(
            only.read_route(SlotId(1)),
            Err(DataError::NoFreshReplica {
                group: 1,
                max_lag_ms: 1000
            })
        );
    }

    #[test]
    fn a_group_that_gains_a_slot_proves_its_replicas_afresh() {
        let reg = ReplicaRegistry::default();
        let router = Router::new(with_replicas(ReadMode::PreferReplica, &reg));
        let before = now_us();
        reg.get("r:1").prove(before);
        // The same routes again: nothing arrives, the proof stands.
        router.swap(with_replicas(ReadMode::PreferReplica, &reg));
        assert_eq!(reg.get("r:1").proven_at(), Some(before));
        // Slot 7's handoff: group 1 gains it.
        let mut b = SlotTableBuilder::default();
        for s in 0..SLOTS as u16 {
            let (g, m) = if s < 512 { (1, "m:1") } else { (2, "m:2") };
            b.assign(SlotId(s), GroupId(g), m);
        }
        b.replicas(GroupId(1), &["r:1".into()], &reg);
        router.swap(b.build(2));
        assert_eq!(reg.get("r:1").proven_at(), None);
        reg.get("r:1").prove(before);
        assert_eq!(
            reg.get("r:1").proven_at(),
            None,
            "a probe sent before the swap"
        );
        // r:1 moves to group 2 (same slots): its proof was group 1's.
        let later = now_us();
        reg.get("r:1").prove(later);
        let mut b = SlotTableBuilder::default();
        for s in 0..SLOTS as u16 {
            let (g, m) = if s < 512 { (1, "m:1") } else { (2, "m:2") };
            b.assign(SlotId(s), GroupId(g), m);
        }
        b.replicas(GroupId(2), &["r:1".into()], &reg);
        router.swap(b.build(3));
        assert_eq!(
            reg.get("r:1").proven_at(),
            None,
            "a replica new to its group"
        );
    }

    #[test]
    fn a_prefix_route_is_a_slot_past_the_clusters_with_its_own_login() {
        let login = crate::login::Login {
            id: 42,
            steps: Arc::from(Vec::new()),
        };
        let target = |a: &str, l: &Login| Target {
            addr: a.into(),
            login: l.clone(),
        };
        let mut b = SlotTableBuilder::default();
        for s in 0..SLOTS as u16 {
            b.assign(SlotId(s), GroupId(1), "a:1");
        }
        b.prefix_route("user:", 0, "b", Some(target("pb:1", &login)))
            .prefix_route("user:vip:", 3, "c", Some(target("pc:1", &Login::none())))
            .prefix_route("down:", 1, "d", None);
        let t = b.build(5);
        let session = Login::none();
        // The longest prefix wins; a key outside every prefix hashes as always.
        assert_eq!(t.slot_of(b"user:1"), SlotId(SLOTS as u16));
        assert_eq!(t.slot_of(b"user:vip:1"), SlotId(SLOTS as u16 + 3));
        assert_eq!(t.slot_of(b"foo"), SlotId::of_key(b"foo"));
        assert_eq!(t.slot_of(b"use"), SlotId::of_key(b"use"));
        let to_b = t.route(t.slot_of(b"user:1")).unwrap();
        assert_eq!(t.backend_addr(to_b).as_ref(), "pb:1");
        assert_eq!(t.login_for(to_b, &session).id, 42);
        assert!(t.is_route_target(to_b));
        // The cluster's own masters keep the session's login, and fan-outs never see a target.
        let own = t.route(t.slot_of(b"foo")).unwrap();
        assert!(std::ptr::eq(t.login_for(own, &session), &session));
        assert_eq!(t.backends().len(), 1);
        // A route without a target, and a slot no route of this table has, are unserved.
        let e = t.route(t.slot_of(b"down:1")).unwrap_err();
        assert!(matches!(e, DataError::RouteUnreachable { .. }), "{e}");
        assert!(matches!(
            t.route(SlotId(SLOTS as u16 + 2)),
            Err(DataError::SlotNotServed(_))
        ));
        assert!(t.route(SlotId(SLOTS as u16 + 500)).is_err());
        assert_eq!(t.routed(SlotId(SLOTS as u16 + 3)).unwrap().1.as_ref(), "c");
        assert!(t.read_route(SlotId(SLOTS as u16 + 500)).is_err());
    }
}
