//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, within one slot as Redis Cluster allows them.
//!
//! Each command between MULTI and EXEC is classified (and seen by the plugins) when it
//! arrives; one in another slot, one that cannot be queued, or one the proxy refuses makes
//! EXEC answer `EXECABORT`, as Redis does. Once the transaction's slot is known (its first
//! keyed command, or the WATCH before MULTI) it is opened on the server, so that what the
//! server refuses while queuing (`-OOM`, `-BUSY` …) is refused there, in the server's words:
//!
//! - after WATCH, on the dedicated connection the WATCH was sent on (MULTI is sent on it at
//!   once), held from WATCH until EXEC, DISCARD or UNWATCH;
//! - otherwise on a dedicated connection taken at the first keyed command, to the slot's
//!   master: `MULTI` and the commands queued before it (PING …) are sent there, then each
//!   command as it arrives; the client gets the server's reply (`+QUEUED` or its error).
//!
//! Dedicated connections are bounded per backend (`dedicated_connections`) and are in the
//! session's backend database (its login, as for every connection of its own). EXEC or
//! DISCARD goes on the same connection, which is released after; a refusal by the proxy
//! sends DISCARD there and answers `EXECABORT`. EXEC ends its batch, as a blocking command
//! does, and waits for the replies ahead of it from outside the transaction if there are any:
//! what the client pipelined before it on the shared connections runs before it, what it
//! pipelines after runs after. RESET sends DISCARD; a client that goes away closes the
//! connection.
//!
//! With no dedicated connection free (the limit reached) the transaction stays with the
//! proxy: queued here, then sent as one contiguous `MULTI … EXEC` block on the shared
//! pipelined connection of the slot's master at EXEC, where only EXEC's reply is the
//! client's (the session answered `+QUEUED` already). So does a transaction with no key.
//!
//! A cluster-wide admin command (`CONFIG SET`, `FLUSHDB` …) is queued on the transaction's
//! server and sent to the other masters once EXEC has run (`fanout`).
//!
//! A slot that moves while a transaction is open fails its EXEC whole (`DISCARD` where it is
//! open on the server): a null reply after WATCH (as if a watched key changed), otherwise
//! `-TRYAGAIN`. Never a partial transaction, never one run on an owner that no longer has the
//! slot.

mod fanout;

use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::Session;
use super::reply::Pending;
use crate::backend::{Dedicated, ReplyResult, ReplyRx};
use crate::hotcache::Written;
use crate::stages::classify::Classified;
use crate::worker::Worker;
use tessera_model::command::{Command, Kind, Local, Tx};
use tessera_model::error::DataError;
use tessera_model::limits::{MemoryPool, OutputAccount};
use tessera_model::router::{BackendIdx, SlotId, SlotTable};
use tessera_resp::Proto;

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";
const UNWATCH: &[u8] = b"*1\r\n$7\r\nUNWATCH\r\n";
const DISCARD: &[u8] = b"*1\r\n$7\r\nDISCARD\r\n";

/// A session's transaction state.
#[derive(Default)]
pub(crate) struct Transaction {
    /// Boxed: every idle session holds a `Transaction`.
    queue: Option<Box<Queue>>,
    watch: Option<Watch>,
}

/// A transaction since MULTI. The commands the proxy holds (until it is open on a server, or
/// all of them when it cannot be) take their bytes from the proxy's request memory
/// (`query_buffer_total`, shared by every client's unfinished requests), given back when they
/// are sent or the queue goes (EXEC, DISCARD, RESET, the client gone).
struct Queue {
    bytes: BytesMut,
    /// Commands queued, here or on the server.
    count: u32,
    slot: Option<SlotId>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    failed: bool,
    /// What the queued commands may write that a hot-key cache could hold: what EXEC writes.
    written: Written,
    pool: Arc<MemoryPool>,
    /// Where the transaction is open on a server.
    server: Server,
    /// Cluster-wide admin commands queued, for the other masters after EXEC.
    fanouts: fanout::Queued,
}

/// Where a transaction is open on a server (sent `MULTI`), if it is.
enum Server {
    /// Not yet: its slot is not known.
    No,
    /// Never: no dedicated connection was free; it stays with the proxy until EXEC.
    Unavailable,
    /// On a dedicated connection of its own.
    Own(Dedicated),
    /// On the watch's connection.
    Watch,
}

