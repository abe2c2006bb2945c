//! Client-side caching (`CLIENT TRACKING`) for one worker: the keys its tracking sessions
//! have read (default, OPTIN and OPTOUT modes) and the prefixes of its BCAST sessions, and the
//! invalidation messages a write turns into. Every backend tells each hub of every key
//! written there (the hub's subscriber connections run `CLIENT TRACKING ON BCAST`), so a write
//! through any proxy — or straight to a server, or a key moved off a slot's old owner —
//! invalidates what the clients of every proxy cached.
//!
//! In default mode a key is forgotten once invalidated, as Redis does; the table is bounded
//! (`MAX_KEYS`): past it the oldest entry is invalidated to make room, as Redis does past
//! `tracking-table-max-keys`. No operation of one session scans the table: each costs its own
//! keys and prefixes (`prefixes`, `sinks`). Invalidations go into the session's own inbox (RESP3
//! `invalidate` pushes), or for `REDIRECT id` to that client's redirect queue, whichever worker
//! it is on, as `__redis__:invalidate` messages ([`Redirects`]).
//!
//! A `NOLOOP` session hears of writes on its own connections instead (`session::own_conns`,
//! each running `CLIENT TRACKING ON BCAST NOLOOP`, whose reports leave out exactly its own
//! writes): the hub's reports from a backend it has such a connection to pass it by, and its
//! connection's reports concern it alone ([`Tracking::invalidate_for`]). Where it has none
//! (a master new to it, a connection down), the hub's reports are its, as it wrote nothing
//! there.

mod prefixes;

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::{BufMut, Bytes, BytesMut};
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::mpsc;

use super::SinkId;
use super::sinks::Sinks;
use prefixes::Prefixes;

/// Keys a worker tracks for its default, OPTIN and OPTOUT sessions, together.
pub const MAX_KEYS: usize = 100_000;
/// The longest BCAST prefix a client may name: a written key is looked up once per distinct
/// prefix length up to its own (`prefixes`), so this bounds what one write costs.
pub const MAX_PREFIX_LEN: usize = 256;
/// Invalidation messages queued for one redirect target; past it they are dropped (logged).
pub const REDIRECT_QUEUE: usize = 65_536;
/// The channel a RESP2 redirect target subscribes to.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// Where a tracking session's invalidations go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Its own connection, as RESP3 `invalidate` pushes.
    Own,
    /// The client with this id, as `message __redis__:invalidate` (RESP2's way).
    Redirect(u64),
    /// Nowhere: a RESP2 client without REDIRECT (Redis drops them too).
    Nowhere,
}

/// What one invalidation is for each sink concerned.
pub enum Delivery {
    Own(SinkId, Bytes),
    /// For the client with this id, from this sink's tracking.
    Redirect(SinkId, u64, Bytes),
}

/// A worker's tracking state. Every operation one session makes costs in proportion to its
/// own keys and prefixes, never to the whole table: starting or stopping tracking (which
/// each `CLIENT TRACKING ON` does), reading a key, having an entry evicted.
#[derive(Default)]
pub struct Tracking {
    /// Keys read in default, OPTIN and OPTOUT mode, with the sinks that read them.
    keys: FxHashMap<Bytes, Tracked>,
    /// What each of those sinks read, so that stopping costs its own keys only.
    read_by: FxHashMap<SinkId, FxHashSet<Bytes>>,
    /// Keys in the order they entered `keys`, for eviction past `MAX_KEYS` (an entry whose
    /// `seq` no longer matches the key's is stale and skipped; compacted once stale entries
    /// outnumber live ones, so every push pays for one skip at most).
    order: VecDeque<(u64, Bytes)>,
    next_seq: u64,
    /// BCAST sinks by prefix.
    bcast: Prefixes,
    targets: FxHashMap<SinkId, Target>,
    /// `NOLOOP` sinks: the backends they hear of on their own connections.
    noloop: FxHashMap<SinkId, NoLoop>,
}

/// A `NOLOOP` sink's own reporting connections that are up.
struct NoLoop {
    /// Which set of connections is the sink's now (events of an earlier set are stale).
    generation: u64,
    up: Vec<std::sync::Arc<str>>,
}

