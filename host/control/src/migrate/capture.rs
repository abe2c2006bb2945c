//! What a source's replication stream says about the slots moving off it: which of their
//! keys were written since the last copy round. The stream carries every change the source
//! makes, whoever made it and however — a client's command, a script's or a function's
//! effects (Redis 7 replicates effects), a transaction, a key that expired or was evicted (a
//! `DEL`), a `FLUSHALL` — so a key the stream does not name has not changed.
//!
//! A big key (one the copy sends in chunks, `mark_big`) is followed finer: a write that names
//! its elements — `HSET`/`HDEL`/`HINCRBY` of fields, `SADD`/`SREM` of members, `ZADD`/`ZREM`/
//! `ZINCRBY` of members, `PEXPIREAT`/`PERSIST` of its TTL — records those elements only, so
//! the next round sets just them (a hash written all the time converges instead of being
//! copied whole round after round). Any other write to it changes the whole key.
//!
//! Every client database is followed: a key is kept with its backend database (`DbKey`,
//! from the stream's `SELECT`s). Tessera's internal database is not: nothing there is a
//! client's key. A stream joined mid-way (`PSYNC` from the source's offset) does not say
//! which database it is in until its next `SELECT`, which a source sends only when the
//! database of what it propagates changes: the copier writes a marker key in the internal
//! database right after it joins (`set_marker`), which makes the next client write come with
//! its `SELECT`; a write seen before either is recorded in every client database.
//!
//! Pure: it is fed decoded commands (`observe`) by the copier's replica connection.
//! Bounded: the changed keys it keeps are counted in bytes; past the bound, the slot with the
//! most is given up (`lost`), and its copy starts over rather than the capture growing.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use rustc_hash::{FxHashMap, FxHashSet};
use tessera_model::command::CommandTable;
use tessera_model::migration::INTERNAL_DB;
use tessera_model::router::{SLOTS, SlotId};
use tessera_resp::Request;

/// What one kept key costs beyond its bytes (the set's entry and the `Bytes`).
const ENTRY_OVERHEAD: usize = 64;

/// A key of one backend database: what the copy reads, writes and keeps track of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DbKey {
    pub db: u32,
    pub name: Bytes,
}

impl DbKey {
    pub fn new(db: u32, name: &[u8]) -> Self {
        Self {
            db,
            name: Bytes::copy_from_slice(name),
        }
    }

    pub fn slot(&self) -> u16 {
        SlotId::of_key(&self.name).0
    }

    /// What a key costs the capture's bound.
    fn size(&self) -> usize {
        self.name.len() + ENTRY_OVERHEAD
    }
}

impl std::fmt::Display for DbKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = String::from_utf8_lossy(&self.name);
        if self.db == 0 {
            write!(f, "{name}")
        } else {
            write!(f, "{name} (backend database {})", self.db)
        }
    }
}

/// Changed keys of the moving slots, since the last [`Capture::take`].
pub struct Capture {
    /// The moving slots (a bit per slot).
    moving: Box<[bool; SLOTS]>,
    changed: FxHashMap<u16, FxHashSet<DbKey>>,
    /// Bytes the changed keys hold, and the most they may.
    held: usize,
    limit: usize,
    /// Slots whose changes can no longer be told (the bound was reached, or the source was
    /// flushed): their copy starts over.
    lost: BTreeSet<u16>,
    /// The database the stream's commands apply to (`SELECT`); `None` until the stream has
    /// said.
    db: Option<u32>,
    /// The source's databases (`databases`): a write in an unknown database may be in any.
    databases: u32,
    /// The key whose write says the stream is in the internal database (`set_marker`).
    marker: Option<Bytes>,
    /// The replication offset of the last byte observed.
    offset: u64,
    /// Commands seen that changed a moving slot, for the status.
    writes: u64,
    /// Keys copied in chunks: followed element by element.
    big: FxHashSet<DbKey>,
    /// Per slot, the elements of big keys written since the last take.
    elements: FxHashMap<u16, FxHashMap<DbKey, Elements>>,
}

/// The written elements of a big key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elements {
    /// Hash fields, set or sorted-set members.
    pub names: FxHashSet<Bytes>,
    /// Its expire time changed.
    pub ttl: bool,
}

impl Capture {
    /// A capture of `slots`, from the stream at `offset`, keeping at most `limit` bytes of
    /// changed keys.
    pub fn new(slots: impl IntoIterator<Item = u16>, offset: u64, limit: usize) -> Self {
        let mut moving = Box::new([false; SLOTS]);
        for s in slots {
            if let Some(m) = moving.get_mut(s as usize) {
                *m = true;
            }
        }
        Self {
            moving,
            changed: FxHashMap::default(),
            held: 0,
            limit,
            lost: BTreeSet::new(),
            db: None,
            databases: 1,
            marker: None,
            offset,
            writes: 0,
            big: FxHashSet::default(),
            elements: FxHashMap::default(),
        }
    }