impl Queue {
    fn new(pool: Arc<MemoryPool>) -> Self {
        Self {
            bytes: BytesMut::new(),
            count: 0,
            slot: None,
            failed: false,
            written: Written::Nothing,
            pool,
            server: Server::No,
            fanouts: fanout::Queued::default(),
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.pool.release(self.bytes.len());
    }
}

/// Keys watched on one backend, over a connection held for it.
struct Watch {
    conn: Dedicated,
    slot: SlotId,
}

impl Transaction {
    /// Between MULTI and EXEC/DISCARD.
    #[inline]
    pub(crate) fn queuing(&self) -> bool {
        self.queue.is_some()
    }

    /// Redis's refusal of a command it never queues (`SAVE`, `SHUTDOWN`, …) sent inside
    /// MULTI, whatever the proxy's own policy thinks of the command.
    pub(crate) fn never_queued(&self, cmd: &Command) -> Option<DataError> {
        (cmd.no_multi && self.queuing()).then_some(DataError::NoMulti)
    }

    /// A command was refused while queuing (the error is the client's reply).
    pub(crate) fn refused(&mut self) {
        if let Some(q) = &mut self.queue {
            q.failed = true;
        }
    }

    /// What the queued commands may write, for the hot-key cache (EXEC writes it).
    pub(crate) fn queued_writes(&self) -> Written {
        self.queue
            .as_ref()
            .map_or(Written::Nothing, |q| q.written.clone())
    }

    /// Keys are watched (the next EXEC depends on them).
    #[inline]
    pub(crate) fn watching(&self) -> bool {
        self.watch.is_some()
    }

    /// Back to no transaction (RESET, DISCARD): DISCARD where it is open on a server (which
    /// unwatches too), UNWATCH where keys are only watched; the connections are let go.
    pub(crate) fn reset(&mut self) {
        let server = self
            .queue
            .take()
            .map(|mut q| std::mem::replace(&mut q.server, Server::No));
        match (server, self.watch.take()) {
            (Some(Server::Own(conn)), w) => {
                discard(conn);
                if let Some(w) = w {
                    unwatch(w);
                }
            }
            (Some(Server::Watch), Some(w)) => discard(w.conn),
            (_, Some(w)) => unwatch(w),
            (_, None) => {}
        }
    }

    /// The connection the open transaction is on, if it is open on a server.
    fn server_conn(&self) -> Option<&Dedicated> {
        match &self.queue.as_ref()?.server {
            Server::Own(conn) => Some(conn),
            Server::Watch => self.watch.as_ref().map(|w| &w.conn),
            Server::No | Server::Unavailable => None,
        }
    }
}

/// Commands run at once even while queuing, as Redis runs them.
pub(crate) fn runs_while_queuing(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Transaction(_) | Kind::Local(Local::Quit | Local::Reset)
    )
}

/// Lets a watch go: UNWATCH on its connection (FIFO: it is done before the connection's next
/// use), and the connection back to the worker.
fn unwatch(w: Watch) {
    drop(w.conn.send(Bytes::from_static(UNWATCH), None));
    w.conn.release();
}

/// EXEC on `conn`, if `slot` is still its server's (routed with the table in force now);
/// otherwise DISCARD there and the client's answer: a null after WATCH (`watched`), as if a
/// watched key changed, else `-TRYAGAIN` or the route's error.
fn send_exec(
    worker: &Worker,
    conn: Dedicated,
    account: &Rc<OutputAccount>,
    proto: Proto,
    slot: SlotId,
    watched: Option<SlotId>,
) -> Result<ReplyRx, ReplyResult> {
    let table = worker.shared.router.load();
    let route = table.route(slot);
    match route {
        Ok(b) if table.backend_addr(b) == conn.addr() => {
            let rx = conn.send(Bytes::from_static(EXEC), Some(account));
            // EXEC ends the transaction and unwatches: the connection is clean once it ran.
            conn.release();
            Ok(rx)
        }
        // The slot moved since the transaction opened: what was queued (and watched) is not
        // where it would run.
        _ => {
            discard(conn);
            if watched.is_none() {
                return Err(Err(moved(route, slot)));
            }
            let b = null(proto);
            // Held for the client until written, as a backend's reply is.
            account.charge(b.len());
            Err(Ok(b))
        }
    }
}

/// Ends a transaction open on `conn` without running it, and lets the connection go.
fn discard(conn: Dedicated) {
    drop(conn.send(Bytes::from_static(DISCARD), None));
    conn.release();
}

fn null(proto: Proto) -> Bytes {
    Bytes::from_static(match proto {
        Proto::Resp2 => b"*-1\r\n",
        Proto::Resp3 => b"_\r\n",
    })
}