/// One tracked key.
struct Tracked {
    sinks: Sinks,
    /// Its place in `order`.
    seq: u64,
}

impl Tracking {
    /// Any session tracking at all: the backends must report writes.
    pub fn active(&self) -> bool {
        !self.targets.is_empty()
    }

    /// `sink` starts tracking (again, with new options); `noloop`: the generation of the own
    /// connections it hears of writes on (they report as they come up, `own_up`).
    pub fn start(
        &mut self,
        sink: SinkId,
        target: Target,
        bcast: Option<Vec<Bytes>>,
        noloop: Option<u64>,
    ) {
        self.stop(sink);
        self.targets.insert(sink, target);
        if let Some(generation) = noloop {
            self.noloop.insert(
                sink,
                NoLoop {
                    generation,
                    up: Vec::new(),
                },
            );
        }
        if let Some(prefixes) = bcast {
            self.bcast.add(sink, prefixes);
        }
    }

    /// `sink` stops tracking: what it read is forgotten.
    pub fn stop(&mut self, sink: SinkId) {
        if self.targets.remove(&sink).is_none() {
            return;
        }
        self.noloop.remove(&sink);
        self.bcast.remove(sink);
        for key in self.read_by.remove(&sink).unwrap_or_default() {
            if let Some(t) = self.keys.get_mut(&key) {
                t.sinks.remove(sink);
                if t.sinks.is_empty() {
                    self.keys.remove(&key);
                }
            }
        }
        self.compact();
    }

    /// `sink` read `keys`: each will be invalidated for it once. Returns the invalidations
    /// of entries evicted to stay within `MAX_KEYS`.
    pub fn read(&mut self, sink: SinkId, keys: impl Iterator<Item = Bytes>) -> Vec<Delivery> {
        let mut evicted = Vec::new();
        for key in keys {
            if !self.keys.contains_key(&key) {
                if self.keys.len() >= MAX_KEYS {
                    self.evict_one(&mut evicted);
                }
                self.next_seq += 1;
                let seq = self.next_seq;
                self.order.push_back((seq, key.clone()));
                self.keys.insert(
                    key.clone(),
                    Tracked {
                        sinks: Sinks::default(),
                        seq,
                    },
                );
            }
            let t = self.keys.get_mut(&key).expect("inserted above");
            if t.sinks.insert(sink) {
                self.read_by.entry(sink).or_default().insert(key);
            }
        }
        self.compact();
        evicted
    }

    /// Drops the oldest tracked key, telling its sinks (as Redis does past
    /// `tracking-table-max-keys`).
    fn evict_one(&mut self, out: &mut Vec<Delivery>) {
        while let Some((seq, key)) = self.order.pop_front() {
            if self.keys.get(&key).is_some_and(|t| t.seq == seq) {
                let t = self.keys.remove(&key).expect("checked above");
                self.forget(&key, &t.sinks);
                for s in t.sinks.iter() {
                    self.tell(s, Some(&key), out);
                }
                return;
            }
        }
    }

    /// Removes `key` from what each of `sinks` read.
    fn forget(&mut self, key: &[u8], sinks: &Sinks) {
        for s in sinks.iter() {
            if let Some(read) = self.read_by.get_mut(&s) {
                read.remove(key);
            }
        }
    }

