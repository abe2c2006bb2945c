//! Pub/sub for one worker thread: a [`Hub`] holds ONE subscriber connection per backend (in
//! RESP3, so pushes are told from replies), subscribes each channel, pattern and shard channel
//! there once however many of the worker's sessions want it, and fans each message out to the
//! sessions' [`Inbox`]es, charged to their output accounts (a subscriber that does not read
//! goes over its limits and is closed; the hub never waits for it).
//!
//! Where a name is subscribed follows the slot table (see [`owners`]): a channel or shard
//! channel on the master of its slot (and, while the slot moves, on its source too; while the
//! slot is held for a move's barrier, on every master), a pattern on every master. On each
//! table swap the hub subscribes where a name is now wanted before it unsubscribes where it no
//! longer is. The session side (commands, confirmations, writing messages) is `session::pubsub`.

mod conn;
pub mod counts;
pub mod fleet;
mod glob;
mod sinks;
pub mod tracking;
pub mod wire;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::sync::Arc;

use bytes::Bytes;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;
use tokio::sync::{Notify, oneshot};

use crate::clients::ClientRegistry;
use conn::SubConn;
use sinks::Sinks;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::router::{Router, SlotId, SlotTable};
use tracking::{Delivery, Tracking};
pub use tracking::{Redirects, Target};
pub use wire::Space;

/// A session's place in its worker's hub.
pub type SinkId = u64;

/// Where one session's messages wait until it writes them. Their bytes are charged to the
/// session's output account from the moment they are queued.
pub struct Inbox {
    queue: RefCell<VecDeque<Bytes>>,
    notify: Notify,
    account: Rc<OutputAccount>,
}

impl Inbox {
    /// Queues a message (charged to the session's account), unless the session is being
    /// closed over its output limits.
    pub fn push(&self, msg: Bytes) {
        if self.account.overflow().is_some() {
            return; // the session is being closed; nothing more is held for it
        }
        self.account.charge(msg.len());
        self.queue.borrow_mut().push_back(msg);
        self.notify.notify_one();
    }

    /// Every message queued, oldest first. Their bytes stay charged: the caller releases
    /// them once written (or handed on).
    pub fn take(&self) -> VecDeque<Bytes> {
        std::mem::take(&mut *self.queue.borrow_mut())
    }

    pub fn is_empty(&self) -> bool {
        self.queue.borrow().is_empty()
    }

    /// Completes once a message is queued.
    pub async fn ready(&self) {
        while self.is_empty() {
            self.notify.notified().await;
        }
    }

    pub fn account(&self) -> &Rc<OutputAccount> {
        &self.account
    }
}

/// One name subscribed on behalf of some of the worker's sessions.
struct Entry {
    sinks: Sinks,
    /// The backends it is subscribed on now.
    on: SmallVec<[Arc<str>; 2]>,
}

#[derive(Default)]
struct State {
    sinks: FxHashMap<SinkId, Rc<Inbox>>,
    subs: [FxHashMap<Bytes, Entry>; 3],
    conns: FxHashMap<Arc<str>, SubConn>,
    /// How subscriber connections log in (the proxy's control login; see docs/pubsub.md).
    login: Option<Login>,
    next_sink: SinkId,
    following: bool,
    /// Client-side caching: what the worker's tracking sessions cached.
    tracking: Tracking,
    /// Backends whose subscriber connection reports every write (`CLIENT TRACKING ON BCAST`).
    tracking_on: FxHashSet<Arc<str>>,
    /// Prefix routes' targets (another cluster's proxies) among them, and the request that
    /// has them report the writes under their prefixes (`… BCAST PREFIX p …`).
    tracking_routed: FxHashMap<Arc<str>, Bytes>,
    /// The worker's hot-key cache, when on: told of every invalidation and tracking link.
    cache: Option<Rc<crate::hotcache::HotCache>>,
}

