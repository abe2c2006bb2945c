//! Stage 4 of the data path: a classified command becomes a [`Plan`] against the routing table
//! in force: answered by the session, kept by the session's own state (transactions,
//! subscriptions, blocking commands …), sent to the one backend owning its slot, split per
//! backend and merged, or fanned out to every backend. Every command passes here. Pure: the plan names backends by `BackendIdx` of
//! the table it was made with, and the send stage resolves them with that same table.

use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use super::classify::{Classified, db_args};
use super::merge::{Merge, Owners};
use tessera_model::command::{Admin, Kind, Local, Options, PubSub, Split, Tx};
use tessera_model::databases::{backend_channel, backend_db, keyspace_db};
use tessera_model::error::DataError;
use tessera_model::router::{BackendIdx, SlotId, SlotTable};
use tessera_resp::{Request, encode_request};

/// Whose rights a request to a backend runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The client's command, on the shared connections of the session's confined identity.
    Data,
    /// The proxy's own request (INFO, COMMAND, SCRIPT KILL), on connections with
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

/// What to do with a command.
#[derive(Debug)]
pub enum Plan {
    /// The session answers it (HELLO, AUTH, CLIENT, PING, INFO …).
    Local(Local),
    /// The session carries it out with state of its own (see [`Own`]).
    Session(Own),
    /// One backend request; its reply is the client's.
    One(Send),
    /// Several backend requests whose replies are merged into one.
    Gather { parts: Vec<Send>, merge: Merge },
}

/// What the session carries out itself, with state of its own, rather than as requests on the
/// shared backend connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Own {
    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH: the session's transaction state.
    Transaction(Tx),
    /// WAIT: on every master, after the client's earlier writes.
    Wait,
    /// SUBSCRIBE and its kin: the session's subscriptions.
    Subscription(PubSub),
    /// A command that may hold its connection until answered, on a dedicated connection to
    /// the master of its slot, routed when it starts.
    Blocking(SlotId),
    /// PUBLISH, SPUBLISH, PUBSUB NUMSUB / SHARDNUMSUB: sent as [`counted`] plans them, the
    /// servers' counts then made counts of clients (`session::pubsub_counts`).
    Counted(PubSub),
}

/// Plans `c` against `table`.
///
/// # Errors
/// `CROSSSLOT`, and the routing errors of the slots it needs (`SlotTable::route`).
pub fn plan(c: &Classified<'_>, table: &Arc<SlotTable>) -> Result<Plan, DataError> {
    if c.blocks() {
        return c.slot_in(table).map(|s| Plan::Session(Own::Blocking(s)));
    }
    match c.cmd.kind {
        Kind::Keyed | Kind::AdminKeyed | Kind::Blocking => forward(c, table).map(Plan::One),
        Kind::Split(s) => split(c, s, table),
        Kind::Local(l) => Ok(Plan::Local(l)),
        Kind::Admin(a) | Kind::Library(a) => admin(a, c, table),
        Kind::ScriptKill => to_all(table, c.req.as_bytes(), Channel::Control, Merge::AnyOk),
        Kind::PubSub(p) => pubsub(p, c, table),
        Kind::Transaction(t) => Ok(Plan::Session(Own::Transaction(t))),
        Kind::Wait => Ok(Plan::Session(Own::Wait)),
        // Refused and unsupported commands never pass the classify stage.
        Kind::Unsupported | Kind::Refused => Err(DataError::Refused(c.cmd.name.to_string())),
    }
}

/// The request for the master of the one slot all the command's keys hash to (slot 0's for a
/// command without keys, such as `EVAL … 0`).
fn forward(c: &Classified<'_>, table: &SlotTable) -> Result<Send, DataError> {
    let slot = c.slot_in(table)?;
    let to = if c.cmd.replica_read {
        table.read_route(slot)?
    } else {
        table.route(slot)?
    };
    Ok(Send {
        to,
        channel: Channel::Data,
        bytes: backend_request(c),
    })
}

