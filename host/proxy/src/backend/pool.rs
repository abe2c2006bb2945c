//! A worker thread's connections, by (address, protocol, login, lane), created on first use.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use super::{BackendConn, BackendOptions, ReplyRx};
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_resp::Proto;

/// Connection sets of one address, by (protocol, login id, lane): a handful at most.
type Sets = Vec<(Proto, u64, Lane, Box<[BackendConn]>)>;

/// Which of a backend's connection sets a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lane {
    /// The pipelined connections every client shares.
    #[default]
    Shared,
    /// A script or function to a server its client's batch has sent nothing to yet, and the
    /// commands of that batch behind it to the same server, on connections of their own
    /// (`session::send::BatchLanes`): while it runs, the other
    /// clients' commands on the shared connections reach the server and get its `-BUSY`
    /// answer, as from Redis itself, instead of queueing behind it (Redis reads nothing more
    /// from the connection that runs the script).
    Scripts,
}

/// Connections of one worker thread. Not `Sync`: each thread has its own, so requests and
/// replies never cross threads.
pub struct Pool {
    opts: BackendOptions,
    per_backend: usize,
    conns: RefCell<FxHashMap<Arc<str>, Sets>>,
    next: Cell<usize>,
}

impl Pool {
    pub fn new(opts: BackendOptions, per_backend: usize) -> Self {
        Self {
            opts,
            per_backend: per_backend.max(1),
            conns: Default::default(),
            next: Cell::new(0),
        }
    }

    pub fn options(&self) -> &BackendOptions {
        &self.opts
    }

    /// Sends `req` to `addr` over a connection speaking `proto` logged in as `login`; the
    /// reply is held on `account`'s behalf until taken. A client's requests (one `account`)
    /// keep to one connection of the set, so they run in the order it sent them; requests
    /// of no client are spread round-robin.
    pub fn send(
        &self,
        addr: &Arc<str>,
        proto: Proto,
        login: &Login,
        req: Bytes,
        account: Option<&Rc<OutputAccount>>,
    ) -> ReplyRx {
        self.send_block_on(Lane::Shared, addr, proto, login, req, 0, account)
    }

    /// `send` on a chosen lane.
    pub fn send_on(
        &self,
        lane: Lane,
        addr: &Arc<str>,
        proto: Proto,
        login: &Login,
        req: Bytes,
        account: Option<&Rc<OutputAccount>>,
    ) -> ReplyRx {
        self.send_block_on(lane, addr, proto, login, req, 0, account)
    }

    /// Sends several requests written contiguously on one connection of `lane` (a
    /// transaction's `MULTI … EXEC`); the last reply is returned, the `skip` before it dropped.
    /// Every other `send` is this one.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn send_block_on(
        &self,
        lane: Lane,
        addr: &Arc<str>,
        proto: Proto,
        login: &Login,
        req: Bytes,
        skip: u32,
        account: Option<&Rc<OutputAccount>>,
    ) -> ReplyRx {
        let mut conns = self.conns.borrow_mut();
        // Looked up by `&str`: no Arc clone on the hot path.
        let sets = match conns.get_mut(&**addr) {
            Some(s) => s,
            None => conns.entry(addr.clone()).or_default(),
        };
        if let Some((_, _, _, set)) = sets
            .iter()
            .find(|(p, id, l, _)| *p == proto && *id == login.id && *l == lane)
        {
            return self.pick(set, account).send_block(req, skip, account);
        }
        let set: Box<[BackendConn]> = (0..self.per_backend)
            .map(|_| BackendConn::spawn(addr.clone(), proto, login.clone(), self.opts.clone()))
            .collect();
        let rx = self.pick(&set, account).send_block(req, skip, account);
        sets.push((proto, login.id, lane, set));
        rx
    }

    /// Drops the connections of logins no longer in use (their tasks finish what is in flight,
    /// then exit).
    pub fn retain_logins(&self, live: impl Fn(u64) -> bool) {
        for sets in self.conns.borrow_mut().values_mut() {
            sets.retain(|(_, id, _, _)| live(*id));
        }
    }

    /// The connection for a request: a client's always the same one (chosen by its output
    /// account, one per session, which lives as long as its requests), so that a pipelined
    /// `SET k v; GET k` cannot run in the other order on two connections; the others in turn.
    fn pick<'a>(
        &self,
        set: &'a [BackendConn],
        account: Option<&Rc<OutputAccount>>,
    ) -> &'a BackendConn {
        if set.len() == 1 {
            return &set[0];
        }
        let i = match account {
            // The account's address, Fibonacci-hashed: allocations of one size sit at fixed
            // strides, which a plain modulo would map to the same few connections.
            Some(a) => ((Rc::as_ptr(a) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize,
            None => {
                let i = self.next.get().wrapping_add(1);
                self.next.set(i);
                i
            }
        };
        &set[i % set.len()]
    }
}