struct HubInner {
    router: Arc<Router>,
    redirects: Arc<Redirects>,
    /// The proxy's subscription counts, kept by every worker's hub (`counts`).
    counts: Arc<counts::Counts>,
    /// Every client of the proxy: a redirect target that is not among them is gone.
    clients: Arc<ClientRegistry>,
    state: RefCell<State>,
}

const TRACKING_ON: &[u8] = b"*4\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n$5\r\nBCAST\r\n";
const TRACKING_OFF: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$3\r\nOFF\r\n";

/// A worker's subscriptions; cheap to clone (one per worker, shared by its sessions).
#[derive(Clone)]
pub struct Hub {
    inner: Rc<HubInner>,
}

/// Requests for one backend, by space and direction, gathered while the state is borrowed
/// and sent after.
#[derive(Default)]
struct Batch {
    per: FxHashMap<(Arc<str>, Space, bool), Vec<Bytes>>,
}

impl Batch {
    fn add(&mut self, addr: &Arc<str>, space: Space, subscribe: bool, name: &Bytes) {
        self.per
            .entry((addr.clone(), space, subscribe))
            .or_default()
            .push(name.clone());
    }
}

/// How long a hub waits for the backends to confirm a table swap's new subscriptions.
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Waits for every receiver (a dropped sender counts as answered).
pub async fn join(rxs: Vec<oneshot::Receiver<()>>) {
    for rx in rxs {
        let _ = rx.await;
    }
}

/// Names per backend request, so one request stays small.
const NAMES_PER_REQUEST: usize = 256;

impl Hub {
    pub fn new(
        router: Arc<Router>,
        redirects: Arc<Redirects>,
        counts: Arc<counts::Counts>,
        clients: Arc<ClientRegistry>,
    ) -> Self {
        Self {
            inner: Rc::new(HubInner {
                router,
                redirects,
                counts,
                clients,
                state: RefCell::default(),
            }),
        }
    }

    /// `sink` tracks keys for client-side caching (BCAST: these prefixes, none for every key),
    /// its invalidations going to `target`. The receivers complete once every backend reports
    /// writes to this hub, as the backends of a direct client would from its `CLIENT TRACKING`.
    /// `noloop`: the sink hears of writes on its own connections of this generation, once
    /// each is up (`own_connected`).
    pub fn track(
        &self,
        sink: SinkId,
        target: Target,
        bcast: Option<Vec<Bytes>>,
        noloop: Option<u64>,
        login: &Login,
    ) -> Vec<oneshot::Receiver<()>> {
        self.follow_table();
        {
            let mut s = self.inner.state.borrow_mut();
            if s.login.is_none() {
                s.login = Some(login.clone());
            }
            s.tracking.start(sink, target, bcast, noloop);
        }
        self.report_writes(false)
    }

    /// `sink`'s own `NOLOOP` connection to `addr` (of `generation`) is logged in and
    /// tracking: the hub's reports from `addr` pass the sink by from now on. `flush`: its
    /// reports may have missed writes (a connection that came back, or one opened to a
    /// master while the sink tracked already, whose first reports and the hub's last ones
    /// may cross), so the sink's whole cache is invalidated.
    pub fn own_connected(&self, sink: SinkId, generation: u64, addr: &Arc<str>, flush: bool) {
        let mut out = Vec::new();
        {
            let mut s = self.inner.state.borrow_mut();
            if s.tracking.own_up(sink, generation, addr) && flush {
                s.tracking.invalidate_for(sink, None, &mut out);
            }
        }
        self.dispatch(out);
    }

    /// `sink`'s own connection to `addr` broke: the hub's reports from `addr` are its again.
    pub fn own_lost(&self, sink: SinkId, generation: u64, addr: &str) {
        let mut s = self.inner.state.borrow_mut();
        s.tracking.own_down(sink, generation, addr);
    }

    /// A push on `sink`'s own connection: an invalidation for it alone.
    pub fn own_report(&self, sink: SinkId, generation: u64, push: &[u8]) {
        let wire::Push::Invalidate(parts) = wire::classify_push(push) else {
            return;
        };
        let mut out = Vec::new();
        {
            let mut s = self.inner.state.borrow_mut();
            if !s.tracking.is_own(sink, generation) {
                return;
            }
            let keys = tracking::invalidated_keys(&parts);
            s.tracking.invalidate_for(sink, keys.as_deref(), &mut out);
        }
        self.dispatch(out);
    }

