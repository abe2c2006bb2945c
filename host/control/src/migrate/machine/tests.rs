//! The state machine against a model of the cluster: two groups (source 0, target 1), a few
//! proxies that route by the tables pushed to them (holding a slot's commands while it is
//! held), clients writing and reading through them, the copy (a capture of the source's
//! changes and copy rounds), pushes that reach some proxies and not others, lost
//! acknowledgements, dashboard crashes at any point, and aborts.
//!
//! Checked on every step: no read returns anything but the last acknowledged write. Checked
//! once everything settles: the slot's owner has every acknowledged write, and the other group
//! has none of its keys.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;

use super::*;

const KEYS: u8 = 4;
const PROXIES: usize = 3;

type Key = u8;
/// A key's value: the id of the write that set it (absent: deleted).
type Value = u64;

/// A proxy's table for the slot, as last pushed to it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Table {
    owner: usize,
    held: bool,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Write(Key, Option<Value>),
    Read(Key),
}

#[derive(Debug)]
struct Proxy {
    table: Table,
    /// Commands held while the slot is held.
    held: VecDeque<Op>,
}

/// The copy, in the dashboard's memory: lost in a crash.
#[derive(Debug, Default)]
struct Copy {
    /// Keys still to copy this round.
    round: BTreeSet<Key>,
    /// Keys the capture saw written since this round began.
    changed: BTreeSet<Key>,
    /// The capture broke: it sees no write any more (and says so, see `World::lost`).
    broken: bool,
}

/// What the store holds of the slot's migration.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Record {
    state: Persisted,
    owner_target: bool,
}

struct World {
    groups: [BTreeMap<Key, Value>; 2],
    /// The slot's owner as the store has it when no migration record says otherwise.
    owner: usize,
    /// The slot's record in the store …
    record: Option<Record>,
    /// … and in the dashboard's memory, which pushes route by (lost in a crash).
    memory: Option<Record>,
    /// The table of the last push, as persisted before it went out.
    committed: Option<Table>,
    proxies: Vec<Proxy>,
    /// The last acknowledged write of each key.
    acked: BTreeMap<Key, Option<Value>>,
    next_value: Value,
    // === the dashboard (in memory) ===
    slot: Option<Slot>,
    copy: Option<Copy>,
    /// Requests out (a push, a deletion, the final copy), each with its number: a
    /// completion is delivered only if no later request of its kind went out since (the
    /// driver's rule: an acknowledgement answers the latest push, never an older one).
    inflight: VecDeque<(Action, u64)>,
    latest: BTreeMap<Kind, u64>,
    next_request: u64,
    /// Completions the machine has not seen yet, with the request they answer.
    events: VecDeque<(Event, Option<(Kind, u64)>)>,
}

/// The kinds of request whose completions come back later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Push,
    Delete,
    Final,
}

impl World {
    fn new() -> Self {
        let mut w = Self {
            groups: [BTreeMap::new(), BTreeMap::new()],
            owner: 0,
            record: None,
            memory: None,
            committed: None,
            proxies: (0..PROXIES)
                .map(|_| Proxy {
                    table: Table {
                        owner: 0,
                        held: false,
                    },
                    held: VecDeque::new(),
                })
                .collect(),
            acked: BTreeMap::new(),
            next_value: 1,
            slot: None,
            copy: None,
            inflight: VecDeque::new(),
            latest: BTreeMap::new(),
            next_request: 0,
            events: VecDeque::new(),
        };
        for k in 0..KEYS {
            w.write_to(0, k, Some(0));
            w.acked.insert(k, Some(0));
        }
        w
    }

    fn write_to(&mut self, group: usize, k: Key, v: Option<Value>) {
        match v {
            Some(v) => self.groups[group].insert(k, v),
            None => self.groups[group].remove(&k),
        };
        // The capture sees every write the source executes.
        if group == 0
            && let Some(c) = &mut self.copy
            && !c.broken
        {
            c.changed.insert(k);
        }
    }

    /// The table the dashboard's records describe.
    fn table(&self) -> Table {
        match self.memory {
            None => Table {
                owner: self.owner,
                held: false,
            },
            Some(r) => Table {
                owner: if r.owner_target { 1 } else { 0 },
                held: r.state == Persisted::Handoff,
            },
        }
    }