    /// Rebuilds `order` without its stale entries once they outnumber the live ones: paid
    /// for by the removals that made them stale.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.keys.len() + 64 {
            return;
        }
        let keys = &self.keys;
        self.order
            .retain(|(seq, k)| keys.get(k).is_some_and(|t| t.seq == *seq));
    }

    /// The message for `sink` about `key` (`None`: everything), if it takes messages.
    fn tell(&self, sink: SinkId, key: Option<&[u8]>, out: &mut Vec<Delivery>) {
        match key {
            Some(k) => self.tell_keys(sink, &[k], out),
            None => match self.targets.get(&sink) {
                Some(Target::Own) => out.push(Delivery::Own(sink, push(None))),
                Some(Target::Redirect(id)) => {
                    out.push(Delivery::Redirect(sink, *id, message(None)));
                }
                _ => {}
            },
        }
    }

    /// One message for `sink` about all of `keys`, if it takes messages.
    fn tell_keys(&self, sink: SinkId, keys: &[&[u8]], out: &mut Vec<Delivery>) {
        match self.targets.get(&sink) {
            Some(Target::Own) => out.push(Delivery::Own(sink, push(Some(keys)))),
            Some(Target::Redirect(id)) => {
                out.push(Delivery::Redirect(sink, *id, message(Some(keys))));
            }
            _ => {}
        }
    }

    /// Keys were written (`None`: the server flushed everything), as one report of the hub's
    /// connection to `from` says (`None`: no backend's report): the messages for every sink
    /// that cached one, but a `NOLOOP` sink that hears of `from` on its own connection. As
    /// from Redis, a key read in the other modes is a message of its own; a BCAST sink gets
    /// one message per prefix of its, with every key of the report under it.
    pub fn invalidate(&mut self, keys: Option<&[Bytes]>, from: Option<&str>) -> Vec<Delivery> {
        let mut out = Vec::new();
        let hears_itself = |noloop: &FxHashMap<SinkId, NoLoop>, s: SinkId| {
            from.is_some_and(|f| {
                noloop
                    .get(&s)
                    .is_some_and(|n| n.up.iter().any(|a| **a == *f))
            })
        };
        let Some(keys) = keys else {
            let sinks: Vec<SinkId> = self.targets.keys().copied().collect();
            for s in sinks {
                if !hears_itself(&self.noloop, s) {
                    self.invalidate_for(s, None, &mut out);
                }
            }
            return out;
        };
        for k in keys {
            let Some(mut t) = self.keys.remove(k) else {
                continue;
            };
            let mut told = Sinks::default();
            let mut kept = Sinks::default();
            for s in t.sinks.iter() {
                if hears_itself(&self.noloop, s) {
                    kept.insert(s);
                } else {
                    told.insert(s);
                }
            }
            self.forget(k, &told);
            for s in told.iter() {
                self.tell(s, Some(k), &mut out);
            }
            if !kept.is_empty() {
                t.sinks = kept;
                self.keys.insert(k.clone(), t);
            }
        }
        let mut groups = Groups::default();
        for k in keys {
            self.bcast.matching_under(k, |s, len| {
                if !hears_itself(&self.noloop, s) {
                    groups.add(s, len, k);
                }
            });
        }
        for ((s, _), keys) in groups.in_order() {
            self.tell_keys(s, &keys, &mut out);
        }
        self.compact();
        out
    }

    /// Keys were written (`None`: everything flushed), as one report of `sink`'s own
    /// connection says (`NOLOOP`: not by `sink`): its messages, as `invalidate` words them,
    /// for the keys it cached or tracks the prefix of.
    pub fn invalidate_for(
        &mut self,
        sink: SinkId,
        keys: Option<&[Bytes]>,
        out: &mut Vec<Delivery>,
    ) {
        let Some(keys) = keys else {
            for k in self.read_by.remove(&sink).unwrap_or_default() {
                if let Some(t) = self.keys.get_mut(&k) {
                    t.sinks.remove(sink);
                    if t.sinks.is_empty() {
                        self.keys.remove(&k);
                    }
                }
            }
            self.tell(sink, None, out);
            self.compact();
            return;
        };
        for k in keys {
            if let Some(t) = self.keys.get_mut(k)
                && t.sinks.remove(sink)
            {
                if t.sinks.is_empty() {
                    self.keys.remove(k);
                }
                if let Some(r) = self.read_by.get_mut(&sink) {
                    r.remove(k);
                }
                self.tell(sink, Some(k), out);
            }
        }
        let mut groups = Groups::default();
        for k in keys {
            self.bcast.matching_under(k, |s, len| {
                if s == sink {
                    groups.add(s, len, k);
                }
            });
        }
        for ((s, _), keys) in groups.in_order() {
            self.tell_keys(s, &keys, out);
        }
        self.compact();
    }

    /// `sink`'s own connection to `addr` (of `generation`) reports writes now. Whether that
    /// generation is still the sink's.
    pub fn own_up(&mut self, sink: SinkId, generation: u64, addr: &std::sync::Arc<str>) -> bool {
        match self.noloop.get_mut(&sink) {
            Some(n) if n.generation == generation => {
                if !n.up.contains(addr) {
                    n.up.push(addr.clone());
                }
                true
            }
            _ => false,
        }
    }

    /// `sink`'s own connection to `addr` broke: the hub's reports from `addr` are its again.
    pub fn own_down(&mut self, sink: SinkId, generation: u64, addr: &str) {
        if let Some(n) = self.noloop.get_mut(&sink)
            && n.generation == generation
        {
            n.up.retain(|a| **a != *addr);
        }
    }

    /// Whether `sink` still hears of writes on its connections of `generation`.
    pub fn is_own(&self, sink: SinkId, generation: u64) -> bool {
        self.noloop
            .get(&sink)
            .is_some_and(|n| n.generation == generation)
    }

    /// Every tracking sink's cache is to be dropped (a backend's report was lost): a null
    /// invalidation for each.
    pub fn flush_all(&mut self) -> Vec<Delivery> {
        self.invalidate(None, None)
    }

    /// `invalidate` for one key.
    #[cfg(test)]
    fn invalidate_one(&mut self, key: &[u8]) -> Vec<Delivery> {
        self.invalidate(Some(&[Bytes::copy_from_slice(key)]), None)
    }
}