    /// The worker's hot-key cache is kept true by this hub (set once, at the worker's start).
    pub fn set_cache(&self, cache: Rc<crate::hotcache::HotCache>) {
        self.inner.state.borrow_mut().cache = Some(cache);
    }

    /// Starts the reports of writes the cache needs (once; the cache is a BCAST sink of its
    /// prefixes that never stops tracking). Its links count as up once each backend has
    /// answered `CLIENT TRACKING ON` (`tracking_confirmed`).
    pub fn track_for_cache(&self, login: &Login) {
        let prefixes = {
            let mut s = self.inner.state.borrow_mut();
            let Some(c) = &s.cache else { return };
            if c.started.replace(true) {
                return;
            }
            let p = c.prefixes();
            s.next_sink += 1;
            let id = s.next_sink;
            (id, p)
        };
        let _ = self.track(prefixes.0, Target::Nowhere, Some(prefixes.1), None, login);
    }

    /// The subscriber connection to `addr` answered `+OK`: on a connection that reports
    /// writes, that is `CLIENT TRACKING ON` confirmed (the cache never turns it off).
    fn tracking_confirmed(&self, addr: &Arc<str>) {
        let s = self.inner.state.borrow();
        if let Some(c) = &s.cache
            && s.tracking_on.contains(addr)
        {
            c.link_up(addr);
        }
    }

    /// The subscriber connection to `addr` broke: writes there go unreported until it is
    /// back, so the cache empties and stops serving now.
    fn link_down(&self, addr: &Arc<str>) {
        if let Some(c) = &self.inner.state.borrow().cache {
            c.link_down(addr);
        }
    }

    /// `sink` stops tracking; once no session of the worker tracks, the backends stop
    /// reporting writes.
    pub fn untrack(&self, sink: SinkId) {
        let mut s = self.inner.state.borrow_mut();
        s.tracking.stop(sink);
        if !s.tracking.active() {
            s.tracking_routed.clear();
            let on: Vec<Arc<str>> = s.tracking_on.drain().collect();
            for addr in on {
                if let Some(c) = s.conns.get(&addr) {
                    c.send(Bytes::from_static(TRACKING_OFF));
                }
            }
        }
    }

    /// `sink` read `keys` while tracking: each is invalidated for it once it is written.
    pub fn read(&self, sink: SinkId, keys: impl Iterator<Item = Bytes>) {
        let evicted = self.inner.state.borrow_mut().tracking.read(sink, keys);
        self.dispatch(evicted);
    }

    /// Every backend of the table in force, while anyone tracks, reports writes to this hub;
    /// receivers for the ones that start now. `swapped`: called for a new table, which may
    /// have changed the prefix routes.
    fn report_writes(&self, swapped: bool) -> Vec<oneshot::Receiver<()>> {
        let table = self.inner.router.load();
        let (synced, flushed) = {
            let mut s = self.inner.state.borrow_mut();
            if !s.tracking.active() {
                return Vec::new();
            }
            let login = s.login.clone().unwrap_or_else(Login::none);
            let mut synced = Vec::new();
            for addr in table.backends() {
                if s.tracking_on.contains(addr) {
                    continue;
                }
                s.tracking_on.insert(addr.clone());
                let conn = match s.conns.get(addr) {
                    Some(c) => c,
                    None => {
                        let c = SubConn::spawn(addr.clone(), login.clone(), self.weak());
                        s.conns.entry(addr.clone()).or_insert(c)
                    }
                };
                conn.send(Bytes::from_static(TRACKING_ON));
                synced.push(conn.sync());
            }
            let changed = self.report_routed_writes(&mut s, &table, &mut synced);
            // Keys of a prefix whose route came, went or moved to another proxy may have been
            // cached from where they no longer live, or writes there gone unreported while the
            // target changed: every tracking session drops its cache, as after a lost link.
            let flushed = if changed && swapped {
                s.tracking.flush_all()
            } else {
                Vec::new()
            };
            (synced, flushed)
        };
        self.dispatch(flushed);
        synced
    }

