//! A session's use of its worker's hot-key cache (`hotcache`): which commands may be answered
//! from it (a plain GET of a hot key under a configured prefix, after classify and the plugin
//! layer, outside MULTI and WATCH, on a slot that is not moving, read from its master, while
//! every master's tracking link is up), and the fill of a miss's reply.

use bytes::Bytes;

use super::Session;
use crate::hotcache::Ticket;
use crate::stages::classify::Classified;
use tessera_model::router::SlotTable;
use tessera_model::router::replicas::ReadMode;

/// What the cache makes of a command.
pub(super) enum Cached {
    /// Answered from the cache.
    Hit(Bytes),
    /// Sent to Redis; its reply fills the cache.
    Fill(Ticket),
    /// Not the cache's.
    Pass,
}

impl Session {
    pub(super) fn hot_cache_lookup(&mut self, c: &Classified<'_>) -> Cached {
        let cache = &self.worker.hot_cache;
        if !cache.on()
            || c.cmd.name != "GET"
            || c.keys.len() != 1
            || self.fenced
            || self.tx.queuing()
            || self.tx.watching()
        {
            return Cached::Pass;
        }
        let key = c.req.arg(c.keys[0] as usize);
        if !cache.covers(key) {
            return Cached::Pass;
        }
        if !cache.started.get() {
            let login = self.worker.control_login();
            self.worker.pubsub.track_for_cache(&login);
        }
        if !self.worker.hotkeys.is_hot(key) {
            return Cached::Pass;
        }
        let table = self.worker.shared.router.load();
        let slot_id = table.slot_of(key);
        // A prefix route's keys are another cluster's: its writes would not invalidate here.
        if SlotTable::is_routed(slot_id) {
            return Cached::Pass;
        }
        let slot = table.slot(slot_id);
        // A replica may answer with a value older than an invalidation already taken in;
        // only a master's reply is cached.
        if slot.blocked
            || slot.migrating_from.is_some()
            || (c.cmd.replica_read && table.read.mode != ReadMode::Master)
        {
            return Cached::Pass;
        }
        if !cache.serving(table.backends()) {
            cache.count_miss();
            return Cached::Pass;
        }
        match cache.lookup(key) {
            Ok(reply) => Cached::Hit(reply),
            Err(t) => Cached::Fill(t),
        }
    }

    /// Stores a miss's reply (before observers rewrite it: a hit goes through them too).
    pub(super) fn hot_cache_fill(&self, t: Ticket, reply: &[u8]) {
        let table = self.worker.shared.router.load();
        self.worker.hot_cache.fill(t, reply, table.backends());
    }
}