    /// The source has `databases` databases, and writes `marker` in the internal database:
    /// seeing it tells the capture which database the stream is in.
    pub fn set_marker(&mut self, databases: u32, marker: &[u8]) {
        self.databases = databases.max(1);
        self.marker = Some(Bytes::copy_from_slice(marker));
    }

    /// `key` is copied in chunks: its later writes are recorded element by element.
    pub fn mark_big(&mut self, key: &DbKey) {
        self.big.insert(key.clone());
    }

    /// The replication offset of the last byte observed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Writes to moving slots seen so far.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Bytes the changed keys hold now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Stops following `slot` (handed off, aborted): its changed keys are dropped.
    pub fn forget(&mut self, slot: u16) {
        if let Some(m) = self.moving.get_mut(slot as usize) {
            *m = false;
        }
        self.drop_slot(slot);
        self.lost.remove(&slot);
    }

    /// One command of the stream, `len` bytes of it.
    pub fn observe(&mut self, req: &Request, len: u64) {
        self.offset += len;
        let name = req.arg(0);
        if name.eq_ignore_ascii_case(b"SELECT") {
            // A malformed SELECT leaves nothing trustworthy about which database follows.
            match req
                .get(1)
                .and_then(|d| std::str::from_utf8(d).ok()?.parse().ok())
            {
                Some(db) => self.db = Some(db),
                None => self.lose_all(),
            }
            return;
        }
        if name.eq_ignore_ascii_case(b"FLUSHALL") || name.eq_ignore_ascii_case(b"SWAPDB") {
            self.lose_all();
            return;
        }
        // MOVE and COPY … DB write into another database: the key they name there changed.
        if let Some((db, key)) = into_other_db(req) {
            self.changed_key(db, key);
        }
        if self.marker.is_some() && req.get(1) == self.marker.as_deref() {
            self.db = Some(INTERNAL_DB);
            return;
        }
        if self.db == Some(INTERNAL_DB) {
            return;
        }
        if name.eq_ignore_ascii_case(b"FLUSHDB") {
            self.lose_all();
            return;
        }
        let table = CommandTable::get();
        let Ok(cmd) = table.lookup(req) else {
            // A command this proxy's table does not know (a module's, a newer server's): its
            // keys cannot be told, so nothing the source holds can be trusted to be copied.
            self.lose_all();
            return;
        };
        let keys = cmd.key_indices(req);
        let Some(db) = self.db else {
            for db in (0..self.databases).filter(|&d| d != INTERNAL_DB) {
                for &i in &keys {
                    self.changed_key(db, req.arg(i as usize));
                }
            }
            return;
        };
        if !self.big.is_empty()
            && let Some(first) = keys.first()
            && self.moving[SlotId::of_key(req.arg(*first as usize)).0 as usize]
            && self.big.contains(&DbKey::new(db, req.arg(*first as usize)))
            && self.changed_elements(req, db, cmd.name, *first as usize)
        {
            return;
        }
        for i in keys {
            self.changed_key(db, req.arg(i as usize));
        }
    }

    /// Records the elements a write names of the big key at `at`; false when the write is not
    /// one that names elements (the whole key is changed then).
    fn changed_elements(&mut self, req: &Request, db: u32, name: &str, at: usize) -> bool {
        let argc = req.argc();
        let names: Vec<usize> = match name {
            "HSET" | "HMSET" => (at + 1..argc).step_by(2).collect(),
            "HSETNX" | "HINCRBY" | "HINCRBYFLOAT" => vec![at + 1],
            "HDEL" | "SADD" | "SREM" | "ZREM" => (at + 1..argc).collect(),
            "ZINCRBY" => vec![at + 2],
            "ZADD" => {
                // Options first (NX XX GT LT CH INCR), then score member pairs.
                let opts = (at + 1..argc)
                    .take_while(|&i| {
                        let a = req.arg(i);
                        [&b"NX"[..], b"XX", b"GT", b"LT", b"CH", b"INCR"]
                            .iter()
                            .any(|o| a.eq_ignore_ascii_case(o))
                    })
                    .count();
                (at + 2 + opts..argc).step_by(2).collect()
            }
            "PEXPIREAT" | "PERSIST" => Vec::new(),
            _ => return false,
        };
        let slot = SlotId::of_key(req.arg(at)).0;
        if !self.moving[slot as usize] || self.lost.contains(&slot) {
            return true;
        }
        let key = DbKey::new(db, req.arg(at));
        // A key changed whole meanwhile is copied whole: its elements add nothing.
        if self.changed.get(&slot).is_some_and(|c| c.contains(&key)) {
            return true;
        }
        self.writes += 1;
        let e = self
            .elements
            .entry(slot)
            .or_default()
            .entry(key)
            .or_default();
        if names.is_empty() {
            e.ttl = true;
        }
        let mut grew = 0;
        for i in names {
            if i < argc && e.names.insert(Bytes::copy_from_slice(req.arg(i))) {
                grew += req.arg(i).len() + ENTRY_OVERHEAD;
            }
        }
        self.held += grew;
        self.enforce_limit();
        true
    }