/// `invalidate` push for some keys, or null for all.
fn push(keys: Option<&[&[u8]]>) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(INVALIDATE_HEAD);
    keys_array(keys, &mut out);
    out.freeze()
}

/// The head of a redirected invalidation, before its keys.
const MESSAGE_HEAD: &[u8] = b">3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n";
const INVALIDATE_HEAD: &[u8] = b">2\r\n$10\r\ninvalidate\r\n";

/// `message __redis__:invalidate [keys]` (a push; written as `*` to a RESP2 client).
fn message(keys: Option<&[&[u8]]>) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(MESSAGE_HEAD);
    keys_array(keys, &mut out);
    out.freeze()
}

/// What a RESP3 tracking client gets from Redis in place of an invalidation for a redirect
/// target that is gone: `tracking-redir-broken id` (a RESP2 one gets nothing).
pub fn redirect_broken(id: u64) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(REDIRECT_BROKEN_HEAD);
    out.put_slice(b":");
    out.put_slice(itoa::Buffer::new().format(id).as_bytes());
    out.put_slice(b"\r\n");
    out.freeze()
}

const REDIRECT_BROKEN_HEAD: &[u8] = b">2\r\n$21\r\ntracking-redir-broken\r\n";

/// Whether `msg` is a `redirect_broken` push.
pub fn is_redirect_broken(msg: &[u8]) -> bool {
    msg.starts_with(REDIRECT_BROKEN_HEAD)
}

/// A redirected invalidation (`message`) as a RESP3 target gets it from Redis: an
/// `invalidate` push. `None` for anything else, a message published to
/// `__redis__:invalidate` included (its payload is a string, never an array or null).
pub fn for_resp3_target(msg: &[u8]) -> Option<Bytes> {
    let keys = msg.strip_prefix(MESSAGE_HEAD)?;
    if !matches!(keys.first(), Some(b'*' | b'_')) {
        return None;
    }
    Some([INVALIDATE_HEAD, keys].concat().into())
}

fn keys_array(keys: Option<&[&[u8]]>, out: &mut BytesMut) {
    let Some(keys) = keys else {
        out.put_slice(b"_\r\n");
        return;
    };
    let mut n = itoa::Buffer::new();
    out.put_slice(b"*");
    out.put_slice(n.format(keys.len()).as_bytes());
    out.put_slice(b"\r\n");
    for k in keys {
        out.put_slice(b"$");
        out.put_slice(n.format(k.len()).as_bytes());
        out.put_slice(b"\r\n");
        out.put_slice(k);
        out.put_slice(b"\r\n");
    }
}

/// The keys of one report for each (BCAST sink, prefix of its they are under).
#[derive(Default)]
struct Groups<'k> {
    list: Vec<(Group<'k>, Vec<&'k [u8]>)>,
    at: FxHashMap<Group<'k>, usize>,
}

/// A BCAST sink and one prefix of its.
type Group<'k> = (SinkId, &'k [u8]);

