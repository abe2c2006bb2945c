//! Dedicated backend connections: one client's own, for what cannot share a pipelined
//! connection — a blocking command (BLPOP, XREAD … BLOCK) that holds its connection until it
//! is answered, and a WATCH that must see the same connection until EXEC. Bounded per backend
//! across the whole proxy (`DedicatedLimit`); a worker keeps a few idle ones for reuse
//! (`Dedicated::release`). Dropping one that is not released closes its socket at once, so a
//! client that goes away while blocked frees its server-side client immediately.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use super::{BackendConn, BackendOptions, Events, LateStep, ReplyRx};
use tessera_model::error::DataError;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_resp::Proto;

/// Idle dedicated connections a worker keeps per (backend, protocol, login). Every open
/// transaction holds one: with 8, fifty clients running transactions on one worker opened a
/// connection for most of them (13 000 connections in 3 s, docs/bench.md).
const IDLE_PER_KEY: usize = 64;
/// A blocked command waits as long as its own timeout says (0: for ever); the connection
/// itself never gives up on it.
const NO_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How many dedicated connections each backend may have open, all workers together.
#[derive(Debug)]
pub struct DedicatedLimit {
    per_backend: usize,
    open: Mutex<FxHashMap<Arc<str>, usize>>,
}

impl DedicatedLimit {
    pub fn new(per_backend: usize) -> Arc<Self> {
        Arc::new(Self {
            per_backend,
            open: Mutex::default(),
        })
    }

    /// Connections open to `addr` now.
    pub fn open(&self, addr: &str) -> usize {
        let open = self.open.lock().expect("dedicated limit lock poisoned");
        open.get(addr).copied().unwrap_or(0)
    }

    fn acquire(self: &Arc<Self>, addr: &Arc<str>) -> Result<Permit, DataError> {
        let mut open = self.open.lock().expect("dedicated limit lock poisoned");
        let n = open.entry(addr.clone()).or_default();
        if *n >= self.per_backend {
            return Err(DataError::DedicatedExhausted {
                addr: addr.clone(),
                limit: self.per_backend,
            });
        }
        *n += 1;
        Ok(Permit {
            limit: self.clone(),
            addr: addr.clone(),
        })
    }
}

/// One open dedicated connection's place under the limit.
struct Permit {
    limit: Arc<DedicatedLimit>,
    addr: Arc<str>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut open = self
            .limit
            .open
            .lock()
            .expect("dedicated limit lock poisoned");
        if let Some(n) = open.get_mut(&self.addr) {
            *n = n.saturating_sub(1);
        }
    }
}

type Key = (Arc<str>, Proto, u64);

/// A worker's idle dedicated connections.
pub struct DedicatedPool {
    opts: BackendOptions,
    limit: Arc<DedicatedLimit>,
    idle: RefCell<FxHashMap<Key, Vec<Dedicated>>>,
}

impl DedicatedPool {
    pub fn new(opts: BackendOptions, limit: Arc<DedicatedLimit>) -> Rc<Self> {
        let opts = BackendOptions {
            timeout: NO_TIMEOUT,
            ..opts
        };
        Rc::new(Self {
            opts,
            limit,
            idle: RefCell::default(),
        })
    }

    /// Lets the idle connections go (the logins they were made for changed).
    pub fn clear_idle(&self) {
        self.idle.borrow_mut().clear();
    }

    /// An idle connection to `addr` speaking `proto` as `login`, or a new one.
    ///
    /// # Errors
    /// `addr` has as many dedicated connections as the limit allows.
    pub fn take(
        self: &Rc<Self>,
        addr: &Arc<str>,
        proto: Proto,
        login: &Login,
    ) -> Result<Dedicated, DataError> {
        let key = (addr.clone(), proto, login.id);
        if let Some(d) = self.idle.borrow_mut().get_mut(&key).and_then(Vec::pop) {
            return Ok(d);
        }
        let permit = self.limit.acquire(addr)?;
        let (conn, abort) =
            BackendConn::spawn_owned(addr.clone(), proto, login.clone(), self.opts.clone());
        // Its server-side id, for CLIENT UNBLOCK should the command have to move.
        let id = conn.send(
            Bytes::from_static(b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n"),
            None,
        );
        Ok(Dedicated {
            conn,
            abort,
            _permit: Some(permit),
            key,
            pool: Rc::downgrade(self),
            client_id: ClientId::Pending(id),
            armed: true,
            lent: None,
        })
    }
}

impl DedicatedPool {
    /// A connection of one client's own that tells `events` of its connects, losses and
    /// pushes and runs `late` in its login (a `NOLOOP` tracking session's,
    /// `session::own_conns`), counted under the same limit as the others and, like them,
    /// never timing out a request.
    ///
    /// # Errors
    /// `addr` has as many dedicated connections as the limit allows.
    pub fn take_reporting(
        &self,
        addr: &Arc<str>,
        proto: Proto,
        login: &Login,
        events: Events,
        late: Option<LateStep>,
    ) -> Result<Reporting, DataError> {
        let permit = self.limit.acquire(addr)?;
        let (conn, abort) = BackendConn::spawn_reporting(
            addr.clone(),
            proto,
            login.clone(),
            self.opts.clone(),
            events.clone(),
            late,
        );
        Ok(Reporting {
            conn,
            abort,
            _permit: permit,
            key: (addr.clone(), proto, login.id),
            lent: Lent {
                events,
                closed: Rc::default(),
            },
        })
    }
}

/// A reporting connection ([`DedicatedPool::take_reporting`]). Dropped, it finishes what
/// is in flight and closes.
pub struct Reporting {
    conn: BackendConn,
    abort: tokio::task::AbortHandle,
    _permit: Permit,
    key: Key,
    lent: Lent,
}

/// What a [`Dedicated`] lent by a [`Reporting`] connection does when dropped unreleased:
/// marks the connection closed and tells its owner it is lost, before closing it.
#[derive(Clone)]
struct Lent {
    events: Events,
    closed: Rc<std::cell::Cell<bool>>,
}

impl Reporting {
    pub fn conn(&self) -> &BackendConn {
        &self.conn
    }

