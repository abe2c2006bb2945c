//! A `NOLOOP` tracking session's own backend connections, one per master: every command it
//! sends to a master goes on its connection there (its transactions and blocking commands
//! too, lent as dedicated connections), and each connection runs the client's tracking as
//! `CLIENT TRACKING ON BCAST NOLOOP [PREFIX …]`. A server's reports for such a connection
//! leave out exactly what that connection wrote, which is exactly what the session wrote
//! there, so Redis's own `NOLOOP` decides what the session hears (`pubsub::tracking` filters
//! the reports by what it read or its prefixes). In RESP3 the reports are pushes between its
//! replies. A RESP2 connection cannot carry them, so its tracking redirects them
//! (`REDIRECT id`) to a second connection of the session's to that master, a RESP3 listener
//! whose id the first one's login waits for (`LateStep`); the two are replaced together once
//! the listener breaks (its id, which the tracking names, is gone with it).
//!
//! The connections count under `dedicated_connections`. Replicas (read routing) and prefix
//! routes' targets keep the shared connections; the hub's reports of those are the session's.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use rustc_hash::FxHashMap;

use crate::backend::{ConnEvent, Dedicated, Events, LateStep, ReplyRx, Reporting};
use crate::pubsub::SinkId;
use crate::worker::Worker;
use tessera_model::error::DataError;
use tessera_model::limits::OutputAccount;
use tessera_model::login::{Login, LoginStep, is_ok};
use tessera_model::router::SlotTable;
use tessera_resp::{Proto, encode_request, parse_integer};

/// Sets of own connections ever made in this process: each is told apart from the ones
/// before it, whose late events are then ignored.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const CLIENT_ID: &[u8] = b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";

/// One session's own connections, by (master address, login id).
pub(super) struct OwnConns {
    worker: Weak<Worker>,
    sink: SinkId,
    generation: u64,
    proto: Proto,
    /// The client's BCAST prefixes (none: every key), for each connection's tracking.
    prefixes: Rc<[Bytes]>,
    conns: RefCell<FxHashMap<(Arc<str>, u64), Own>>,
}

/// The session's connection to one master.
struct Own {
    conn: Reporting,
    /// RESP2: the connection its reports are redirected to.
    listener: Option<Reporting>,
    /// The listener broke or never answered: the pair is replaced at the next use.
    broken: Rc<Cell<bool>>,
}

impl Own {
    fn is_closed(&self) -> bool {
        self.broken.get()
            || self.conn.is_closed()
            || self.listener.as_ref().is_some_and(Reporting::is_closed)
    }
}

/// A RESP2 connection's listener's id: asked once, waited for by every connect of it.
struct ListenerId {
    known: tokio::sync::OnceCell<Option<i64>>,
    asked: RefCell<Option<ReplyRx>>,
}

impl OwnConns {
    /// A set for `sink`, whose connections will track `prefixes` (none: every key).
    pub(super) fn new(worker: &Rc<Worker>, sink: SinkId, proto: Proto, prefixes: &[Bytes]) -> Self {
        Self {
            worker: Rc::downgrade(worker),
            sink,
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
            proto,
            prefixes: Rc::from(prefixes),
            conns: RefCell::default(),
        }
    }

    /// Which set this is, for the hub (`Hub::track`).
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Opens a connection to every master of `table` now, as the session starts tracking:
    /// the replies of a `PING` on each, once it is logged in and tracking.
    ///
    /// # Errors
    /// A master has as many dedicated connections as the limit allows.
    pub(super) fn open_all(
        &self,
        table: &SlotTable,
        login: &Login,
    ) -> Result<Vec<ReplyRx>, DataError> {
        (0..table.backends().len())
            .map(|b| {
                let addr = table.backend_addr(b as _);
                let login = table.login_for(b as _, login);
                self.with_own(addr, login, true, |o| {
                    o.conn.conn().send(Bytes::from_static(PING), None)
                })
            })
            .collect()
    }

    /// Sends `bytes` (`skip` replies dropped before the one returned) on the connection to
    /// `addr`, opened if there is none (or it closed). `first`: opened as tracking starts,
    /// when nothing was read yet that its first reports could have missed.
    pub(super) fn send_block(
        &self,
        addr: &Arc<str>,
        login: &Login,
        bytes: Bytes,
        skip: u32,
        account: Option<&Rc<OutputAccount>>,
        first: bool,
    ) -> ReplyRx {
        let sent = self.with_own(addr, login, first, |o| {
            o.conn.conn().send_block(bytes, skip, account)
        });
        sent.unwrap_or_else(ReplyRx::failed)
    }

    /// The connection to `addr` as a dedicated one (a transaction's, a blocking command's).
    ///
    /// # Errors
    /// None was open and the limit of dedicated connections to `addr` is reached.
    pub(super) fn lend(&self, addr: &Arc<str>, login: &Login) -> Result<Dedicated, DataError> {
        self.with_own(addr, login, false, |o| o.conn.lend())
    }