impl<'k> Groups<'k> {
    /// `key` for `sink`, under its prefix of `prefix_len` bytes.
    fn add(&mut self, sink: SinkId, prefix_len: usize, key: &'k [u8]) {
        let group = (sink, &key[..prefix_len]);
        let i = *self.at.entry(group).or_insert_with(|| {
            self.list.push((group, Vec::new()));
            self.list.len() - 1
        });
        self.list[i].1.push(key);
    }

    /// The groups by prefix, as Redis sends them (its table of prefixes is sorted); the keys
    /// of each in the report's order (a server reports them sorted).
    fn in_order(mut self) -> Vec<(Group<'k>, Vec<&'k [u8]>)> {
        self.list.sort_by(|a, b| a.0.1.cmp(b.0.1));
        self.list
    }
}

/// The keys of an `invalidate` push from a backend (`None`: a flush of everything).
pub fn invalidated_keys(parts: &[&[u8]]) -> Option<Vec<Bytes>> {
    let arr = parts.get(1)?;
    if arr.starts_with(b"_") || arr.starts_with(b"*-1") {
        return None;
    }
    let keys = tessera_resp::split_aggregate(arr)?;
    Some(
        keys.iter()
            .filter_map(|k| bulk_body(k).map(Bytes::copy_from_slice))
            .collect(),
    )
}

fn bulk_body(b: &[u8]) -> Option<&[u8]> {
    if b.first() != Some(&b'$') {
        return None;
    }
    let start = memchr::memchr(b'\n', b)? + 1;
    b.get(start..b.len().checked_sub(2)?)
}

/// Redirect targets of the whole proxy, by client id: clients subscribed to
/// `__redis__:invalidate`, which any worker's tracking sessions may name in `REDIRECT`.
#[derive(Default)]
pub struct Redirects {
    targets: Mutex<FxHashMap<u64, mpsc::Sender<Bytes>>>,
}

