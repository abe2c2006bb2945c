//! A worker thread's connections, by (address, protocol), created on first use.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use super::{BackendConn, BackendOptions, ReplyRx};
use crate::resp::Proto;

/// Index 0: RESP2 connections, 1: RESP3.
type ByProto = [Option<Box<[BackendConn]>>; 2];

/// Connections of one worker thread. Not `Sync`: each thread has its own, so requests and
/// replies never cross threads.
pub struct Pool {
    opts: BackendOptions,
    per_backend: usize,
    conns: RefCell<FxHashMap<Arc<str>, ByProto>>,
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

    /// Sends `req` to `addr` over a connection speaking `proto` (round-robin over the set).
    pub fn send(&self, addr: &Arc<str>, proto: Proto, req: Bytes) -> ReplyRx {
        let mut conns = self.conns.borrow_mut();
        let v = proto as usize;
        if let Some(Some(set)) = conns.get(&**addr).map(|s| &s[v]) {
            return self.pick(set).send(req);
        }
        let set: Box<[BackendConn]> = (0..self.per_backend)
            .map(|_| BackendConn::spawn(addr.clone(), proto, self.opts.clone()))
            .collect();
        let rx = self.pick(&set).send(req);
        conns.entry(addr.clone()).or_default()[v] = Some(set);
        rx
    }

    fn pick<'a>(&self, set: &'a [BackendConn]) -> &'a BackendConn {
        if set.len() == 1 {
            return &set[0];
        }
        let i = self.next.get().wrapping_add(1);
        self.next.set(i);
        &set[i % set.len()]
    }
}