    fn changed_key(&mut self, db: u32, key: &[u8]) {
        if db == INTERNAL_DB {
            return;
        }
        // Checked before the key is copied: most writes are to slots that are not moving.
        let slot = SlotId::of_key(key).0;
        if !self.moving[slot as usize] || self.lost.contains(&slot) {
            return;
        }
        let key = DbKey::new(db, key);
        self.writes += 1;
        // Copied whole: what was recorded of its elements is covered.
        if let Some(by_key) = self.elements.get_mut(&slot)
            && let Some(e) = by_key.remove(&key)
        {
            self.held -= elements_size(&e);
        }
        let size = key.size();
        if self.changed.entry(slot).or_default().insert(key) {
            self.held += size;
        }
        self.enforce_limit();
    }

    /// Past the bound, the slot holding the most is lost.
    fn enforce_limit(&mut self) {
        while self.held > self.limit {
            let busiest = self
                .changed
                .iter()
                .map(|(s, k)| (*s, k.len()))
                .chain(
                    self.elements
                        .iter()
                        .map(|(s, e)| (*s, e.values().map(|x| x.names.len() + 1).sum())),
                )
                .max_by_key(|(_, n)| *n);
            let Some((slot, _)) = busiest else {
                break;
            };
            self.drop_slot(slot);
            self.lost.insert(slot);
        }
    }

    /// The keys of `slots` changed since the last take (and forgets them): the next round's
    /// work. Slots lost meanwhile are listed apart.
    pub fn take(&mut self, slots: &BTreeSet<u16>) -> Taken {
        let mut keys = BTreeMap::new();
        let mut elements = BTreeMap::new();
        for &slot in slots {
            if let Some(set) = self.changed.remove(&slot) {
                self.held -= set.iter().map(DbKey::size).sum::<usize>();
                keys.insert(slot, set.into_iter().collect());
            }
            if let Some(by_key) = self.elements.remove(&slot)
                && !by_key.is_empty()
            {
                self.held -= by_key.values().map(elements_size).sum::<usize>();
                elements.insert(slot, by_key.into_iter().collect());
            }
        }
        let lost = slots.intersection(&self.lost).copied().collect();
        Taken {
            keys,
            elements,
            lost,
        }
    }

    /// Every moving slot is lost: a flush, a database swap, a command whose keys are unknown.
    fn lose_all(&mut self) {
        for slot in 0..SLOTS as u16 {
            if self.moving[slot as usize] {
                self.drop_slot(slot);
                self.lost.insert(slot);
            }
        }
    }

    fn drop_slot(&mut self, slot: u16) {
        if let Some(set) = self.changed.remove(&slot) {
            self.held -= set.iter().map(DbKey::size).sum::<usize>();
        }
        if let Some(by_key) = self.elements.remove(&slot) {
            self.held -= by_key.values().map(elements_size).sum::<usize>();
        }
    }

    /// Starts following `slot` (again, after a loss: afresh).
    pub fn follow(&mut self, slot: u16) {
        if let Some(m) = self.moving.get_mut(slot as usize) {
            *m = true;
        }
        self.lost.remove(&slot);
        self.drop_slot(slot);
    }
}

/// The database and key `MOVE key db` or `COPY src dst … DB db` writes into.
fn into_other_db(req: &Request) -> Option<(u32, &[u8])> {
    let name = req.arg(0);
    let db = |d: &[u8]| std::str::from_utf8(d).ok()?.parse::<u32>().ok();
    if name.eq_ignore_ascii_case(b"MOVE") {
        return Some((db(req.get(2)?)?, req.get(1)?));
    }
    if name.eq_ignore_ascii_case(b"COPY") {
        let at = (3..req.argc()).find(|&i| req.arg(i).eq_ignore_ascii_case(b"DB"))?;
        return Some((db(req.get(at + 1)?)?, req.get(2)?));
    }
    None
}