    /// A client's command through proxy `p`.
    fn client(&mut self, p: usize, op: Op) {
        if self.proxies[p].table.held {
            self.proxies[p].held.push_back(op);
            return;
        }
        self.execute(p, op);
    }

    fn execute(&mut self, p: usize, op: Op) {
        let owner = self.proxies[p].table.owner;
        match op {
            Op::Write(k, v) => {
                self.write_to(owner, k, v);
                self.acked.insert(k, v);
            }
            Op::Read(k) => {
                let got = self.groups[owner].get(&k).copied();
                let want = self.acked.get(&k).copied().flatten();
                assert_eq!(
                    got, want,
                    "stale read of key {k} through proxy {p} (owner {owner})"
                );
            }
        }
    }

    /// Installs `table` on proxy `p`, which then runs what it held if the slot is released.
    fn install(&mut self, p: usize, table: Table) {
        self.proxies[p].table = table;
        if !table.held {
            while let Some(op) = self.proxies[p].held.pop_front() {
                self.execute(p, op);
            }
        }
    }

    fn feed(&mut self, event: Event) {
        let Some(slot) = self.slot else { return };
        let (next, actions) = slot.step(event);
        self.slot = Some(next);
        for a in actions {
            self.start_action(a);
        }
    }

    /// Delivers the oldest completion, unless a later request of its kind went out since.
    fn deliver(&mut self) {
        let Some((event, answers)) = self.events.pop_front() else {
            return;
        };
        if let Some((kind, n)) = answers
            && self.latest.get(&kind) != Some(&n)
        {
            return;
        }
        self.feed(event);
        self.report_broken_capture();
    }

    /// Carries out an action: at once for those the driver awaits (a store write, starting
    /// or stopping the copy), or as a request whose completion comes back later.
    fn start_action(&mut self, action: Action) {
        let kind = match action {
            Action::Save {
                state,
                owner_target,
                durable,
            } => {
                let r = Some(Record {
                    state,
                    owner_target,
                });
                self.memory = r;
                if durable {
                    self.record = r;
                }
                return;
            }
            Action::StartCopy => {
                // The capture starts before the first round lists the source's keys.
                self.copy = Some(Copy {
                    round: self.groups[0].keys().copied().collect(),
                    ..Copy::default()
                });
                return;
            }
            Action::StopCopy => {
                self.copy = None;
                return;
            }
            // The model's copy reports every round anyway.
            Action::ReportNext => return,
            Action::Clear => {
                // A migration reads as over only once every proxy routes by its last table.
                let table = self.table();
                for (i, p) in self.proxies.iter().enumerate() {
                    assert_eq!(p.table, table, "proxy {i} at the migration's end");
                }
                self.owner = table.owner;
                self.record = None;
                self.memory = None;
                self.slot = None;
                self.copy = None;
                return;
            }
            Action::Push => Kind::Push,
            Action::DeleteStale => Kind::Delete,
            Action::FinalCopy => Kind::Final,
        };
        self.next_request += 1;
        self.latest.insert(kind, self.next_request);
        self.inflight.push_back((action, self.next_request));
    }

    /// Completes the oldest request out; `fail` decides whether a push misses a proxy (by
    /// index) or its acknowledgement is lost, and whether a final copy is too slow.
    fn act(&mut self, fail: &mut impl FnMut() -> u8) {
        let Some((action, n)) = self.inflight.pop_front() else {
            return;
        };
        let (event, kind) = match action {
            Action::Push => {
                let table = self.table();
                self.committed = Some(table);
                let mut all = true;
                for p in 0..PROXIES {
                    // 1 in 8 deliveries misses a proxy.
                    if fail().is_multiple_of(8) {
                        all = false;
                    } else {
                        self.install(p, table);
                    }
                }
                // 1 in 8 acknowledgements is lost even when every proxy took the push.
                let acked = all && !fail().is_multiple_of(8);
                let e = if acked {
                    Event::PushAcked
                } else {
                    Event::PushFailed
                };
                (e, Kind::Push)
            }
            Action::DeleteStale => {
                let owner = self.table().owner;
                self.groups[1 - owner].clear();
                (Event::StaleDeleted, Kind::Delete)
            }
            Action::FinalCopy => (self.final_copy(fail), Kind::Final),
            _ => unreachable!("only requests are in flight"),
        };
        self.events.push_back((event, Some((kind, n))));
    }

