//! The slot table: for each slot, the group that owns it, the address of its master, and,
//! while the slot moves, the master it moves from. Backend addresses are interned into a
//! dense list, so a proxy worker keeps its connections by `BackendIdx` and never hashes an
//! address on the hot path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::{GroupId, SLOTS, SlotId};
use crate::error::DataError;

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
    /// While the slot migrates: the master its keys are moved from. A command first moves
    /// its keys from there (MIGRATE), then runs on `master`.
    pub migrating_from: Option<BackendIdx>,
    /// The migration is an abort going back (see `SlotRoute::aborting`).
    pub aborting: bool,
    /// Held for a migration's first barrier phase: commands get -TRYAGAIN.
    pub blocked: bool,
}

/// An immutable routing table; a change builds a new one and swaps it in.
#[derive(Debug)]
pub struct SlotTable {
    pub epoch: u64,
    slots: Box<[SlotEntry]>,
    backends: Vec<Arc<str>>,
}

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
        &self.slots[slot.0 as usize]
    }

    /// Every distinct backend address, in `BackendIdx` order.
    pub fn backends(&self) -> &[Arc<str>] {
        &self.backends
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
            None => Err(DataError::SlotNotServed(slot.0)),
        }
    }

    /// Whether any slot is migrating (the data path then takes the slower, careful route).
    pub fn any_migrating(&self) -> bool {
        self.slots.iter().any(|s| s.migrating_from.is_some())
    }
}

/// Builds a `SlotTable`, interning addresses.
#[derive(Debug, Default)]
pub struct SlotTableBuilder {
    slots: Vec<Option<(GroupId, BackendIdx, Option<BackendIdx>)>>,
    backends: Vec<Arc<str>>,
    down: Vec<GroupId>,
    aborting: Vec<SlotId>,
    blocked: Vec<SlotId>,
}

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

    pub fn assign(&mut self, slot: SlotId, group: GroupId, master: &str) -> &mut Self {
        self.assign_migrating(slot, group, master, None)
    }

    /// Assigns a slot that is moving to `group` from the master `from`.
    pub fn assign_migrating(
        &mut self,
        slot: SlotId,
        group: GroupId,
        master: &str,
        from: Option<&str>,
    ) -> &mut Self {
        if self.slots.is_empty() {
            self.slots = vec![None; SLOTS];
        }
        let idx = self.intern(master);
        let from = from.map(|f| self.intern(f));
        self.slots[slot.0 as usize] = Some((group, idx, from));
        self
    }

    /// Marks a migrating slot's move as an abort going back.
    pub fn aborting(&mut self, slot: SlotId) -> &mut Self {
        self.aborting.push(slot);
        self
    }

    /// Holds a slot (first phase of a migration's barrier).
    pub fn blocked(&mut self, slot: SlotId) -> &mut Self {
        self.blocked.push(slot);
        self
    }

    /// Marks a group's master as down.
    pub fn group_down(&mut self, group: GroupId) -> &mut Self {
        self.down.push(group);
        self
    }

    pub fn build(self, epoch: u64) -> SlotTable {
        let unserved = SlotEntry {
            group: GroupId(0),
            master: None,
            down: false,
            migrating_from: None,
            aborting: false,
            blocked: false,
        };
        let mut slots = vec![unserved; SLOTS];
        for (i, s) in self.slots.into_iter().enumerate() {
            if let Some((group, master, from)) = s {
                let down = self.down.contains(&group);
                let aborting = self.aborting.contains(&SlotId(i as u16));
                let blocked = self.blocked.contains(&SlotId(i as u16));
                slots[i] = SlotEntry {
                    group,
                    master: Some(master),
                    down,
                    migrating_from: from,
                    aborting,
                    blocked,
                };
            }
        }
        SlotTable {
            epoch,
            slots: slots.into_boxed_slice(),
            backends: self.backends,
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
    pub fence: super::Fence,
}

impl Router {
    pub fn new(table: SlotTable) -> Self {
        let (swapped, _) = tokio::sync::watch::channel(table.epoch);
        Self {
            table: ArcSwap::from_pointee(table),
            swapped,
            followers: Default::default(),
            fence: Default::default(),
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

    #[test]
    fn a_migrating_slot_names_its_source() {
        let mut b = SlotTableBuilder::default();
        b.assign_migrating(SlotId(5), GroupId(2), "b:2", Some("a:1"));
        let t = b.build(3);
        let e = t.slot(SlotId(5));
        assert_eq!(t.backend_addr(e.master.unwrap()).as_ref(), "b:2");
        assert_eq!(t.backend_addr(e.migrating_from.unwrap()).as_ref(), "a:1");
        assert!(t.any_migrating());
    }
}