    /// Has each prefix route's target (another cluster's proxy) report the writes under its
    /// routes' prefixes, logged in as the route's user, and a target no longer routed stop.
    /// Returns whether anything changed.
    fn report_routed_writes(
        &self,
        s: &mut State,
        table: &SlotTable,
        synced: &mut Vec<oneshot::Receiver<()>>,
    ) -> bool {
        let routed = routed_tracking(table);
        let gone: Vec<Arc<str>> = s
            .tracking_routed
            .keys()
            .filter(|a| !routed.iter().any(|(r, _, _)| r == *a))
            .cloned()
            .collect();
        let mut changed = !gone.is_empty();
        for addr in gone {
            s.tracking_routed.remove(&addr);
            s.tracking_on.remove(&addr);
            if let Some(c) = s.conns.get(&addr) {
                c.send(Bytes::from_static(TRACKING_OFF));
            }
        }
        for (addr, login, request) in routed {
            if s.tracking_routed.get(&addr) == Some(&request) {
                continue;
            }
            changed = true;
            let was_on = s.tracking_routed.contains_key(&addr);
            s.tracking_on.insert(addr.clone());
            s.tracking_routed.insert(addr.clone(), request.clone());
            let conn = match s.conns.get(&addr) {
                Some(c) => c,
                None => {
                    let c = SubConn::spawn(addr.clone(), login, self.weak());
                    s.conns.entry(addr.clone()).or_insert(c)
                }
            };
            if was_on {
                conn.send(Bytes::from_static(TRACKING_OFF));
            }
            conn.send(request);
            synced.push(conn.sync());
        }
        changed
    }

    /// Hands invalidations to their sessions, here or (a redirect) on any worker.
    fn dispatch(&self, deliveries: Vec<Delivery>) {
        if deliveries.is_empty() {
            return;
        }
        let s = self.inner.state.borrow();
        for d in deliveries {
            match d {
                Delivery::Own(sink, msg) => {
                    if let Some(inbox) = s.sinks.get(&sink) {
                        inbox.push(msg);
                    }
                }
                Delivery::Redirect(sink, id, msg) => {
                    // A target gone (not one that exists unsubscribed): the tracking client
                    // is told, as Redis tells it.
                    if !self.inner.redirects.send(id, msg)
                        && !self.inner.clients.contains(id)
                        && let Some(inbox) = s.sinks.get(&sink)
                    {
                        inbox.push(tracking::redirect_broken(id));
                    }
                }
            }
        }
    }

    /// A subscriber connection to `addr` came back after a break: writes it reported
    /// meanwhile are lost, so every tracking session drops its whole cache.
    fn reconnected(&self, addr: &Arc<str>) {
        let flushed = {
            let mut s = self.inner.state.borrow_mut();
            if !s.tracking_on.contains(addr) {
                return;
            }
            s.tracking.flush_all()
        };
        self.dispatch(flushed);
    }

    /// A new sink for a session's messages, charged to `account`.
    pub fn register(&self, account: Rc<OutputAccount>) -> (SinkId, Rc<Inbox>) {
        let inbox = Rc::new(Inbox {
            queue: RefCell::default(),
            notify: Notify::new(),
            account,
        });
        let mut s = self.inner.state.borrow_mut();
        s.next_sink += 1;
        let id = s.next_sink;
        s.sinks.insert(id, inbox.clone());
        (id, inbox)
    }