    /// Whether it is closed for good (a [`Dedicated`] lent from it was dropped unreleased).
    pub fn is_closed(&self) -> bool {
        self.lent.closed.get() || self.abort.is_finished()
    }

    /// The connection as a [`Dedicated`] for a transaction or a blocking command of its
    /// owner: released, it stays this connection; dropped unreleased (a command may be
    /// blocked on it, a `MULTI` open), it closes at once like any dedicated one, and the
    /// owner opens another.
    pub fn lend(&self) -> Dedicated {
        let id = self.conn.send(
            Bytes::from_static(b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n"),
            None,
        );
        Dedicated {
            conn: self.conn.clone(),
            abort: self.abort.clone(),
            _permit: None,
            key: self.key.clone(),
            pool: std::rc::Weak::new(),
            client_id: ClientId::Pending(id),
            armed: true,
            lent: Some(self.lent.clone()),
        }
    }
}

enum ClientId {
    Pending(ReplyRx),
    Known(Option<i64>),
}

/// One client's own backend connection. Dropped: its socket closes at once.
pub struct Dedicated {
    conn: BackendConn,
    abort: tokio::task::AbortHandle,
    /// `None` when lent by a [`Reporting`] connection, which holds it.
    _permit: Option<Permit>,
    key: Key,
    pool: std::rc::Weak<DedicatedPool>,
    client_id: ClientId,
    /// Dropping closes the socket at once; a released connection that finds no room in the
    /// idle list is disarmed instead, so what it still has in flight is answered.
    armed: bool,
    lent: Option<Lent>,
}

impl Dedicated {
    pub fn addr(&self) -> &Arc<str> {
        &self.key.0
    }

    pub fn send(&self, bytes: Bytes, account: Option<&Rc<OutputAccount>>) -> ReplyRx {
        self.conn.send(bytes, account)
    }

    /// `bytes` holds several requests whose last reply is the one returned (see
    /// `BackendConn::send_block`).
    pub fn send_block(
        &self,
        bytes: Bytes,
        skip: u32,
        account: Option<&Rc<OutputAccount>>,
    ) -> ReplyRx {
        self.conn.send_block(bytes, skip, account)
    }

    /// The server's id of this connection (`CLIENT ID`), once it has answered.
    pub async fn client_id(&mut self) -> Option<i64> {
        if let ClientId::Pending(rx) = &mut self.client_id {
            let id = rx.await.ok().and_then(|r| tessera_resp::parse_integer(&r));
            self.client_id = ClientId::Known(id);
        }
        match self.client_id {
            ClientId::Known(id) => id,
            ClientId::Pending(_) => None,
        }
    }

    /// Gives the connection back to its worker for reuse, once what was sent last leaves the
    /// server no state for it (a reply in, an EXEC or UNWATCH sent): requests still in flight
    /// are answered first, in order.
    pub fn release(mut self) {
        let Some(pool) = self.pool.upgrade() else {
            self.armed = false;
            return;
        };
        let mut idle = pool.idle.borrow_mut();
        let list = idle.entry(self.key.clone()).or_default();
        if list.len() < IDLE_PER_KEY {
            list.push(self);
        } else {
            self.armed = false;
        }
    }
}

impl Drop for Dedicated {
    fn drop(&mut self) {
        // Released connections are moved into the idle list, not dropped; a dropped one
        // may have a command blocked on it, which only closing the socket ends.
        if self.armed {
            if let Some(lent) = &self.lent {
                lent.closed.set(true);
                (lent.events)(super::ConnEvent::Lost);
            }
            self.abort.abort();
        }
    }
}