/// The request as the backends get it: a command that names databases (`MOVE`, `COPY … DB`,
/// `SWAPDB`) names the backends' numbers for them (`tessera_model::databases`); any other is
/// sent as it came.
pub fn backend_request(c: &Classified<'_>) -> Bytes {
    if !matches!(c.cmd.options, Options::Copy | Options::Db) {
        return c.req.as_bytes().clone();
    }
    let at = db_args(c.cmd.options, c.req);
    if at.is_empty() {
        return c.req.as_bytes().clone();
    }
    // Checked by classify's policy stage: a client database number.
    let mapped: Vec<Vec<u8>> = c
        .req
        .args()
        .enumerate()
        .map(|(i, a)| {
            match std::str::from_utf8(a)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
            {
                Some(db) if at.contains(&i) => backend_db(db).to_string().into_bytes(),
                _ => a.to_vec(),
            }
        })
        .collect();
    let size = mapped.iter().map(Vec::len).sum();
    encode_request(mapped.len(), mapped.iter().map(Vec::as_slice), size)
}

/// MGET MSET DEL UNLINK EXISTS TOUCH: one sub-command per backend, merged in key order.
fn split(c: &Classified<'_>, kind: Split, table: &SlotTable) -> Result<Plan, DataError> {
    let req = &c.req;
    let step = if kind == Split::Mset { 2 } else { 1 };
    if !(req.argc() - 1).is_multiple_of(step) {
        return Err(DataError::WrongArity(
            String::from_utf8_lossy(req.arg(0)).to_lowercase(),
        ));
    }
    // (backend, argument indices of its keys), in first-seen order.
    type Group = (BackendIdx, Vec<usize>);
    let mut groups: SmallVec<[Group; 4]> = SmallVec::new();
    // A read's server per group, chosen once: one sub-command per group, as for the masters.
    let mut readers: SmallVec<[(tessera_model::router::GroupId, BackendIdx); 4]> = SmallVec::new();
    for (n, i) in (1..req.argc()).step_by(step).enumerate() {
        // The first key's slot was found by classify; the others are hashed here, once.
        let slot = match n {
            0 => c.first_slot(table),
            _ => table.slot_of(req.arg(i)),
        };
        let b = if c.cmd.replica_read {
            let group = table.slot(slot).group;
            match readers.iter().find(|(g, _)| *g == group) {
                Some(&(_, b)) => {
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
        match groups.iter_mut().find(|(gb, _)| *gb == b) {
            Some((_, keys)) => keys.push(i),
            None => groups.push((b, vec![i])),
        }
    }
    if groups.len() > 1
        && let Some(e) = c.cross_cluster(table)
    {
        return Err(e);
    }
    if let [(b, _)] = groups.as_slice() {
        return Ok(Plan::One(Send {
            to: *b,
            channel: Channel::Data,
            bytes: req.as_bytes().clone(),
        }));
    }
    let mut parts = Vec::with_capacity(groups.len());
    let mut order = Vec::new();
    if kind == Split::Mget {
        order = vec![(0u16, 0u32); req.argc() - 1];
    }
    for (g, (b, keys)) in groups.iter().enumerate() {
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
        parts.push(Send {
            to: *b,
            channel: Channel::Data,
            bytes,
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
/// policy stage has checked the client's). Subscriptions are the session's own, and so are
/// the counts of PUBLISH and NUMSUB (their requests are planned by [`counted`]).
fn pubsub(p: PubSub, c: &Classified<'_>, table: &SlotTable) -> Result<Plan, DataError> {
    let bytes = c.req.as_bytes();
    match p {
        PubSub::Publish | PubSub::SPublish => {
            // A slot held for a handoff holds the command (`SlotBlocked`), as for a key.
            table.route(SlotId::of_key(c.req.arg(1)))?;
            Ok(Plan::Session(Own::Counted(p)))
        }
        PubSub::NumSub => Ok(Plan::Session(Own::Counted(p))),
        PubSub::Channels => to_all(table, bytes, Channel::Control, Merge::Union),
        PubSub::NumPat => to_all(table, bytes, Channel::Control, Merge::Max),
        PubSub::Subscribe
        | PubSub::Unsubscribe
        | PubSub::PSubscribe
        | PubSub::PUnsubscribe
        | PubSub::SSubscribe
        | PubSub::SUnsubscribe => Ok(Plan::Session(Own::Subscription(p))),
    }
}

/// The servers' part of an [`Own::Counted`] command: PUBLISH and SPUBLISH to the master of
/// the channel's slot, NUMSUB to every backend, its counts summed.
///
/// # Errors
/// The channel's slot has no master, or is held for a handoff.
pub fn counted(p: PubSub, c: &Classified<'_>, table: &SlotTable) -> Result<Plan, DataError> {
    let bytes = counted_request(p, c.req);
    match p {
        PubSub::NumSub => to_all(table, &bytes, Channel::Control, Merge::NumSub),
        _ => Ok(Plan::One(Send {
            to: table.route(SlotId::of_key(c.req.arg(1)))?,
            channel: Channel::Control,
            bytes,
        })),
    }
}

/// PUBLISH's channel, or NUMSUB's, as the servers know it: a keyspace notification's of client
/// database n ≥ 1 names their n + 1 (`backend_channel`), as the sessions' subscriptions do.
pub fn counted_request(p: PubSub, req: &Request) -> Bytes {
    let names = if p == PubSub::NumSub {
        2..req.argc()
    } else {
        1..2.min(req.argc())
    };
    let renamed = |i: usize| names.contains(&i) && keyspace_db(req.arg(i)).is_some_and(|d| d != 0);
    if !(0..req.argc()).any(renamed) {
        return req.as_bytes().clone();
    }
    let args: Vec<Bytes> = (0..req.argc())
        .map(|i| {
            let a = req.arg_bytes(i);
            if renamed(i) { backend_channel(&a) } else { a }
        })
        .collect();
    let size = args.iter().map(Bytes::len).sum();
    encode_request(args.len(), args.iter().map(|a| &a[..]), size)
}

/// Commands for every backend. Those that list keys (KEYS, SCAN, RANDOMKEY) keep, of each
/// backend's reply, the keys of the slots it owns under `table` (`Owners`).
fn admin(a: Admin, c: &Classified<'_>, table: &Arc<SlotTable>) -> Result<Plan, DataError> {
    let req = c.req;
    let bytes = backend_request(c);
    let all = |merge| to_all(table, &bytes, Channel::Data, merge);
    let owners = || Owners::new(table.clone());
    match a {
        Admin::AllOk => all(Merge::AllOk),
        Admin::First => all(Merge::First),
        Admin::Concat => all(Merge::Keys(owners())),
        Admin::AllExist => all(Merge::AllExist),
        Admin::RandomKey => {
            let start = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()) as usize;
            all(Merge::RandomKey {
                start,
                owners: owners(),
            })
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
        .map(|to| Send {
            to: to as BackendIdx,
            channel,
            bytes: bytes.clone(),
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
    Ok(Plan::One(Send {
        to: 0,
        channel,
        bytes: bytes.clone(),
    }))
}

/// SCAN over every backend in turn. The client's cursor is `backend_cursor * backends +
/// backend`, so a cursor is an ordinary number and 0 starts and ends the whole iteration.
fn scan(req: &Request, table: &Arc<SlotTable>) -> Result<Plan, DataError> {
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
        parts: vec![Send {
            to: backend as BackendIdx,
            channel: Channel::Data,
            bytes,
        }],
        merge: Merge::Scan {
            backend,
            backends: n,
            owners: Owners::new(table.clone()),
        },
    })
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
            databases: 16,
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
                databases: None,
            }),
        )
        .unwrap()
    }

    fn two_backends() -> Arc<SlotTable> {
        Arc::new(SlotTable::split_evenly(&["a:1".into(), "b:2".into()]))
    }

    #[test]
    fn a_keyed_command_goes_to_its_slots_owner() {
        let t = two_backends();
        let p = plan(&classified(&["GET", "foo"]), &t).unwrap();
        // slot("foo") = 289 < 512: the first backend.
        assert!(matches!(
            p,
            Plan::One(Send {
                to: 0,
                channel: Channel::Data,
                ..
            })
        ));
        let p = plan(&classified(&["SET", "{foo}x", "1"]), &t).unwrap();
        assert!(matches!(p, Plan::One(Send { to: 0, .. })));
    }

    #[test]
    fn keys_in_two_slots_are_crossslot_unless_the_command_splits() {
        let t = two_backends();
        assert_eq!(
            plan(&classified(&["RENAME", "foo", "a"]), &t).unwrap_err(),
            DataError::CrossSlot
        );
        let p = plan(&classified(&["MGET", "foo", "a", "bar"]), &t).unwrap();
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
        let t = Arc::new(b.build(1));
        reg.get("r:1").prove(now_us());
        let to = |args: &[&str]| match plan(&classified(args), &t).unwrap() {
            Plan::One(s) => t.backend_addr(s.to).to_string(),
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
        let t = Arc::new(b.build(1));
        assert!(matches!(
            plan(&classified(&["GET", "k"]), &t),
            Err(DataError::SlotBlocked(_))
        ));
        assert!(matches!(
            plan(&classified(&["GET", "foo"]), &t),
            Err(DataError::SlotNotServed(_))
        ));
    }
}