    /// The final copy: every proxy holds the slot, so nothing writes to the source meanwhile.
    fn final_copy(&mut self, fail: &mut impl FnMut() -> u8) -> Event {
        let Some(c) = self.copy.take() else {
            return Event::FinalFailed;
        };
        // It reads the capture up to the source's last write: a capture that broke before
        // then is found out here.
        if c.broken {
            self.copy = Some(c);
            return Event::CaptureLost;
        }
        if fail().is_multiple_of(6) {
            self.copy = Some(c);
            return Event::FinalFailed;
        }
        for k in c.round.union(&c.changed) {
            match self.groups[0].get(k).copied() {
                Some(v) => self.groups[1].insert(*k, v),
                None => self.groups[1].remove(k),
            };
        }
        self.copy = Some(Copy::default());
        Event::FinalCopied
    }

    /// One key of the current round copied (the source's value as it is now).
    fn copy_one(&mut self) {
        let Some(c) = &mut self.copy else { return };
        let Some(k) = c.round.pop_first() else {
            // The round is over: the changed keys are the next one.
            let next = std::mem::take(&mut c.changed);
            let converged = next.len() <= 1;
            c.round = next;
            self.events
                .push_back((Event::RoundEnded { converged }, None));
            return;
        };
        match self.groups[0].get(&k).copied() {
            Some(v) => self.groups[1].insert(k, v),
            None => self.groups[1].remove(&k),
        };
    }

    /// The driver looks at its copy: a broken capture is reported to the machine.
    fn report_broken_capture(&mut self) {
        if self.copy.as_ref().is_some_and(|c| c.broken) {
            self.feed(Event::CaptureLost);
        }
    }

    /// The dashboard dies: its memory is gone; a successor resumes from the store.
    fn crash(&mut self) {
        self.copy = None;
        self.inflight.clear();
        self.events.clear();
        self.slot = None;
        self.memory = self.record;
        if let Some(r) = self.record {
            let committed = self.committed.is_some_and(|t| t.owner == 1 && !t.held);
            let (slot, actions) = Slot::resume(r.state, r.owner_target, committed);
            self.slot = Some(slot);
            for a in actions {
                self.start_action(a);
            }
        }
    }

    fn start(&mut self) {
        if self.slot.is_none() && self.record.is_none() && self.owner == 0 {
            self.slot = Some(Slot::pending());
            self.record = Some(Record {
                state: Persisted::Pending,
                owner_target: false,
            });
            self.memory = self.record;
            self.feed(Event::Start);
        }
    }

    fn settled(&self) -> bool {
        self.slot.is_none() && self.inflight.is_empty()
    }

    /// Runs the migration to its end with nothing failing any more.
    fn finish(&mut self) {
        let mut never = || 1u8;
        for _ in 0..10_000 {
            if self.settled() {
                break;
            }
            if !self.events.is_empty() {
                self.deliver();
            } else if !self.inflight.is_empty() {
                self.act(&mut never);
            } else if self.slot.is_some_and(|s| s.ready()) {
                self.feed(Event::Handoff);
            } else if self.slot.is_some_and(|s| s.phase == Phase::Pending) {
                self.feed(Event::Start);
            } else {
                self.copy_one();
            }
        }
        assert!(
            self.settled(),
            "the migration did not settle: {:?}",
            self.slot
        );
        // Proxies that missed a push get the table in force (the dashboard's catch-up).
        let table = self.table();
        for p in 0..PROXIES {
            self.install(p, table);
        }
    }

    fn check_settled(&self) {
        let owner = self.owner;
        let want: BTreeMap<Key, Value> = self
            .acked
            .iter()
            .filter_map(|(k, v)| v.map(|v| (*k, v)))
            .collect();
        assert_eq!(
            self.groups[owner], want,
            "the owner (group {owner}) has every acknowledged write, and nothing else"
        );
        assert!(
            self.groups[1 - owner].is_empty(),
            "the other group keeps no key of the slot: {:?}",
            self.groups[1 - owner]
        );
        for p in &self.proxies {
            assert!(p.held.is_empty(), "a held command was never run");
        }
    }
}

