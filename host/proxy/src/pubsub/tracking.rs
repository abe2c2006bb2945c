//! Client-side caching (`CLIENT TRACKING`) for one worker: the keys its tracking sessions
//! have read (default, OPTIN and OPTOUT modes) and the prefixes of its BCAST sessions, and the
//! invalidation messages a write turns into. Every backend tells each hub of every key
//! written there (the hub's subscriber connections run `CLIENT TRACKING ON BCAST`), so a write
//! through any proxy — or straight to a server, or a key moved off a slot's old owner —
//! invalidates what the clients of every proxy cached.
//!
//! In default mode a key is forgotten once invalidated, as Redis does; the table is bounded
//! (`MAX_KEYS`): past it some entry is invalidated to make room, as Redis does past
//! `tracking-table-max-keys`. Invalidations go into the session's own inbox (RESP3
//! `invalidate` pushes), or for `REDIRECT id` to that client's redirect queue, whichever worker
//! it is on, as `__redis__:invalidate` messages ([`Redirects`]).

use std::sync::Mutex;

use bytes::{BufMut, Bytes, BytesMut};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use tokio::sync::mpsc;

use super::SinkId;

/// Keys a worker tracks for its default, OPTIN and OPTOUT sessions, together.
pub const MAX_KEYS: usize = 100_000;
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
    Redirect(u64, Bytes),
}

/// A worker's tracking state.
#[derive(Default)]
pub struct Tracking {
    keys: FxHashMap<Bytes, SmallVec<[SinkId; 2]>>,
    /// BCAST sinks and their prefixes (none: every key).
    bcast: FxHashMap<SinkId, Vec<Bytes>>,
    targets: FxHashMap<SinkId, Target>,
}

impl Tracking {
    /// Any session tracking at all: the backends must report writes.
    pub fn active(&self) -> bool {
        !self.targets.is_empty()
    }

    /// `sink` starts tracking (again, with new options).
    pub fn start(&mut self, sink: SinkId, target: Target, bcast: Option<Vec<Bytes>>) {
        self.stop(sink);
        self.targets.insert(sink, target);
        if let Some(prefixes) = bcast {
            self.bcast.insert(sink, prefixes);
        }
    }

    /// `sink` stops tracking: what it read is forgotten.
    pub fn stop(&mut self, sink: SinkId) {
        if self.targets.remove(&sink).is_none() {
            return;
        }
        self.bcast.remove(&sink);
        self.keys.retain(|_, sinks| {
            sinks.retain(|s| *s != sink);
            !sinks.is_empty()
        });
    }

    /// `sink` read `keys`: each will be invalidated for it once. Returns the invalidations
    /// of entries evicted to stay within `MAX_KEYS`.
    pub fn read(&mut self, sink: SinkId, keys: impl Iterator<Item = Bytes>) -> Vec<Delivery> {
        let mut evicted = Vec::new();
        for key in keys {
            if !self.keys.contains_key(&key) && self.keys.len() >= MAX_KEYS {
                let victim = self.keys.keys().next().cloned();
                if let Some(sinks) = victim.and_then(|v| self.keys.remove(&v).map(|s| (v, s))) {
                    let (v, sinks) = sinks;
                    for s in sinks {
                        match self.targets.get(&s) {
                            Some(Target::Own) => evicted.push(Delivery::Own(s, push(Some(&v)))),
                            Some(Target::Redirect(id)) => {
                                evicted.push(Delivery::Redirect(*id, message(Some(&v))))
                            }
                            _ => {}
                        }
                    }
                }
            }
            let sinks = self.keys.entry(key).or_default();
            if !sinks.contains(&sink) {
                sinks.push(sink);
            }
        }
        evicted
    }

