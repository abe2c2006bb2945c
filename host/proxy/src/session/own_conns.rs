//! A `NOLOOP` tracking session's own backend connections, one per master: every command it
//! sends to a master goes on its connection there (its transactions and blocking commands
//! too, lent as dedicated connections), and each connection runs the client's tracking as
//! `CLIENT TRACKING ON BCAST NOLOOP [PREFIX …]` (RESP3, pushes between replies). A server's
//! reports on such a connection leave out exactly what that connection wrote, which is
//! exactly what the session wrote there, so Redis's own `NOLOOP` decides what the session
//! hears (`pubsub::tracking` filters the reports by what it read or its prefixes).
//!
//! The connections count under `dedicated_connections`. Replicas (read routing) and prefix
//! routes' targets keep the shared connections; the hub's reports of those are the session's.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use rustc_hash::FxHashMap;

use crate::backend::{ConnEvent, Dedicated, Events, ReplyRx, Reporting};
use crate::pubsub::SinkId;
use crate::worker::Worker;
use tessera_model::error::DataError;
use tessera_model::limits::OutputAccount;
use tessera_model::login::{Login, LoginStep, is_ok};
use tessera_model::router::SlotTable;
use tessera_resp::Proto;

/// Sets of own connections ever made in this process: each is told apart from the ones
/// before it, whose late events are then ignored.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// One session's own connections, by (master address, login id).
pub(super) struct OwnConns {
    worker: Weak<Worker>,
    sink: SinkId,
    generation: u64,
    proto: Proto,
    /// `CLIENT TRACKING ON BCAST NOLOOP …`, run by each connection at every connect.
    tracking: Bytes,
    conns: RefCell<FxHashMap<(Arc<str>, u64), Reporting>>,
}

impl OwnConns {
    /// A set for `sink`, whose connections will run `tracking` (a whole request).
    pub(super) fn new(worker: &Rc<Worker>, sink: SinkId, proto: Proto, tracking: Bytes) -> Self {
        Self {
            worker: Rc::downgrade(worker),
            sink,
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
            proto,
            tracking,
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
                self.with_conn(addr, login, true, |c| {
                    c.conn().send(Bytes::from_static(PING), None)
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
        match self.with_conn(addr, login, first, |c| {
            c.conn().send_block(bytes, skip, account)
        }) {
            Ok(rx) => rx,
            Err(e) => ReplyRx::failed(e),
        }
    }

    /// The connection to `addr` as a dedicated one (a transaction's, a blocking command's).
    ///
    /// # Errors
    /// None was open and the limit of dedicated connections to `addr` is reached.
    pub(super) fn lend(&self, addr: &Arc<str>, login: &Login) -> Result<Dedicated, DataError> {
        self.with_conn(addr, login, false, Reporting::lend)
    }

    fn with_conn<T>(
        &self,
        addr: &Arc<str>,
        login: &Login,
        first: bool,
        f: impl FnOnce(&Reporting) -> T,
    ) -> Result<T, DataError> {
        let mut conns = self.conns.borrow_mut();
        let key = (addr.clone(), login.id);
        if let Some(c) = conns.get(&key).filter(|c| !c.is_closed()) {
            return Ok(f(c));
        }
        conns.remove(&key);
        let worker = self.worker.upgrade().ok_or(DataError::BackendDropped)?;
        let c = worker.dedicated.take_reporting(
            addr,
            self.proto,
            &self.tracking_login(login),
            self.events(addr.clone(), first),
        )?;
        let out = f(&c);
        conns.insert(key, c);
        Ok(out)
    }

    /// `login`, then the tracking request while it still has the rights it logs in with
    /// (before the step that confines it to the data user).
    fn tracking_login(&self, login: &Login) -> Login {
        let step = LoginStep {
            request: self.tracking.clone(),
            what: "turning on the session's NOLOOP tracking (CLIENT TRACKING)",
            accept: is_ok,
            confines: false,
        };
        let mut steps = login.steps.to_vec();
        let at = steps.iter().position(|s| s.confines).unwrap_or(steps.len());
        steps.insert(at, step);
        Login {
            id: login.id.rotate_left(29) ^ 0x6E6F_6C6F_6F70,
            steps: Arc::from(steps),
        }
    }

    /// What the connection to `addr` tells the hub: up (its reports are the session's from
    /// now on), lost, and its invalidations.
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
}