/// Why a transaction whose slot has no owner it can run on now fails: the route's error, or
/// `-TRYAGAIN` while the slot moves.
fn moved(route: Result<BackendIdx, DataError>, slot: SlotId) -> DataError {
    match route {
        Err(e) if !matches!(e, DataError::SlotBlocked(_)) => e,
        _ => DataError::TransactionMoved(slot.0),
    }
}

fn err(text: &str) -> Pending {
    Pending::error(&DataError::Invalid(text.into()))
}

impl Session {
    /// MULTI EXEC DISCARD WATCH UNWATCH.
    pub(super) fn transaction(&mut self, t: Tx, c: &Classified<'_>) -> Pending {
        match t {
            Tx::Multi if self.tx.queuing() => err("MULTI calls can not be nested"),
            Tx::Multi => {
                let mut q = Queue::new(self.worker.shared.requests.clone());
                // Watched: the slot is known, and the watch's connection is the server's.
                if let Some(w) = &self.tx.watch {
                    drop(w.conn.send(Bytes::from_static(MULTI), None));
                    q.server = Server::Watch;
                }
                self.tx.queue = Some(Box::new(q));
                Pending::Ready(Bytes::from_static(b"+OK\r\n"))
            }
            Tx::Discard if !self.tx.queuing() => err("DISCARD without MULTI"),
            Tx::Discard => {
                self.tx.reset();
                Pending::Ready(Bytes::from_static(b"+OK\r\n"))
            }
            Tx::Exec => match self.tx.queue.take() {
                None => err("EXEC without MULTI"),
                Some(q) => self.exec(q),
            },
            Tx::Watch if self.tx.queuing() => err("WATCH inside MULTI is not allowed"),
            Tx::Watch => self.watch(c),
            Tx::Unwatch => {
                if let Some(conn) = self.tx.server_conn() {
                    // Queued on the server, as Redis queues it (EXEC unwatches anyway).
                    return Pending::One(conn.send(c.req.as_bytes().clone(), Some(&self.account)));
                }
                match self.tx.watch.take() {
                    Some(w) => {
                        let rx = w.conn.send(c.req.as_bytes().clone(), Some(&self.account));
                        w.conn.release();
                        Pending::One(rx)
                    }
                    None => Pending::Ready(Bytes::from_static(b"+OK\r\n")),
                }
            }
        }
    }

    /// A command between MULTI and EXEC: checked and queued, the server's reply where the
    /// transaction is open on one, else `+QUEUED`; or refused, and the transaction with it.
    pub(super) fn queue(&mut self, c: &Classified<'_>) -> Pending {
        match self.try_queue(c) {
            Ok(Some(rx)) => Pending::One(rx),
            Ok(None) => Pending::Ready(Bytes::from_static(b"+QUEUED\r\n")),
            Err(e) => {
                self.tx.refused();
                Pending::error(&e)
            }
        }
    }

    fn try_queue(&mut self, c: &Classified<'_>) -> Result<Option<ReplyRx>, DataError> {
        let queueable = matches!(
            c.cmd.kind,
            Kind::Keyed
                | Kind::AdminKeyed
                | Kind::Split(_)
                | Kind::Blocking
                | Kind::Local(Local::Ping | Local::Echo)
        ) || fanout::queueable(c.cmd.kind);
        if let Some(e) = self.tx.never_queued(c.cmd) {
            return Err(e);
        }
        if !queueable {
            return Err(DataError::NotInTransaction(
                tessera_model::error::display_name(c.cmd.name),
            ));
        }
        let written = self.hot_cache_written(c);
        let limit = self.worker.shared.config.query_buffer_limit;
        let watched = self.tx.watch.as_ref().map(|w| w.slot);
        let table = self.worker.shared.router.load();
        let q = self.tx.queue.as_mut().expect("queuing");
        if !c.keys.is_empty() {
            let slot = c.slot_in(&table)?;
            match q.slot.or(watched) {
                Some(s) if s != slot => return Err(cross(&table, s, slot)),
                _ => q.slot = Some(slot),
            }
        }
        let bytes = crate::stages::plan::backend_request(c);
        if fanout::queueable(c.cmd.kind) {
            let pool = q.pool.clone();
            q.fanouts.push(q.count, &bytes, &pool, limit)?;
        }
        if matches!(q.server, Server::No) && q.slot.is_some() {
            self.open_on_server(&table);
        }
        if let Some(conn) = self.tx.server_conn() {
            let rx = conn.send(bytes, Some(&self.account));
            let q = self.tx.queue.as_mut().expect("queuing");
            q.count += 1;
            q.written.add(written);
            return Ok(Some(rx));
        }
        let q = self.tx.queue.as_mut().expect("queuing");
        if q.bytes.len() + bytes.len() > limit {
            return Err(DataError::QueryBufferLimit { limit });
        }
        if !q.pool.try_acquire(bytes.len()) {
            return Err(DataError::ProxyRequestMemory {
                limit: q.pool.limit(),
            });
        }
        q.bytes.extend_from_slice(&bytes);
        q.count += 1;
        q.written.add(written);
        Ok(None)
    }