    /// Subscribes `sink` to `names` in `space` (names it has already are left as they are).
    /// Subscriber connections are made with `login` if there are none yet. The receivers
    /// complete once every backend concerned has the subscriptions (or its connection broke).
    pub fn subscribe(
        &self,
        sink: SinkId,
        space: Space,
        names: &[Bytes],
        login: &Login,
    ) -> Vec<oneshot::Receiver<()>> {
        self.follow_table();
        let table = self.inner.router.load();
        let mut batch = Batch::default();
        let mut concerned: SmallVec<[Arc<str>; 2]> = SmallVec::new();
        self.use_login(login);
        {
            let mut s = self.inner.state.borrow_mut();
            let subs = &mut s.subs[space.index()];
            for name in names {
                let mut new_hub = false;
                let entry = subs.entry(name.clone()).or_insert_with(|| {
                    new_hub = true;
                    let on = owners(&table, space, name);
                    for addr in &on {
                        batch.add(addr, space, true, name);
                    }
                    Entry {
                        sinks: Sinks::default(),
                        on,
                    }
                });
                if entry.sinks.insert(sink) {
                    self.inner.counts.subscribed(space, name, new_hub);
                }
                // Another session's subscription may still be on its way: wait for it too.
                for a in &entry.on {
                    if !concerned.contains(a) {
                        concerned.push(a.clone());
                    }
                }
            }
        }
        self.send(batch);
        let s = self.inner.state.borrow();
        concerned
            .iter()
            .filter_map(|a| s.conns.get(a).map(SubConn::sync))
            .collect()
    }

    /// Makes `login` the subscriber connections' login. On a change (a new backend admin
    /// user), the connections of the old one go and new ones subscribe what the state holds.
    fn use_login(&self, login: &Login) {
        let mut s = self.inner.state.borrow_mut();
        if s.login.as_ref().is_some_and(|l| l.id == login.id) {
            return;
        }
        s.login = Some(login.clone());
        if s.conns.is_empty() {
            return;
        }
        // The old connections end without a break being seen: the cache's links go with them.
        if let Some(c) = &s.cache {
            for a in s.conns.keys() {
                c.link_down(a);
            }
        }
        s.conns.clear();
        let addrs: FxHashSet<Arc<str>> = s
            .subs
            .iter()
            .flat_map(|m| m.values().flat_map(|e| e.on.iter().cloned()))
            .chain(s.tracking_on.iter().cloned())
            .collect();
        for a in addrs {
            let c = SubConn::spawn(a.clone(), login.clone(), self.weak());
            s.conns.insert(a, c);
        }
    }

    /// Unsubscribes `sink` from `names` in `space`; a name no session wants any more is
    /// unsubscribed on the backends.
    /// The proxy's counts drop the hub's own subscription only once the servers confirm its
    /// end: until then a `PUBLISH` there still counts it (as one of this hub's, not as a
    /// direct client; `session::pubsub_counts`).
    pub fn unsubscribe(&self, sink: SinkId, space: Space, names: &[Bytes]) {
        let mut batch = Batch::default();
        let mut left: Vec<Bytes> = Vec::new();
        let mut concerned: SmallVec<[Arc<str>; 2]> = SmallVec::new();
        {
            let mut s = self.inner.state.borrow_mut();
            let subs = &mut s.subs[space.index()];
            for name in names {
                let Some(entry) = subs.get_mut(name) else {
                    continue;
                };
                if entry.sinks.remove(sink) {
                    self.inner.counts.unsubscribed(space, name);
                }
                if entry.sinks.is_empty() {
                    for addr in &entry.on {
                        batch.add(addr, space, false, name);
                        if !concerned.contains(addr) {
                            concerned.push(addr.clone());
                        }
                    }
                    left.push(name.clone());
                    subs.remove(name);
                }
            }
        }
        self.send(batch);
        if left.is_empty() {
            return;
        }
        let synced: Vec<oneshot::Receiver<()>> = {
            let s = self.inner.state.borrow();
            concerned
                .iter()
                .filter_map(|a| s.conns.get(a).map(SubConn::sync))
                .collect()
        };
        let counts = self.inner.counts.clone();
        tokio::task::spawn_local(async move {
            join(synced).await;
            for name in &left {
                counts.hub_left(space, name);
            }
        });
    }