    /// A key was written (`None`: the server flushed everything): the messages for every
    /// sink that cached it.
    pub fn invalidate(&mut self, key: Option<&[u8]>) -> Vec<Delivery> {
        let mut out = Vec::new();
        let mut send = |sink: SinkId, targets: &FxHashMap<SinkId, Target>| match targets.get(&sink)
        {
            Some(Target::Own) => out.push(Delivery::Own(sink, push(key))),
            Some(Target::Redirect(id)) => out.push(Delivery::Redirect(*id, message(key))),
            _ => {}
        };
        match key {
            Some(k) => {
                if let Some(sinks) = self.keys.remove(k) {
                    for s in sinks {
                        send(s, &self.targets);
                    }
                }
                for (s, prefixes) in &self.bcast {
                    if prefixes.is_empty() || prefixes.iter().any(|p| k.starts_with(p)) {
                        send(*s, &self.targets);
                    }
                }
            }
            None => {
                self.keys.clear();
                for s in self.targets.keys() {
                    send(*s, &self.targets);
                }
            }
        }
        out
    }

    /// Every tracking sink's cache is to be dropped (a backend's report was lost): a null
    /// invalidation for each.
    pub fn flush_all(&mut self) -> Vec<Delivery> {
        self.invalidate(None)
    }
}

/// `invalidate` push for one key, or null for all.
fn push(key: Option<&[u8]>) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(b">2\r\n$10\r\ninvalidate\r\n");
    keys_array(key, &mut out);
    out.freeze()
}

/// `message __redis__:invalidate [key]` (a push; written as `*` to a RESP2 client).
fn message(key: Option<&[u8]>) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(b">3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    keys_array(key, &mut out);
    out.freeze()
}

fn keys_array(key: Option<&[u8]>, out: &mut BytesMut) {
    match key {
        Some(k) => {
            out.put_slice(b"*1\r\n$");
            out.put_slice(itoa::Buffer::new().format(k.len()).as_bytes());
            out.put_slice(b"\r\n");
            out.put_slice(k);
            out.put_slice(b"\r\n");
        }
        None => out.put_slice(b"_\r\n"),
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
    pub fn send(&self, id: u64, msg: Bytes) {
        let targets = self.lock();
        if let Some(tx) = targets.get(&id)
            && let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(msg)
        {
            tracing::warn!(
                client = id,
                "invalidation dropped: the redirect target does not read"
            );
        }
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
        t.start(1, Target::Own, None);
        t.start(2, Target::Own, Some(vec![Bytes::from("user:")]));
        t.start(3, Target::Redirect(42), None);
        t.read(1, [Bytes::from("user:1")].into_iter());
        t.read(3, [Bytes::from("user:1")].into_iter());
        let d = t.invalidate(Some(b"user:1"));
        let mut got = own(&d);
        got.sort();
        let expect = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nuser:1\r\n".to_vec();
        assert_eq!(got, vec![(1, expect.clone()), (2, expect)]);
        assert!(d.iter().any(|d| matches!(d, Delivery::Redirect(42, m)
            if m.starts_with(b">3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n"))));
        // Forgotten once invalidated (default mode); BCAST keeps hearing of its prefix.
        let d = t.invalidate(Some(b"user:1"));
        assert_eq!(own(&d).iter().map(|(s, _)| *s).collect::<Vec<_>>(), [2]);
        assert!(t.invalidate(Some(b"other")).is_empty());
        t.stop(2);
        assert!(t.invalidate(Some(b"user:1")).is_empty());
    }

    #[test]
    fn the_table_is_bounded_by_invalidating_what_it_drops() {
        let mut t = Tracking::default();
        t.start(1, Target::Own, None);
        let keys = (0..MAX_KEYS).map(|i| Bytes::from(format!("k{i}")));
        assert!(t.read(1, keys).is_empty());
        let d = t.read(1, [Bytes::from("one-more")].into_iter());
        assert_eq!(d.len(), 1, "one entry made room, its sink told");
        assert_eq!(t.keys.len(), MAX_KEYS);
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