/// What a big key's recorded elements hold of the bound.
fn elements_size(e: &Elements) -> usize {
    e.names.iter().map(|n| n.len() + ENTRY_OVERHEAD).sum()
}

/// A round's work, taken from the capture.
#[derive(Debug, Default)]
pub struct Taken {
    /// Changed keys per slot.
    pub keys: BTreeMap<u16, Vec<DbKey>>,
    /// Per slot, big keys whose written elements (only) are to be copied.
    pub elements: BTreeMap<u16, Vec<(DbKey, Elements)>>,
    /// Slots whose changes could not be kept: their copy starts over.
    pub lost: BTreeSet<u16>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> (Request, u64) {
        let r = Request::from_args(args);
        let n = r.as_bytes().len() as u64;
        (r, n)
    }

    fn observe(c: &mut Capture, args: &[&str]) {
        let (r, n) = req(args);
        c.observe(&r, n);
    }

    fn slot(key: &str) -> u16 {
        SlotId::of_key(key.as_bytes()).0
    }

    fn all() -> BTreeSet<u16> {
        (0..SLOTS as u16).collect()
    }

    #[test]
    fn writes_to_moving_slots_are_kept_per_slot_and_taken_once() {
        let (a, b) = ("{a}x", "{b}y");
        let mut c = Capture::new([slot(a)], 100, 1 << 20);
        observe(&mut c, &["SET", a, "1"]);
        observe(&mut c, &["SET", b, "1"]);
        observe(&mut c, &["DEL", a, b]);
        // A script's effects come as the commands it ran, in MULTI/EXEC.
        observe(&mut c, &["MULTI"]);
        observe(&mut c, &["HSET", "{a}h", "f", "v"]);
        observe(&mut c, &["EXEC"]);
        let t = c.take(&all());
        let keys: BTreeSet<&[u8]> = t.keys[&slot(a)].iter().map(|k| &k.name[..]).collect();
        assert_eq!(keys, BTreeSet::from([&b"{a}x"[..], b"{a}h"]));
        assert!(!t.keys.contains_key(&slot(b)), "not a moving slot");
        assert!(c.take(&all()).keys.is_empty(), "taken once");
        assert!(c.offset() > 100);
    }

