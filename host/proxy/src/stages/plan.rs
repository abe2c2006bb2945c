//! Stage 4 of the data path: a classified command becomes a [`Plan`] against the routing table
//! in force: answered by the session, sent to the one backend owning its slot, split per backend
//! and merged, fanned out to every backend, or — on a slot being migrated — its keys moved off
//! the old owner first. Pure: the plan names backends by `BackendIdx` of the table it was made
//! with, and the send stage resolves them with that same table.

use bytes::Bytes;
use smallvec::SmallVec;

use super::classify::Classified;
use super::merge::Merge;
use tessera_model::command::{Admin, Kind, Local, PubSub, Split};
use tessera_model::error::DataError;
use tessera_model::router::{BackendIdx, SlotId, SlotTable};
use tessera_resp::{Request, encode_request};

/// Whose rights a request to a backend runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The client's command, on the shared connections of the session's confined identity.
    Data,
    /// The proxy's own request (INFO, COMMAND, moving keys, SCRIPT KILL), on connections with
    /// the proxy's full rights, separate from the data connections.
    Control,
}

/// One request to one backend.
#[derive(Debug)]
pub struct Send {
    pub to: BackendIdx,
    pub channel: Channel,
    pub bytes: Bytes,
}

/// A command on keys of a migrating slot: the keys are moved from `source` to `target` first,
/// then the command runs on `target`.
#[derive(Debug)]
pub struct MovePlan {
    pub source: BackendIdx,
    pub target: BackendIdx,
    /// The move is an abort going back (the target's markers are checked too).
    pub aborting: bool,
    /// Epoch of the table the plan was made with.
    pub epoch: u64,
    pub keys: SmallVec<[Bytes; 2]>,
    pub bytes: Bytes,
}

/// One backend request of a plan.
#[derive(Debug)]
pub enum Part {
    Send(Send),
    Move(Box<MovePlan>),
}

/// What to do with a command.
#[derive(Debug)]
pub enum Plan {
    /// The session answers it (HELLO, AUTH, CLIENT, PING, INFO …).
    Local(Local),
    /// One backend request; its reply is the client's.
    One(Part),
    /// Several backend requests whose replies are merged into one.
    Gather { parts: Vec<Part>, merge: Merge },
}

/// Plans `c` against `table`. Keys in `moved` (known moved off a migrating slot's source under
/// this table) go straight to the target.
///
/// # Errors
/// `CROSSSLOT`, and the routing errors of the slots it needs (`SlotTable::route`).
pub fn plan(c: &Classified<'_>, table: &SlotTable, moved: &MovedKeys) -> Result<Plan, DataError> {
    match c.cmd.kind {
        Kind::Keyed | Kind::AdminKeyed | Kind::Blocking => forward(c, table, moved).map(Plan::One),
        Kind::Split(s) => split(c, s, table, moved),
        Kind::Local(l) => Ok(Plan::Local(l)),
        Kind::Admin(a) | Kind::Library(a) => admin(a, c.req, table),
        Kind::ScriptKill => to_all(table, c.req.as_bytes(), Channel::Control, Merge::AnyOk),
        Kind::PubSub(p) => pubsub(p, c, table),
        // The session keeps transactions and WAIT itself; refused and unsupported commands
        // never pass the classify stage.
        Kind::Transaction(_) | Kind::Wait | Kind::Unsupported | Kind::Refused => {
            Err(DataError::Refused(c.cmd.name.to_string()))
        }
    }
}

/// The request for the master of the one slot all the command's keys hash to (slot 0's for a
/// command without keys, such as `EVAL … 0`).
fn forward(c: &Classified<'_>, table: &SlotTable, moved: &MovedKeys) -> Result<Part, DataError> {
    let slot = c.slot(table)?;
    let to = if c.cmd.replica_read {
        table.read_route(slot)?
    } else {
        table.route(slot)?
    };
    let bytes = c.req.as_bytes().clone();
    let entry = table.slot(slot);
    Ok(match entry.migrating_from {
        Some(source) if !c.keys.is_empty() && !moved.contains_all(table.epoch, c.key_args()) => {
            Part::Move(Box::new(MovePlan {
                source,
                target: to,
                aborting: entry.aborting,
                epoch: table.epoch,
                keys: c
                    .keys
                    .iter()
                    .map(|&i| c.req.arg_bytes(i as usize))
                    .collect(),
                bytes,
            }))
        }
        _ => Part::Send(Send {
            to,
            channel: Channel::Data,
            bytes,
        }),
    })
}