    /// Opens the transaction, its slot now known, on a dedicated connection to the slot's
    /// master (in the session's database, as its login says): `MULTI` and what was queued
    /// before, whose replies the client had from the proxy already. With none free, or the
    /// slot without an owner now, it stays with the proxy (EXEC then decides).
    fn open_on_server(&mut self, table: &SlotTable) {
        let Some(slot) = self.tx.queue.as_ref().map(|q| q.slot) else {
            return;
        };
        let Some(b) = slot.and_then(|s| table.route(s).ok()) else {
            return;
        };
        let owner = table.backend_addr(b).clone();
        let login = table.login_for(b, &self.login);
        let taken = self.take_dedicated(&owner, login);
        let Some(q) = self.tx.queue.as_mut() else {
            return;
        };
        let Ok(conn) = taken else {
            q.server = Server::Unavailable;
            return;
        };
        let mut block = BytesMut::with_capacity(MULTI.len() + q.bytes.len());
        block.extend_from_slice(MULTI);
        block.extend_from_slice(&q.bytes);
        drop(conn.send_block(block.freeze(), q.count, None));
        q.pool.release(q.bytes.len());
        q.bytes = BytesMut::new();
        q.server = Server::Own(conn);
    }

    fn exec(&mut self, mut q: Box<Queue>) -> Pending {
        let watch = self.tx.watch.take();
        let fanouts = std::mem::take(&mut q.fanouts);
        // The transaction's server, where it is open or where the proxy will send it: the
        // master the fan-outs queued in it have run on (`None` when there are none).
        let ran_on = match (&q.server, &watch) {
            _ if fanouts.is_empty() => None,
            (Server::Own(conn), _) => Some(conn.addr().clone()),
            (Server::Watch, Some(w)) => Some(w.conn.addr().clone()),
            _ => {
                let table = self.worker.shared.router.load();
                let slot = q.slot.or(watch.as_ref().map(|w| w.slot));
                let owner = table.route(slot.unwrap_or(SlotId(0))).ok();
                owner.map(|b| table.backend_addr(b).clone())
            }
        };
        let exec = match (std::mem::replace(&mut q.server, Server::No), watch) {
            (Server::Own(conn), None) => self.exec_on_server(&q, conn, None),
            (Server::Watch, Some(w)) => self.exec_on_server(&q, w.conn, Some(w.slot)),
            (_, watch) => self.exec_here(q, watch),
        };
        let Some(ran_on) = ran_on else {
            return exec;
        };
        let after = fanout::AfterExec {
            fanouts,
            ran_on,
            worker: self.worker.clone(),
            account: self.account.clone(),
            proto: self.proto,
            login: self.login.clone(),
            own: self.own_conns().cloned(),
        };
        // Blocked, so that what the client sends after EXEC runs after the other masters ran
        // the fan-outs too.
        match exec {
            Pending::One(rx) => Pending::Blocked(Box::pin(async move {
                let _batch = super::Batch::enter(after.worker.clone());
                after.finish(rx.await).await
            })),
            Pending::Blocked(f) => Pending::Blocked(Box::pin(async move {
                let r = f.await;
                let _batch = super::Batch::enter(after.worker.clone());
                after.finish(r).await
            })),
            // Refused, aborted or failed: nothing ran.
            other => other,
        }
    }