/// One scheduler choice: what happens next.
fn run(choices: &[u8]) {
    let mut w = World::new();
    w.start();
    let mut it = choices.iter().copied();
    let mut fail = move || it.next().unwrap_or(1);
    let mut picks = choices.iter().copied().rev();
    while let Some(c) = picks.next() {
        let arg = picks.next().unwrap_or(0);
        match c % 16 {
            0..=3 => {
                let p = arg as usize % PROXIES;
                let k = arg / 3 % KEYS;
                let v = if arg % 5 == 0 {
                    None
                } else {
                    w.next_value += 1;
                    Some(w.next_value)
                };
                w.client(p, Op::Write(k, v));
            }
            4..=5 => w.client(arg as usize % PROXIES, Op::Read(arg / 3 % KEYS)),
            6..=8 => w.act(&mut fail),
            9..=10 => w.deliver(),
            11..=12 => w.copy_one(),
            13 => {
                if w.slot.is_some_and(|s| s.ready()) {
                    w.feed(Event::Handoff);
                } else if w.slot.is_some_and(|s| s.phase == Phase::Pending) {
                    w.feed(Event::Start);
                }
            }
            14 => {
                if arg % 4 == 0 {
                    w.crash();
                } else if arg % 4 == 1 {
                    w.feed(Event::Abort);
                } else if arg % 4 == 2 {
                    if let Some(c) = &mut w.copy {
                        c.broken = true;
                    }
                } else if w.settled() {
                    // Move it again (either way).
                    if w.owner == 1 {
                        w.groups.swap(0, 1);
                        w.owner = 0;
                        for p in 0..PROXIES {
                            let t = w.proxies[p].table;
                            w.proxies[p].table.owner = 1 - t.owner;
                        }
                        if let Some(t) = &mut w.committed {
                            t.owner = 1 - t.owner;
                        }
                    }
                    w.start();
                }
            }
            _ => {}
        }
    }
    w.finish();
    w.check_settled();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn every_acknowledged_write_ends_on_the_owner_and_no_read_is_stale(
        choices in proptest::collection::vec(any::<u8>(), 0..400)
    ) {
        run(&choices);
    }
}

#[test]
fn a_migration_with_nothing_going_wrong_moves_the_slot() {
    let mut w = World::new();
    w.start();
    w.finish();
    w.check_settled();
    assert_eq!(w.owner, 1);
}

#[test]
fn an_abort_before_the_handoff_leaves_the_slot_with_its_source() {
    let mut w = World::new();
    w.start();
    let mut never = || 1u8;
    w.act(&mut never); // the target's leftovers deleted
    w.deliver(); // … so the copy starts
    w.copy_one();
    w.feed(Event::Abort);
    w.finish();
    w.check_settled();
    assert_eq!(w.owner, 0);
}

#[test]
fn every_persisted_state_resumes_to_a_settled_slot() {
    for state in [
        Persisted::Pending,
        Persisted::Copying,
        Persisted::Handoff,
        Persisted::Cleanup,
    ] {
        for (owner_target, committed) in [(false, false), (true, false), (false, true)] {
            let (slot, actions) = Slot::resume(state, owner_target, committed);
            assert_eq!(slot.persisted().map(|_| ()), Some(()), "{state:?}");
            if matches!(state, Persisted::Copying | Persisted::Handoff) && !committed {
                assert!(
                    matches!(
                        actions[0],
                        Action::Save {
                            state: Persisted::Copying,
                            ..
                        }
                    ),
                    "a lost copy or handoff is released first"
                );
            }
        }
    }
}

#[test]
fn a_slot_is_routed_to_its_target_only_after_the_final_copy() {
    let s = Slot {
        phase: Phase::Blocked,
        aborted: false,
    };
    let (_, actions) = s.step(Event::FinalCopied);
    let owner_saved = actions.iter().position(|a| {
        matches!(
            a,
            Action::Save {
                owner_target: true,
                durable: false,
                ..
            }
        )
    });
    let push = actions.iter().position(|a| *a == Action::Push);
    assert!(owner_saved.is_some() && owner_saved < push);
    for event in [
        Event::PushAcked,
        Event::RoundEnded { converged: true },
        Event::StaleDeleted,
        Event::Handoff,
    ] {
        for phase in [
            Phase::Pending,
            Phase::Purging,
            Phase::Copying {
                round: 3,
                converged: true,
            },
            Phase::Blocking,
        ] {
            let (_, actions) = Slot {
                phase,
                aborted: false,
            }
            .step(event);
            assert!(
                !actions.iter().any(|a| matches!(
                    a,
                    Action::Save {
                        owner_target: true,
                        ..
                    }
                )),
                "{phase:?} + {event:?}"
            );
        }
    }
}