/// MGET MSET DEL UNLINK EXISTS TOUCH: one sub-command per backend, merged in key order. Keys of
/// a migrating slot form their own sub-command per (target, source), whose keys move first.
fn split(
    c: &Classified<'_>,
    kind: Split,
    table: &SlotTable,
    moved: &MovedKeys,
) -> Result<Plan, DataError> {
    let req = &c.req;
    let step = if kind == Split::Mset { 2 } else { 1 };
    if !(req.argc() - 1).is_multiple_of(step) {
        return Err(DataError::WrongArity(
            String::from_utf8_lossy(req.arg(0)).to_lowercase(),
        ));
    }
    // (backend, source while migrating, argument indices of its keys), in first-seen order.
    type Group = (BackendIdx, Option<BackendIdx>, Vec<usize>);
    let mut groups: SmallVec<[Group; 4]> = SmallVec::new();
    // A read's server per group, chosen once: one sub-command per group, as for the masters.
    let mut readers: SmallVec<[(tessera_model::router::GroupId, BackendIdx); 4]> = SmallVec::new();
    for i in (1..req.argc()).step_by(step) {
        let slot = table.slot_of(req.arg(i));
        let b = if c.cmd.replica_read {
            let group = table.slot(slot).group;
            match readers.iter().find(|(g, _)| *g == group) {
                Some(&(_, b)) if table.slot(slot).migrating_from.is_none() => {
                    table.route(slot)?;
                    b
                }
                _ => {
                    let b = table.read_route(slot)?;
                    readers.push((group, b));
                    b
                }
            }
        } else {
            table.route(slot)?
        };
        let from = table.slot(slot).migrating_from;
        match groups
            .iter_mut()
            .find(|(gb, gf, _)| *gb == b && *gf == from)
        {
            Some((_, _, keys)) => keys.push(i),
            None => groups.push((b, from, vec![i])),
        }
    }
    if groups.len() > 1
        && let Some(e) = c.cross_cluster(table)
    {
        return Err(e);
    }
    if let [(b, None, _)] = groups.as_slice() {
        return Ok(Plan::One(Part::Send(Send {
            to: *b,
            channel: Channel::Data,
            bytes: req.as_bytes().clone(),
        })));
    }
    let mut parts = Vec::with_capacity(groups.len());
    let mut order = Vec::new();
    if kind == Split::Mget {
        order = vec![(0u16, 0u32); req.argc() - 1];
    }
    for (g, (b, from, keys)) in groups.iter().enumerate() {
        if kind == Split::Mget {
            for (pos, &i) in keys.iter().enumerate() {
                order[i - 1] = (g as u16, pos as u32);
            }
        }
        let count = 1 + keys.len() * step;
        let args = keys.iter().flat_map(|&i| (i..i + step).map(|j| req.arg(j)));
        let size: usize = keys
            .iter()
            .map(|&i| (i..i + step).map(|j| req.arg(j).len()).sum::<usize>())
            .sum();
        let bytes = encode_request(count, std::iter::once(req.arg(0)).chain(args), size);
        let send = |bytes| {
            Part::Send(Send {
                to: *b,
                channel: Channel::Data,
                bytes,
            })
        };
        parts.push(match from {
            Some(source) if !moved.contains_all(table.epoch, keys.iter().map(|&i| req.arg(i))) => {
                Part::Move(Box::new(MovePlan {
                    source: *source,
                    target: *b,
                    aborting: keys
                        .iter()
                        .any(|&i| table.slot(table.slot_of(req.arg(i))).aborting),
                    epoch: table.epoch,
                    keys: keys.iter().map(|&i| req.arg_bytes(i)).collect(),
                    bytes,
                }))
            }
            _ => send(bytes),
        });
    }
    let merge = match kind {
        Split::Mget => Merge::Mget(order),
        Split::Mset => Merge::AllOk,
        Split::Sum => Merge::Sum,
    };
    Ok(Plan::Gather { parts, merge })
}

/// PUBLISH and SPUBLISH go to the master of the channel's slot, PUBSUB's introspection to
/// every backend, all on the proxy's own connections (data users have no channel rights; the
/// policy stage has checked the client's). Subscriptions are the session's, never planned.
fn pubsub(p: PubSub, c: &Classified<'_>, table: &SlotTable) -> Result<Plan, DataError> {
    let bytes = c.req.as_bytes();
    match p {
        PubSub::Publish | PubSub::SPublish => {
            let to = table.route(SlotId::of_key(c.req.arg(1)))?;
            Ok(Plan::One(Part::Send(Send {
                to,
                channel: Channel::Control,
                bytes: bytes.clone(),
            })))
        }
        PubSub::Channels => to_all(table, bytes, Channel::Control, Merge::Union),
        PubSub::NumSub => to_all(table, bytes, Channel::Control, Merge::NumSub),
        PubSub::NumPat => to_all(table, bytes, Channel::Control, Merge::Sum),
        _ => Err(DataError::Refused(c.cmd.name.to_string())),
    }
}