impl Redirects {
    /// Client `id` receives invalidations from now on.
    pub fn register(&self, id: u64) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(REDIRECT_QUEUE);
        self.lock().insert(id, tx);
        rx
    }

    pub fn unregister(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Queues `msg` for client `id` if it is a target; a full queue drops it (logged).
    /// Whether `id` is a target.
    pub fn send(&self, id: u64, msg: Bytes) -> bool {
        let targets = self.lock();
        let Some(tx) = targets.get(&id) else {
            return false;
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(msg) {
            tracing::warn!(
                client = id,
                "invalidation dropped: the redirect target does not read"
            );
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<u64, mpsc::Sender<Bytes>>> {
        self.targets.lock().expect("redirects lock poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(d: &[Delivery]) -> Vec<(SinkId, Vec<u8>)> {
        d.iter()
            .filter_map(|d| match d {
                Delivery::Own(s, b) => Some((*s, b.to_vec())),
                Delivery::Redirect(..) => None,
            })
            .collect()
    }

    #[test]
    fn a_read_key_is_invalidated_once_and_bcast_by_prefix() {
        let mut t = Tracking::default();
        t.start(1, Target::Own, None, None);
        t.start(2, Target::Own, Some(vec![Bytes::from("user:")]), None);
        t.start(3, Target::Redirect(42), None, None);
        t.read(1, [Bytes::from("user:1")].into_iter());
        t.read(3, [Bytes::from("user:1")].into_iter());
        let d = t.invalidate_one(b"user:1");
        let mut got = own(&d);
        got.sort();
        let expect = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nuser:1\r\n".to_vec();
        assert_eq!(got, vec![(1, expect.clone()), (2, expect)]);
        assert!(d.iter().any(|d| matches!(d, Delivery::Redirect(3, 42, m)
            if m.starts_with(b">3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n"))));
        // Forgotten once invalidated (default mode); BCAST keeps hearing of its prefix.
        let d = t.invalidate_one(b"user:1");
        assert_eq!(own(&d).iter().map(|(s, _)| *s).collect::<Vec<_>>(), [2]);
        assert!(t.invalidate_one(b"other").is_empty());
        t.stop(2);
        assert!(t.invalidate_one(b"user:1").is_empty());
    }

    #[test]
    fn one_report_is_one_message_per_bcast_prefix_and_one_per_key_read() {
        let mut t = Tracking::default();
        t.start(
            1,
            Target::Own,
            Some(vec![Bytes::from("a:"), Bytes::from("b:")]),
            None,
        );
        t.start(2, Target::Own, Some(vec![]), None);
        t.start(3, Target::Own, None, None);
        t.read(3, [Bytes::from("a:1"), Bytes::from("a:2")].into_iter());
        let keys = ["a:1", "b:1", "a:2", "c:1"].map(Bytes::from);
        let mut got = own(&t.invalidate(Some(&keys), None));
        got.sort();
        assert_eq!(
            got,
            [
                (1, push(Some(&[b"b:1"])).to_vec()),
                (1, push(Some(&[b"a:1", b"a:2"])).to_vec()),
                (2, push(Some(&[b"a:1", b"b:1", b"a:2", b"c:1"])).to_vec()),
                (3, push(Some(&[b"a:1"])).to_vec()),
                (3, push(Some(&[b"a:2"])).to_vec()),
            ]
        );
        // A NOLOOP sink's own report concerns it alone, worded the same way.
        t.start(4, Target::Own, Some(vec![Bytes::from("a:")]), Some(9));
        let mut out = Vec::new();
        t.invalidate_for(4, Some(&keys), &mut out);
        assert_eq!(own(&out), [(4, push(Some(&[b"a:1", b"a:2"])).to_vec())]);
    }

    #[test]
    fn the_table_is_bounded_by_invalidating_what_it_drops() {
        let mut t = Tracking::default();
        t.start(1, Target::Own, None, None);
        let keys = (0..MAX_KEYS).map(|i| Bytes::from(format!("k{i}")));
        assert!(t.read(1, keys).is_empty());
        let d = t.read(1, [Bytes::from("one-more")].into_iter());
        assert_eq!(d.len(), 1, "one entry made room, its sink told");
        assert_eq!(t.keys.len(), MAX_KEYS);
    }

    #[test]
    fn a_session_that_stops_or_restarts_leaves_everyone_elses_entries_alone() {
        let mut t = Tracking::default();
        t.start(1, Target::Own, None, None);
        t.start(2, Target::Own, None, None);
        t.read(1, (0..1000).map(|i| Bytes::from(format!("k{i}"))));
        t.read(2, [Bytes::from("k1"), Bytes::from("mine")].into_iter());
        // A restart (CLIENT TRACKING ON again) forgets only what sink 2 read.
        t.start(2, Target::Own, None, None);
        assert_eq!(t.keys.len(), 1000);
        assert!(t.read_by.get(&2).is_none_or(|r| r.is_empty()));
        assert_eq!(
            own(&t.invalidate_one(b"k1")),
            [(1, push(Some(&[b"k1"])).to_vec())]
        );
        t.stop(1);
        assert!(t.keys.is_empty() && t.read_by.is_empty());
        // Entries come and go; the eviction order never holds more than its bound.
        for round in 0..50 {
            let keys: Vec<Bytes> = (0..100).map(|i| Bytes::from(format!("r{i}"))).collect();
            t.read(2, keys.iter().cloned());
            for k in &keys {
                t.invalidate_one(k);
            }
            assert!(t.order.len() <= 2 * t.keys.len() + 64, "round {round}");
        }
    }

    #[test]
    fn the_oldest_entry_is_evicted_first() {
        let mut t = Tracking::default();
        t.start(1, Target::Own, None, None);
        t.read(1, (0..MAX_KEYS).map(|i| Bytes::from(format!("k{i}"))));
        t.invalidate_one(b"k0");
        // Room was made by the invalidation: nothing evicted.
        assert!(t.read(1, [Bytes::from("new1")].into_iter()).is_empty());
        let d = t.read(1, [Bytes::from("new2")].into_iter());
        assert_eq!(own(&d), [(1, push(Some(&[b"k1"])).to_vec())]);
    }

    #[test]
    fn backend_invalidations_are_parsed() {
        let parts: [&[u8]; 2] = [b"$10\r\ninvalidate\r\n", b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n"];
        assert_eq!(
            invalidated_keys(&parts),
            Some(vec![Bytes::from("a"), Bytes::from("bc")])
        );
        let flush: [&[u8]; 2] = [b"$10\r\ninvalidate\r\n", b"_\r\n"];
        assert_eq!(invalidated_keys(&flush), None);
    }
}
