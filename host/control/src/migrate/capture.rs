//! What a source's replication stream says about the slots moving off it: which of their
//! keys were written since the last copy round. The stream carries every change the source
//! makes, whoever made it and however — a client's command, a script's or a function's
//! effects (Redis 7 replicates effects), a transaction, a key that expired or was evicted (a
//! `DEL`), a `FLUSHALL` — so a key the stream does not name has not changed.
//!
//! Pure: it is fed decoded commands (`observe`) by the copier's replica connection.
//! Bounded: the changed keys it keeps are counted in bytes; past the bound, the slot with the
//! most is given up (`lost`), and its copy starts over rather than the capture growing.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use rustc_hash::{FxHashMap, FxHashSet};
use tessera_model::command::CommandTable;
use tessera_model::router::{SLOTS, SlotId};
use tessera_resp::Request;

/// What one kept key costs beyond its bytes (the set's entry and the `Bytes`).
const ENTRY_OVERHEAD: usize = 64;

/// Changed keys of the moving slots, since the last [`Capture::take`].
pub struct Capture {
    /// The moving slots (a bit per slot).
    moving: Box<[bool; SLOTS]>,
    changed: FxHashMap<u16, FxHashSet<Bytes>>,
    /// Bytes the changed keys hold, and the most they may.
    held: usize,
    limit: usize,
    /// Slots whose changes can no longer be told (the bound was reached, or the source was
    /// flushed): their copy starts over.
    lost: BTreeSet<u16>,
    /// The database the stream's commands apply to (`SELECT`); clients use database 0.
    db: u64,
    /// The replication offset of the last byte observed.
    offset: u64,
    /// Commands seen that changed a moving slot, for the status.
    writes: u64,
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
            db: 0,
            offset,
            writes: 0,
        }
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
                Some(db) => self.db = db,
                None => self.lose_all(),
            }
            return;
        }
        if name.eq_ignore_ascii_case(b"FLUSHALL") || name.eq_ignore_ascii_case(b"SWAPDB") {
            self.lose_all();
            return;
        }
        if self.db != 0 {
            // MOVE and COPY … DB write into another database: into the clients' one, from
            // here, the key they name there is changed.
            if let Some(key) = into_db0(req) {
                self.changed_key(key);
            }
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
        for i in cmd.key_indices(req) {
            self.changed_key(req.arg(i as usize));
        }
    }

    fn changed_key(&mut self, key: &[u8]) {
        let slot = SlotId::of_key(key).0;
        if !self.moving[slot as usize] || self.lost.contains(&slot) {
            return;
        }
        self.writes += 1;
        let set = self.changed.entry(slot).or_default();
        if set.insert(Bytes::copy_from_slice(key)) {
            self.held += key.len() + ENTRY_OVERHEAD;
        }
        while self.held > self.limit {
            let Some((&slot, _)) = self.changed.iter().max_by_key(|(_, keys)| keys.len()) else {
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
        for &slot in slots {
            if let Some(set) = self.changed.remove(&slot) {
                self.held -= set.iter().map(|k| k.len() + ENTRY_OVERHEAD).sum::<usize>();
                keys.insert(slot, set.into_iter().collect());
            }
        }
        let lost = slots.intersection(&self.lost).copied().collect();
        Taken { keys, lost }
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
            self.held -= set.iter().map(|k| k.len() + ENTRY_OVERHEAD).sum::<usize>();
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

/// The key `MOVE key 0` or `COPY src dst … DB 0` writes into database 0, run from another.
fn into_db0(req: &Request) -> Option<&[u8]> {
    let name = req.arg(0);
    if name.eq_ignore_ascii_case(b"MOVE") && req.get(2) == Some(b"0") {
        return req.get(1);
    }
    if name.eq_ignore_ascii_case(b"COPY") {
        let db = (3..req.argc())
            .find(|&i| req.arg(i).eq_ignore_ascii_case(b"DB"))
            .and_then(|i| req.get(i + 1));
        if db == Some(b"0") {
            return req.get(2);
        }
    }
    None
}

/// A round's work, taken from the capture.
#[derive(Debug, Default)]
pub struct Taken {
    /// Changed keys per slot.
    pub keys: BTreeMap<u16, Vec<Bytes>>,
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
        let keys: BTreeSet<&[u8]> = t.keys[&slot(a)].iter().map(|k| &k[..]).collect();
        assert_eq!(keys, BTreeSet::from([&b"{a}x"[..], b"{a}h"]));
        assert!(!t.keys.contains_key(&slot(b)), "not a moving slot");
        assert!(c.take(&all()).keys.is_empty(), "taken once");
        assert!(c.offset() > 100);
    }

    #[test]
    fn other_databases_are_not_the_clients_and_a_flush_loses_every_slot() {
        let a = "{a}x";
        let mut c = Capture::new([slot(a)], 0, 1 << 20);
        observe(&mut c, &["SELECT", "1"]);
        observe(&mut c, &["SET", a, "1"]);
        observe(&mut c, &["FLUSHDB"]);
        assert!(c.take(&all()).keys.is_empty() && c.take(&all()).lost.is_empty());
        // … but a key moved or copied from there into database 0 is a change there.
        observe(&mut c, &["MOVE", a, "0"]);
        observe(&mut c, &["COPY", "src", "{a}dst", "DB", "0"]);
        assert_eq!(c.take(&all()).keys[&slot(a)].len(), 2);
        observe(&mut c, &["SELECT", "0"]);
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
    fn a_forgotten_slot_is_no_longer_followed() {
        let mut c = Capture::new([slot("k")], 0, 1 << 20);
        observe(&mut c, &["SET", "k", "1"]);
        c.forget(slot("k"));
        observe(&mut c, &["SET", "k", "2"]);
        assert!(c.take(&all()).keys.is_empty());
        assert_eq!(c.held(), 0);
    }
}