    fn with_own<T>(
        &self,
        addr: &Arc<str>,
        login: &Login,
        first: bool,
        f: impl FnOnce(&Own) -> T,
    ) -> Result<T, DataError> {
        let mut conns = self.conns.borrow_mut();
        let key = (addr.clone(), login.id);
        if let Some(o) = conns.get(&key).filter(|o| !o.is_closed()) {
            return Ok(f(o));
        }
        conns.remove(&key);
        let o = self.open(addr, login, first)?;
        let out = f(&o);
        conns.insert(key, o);
        Ok(out)
    }

    /// A new connection to `addr` as `login`, tracking from every connect (RESP2: with its
    /// listener).
    fn open(&self, addr: &Arc<str>, login: &Login, first: bool) -> Result<Own, DataError> {
        let worker = self.worker.upgrade().ok_or(DataError::BackendDropped)?;
        let broken = Rc::new(Cell::new(false));
        let events = self.events(addr.clone(), first);
        let id = login.id.rotate_left(29) ^ 0x6E6F_6C6F_6F70;
        if self.proto == Proto::Resp3 {
            let login = login.with_step(tracking_step(&self.prefixes, None), id);
            let conn = worker
                .dedicated
                .take_reporting(addr, self.proto, &login, events, None)?;
            return Ok(Own {
                conn,
                listener: None,
                broken,
            });
        }
        let listener = worker.dedicated.take_reporting(
            addr,
            Proto::Resp3,
            &worker.control_login(),
            self.listener_events(addr.clone(), broken.clone()),
            None,
        )?;
        let asked = listener.conn().send(Bytes::from_static(CLIENT_ID), None);
        let late = redirected(self.prefixes.clone(), asked, broken.clone());
        let conn = worker
            .dedicated
            .take_reporting(addr, self.proto, login, events, Some(late))?;
        Ok(Own {
            conn,
            listener: Some(listener),
            broken,
        })
    }

    /// What the connection to `addr` tells the hub: up (its reports are the session's from
    /// now on), lost, and its invalidations (RESP3).
    fn events(&self, addr: Arc<str>, first: bool) -> Events {
        let (worker, sink, generation) = (self.worker.clone(), self.sink, self.generation);
        let fresh = Cell::new(first);
        Rc::new(move |e| {
            let Some(w) = worker.upgrade() else { return };
            match e {
                ConnEvent::Connected => {
                    w.pubsub
                        .own_connected(sink, generation, &addr, !fresh.replace(false));
                }
                ConnEvent::Lost => w.pubsub.own_lost(sink, generation, &addr),
                ConnEvent::Push(push) => w.pubsub.own_report(sink, generation, &push),
            }
        })
    }

    /// What a RESP2 connection's listener tells the hub: the reports; once it breaks, the
    /// pair is done.
    fn listener_events(&self, addr: Arc<str>, broken: Rc<Cell<bool>>) -> Events {
        let (worker, sink, generation) = (self.worker.clone(), self.sink, self.generation);
        Rc::new(move |e| {
            let Some(w) = worker.upgrade() else { return };
            match e {
                ConnEvent::Connected => {}
                ConnEvent::Lost => {
                    broken.set(true);
                    w.pubsub.own_lost(sink, generation, &addr);
                }
                ConnEvent::Push(push) => w.pubsub.own_report(sink, generation, &push),
            }
        })
    }
}

/// `CLIENT TRACKING ON BCAST NOLOOP [REDIRECT id] [PREFIX p …]`, as a login step.
fn tracking_step(prefixes: &[Bytes], redirect: Option<i64>) -> LoginStep {
    let id = redirect.map(|id| id.to_string());
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"ON", b"BCAST", b"NOLOOP"];
    if let Some(id) = &id {
        args.push(b"REDIRECT");
        args.push(id.as_bytes());
    }
    for p in prefixes {
        args.push(b"PREFIX");
        args.push(p);
    }
    let size = args.iter().map(|a| a.len()).sum();
    LoginStep {
        request: encode_request(args.len(), args.iter().copied(), size),
        what: "turning on the session's NOLOOP tracking (CLIENT TRACKING)",
        accept: is_ok,
        confines: false,
    }
}

/// A RESP2 connection's tracking step, redirected to its listener once `asked` (the
/// listener's `CLIENT ID`) is answered; without an answer the connect fails and the pair is
/// `broken`.
fn redirected(prefixes: Rc<[Bytes]>, asked: ReplyRx, broken: Rc<Cell<bool>>) -> LateStep {
    let id = Rc::new(ListenerId {
        known: tokio::sync::OnceCell::new(),
        asked: RefCell::new(Some(asked)),
    });
    Rc::new(move || {
        let (id, prefixes, broken) = (id.clone(), prefixes.clone(), broken.clone());
        Box::pin(async move {
            let known = id
                .known
                .get_or_init(|| async {
                    let asked = id.asked.borrow_mut().take();
                    match asked {
                        Some(rx) => rx.await.ok().and_then(|r| parse_integer(&r)),
                        None => None,
                    }
                })
                .await;
            match known {
                Some(n) => Ok(tracking_step(&prefixes, Some(*n))),
                None => {
                    broken.set(true);
                    Err("the connection its tracking reports to did not answer".into())
                }
            }
        })
    })
}