    #[test]
    fn every_client_database_is_followed_and_the_internal_one_is_not() {
        let a = "{a}x";
        let mut c = Capture::new([slot(a)], 0, 1 << 20);
        observe(&mut c, &["SELECT", "1"]);
        observe(&mut c, &["SET", a, "1"]);
        observe(&mut c, &["FLUSHDB"]);
        assert!(c.take(&all()).keys.is_empty() && c.take(&all()).lost.is_empty());
        // … but a key moved or copied from there into a client database is a change there.
        observe(&mut c, &["MOVE", a, "0"]);
        observe(&mut c, &["COPY", "src", "{a}dst", "DB", "3"]);
        let keys: BTreeSet<DbKey> = c.take(&all()).keys[&slot(a)].iter().cloned().collect();
        assert_eq!(
            keys,
            BTreeSet::from([DbKey::new(0, a.as_bytes()), DbKey::new(3, b"{a}dst")])
        );
        // The same name in two databases is two keys; MOVE changes it in both.
        observe(&mut c, &["SELECT", "4"]);
        observe(&mut c, &["SET", a, "1"]);
        observe(&mut c, &["SELECT", "0"]);
        observe(&mut c, &["SET", a, "1"]);
        observe(&mut c, &["MOVE", "{a}m", "5"]);
        let keys: BTreeSet<DbKey> = c.take(&all()).keys[&slot(a)].iter().cloned().collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                DbKey::new(0, a.as_bytes()),
                DbKey::new(4, a.as_bytes()),
                DbKey::new(0, b"{a}m"),
                DbKey::new(5, b"{a}m"),
            ])
        );
        // A client database flushed, or every one, loses every slot.
        observe(&mut c, &["SELECT", "4"]);
        observe(&mut c, &["FLUSHDB"]);
        assert_eq!(c.take(&all()).lost, BTreeSet::from([slot(a)]));
        c.follow(slot(a));
        observe(&mut c, &["SET", a, "1"]);
        observe(&mut c, &["FLUSHALL"]);
        let t = c.take(&all());
        assert!(t.keys.is_empty());
        assert_eq!(t.lost, BTreeSet::from([slot(a)]));
        c.follow(slot(a));
        observe(&mut c, &["SET", a, "2"]);
        assert_eq!(c.take(&all()).keys[&slot(a)].len(), 1);
    }

    #[test]
    fn a_stream_joined_mid_way_is_in_every_database_until_it_says_which() {
        let a = "{a}x";
        let mut c = Capture::new([slot(a)], 0, 1 << 20);
        c.set_marker(4, b"__tessera:capture:1");
        observe(&mut c, &["SET", a, "1"]);
        let keys: BTreeSet<u32> = c.take(&all()).keys[&slot(a)].iter().map(|k| k.db).collect();
        assert_eq!(keys, BTreeSet::from([0, 2, 3]), "every client database");
        // The marker's write: the stream is in the internal database from there.
        observe(&mut c, &["SET", "__tessera:capture:1", "1", "PXAT", "1"]);
        observe(&mut c, &["SET", a, "1"]);
        assert!(c.take(&all()).keys.is_empty());
        observe(&mut c, &["SELECT", "3"]);
        observe(&mut c, &["SET", a, "1"]);
        assert_eq!(
            c.take(&all()).keys[&slot(a)],
            vec![DbKey::new(3, a.as_bytes())]
        );
    }

    #[test]
    fn a_command_whose_keys_cannot_be_told_loses_every_slot() {
        let mut c = Capture::new([slot("k")], 0, 1 << 20);
        observe(&mut c, &["MODULE.WRITE", "k"]);
        assert_eq!(c.take(&all()).lost, BTreeSet::from([slot("k")]));
    }

    #[test]
    fn past_its_bound_the_busiest_slot_is_lost_not_the_memory() {
        let (a, b) = ("{a}", "{b}");
        let mut c = Capture::new([slot(a), slot(b)], 0, 10 * (ENTRY_OVERHEAD + 8));
        observe(&mut c, &["SET", "{b}1", "v"]);
        for i in 0..20 {
            observe(&mut c, &["SET", &format!("{a}{i:04}"), "v"]);
        }
        assert!(c.held() <= 10 * (ENTRY_OVERHEAD + 8));
        let t = c.take(&all());
        assert_eq!(t.lost, BTreeSet::from([slot(a)]));
        assert_eq!(t.keys[&slot(b)].len(), 1, "the quiet slot is kept");
        // The lost slot's writes are not kept until its copy starts over.
        observe(&mut c, &["SET", "{a}z", "v"]);
        assert!(c.take(&all()).keys.is_empty());
    }

    #[test]
    fn a_big_keys_writes_are_kept_element_by_element_until_it_changes_whole() {
        let k = "{b}hash";
        let mut c = Capture::new([slot(k)], 0, 1 << 20);
        observe(&mut c, &["SELECT", "0"]);
        c.mark_big(&DbKey::new(0, k.as_bytes()));
        observe(&mut c, &["HSET", k, "f1", "v", "f2", "v"]);
        observe(&mut c, &["HDEL", k, "f3"]);
        observe(&mut c, &["HINCRBY", k, "f1", "1"]);
        observe(&mut c, &["PEXPIREAT", k, "99999999999999"]);
        let t = c.take(&all());
        assert!(t.keys.is_empty(), "not copied whole: {:?}", t.keys);
        let (key, e) = &t.elements[&slot(k)][0];
        assert_eq!(key, &DbKey::new(0, k.as_bytes()));
        let mut names: Vec<&[u8]> = e.names.iter().map(|n| &n[..]).collect();
        names.sort();
        assert_eq!(names, [&b"f1"[..], b"f2", b"f3"]);
        assert!(e.ttl);
        // ZADD's options are not members.
        let z = "{b}zset";
        c.mark_big(&DbKey::new(0, z.as_bytes()));
        observe(&mut c, &["ZADD", z, "XX", "CH", "1", "m1", "2", "m2"]);
        let t = c.take(&all());
        let mut names: Vec<&[u8]> = t.elements[&slot(z)][0]
            .1
            .names
            .iter()
            .map(|n| &n[..])
            .collect();
        names.sort();
        assert_eq!(names, [&b"m1"[..], b"m2"]);
        // A write that is not per element makes it whole, and what was recorded goes.
        observe(&mut c, &["HSET", k, "f9", "v"]);
        observe(&mut c, &["RENAME", k, "{b}other"]);
        let t = c.take(&all());
        assert!(t.elements.is_empty(), "{:?}", t.elements);
        assert_eq!(t.keys[&slot(k)].len(), 2);
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn a_forgotten_slot_is_no_longer_followed() {
        let mut c = Capture::new([slot("k")], 0, 1 << 20);
        observe(&mut c, &["SET", "k", "1"]);
        c.forget(slot("k"));
        observe(&mut c, &["SET", "k", "2"]);
        assert!(c.take(&all()).keys.is_empty());
        assert_eq!(c.held(), 0);
    }
}
