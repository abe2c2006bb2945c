//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, within one slot as Redis Cluster allows them.
//!
//! Between MULTI and EXEC the session queues commands itself: each is classified (and seen by
//! the plugins) when it arrives, and one in another slot, one that cannot be queued, or an
//! error refuses it there and makes EXEC answer `EXECABORT`, as Redis does. EXEC sends the
//! whole transaction as one contiguous `MULTI … EXEC` block:
//!
//! - without WATCH, on the shared pipelined connection of the slot's master (no connection
//!   per transaction; other sessions' requests go before or after the block, never inside);
//! - with WATCH, on the dedicated connection the WATCH was sent on, held from WATCH until
//!   EXEC, DISCARD or UNWATCH (bounded per backend, `dedicated_connections`).
//!
//! Only EXEC's reply is the client's; the backend's `+OK`/`+QUEUED` are dropped (the session
//! answered those already). A slot that moves while a transaction is open fails its EXEC
//! whole: a null reply after WATCH (as if a watched key changed), otherwise `-TRYAGAIN`.
//! Never a partial transaction, never one run on an owner that no longer has the slot.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::Session;
use super::reply::Pending;
use crate::backend::{Dedicated, Lane};
use crate::hotcache::Written;
use crate::stages::classify::Classified;
use tessera_model::command::{Command, Kind, Local, Tx};
use tessera_model::error::DataError;
use tessera_model::limits::MemoryPool;
use tessera_model::router::{SlotId, SlotTable};
use tessera_resp::Proto;

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";
const UNWATCH: &[u8] = b"*1\r\n$7\r\nUNWATCH\r\n";

/// A session's transaction state.
#[derive(Default)]
pub(crate) struct Transaction {
    queue: Option<Queue>,
    watch: Option<Watch>,
}

/// Commands queued since MULTI. Their bytes are taken from the proxy's request memory
/// (`query_buffer_total`, shared by every client's unfinished requests) while queued, and
/// given back when the queue goes (EXEC, DISCARD, RESET, the client gone).
struct Queue {
    bytes: BytesMut,
    count: u32,
    slot: Option<SlotId>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    failed: bool,
    /// What the queued commands may write that a hot-key cache could hold: what EXEC writes.
    written: Written,
    pool: Arc<MemoryPool>,
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

    /// Back to no transaction (RESET): the watch's connection is let go.
    pub(crate) fn reset(&mut self) {
        self.queue = None;
        if let Some(w) = self.watch.take() {
            unwatch(w);
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

fn null(proto: Proto) -> Pending {
    Pending::Ready(Bytes::from_static(match proto {
        Proto::Resp2 => b"*-1\r\n",
        Proto::Resp3 => b"_\r\n",
    }))
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
                self.tx.queue = Some(Queue::new(self.worker.shared.requests.clone()));
                Pending::Ready(Bytes::from_static(b"+OK\r\n"))
            }
            Tx::Discard => match self.tx.queue.take() {
                None => err("DISCARD without MULTI"),
                Some(_) => {
                    if let Some(w) = self.tx.watch.take() {
                        unwatch(w);
                    }
                    Pending::Ready(Bytes::from_static(b"+OK\r\n"))
                }
            },
            Tx::Exec => match self.tx.queue.take() {
                None => err("EXEC without MULTI"),
                Some(q) => self.exec(q),
            },
            Tx::Watch if self.tx.queuing() => err("WATCH inside MULTI is not allowed"),
            Tx::Watch => self.watch(c),
            Tx::Unwatch => match self.tx.watch.take() {
                Some(w) => {
                    let rx = w.conn.send(c.req.as_bytes().clone(), Some(&self.account));
                    w.conn.release();
                    Pending::One(rx)
                }
                None => Pending::Ready(Bytes::from_static(b"+OK\r\n")),
            },
        }
    }

    /// A command between MULTI and EXEC: checked and queued, `+QUEUED`; or refused, and the
    /// transaction with it.
    pub(super) fn queue(&mut self, c: &Classified<'_>) -> Pending {
        match self.try_queue(c) {
            Ok(()) => Pending::Ready(Bytes::from_static(b"+QUEUED\r\n")),
            Err(e) => {
                self.tx.refused();
                Pending::error(&e)
            }
        }
    }

    fn try_queue(&mut self, c: &Classified<'_>) -> Result<(), DataError> {
        let queueable = matches!(
            c.cmd.kind,
            Kind::Keyed
                | Kind::AdminKeyed
                | Kind::Split(_)
                | Kind::Blocking
                | Kind::Local(Local::Ping | Local::Echo)
        );
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
        let bytes = &crate::stages::plan::backend_request(c);
        if q.bytes.len() + bytes.len() > limit {
            return Err(DataError::QueryBufferLimit { limit });
        }
        if !q.pool.try_acquire(bytes.len()) {
            return Err(DataError::ProxyRequestMemory {
                limit: q.pool.limit(),
            });
        }
        q.bytes.extend_from_slice(bytes);
        q.count += 1;
        q.written.add(written);
        Ok(())
    }

    fn exec(&mut self, q: Queue) -> Pending {
        let watch = self.tx.watch.take();
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
        let login = owner_idx.map_or(&self.login, |b| table.login_for(b, &self.login));
        let owner = owner_idx.map(|b| table.backend_addr(b).clone());
        let mut block = BytesMut::with_capacity(MULTI.len() + q.bytes.len() + EXEC.len());
        block.extend_from_slice(MULTI);
        block.extend_from_slice(&q.bytes);
        block.extend_from_slice(EXEC);
        let block = block.freeze();
        let skip = 1 + q.count;
        match (watch, owner) {
            (Some(w), Some(owner)) if *w.conn.addr() == owner => {
                let rx = w.conn.send_block(block, skip, Some(&self.account));
                // EXEC unwatches: the connection is clean again once it has run.
                w.conn.release();
                Pending::One(rx)
            }
            // The slot moved since WATCH: what was watched is not where the transaction would
            // run, so it fails as if a watched key had changed.
            (Some(w), _) => {
                unwatch(w);
                null(self.proto)
            }
            (None, Some(owner)) => Pending::One(self.worker.pool.send_block_on(
                owner_idx.map_or(Lane::Shared, |b| self.sender(&table).lane_for(b)),
                &owner,
                self.proto,
                login,
                block,
                skip,
                Some(&self.account),
            )),
            (None, None) => match table.route(slot) {
                Err(e) if !matches!(e, DataError::SlotBlocked(_)) => Pending::error(&e),
                _ => Pending::error(&DataError::TransactionMoved(slot.0)),
            },
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
                match self.worker.dedicated.take(&owner, self.proto, login) {
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
