//! A session's use of its worker's hot-key cache (`hotcache`): which commands may be answered
//! from it (a plain GET of a hot key under a configured prefix, after classify and the plugin
//! layer, outside MULTI and WATCH, on a slot that is not moving, read from its master, while
//! every master's tracking link is up), the fill of a miss's reply (with the key's TTL, asked
//! right behind the GET), and the session's own writes, which the cache must never hide from
//! a read that follows them: each is counted when sent and again when its reply comes in.

use bytes::Bytes;

use super::Session;
use crate::backend::ReplyRx;
use crate::hotcache::{KeyTtl, Ticket, Written};
use crate::stages::classify::Classified;
use tessera_model::command::{Kind, Tx};
use tessera_model::router::SlotTable;
use tessera_model::router::replicas::ReadMode;

/// What the cache makes of a command.
pub(super) enum Cached {
    /// Answered from the cache.
    Hit(Bytes),
    /// Sent to Redis; its reply fills the cache (once the key's TTL is asked for).
    Fill(Ticket),
    /// Not the cache's.
    Pass,
}

/// A miss on its way: the GET's ticket and the `PTTL` sent right behind it.
pub(super) struct HotFill {
    ticket: Ticket,
    ttl: ReplyRx,
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
            // The cache holds database 0's keys (a write in another database to a key of the
            // same name still invalidates it: tracking goes by name).
            || self.db() != 0
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
        let slot_id = c.first_slot(&table);
        // A prefix route's keys are another cluster's: its writes would not invalidate here.
        if SlotTable::is_routed(slot_id) {
            return Cached::Pass;
        }
        let slot = table.slot(slot_id);
        // A replica may answer with a value older than an invalidation already taken in;
        // only a master's reply is cached.
        if slot.blocked || (c.cmd.replica_read && table.read.mode != ReadMode::Master) {
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

    /// Sends `PTTL` for a miss's key right behind its GET (which the caller has just sent),
    /// on the same master and login; its reply is not charged to the client. A key whose TTL
    /// cannot be read is not cached. It may run before the GET on another connection of the
    /// set: a write of the key between the two moves the invalidation count (or this proxy's
    /// write counters), so a value and a TTL that do not belong together are never kept.
    pub(super) fn hot_cache_ask_ttl(&self, ticket: Ticket) -> Option<HotFill> {
        let table = self.worker.shared.router.load();
        let key: &[u8] = &ticket.key;
        let to = table.route(table.slot_of(key)).ok()?;
        let req = tessera_resp::encode_request(2, [&b"PTTL"[..], key], 4 + key.len());
        let ttl = self
            .worker
            .pool
            .send(table.backend_addr(to), self.proto, &self.login, req, None);
        Some(HotFill { ticket, ttl })
    }

    /// Stores a miss's reply (before observers rewrite it: a hit goes through them too), once
    /// the key's TTL is in; the client's reply does not wait for it.
    pub(super) fn hot_cache_fill(&self, fill: HotFill, reply: &[u8]) {
        if !self.worker.hot_cache.may_fill(&fill.ticket, reply) {
            return;
        }
        let reply = Bytes::copy_from_slice(reply);
        let worker = self.worker.clone();
        tokio::task::spawn_local(async move {
            let ttl = match fill.ttl.await {
                Ok(r) => KeyTtl::from_reply(&r),
                Err(_) => return,
            };
            let table = worker.shared.router.load();
            worker
                .hot_cache
                .fill(fill.ticket, &reply, table.backends(), ttl);
        });
    }

    /// What `c` may write that a cache could hold (nothing while the cache is off).
    pub(super) fn hot_cache_written(&self, c: &Classified<'_>) -> Written {
        let cache = &self.worker.hot_cache;
        if !cache.on() {
            return Written::Nothing;
        }
        // An EXEC writes what was queued (counted as it was queued).
        if c.cmd.kind == Kind::Transaction(Tx::Exec) {
            return self.tx.queued_writes();
        }
        // A script may write keys it does not declare.
        let anything = matches!(c.cmd.name, "EVAL" | "EVALSHA" | "FCALL");
        cache.written(c.cmd.write, anything, c.key_args())
    }
}