fn admin(a: Admin, req: &Request, table: &SlotTable) -> Result<Plan, DataError> {
    let all = |merge| to_all(table, req.as_bytes(), Channel::Data, merge);
    match a {
        Admin::AllOk => all(Merge::AllOk),
        Admin::First => all(Merge::First),
        Admin::Concat => all(Merge::Concat),
        Admin::AllExist => all(Merge::AllExist),
        Admin::RandomKey => {
            let start = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()) as usize;
            all(Merge::RandomKey { start })
        }
        Admin::Scan => scan(req, table),
    }
}

/// The same request to every backend of the table, merged by `merge`.
///
/// # Errors
/// A table with no backend.
pub fn to_all(
    table: &SlotTable,
    bytes: &Bytes,
    channel: Channel,
    merge: Merge,
) -> Result<Plan, DataError> {
    if table.backends().is_empty() {
        return Err(DataError::NoBackend);
    }
    let parts = (0..table.backends().len())
        .map(|to| {
            Part::Send(Send {
                to: to as BackendIdx,
                channel,
                bytes: bytes.clone(),
            })
        })
        .collect();
    Ok(Plan::Gather { parts, merge })
}

/// A request with no key whose answer is the same on every backend: any one answers.
///
/// # Errors
/// A table with no backend.
pub fn to_any(table: &SlotTable, bytes: &Bytes, channel: Channel) -> Result<Plan, DataError> {
    if table.backends().is_empty() {
        return Err(DataError::NoBackend);
    }
    Ok(Plan::One(Part::Send(Send {
        to: 0,
        channel,
        bytes: bytes.clone(),
    })))
}

/// SCAN over every backend in turn. The client's cursor is `backend_cursor * backends +
/// backend`, so a cursor is an ordinary number and 0 starts and ends the whole iteration.
fn scan(req: &Request, table: &SlotTable) -> Result<Plan, DataError> {
    let cursor = std::str::from_utf8(req.arg(1))
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(DataError::InvalidCursor)?;
    let n = table.backends().len() as u64;
    if n == 0 {
        return Err(DataError::NoBackend);
    }
    let (backend, inner) = (cursor % n, cursor / n);
    let inner = inner.to_string();
    let mut args: Vec<&[u8]> = vec![b"SCAN", inner.as_bytes()];
    args.extend(req.args().skip(2));
    let bytes = Request::from_args(&args).as_bytes().clone();
    Ok(Plan::Gather {
        parts: vec![Part::Send(Send {
            to: backend as BackendIdx,
            channel: Channel::Data,
            bytes,
        })],
        merge: Merge::Scan {
            backend,
            backends: n,
        },
    })
}

/// Keys of migrating slots a worker has seen moved off their source (or never there), valid
/// for one table epoch. Within an epoch nothing writes to a migrating slot's source, so a key
/// gone from it stays gone: its next commands go straight to the target instead of running the
/// move script on the source again. A new table (another step, an abort) starts afresh.
#[derive(Default)]
pub struct MovedKeys {
    epoch: std::cell::Cell<u64>,
    keys: std::cell::RefCell<rustc_hash::FxHashSet<Bytes>>,
}

/// Beyond this many keys the set starts again (memory bound; it only saves work).
const MOVED_KEYS_LIMIT: usize = 200_000;