    /// The session of `sink` is gone.
    pub fn release(&self, sink: SinkId) {
        self.untrack(sink);
        self.inner.state.borrow_mut().sinks.remove(&sink);
    }

    /// Sessions registered here (each made its sink with a subscription or tracking).
    #[cfg(test)]
    pub fn sinks(&self) -> usize {
        self.inner.state.borrow().sinks.len()
    }

    /// Whether any session still tracks keys here.
    #[cfg(test)]
    pub fn tracking(&self) -> bool {
        self.inner.state.borrow().tracking.active()
    }

    /// Starts following table swaps (once; on the first subscription).
    fn follow_table(&self) {
        let mut s = self.inner.state.borrow_mut();
        if s.following {
            return;
        }
        s.following = true;
        let weak = Rc::downgrade(&self.inner);
        let (mut swaps, caught_up) = self.inner.router.follow();
        tokio::task::spawn_local(async move {
            while swaps.changed().await.is_ok() {
                let Some(inner) = weak.upgrade() else { return };
                let (epoch, synced) = Hub { inner }.reconcile();
                // The proxy acknowledges the swap once this is stored (`Shared::drain`).
                let _ = tokio::time::timeout(SYNC_WAIT, join(synced)).await;
                caught_up.store(epoch, std::sync::atomic::Ordering::Release);
            }
        });
    }

    /// Moves every subscription to where the table in force wants it: subscribes on the new
    /// owners first, then unsubscribes on the old ones. Returns the table's epoch, and
    /// receivers that complete once the new owners have the subscriptions.
    fn reconcile(&self) -> (u64, Vec<oneshot::Receiver<()>>) {
        let table = self.inner.router.load();
        let mut add = Batch::default();
        let mut remove = Batch::default();
        {
            let mut s = self.inner.state.borrow_mut();
            // A new table may have a new master (a failover, which can lose writes) or move
            // slots: what the cache holds is let go.
            if let Some(c) = &s.cache {
                c.clear();
            }
            for space in Space::ALL {
                for (name, entry) in s.subs[space.index()].iter_mut() {
                    let want = owners(&table, space, name);
                    for a in want.iter().filter(|a| !entry.on.contains(a)) {
                        add.add(a, space, true, name);
                    }
                    for a in entry.on.iter().filter(|a| !want.contains(a)) {
                        remove.add(a, space, false, name);
                    }
                    entry.on = want;
                }
            }
        }
        let concerned: Vec<Arc<str>> = {
            let mut v: Vec<Arc<str>> = add.per.keys().map(|(a, _, _)| a.clone()).collect();
            v.sort();
            v.dedup();
            v
        };
        self.send(add);
        self.send(remove);
        let mut synced: Vec<oneshot::Receiver<()>> = {
            let s = self.inner.state.borrow();
            concerned
                .iter()
                .filter_map(|a| s.conns.get(a).map(SubConn::sync))
                .collect()
        };
        // A backend new to the table reports writes before the swap is acknowledged.
        synced.extend(self.report_writes(true));
        (table.epoch, synced)
    }

    /// Whether anything is subscribed on `addr`.
    fn wants(&self, addr: &Arc<str>) -> bool {
        let s = self.inner.state.borrow();
        s.tracking_on.contains(addr)
            || s.subs
                .iter()
                .any(|m| m.values().any(|e| e.on.contains(addr)))
    }

    /// What a (re)connected subscriber connection to `addr` must subscribe.
    fn resubscriptions(&self, addr: &Arc<str>) -> Vec<Bytes> {
        let s = self.inner.state.borrow();
        let mut out = Vec::new();
        if s.tracking_on.contains(addr) {
            out.push(match s.tracking_routed.get(addr) {
                Some(request) => request.clone(),
                None => Bytes::from_static(TRACKING_ON),
            });
        }
        for space in Space::ALL {
            let names: Vec<Bytes> = s.subs[space.index()]
                .iter()
                .filter(|(_, e)| e.on.contains(addr))
                .map(|(n, _)| n.clone())
                .collect();
            for chunk in names.chunks(NAMES_PER_REQUEST) {
                out.push(wire::request(space, true, chunk));
            }
        }
        out
    }

