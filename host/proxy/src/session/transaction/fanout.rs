//! Cluster-wide admin commands inside a transaction (`CONFIG SET`, `FLUSHDB`, `FLUSHALL`,
//! `CONFIG GET` …: the fan-outs whose merge is "all `+OK`" or "the first reply"). Each is
//! queued on the transaction's server, where it runs in its place as Redis runs it, and is
//! sent to every other master once EXEC has run there. Its element of EXEC's reply is the
//! transaction's server's answer, or else the first error another master gave. One the
//! transaction's server refused is sent nowhere else; a transaction that did not run (a
//! watched key changed, `EXECABORT`, the slot moved) sends none. Across masters this is no
//! more atomic than the same command outside a transaction, which also reaches each master
//! on its own connection.

use std::rc::Rc;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::backend::ReplyResult;
use crate::session::reply::taken;
use crate::worker::Worker;
use tessera_model::command::{Admin, Kind};
use tessera_model::error::DataError;
use tessera_model::limits::{MemoryPool, OutputAccount};
use tessera_model::login::Login;
use tessera_model::router::BackendIdx;
use tessera_plugin_abi::reply::{is_error_reply, split_aggregate};
use tessera_resp::Proto;

/// A fan-out that may be queued: its answer does not need every master at once (as `KEYS`,
/// `SCAN` or `SCRIPT EXISTS` do).
pub(super) fn queueable(kind: Kind) -> bool {
    matches!(kind, Kind::Admin(Admin::AllOk | Admin::First))
}

/// Cluster-wide commands one transaction may queue.
const MAX_QUEUED: usize = 64;

/// Fan-outs queued in one transaction: their place in EXEC's reply and a copy of their
/// request, held in the proxy's request memory (`query_buffer_total`) until sent, and within
/// the client's `query_buffer_limit`.
#[derive(Default)]
pub(super) struct Queued {
    list: Vec<(u32, Bytes)>,
    held: Option<(Arc<MemoryPool>, usize)>,
}

impl Queued {
    /// Queues `req`, element `at` of EXEC's reply.
    ///
    /// # Errors
    /// Past `MAX_QUEUED`, the client's limit or the proxy's request memory.
    pub(super) fn push(
        &mut self,
        at: u32,
        req: &[u8],
        pool: &Arc<MemoryPool>,
        limit: usize,
    ) -> Result<(), DataError> {
        if self.list.len() >= MAX_QUEUED {
            return Err(DataError::Invalid(format!(
                "at most {MAX_QUEUED} cluster-wide commands can be queued in one transaction"
            )));
        }
        let held = self.held.as_ref().map_or(0, |(_, n)| *n);
        if held + req.len() > limit {
            return Err(DataError::QueryBufferLimit { limit });
        }
        if !pool.try_acquire(req.len()) {
            return Err(DataError::ProxyRequestMemory {
                limit: pool.limit(),
            });
        }
        self.held = Some((pool.clone(), held + req.len()));
        self.list.push((at, Bytes::copy_from_slice(req)));
        Ok(())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some((pool, n)) = &self.held {
            pool.release(*n);
        }
    }
}

/// What EXEC owes the other masters once it has run.
pub(super) struct AfterExec {
    pub(super) fanouts: Queued,
    /// The transaction's server.
    pub(super) ran_on: Arc<str>,
    pub(super) worker: Rc<Worker>,
    pub(super) account: Rc<OutputAccount>,
    pub(super) proto: Proto,
    pub(super) login: Login,
    /// A `NOLOOP` session's own connections to the masters, which its fan-outs take.
    pub(super) own: Option<Rc<crate::session::own_conns::OwnConns>>,
}

impl AfterExec {
    /// EXEC's reply (held for the client, as a backend's reply is), once every other master
    /// has answered the fan-outs the transaction's server ran.
    pub(super) async fn finish(self, exec: ReplyResult) -> ReplyResult {
        let reply = exec?;
        let Some(elems) = split_aggregate(&reply) else {
            // Null (a watched key changed) or an error: nothing ran.
            return Ok(reply);
        };
        let send: Vec<&(u32, Bytes)> = self
            .fanouts
            .list
            .iter()
            .filter(|(at, _)| elems.get(*at as usize).is_some_and(|e| !is_error_reply(e)))
            .collect();
        if send.is_empty() {
            return Ok(reply);
        }
        let table = self.worker.shared.router.load();
        let mut rxs = Vec::with_capacity(send.len() * table.backends().len());
        for (b, addr) in table.backends().iter().enumerate() {
            if **addr == *self.ran_on {
                continue;
            }
            let login = table.login_for(b as BackendIdx, &self.login);
            for (i, (_, req)) in send.iter().enumerate() {
                let rx = match &self.own {
                    Some(own) => {
                        own.send_block(addr, login, req.clone(), 0, Some(&self.account), false)
                    }
                    None => self.worker.pool.send(
                        addr,
                        self.proto,
                        login,
                        req.clone(),
                        Some(&self.account),
                    ),
                };
                rxs.push((i, rx));
            }
        }
        let mut refused: Vec<Option<Bytes>> = vec![None; send.len()];
        for (i, rx) in rxs {
            match taken(rx.await, &self.account) {
                Ok(b) if is_error_reply(&b) => {
                    refused[i].get_or_insert(b);
                }
                Ok(_) => {}
                Err(e) => {
                    refused[i].get_or_insert(e.reply());
                }
            }
        }
        if refused.iter().all(Option::is_none) {
            return Ok(reply);
        }
        let mut out = BytesMut::with_capacity(reply.len() + 64);
        out.put_slice(format!("*{}\r\n", elems.len()).as_bytes());
        for (j, e) in elems.iter().enumerate() {
            let error = send
                .iter()
                .zip(&refused)
                .find_map(|((at, _), r)| (*at as usize == j).then_some(r.as_ref()).flatten());
            out.put_slice(error.map_or(*e, |b| &b[..]));
        }
        // The client is owed the rebuilt reply instead of the server's.
        self.account.release(reply.len());
        self.account.charge(out.len());
        Ok(out.freeze())
    }
}