impl MovedKeys {
    /// Whether every key is known moved under table `epoch`.
    pub fn contains_all<'k>(&self, epoch: u64, mut keys: impl Iterator<Item = &'k [u8]>) -> bool {
        if self.epoch.get() != epoch {
            self.keys.borrow_mut().clear();
            self.epoch.set(epoch);
            return false;
        }
        let set = self.keys.borrow();
        keys.all(|k| set.contains(k))
    }

    /// Records keys found moved by a move made under table `epoch`.
    pub fn insert(&self, epoch: u64, keys: &[Bytes]) {
        if self.epoch.get() != epoch {
            return;
        }
        let mut set = self.keys.borrow_mut();
        if set.len() + keys.len() > MOVED_KEYS_LIMIT {
            set.clear();
        }
        set.extend(keys.iter().map(|k| Bytes::copy_from_slice(k)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::classify::{Policy, classify};
    use tessera_model::router::{GroupId, SlotTableBuilder};
    use tessera_model::users::User;

    fn classified(args: &[&str]) -> Classified<'static> {
        let policy = Policy {
            admin_commands: true,
            scripts_confined: true,
        };
        // Leaked: a test's handful of requests, so plans can borrow them for 'static.
        let req: &'static Request = Box::leak(Box::new(Request::from_args(args)));
        classify(
            req,
            &policy,
            Some(&User {
                name: "default".into(),
                allowed_classes: None,
                key_prefix: None,
            }),
        )
        .unwrap()
    }

    fn two_backends() -> SlotTable {
        SlotTable::split_evenly(&["a:1".into(), "b:2".into()])
    }

    #[test]
    fn a_keyed_command_goes_to_its_slots_owner() {
        let t = two_backends();
        let p = plan(&classified(&["GET", "foo"]), &t, &MovedKeys::default()).unwrap();
        // slot("foo") = 289 < 512: the first backend.
        assert!(matches!(
            p,
            Plan::One(Part::Send(Send {
                to: 0,
                channel: Channel::Data,
                ..
            }))
        ));
        let p = plan(
            &classified(&["SET", "{foo}x", "1"]),
            &t,
            &MovedKeys::default(),
        )
        .unwrap();
        assert!(matches!(p, Plan::One(Part::Send(Send { to: 0, .. }))));
    }

    #[test]
    fn keys_in_two_slots_are_crossslot_unless_the_command_splits() {
        let t = two_backends();
        let m = MovedKeys::default();
        assert_eq!(
            plan(&classified(&["RENAME", "foo", "a"]), &t, &m).unwrap_err(),
            DataError::CrossSlot
        );
        let p = plan(&classified(&["MGET", "foo", "a", "bar"]), &t, &m).unwrap();
        let Plan::Gather {
            parts,
            merge: Merge::Mget(order),
        } = p
        else {
            panic!("MGET over two backends is gathered");
        };
        assert_eq!(parts.len(), 2);
        assert_eq!(order.len(), 3);
    }

    #[test]
    fn a_migrating_slot_moves_keys_first_until_they_are_known_moved() {
        let mut b = SlotTableBuilder::default();
        for s in 0..tessera_model::router::SLOTS as u16 {
            b.assign_migrating(SlotId(s), GroupId(2), "t:1", Some("s:1"));
        }
        let t = b.build(7);
        let moved = MovedKeys::default();
        let c = classified(&["GET", "k"]);
        let Plan::One(Part::Move(m)) = plan(&c, &t, &moved).unwrap() else {
            panic!("a key of a migrating slot is moved first");
        };
        assert_eq!((m.epoch, m.keys.len()), (7, 1));
        moved.insert(7, &m.keys);
        assert!(matches!(
            plan(&c, &t, &moved).unwrap(),
            Plan::One(Part::Send(_))
        ));
    }

    #[test]
    fn a_read_goes_to_a_fresh_replica_and_a_write_to_the_master() {
        use tessera_model::router::replicas::{ReadMode, ReadPolicy, ReplicaRegistry, now_us};
        let reg = ReplicaRegistry::default();
        let mut b = SlotTableBuilder::default();
        for s in 0..tessera_model::router::SLOTS as u16 {
            b.assign(SlotId(s), GroupId(1), "m:1");
        }
        b.replicas(GroupId(1), &["r:1".into()], &reg)
            .read_policy(ReadPolicy {
                mode: ReadMode::PreferReplica,
                max_lag_ms: 60_000,
            });
        let t = b.build(1);
        reg.get("r:1").prove(now_us());
        let m = MovedKeys::default();
        let to = |args: &[&str]| match plan(&classified(args), &t, &m).unwrap() {
            Plan::One(Part::Send(s)) => t.backend_addr(s.to).to_string(),
            p => panic!("{args:?} planned as {p:?}"),
        };
        assert_eq!(to(&["GET", "a"]), "r:1");
        assert_eq!(
            to(&["MGET", "a", "b", "c"]),
            "r:1",
            "one group: one request"
        );
        assert_eq!(to(&["SET", "a", "1"]), "m:1");
        assert_eq!(to(&["TOUCH", "a"]), "m:1");
        // Fan-outs reach the masters only.
        let Plan::Gather { parts, .. } = to_all(
            &t,
            &Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
            Channel::Data,
            Merge::AllOk,
        )
        .unwrap() else {
            panic!("to_all gathers");
        };
        assert_eq!(parts.len(), 1);
    }

    #[test]
    fn blocked_and_unowned_slots_answer_their_routing_error() {
        let mut b = SlotTableBuilder::default();
        b.assign(SlotId::of_key(b"k"), GroupId(1), "a:1")
            .blocked(SlotId::of_key(b"k"));
        let t = b.build(1);
        let m = MovedKeys::default();
        assert!(matches!(
            plan(&classified(&["GET", "k"]), &t, &m),
            Err(DataError::SlotBlocked(_))
        ));
        assert!(matches!(
            plan(&classified(&["GET", "foo"]), &t, &m),
            Err(DataError::SlotNotServed(_))
        ));
    }
}