    /// A push from the subscriber connection to `from`: a message goes to every session
    /// subscribed to what it names. Keyspace notifications are delivered only from the
    /// master that owns their key's slot now (`sent_by_owner`) and never of the internal
    /// database.
    fn deliver(&self, from: &str, push: Bytes) {
        let (space, name, channel) = match wire::classify_push(&push) {
            wire::Push::Message { channel, .. } if wire::internal_db_event(channel) => return,
            wire::Push::Message { channel, .. } if !self.sent_by_owner(from, channel, &push) => {
                return;
            }
            wire::Push::Message {
                space,
                name,
                channel,
            } => (space, name, channel),
            wire::Push::Invalidate(parts) => {
                let deliveries = {
                    let mut s = self.inner.state.borrow_mut();
                    if let Some(c) = &s.cache {
                        match tracking::invalidated_keys(&parts) {
                            Some(keys) => keys.iter().for_each(|k| c.invalidate(k)),
                            None => c.clear(),
                        }
                    }
                    let keys = tracking::invalidated_keys(&parts);
                    s.tracking.invalidate(keys.as_deref(), Some(from))
                };
                return self.dispatch(deliveries);
            }
            wire::Push::Other => return,
        };
        let s = self.inner.state.borrow();
        if let Some(entry) = s.subs[space.index()].get(name) {
            // Copied once (shared by every sink): a slice would keep the connection's whole
            // read buffer alive while a slow subscriber holds the message, charged for far
            // less than it pins. A keyspace notification of a numbered database is named as
            // clients number it (sessions subscribe the backends' names: `backend_name`).
            let push = match client_numbered(&push, space, channel) {
                Some(renamed) => renamed,
                None => Bytes::copy_from_slice(&push),
            };
            for id in entry.sinks.iter() {
                if let Some(inbox) = s.sinks.get(&id) {
                    inbox.push(push.clone());
                }
            }
        }
    }

    /// Whether a message from `from` may go to clients: anything but a keyspace notification
    /// of a key whose slot another master owns now. Those come from a slot move (its copy's
    /// writes on the target before the handoff, its cleanup's deletes on the source after):
    /// the key did not change for clients.
    fn sent_by_owner(&self, from: &str, channel: &[u8], push: &[u8]) -> bool {
        let Some(key) = wire::notified_key(channel, push) else {
            return true;
        };
        let table = self.inner.router.load();
        match table.slot(table.slot_of(key)).master {
            Some(owner) => &**table.backend_addr(owner) == from,
            None => true,
        }
    }

    fn send(&self, batch: Batch) {
        if batch.per.is_empty() {
            return;
        }
        let mut s = self.inner.state.borrow_mut();
        let login = s.login.clone().unwrap_or_else(Login::none);
        for ((addr, space, subscribe), names) in batch.per {
            let conn = s
                .conns
                .entry(addr.clone())
                .or_insert_with(|| SubConn::spawn(addr, login.clone(), self.weak()));
            for chunk in names.chunks(NAMES_PER_REQUEST) {
                conn.send(wire::request(space, subscribe, chunk));
            }
        }
    }

    fn weak(&self) -> Weak<HubInner> {
        Rc::downgrade(&self.inner)
    }
}

/// A keyspace notification's push from a backend database other than 0, renamed with the
/// client database's number (`tessera_model::databases`); `None` for any other push.
fn client_numbered(push: &[u8], space: Space, channel: &[u8]) -> Option<Bytes> {
    let db = tessera_model::databases::keyspace_db(channel).filter(|&db| db != 0)?;
    wire::renumbered_push(push, space, tessera_model::databases::client_db(db)?)
}

pub use tessera_model::databases::backend_channel as backend_name;

/// A prefix route target's address and login, with something for it.
type ForTarget<T> = (Arc<str>, Login, T);