    /// EXEC of a transaction open on `conn` (the watch's, of keys in slot `watched`): there,
    /// if the slot is still its server's then.
    fn exec_on_server(&mut self, q: &Queue, conn: Dedicated, watched: Option<SlotId>) -> Pending {
        // Opened on a server only once its slot is known: by a keyed command or the watch.
        let slot = match q.slot.or(watched) {
            Some(slot) if !q.failed => slot,
            _ => {
                discard(conn);
                return Pending::error(&DataError::ExecAbort);
            }
        };
        let (worker, account, proto) = (self.worker.clone(), self.account.clone(), self.proto);
        // Its batch ends with it (a `Blocked` reply): what the client sends after EXEC runs
        // after it. Counted in flight until answered, as any command: a table swap that moves
        // the slot waits for it, and one that moved it already is seen when it is routed.
        if !self.sent_ahead {
            // Nothing of its batch ahead of it on another connection: sent now.
            let batch = super::Batch::enter(worker.clone());
            let sent = send_exec(&worker, conn, &account, proto, slot, watched);
            return Pending::Blocked(Box::pin(async move {
                let _batch = batch;
                match sent {
                    Ok(rx) => rx.await,
                    Err(r) => r,
                }
            }));
        }
        // Sent once the replies ahead of it are in: what the client sent before EXEC on
        // other connections has run before it.
        Pending::Blocked(Box::pin(async move {
            let _batch = super::Batch::enter(worker.clone());
            match send_exec(&worker, conn, &account, proto, slot, watched) {
                Ok(rx) => rx.await,
                Err(r) => r,
            }
        }))
    }

    /// EXEC of a transaction the proxy queued: one `MULTI … EXEC` block.
    fn exec_here(&mut self, q: Box<Queue>, watch: Option<Watch>) -> Pending {
        if q.failed {
            if let Some(w) = watch {
                unwatch(w);
            }
            return Pending::error(&DataError::ExecAbort);
        }
        if q.count == 0 && watch.is_none() {
            return Pending::Ready(Bytes::from_static(b"*0\r\n"));
        }
        let slot = q
            .slot
            .or(watch.as_ref().map(|w| w.slot))
            .unwrap_or(SlotId(0));
        let table = self.worker.shared.router.load();
        let owner_idx = table.route(slot).ok();
        let mut block = BytesMut::with_capacity(MULTI.len() + q.bytes.len() + EXEC.len());
        block.extend_from_slice(MULTI);
        block.extend_from_slice(&q.bytes);
        block.extend_from_slice(EXEC);
        let block = block.freeze();
        let skip = 1 + q.count;
        match (watch, owner_idx) {
            (Some(w), Some(b)) if w.conn.addr() == table.backend_addr(b) => {
                let rx = w.conn.send_block(block, skip, Some(&self.account));
                // EXEC unwatches: the connection is clean again once it has run.
                w.conn.release();
                Pending::One(rx)
            }
            // The slot moved since WATCH: what was watched is not where the transaction would
            // run, so it fails as if a watched key had changed.
            (Some(w), _) => {
                unwatch(w);
                Pending::Ready(null(self.proto))
            }
            (None, Some(b)) => Pending::One(self.sender(&table).data(b, block, skip)),
            (None, None) => Pending::error(&moved(table.route(slot), slot)),
        }
    }

    /// WATCH keys: on a dedicated connection to their slot's master, held until EXEC,
    /// DISCARD or UNWATCH. Every key watched in a session shares one slot.
    fn watch(&mut self, c: &Classified<'_>) -> Pending {
        let table = self.worker.shared.router.load();
        let slot = match c.slot_in(&table) {
            Ok(s) => s,
            Err(e) => return Pending::error(&e),
        };
        if let Some(w) = &self.tx.watch
            && w.slot != slot
        {
            return Pending::error(&cross(&table, w.slot, slot));
        }
        let (owner, login) = match table.route(slot) {
            Ok(b) => (
                table.backend_addr(b).clone(),
                table.login_for(b, &self.login),
            ),
            Err(e) => return Pending::error(&e),
        };
        let conn = match self.tx.watch.take() {
            Some(w) if *w.conn.addr() == owner => w.conn,
            other => {
                if let Some(w) = other {
                    unwatch(w);
                }
                match self.take_dedicated(&owner, login) {
                    Ok(conn) => conn,
                    Err(e) => return Pending::error(&e),
                }
            }
        };
        let rx = conn.send(c.req.as_bytes().clone(), Some(&self.account));
        self.tx.watch = Some(Watch { conn, slot });
        Pending::One(rx)
    }
}

/// Keys of a transaction in two slots: `CROSSSLOT`, naming the clusters when a prefix route
/// puts them in two.
fn cross(table: &SlotTable, a: SlotId, b: SlotId) -> DataError {
    if !SlotTable::is_routed(a) && !SlotTable::is_routed(b) {
        return DataError::CrossSlot;
    }
    DataError::CrossCluster(format!(
        "{}, {}",
        table.describe_cluster(a),
        table.describe_cluster(b)
    ))
}