/// For each prefix route target of `table`: its login (the first route's to it) and the
/// request that has it report writes under its routes' prefixes. A prefix under another of
/// the list is left out (a proxy refuses overlapping BCAST prefixes, as Redis does).
fn routed_tracking(table: &SlotTable) -> Vec<ForTarget<Bytes>> {
    let mut per: Vec<ForTarget<Vec<&[u8]>>> = Vec::new();
    for (addr, login, prefix) in table.route_targets() {
        match per.iter_mut().find(|(a, _, _)| a == addr) {
            Some((_, _, prefixes)) => prefixes.push(prefix),
            None => per.push((addr.clone(), login.clone(), vec![prefix])),
        }
    }
    per.into_iter()
        .map(|(addr, login, mut prefixes)| {
            prefixes.sort_unstable();
            prefixes.dedup();
            let kept: Vec<&[u8]> = prefixes
                .iter()
                .filter(|p| {
                    !prefixes
                        .iter()
                        .any(|q| q.len() < p.len() && p.starts_with(q))
                })
                .copied()
                .collect();
            let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"ON", b"BCAST"];
            for p in kept {
                args.extend([&b"PREFIX"[..], p]);
            }
            let size = args.iter().map(|a| a.len()).sum();
            let request = tessera_resp::encode_request(args.len(), args, size);
            (addr, login, request)
        })
        .collect()
}

/// The backends a name of `space` is subscribed on under `table`: every master for a
/// pattern and for a keyspace notification's channel (each master tells of its own keys:
/// the channel's name does not hash to where they are); for another channel, the master of
/// its slot; while the slot is held for a handoff, every master, so the target is subscribed
/// before anyone publishes there.
pub fn owners(table: &SlotTable, space: Space, name: &[u8]) -> SmallVec<[Arc<str>; 2]> {
    let slot = table.slot(SlotId::of_key(name));
    if space == Space::Pattern
        || slot.blocked
        || (space == Space::Channel && tessera_model::databases::keyspace_db(name).is_some())
    {
        return table.backends().iter().cloned().collect();
    }
    slot.master
        .map(|idx| table.backend_addr(idx).clone())
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::router::{GroupId, SlotTableBuilder};

    fn names(v: SmallVec<[Arc<str>; 2]>) -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|a| a.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn owners_follow_the_slot_and_its_handoff() {
        let slot = SlotId::of_key(b"news");
        let mut b = SlotTableBuilder::default();
        for s in 0..1024u16 {
            let (g, a) = if s < 512 { (1, "a:1") } else { (2, "b:2") };
            if SlotId(s) == slot {
                b.assign(SlotId(s), GroupId(3), "c:3");
            } else {
                b.assign(SlotId(s), GroupId(g), a);
            }
        }
        let t = b.build(2);
        assert_eq!(names(owners(&t, Space::Channel, b"news")), ["c:3"]);
        assert_eq!(names(owners(&t, Space::Shard, b"{news}x")), ["c:3"]);
        assert_eq!(
            names(owners(&t, Space::Pattern, b"n*")),
            ["a:1", "b:2", "c:3"]
        );
        let t = SlotTable::split_evenly(&["a:1".into(), "b:2".into()]);
        assert_eq!(owners(&t, Space::Channel, b"news").len(), 1);
        for keyspace in [&b"__keyspace@0__:k"[..], b"__keyevent@3__:del"] {
            assert_eq!(owners(&t, Space::Channel, keyspace).len(), 2);
        }
        let mut b = SlotTableBuilder::default();
        b.assign(slot, GroupId(1), "a:1");
        b.assign(SlotId((slot.0 + 1) % 1024), GroupId(2), "b:2");
        b.blocked(slot);
        assert_eq!(
            names(owners(&b.build(3), Space::Shard, b"news")),
            ["a:1", "b:2"]
        );
    }

    #[test]
    fn an_unserved_slot_has_no_owner() {
        let t = SlotTable::split_evenly(&[]);
        assert!(owners(&t, Space::Channel, b"x").is_empty());
    }
}
