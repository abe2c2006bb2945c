//! Stage 5 of the data path: a plan's requests go to the backends, on the worker's shared,
//! pipelined connections (the client's login for its commands, the proxy's control login for
//! its own), or a `NOLOOP` tracking session's own connections to the masters (`own_conns`),
//! and the plan becomes the replies it waits for.

use std::cell::Cell;
use std::rc::Rc;

use bytes::Bytes;

use crate::backend::{Lane, ReplyRx};
use crate::stages::plan::{Channel, Plan, Send};
use crate::worker::Worker;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::router::{BackendIdx, SlotTable};
use tessera_resp::Proto;

use super::own_conns::OwnConns;
use super::reply::{Gather, Pending};

/// What sending needs from the session: its worker, protocol, login and output account, the
/// table the plan was made with, and the server whose requests take `Lane::Scripts` in this
/// batch, if any.
pub(crate) struct Sender<'a> {
    pub(crate) worker: &'a Rc<Worker>,
    pub(crate) table: &'a SlotTable,
    pub(crate) proto: Proto,
    pub(crate) login: &'a Login,
    pub(crate) account: &'a Rc<OutputAccount>,
    /// Which lane each backend's data requests take in this batch.
    pub(crate) lanes: &'a BatchLanes,
    /// A `NOLOOP` session's own connections to the masters.
    pub(crate) own: Option<&'a Rc<OwnConns>>,
}

/// Which lane a batch's data requests take, per backend, by bit `idx % 16`: the backends it
/// sent to on the shared connections (bits 0–15), and those a script of the batch went to on
/// `Lane::Scripts` (bits 16–31; their later requests in the batch follow it there). Backends
/// sharing a bit share its fate: a script to one stays on the shared lane behind the other's
/// requests (only slower), and once one is pinned the other's requests take its own scripts
/// lane, before which none of the batch went to it. One word, as every idle session holds one.
#[derive(Default)]
pub(crate) struct BatchLanes(Cell<u32>);

impl BatchLanes {
    /// A new batch: every reply of the last one is in, so no order is left to keep.
    pub(crate) fn clear(&self) {
        self.0.set(0);
    }

    /// A script to `to` takes `Lane::Scripts`, with the batch's later requests to `to`,
    /// unless something of this batch went to `to` on the shared lane before it.
    pub(crate) fn pin(&self, to: BackendIdx) {
        let (v, bit) = (self.0.get(), Self::bit(to));
        if v & bit == 0 {
            self.0.set(v | bit << 16);
        }
    }

    /// The lane of a data request to backend `to`, marking `to` touched when it is shared.
    #[inline]
    pub(crate) fn lane_for(&self, to: BackendIdx) -> Lane {
        let (v, bit) = (self.0.get(), Self::bit(to));
        if v & bit << 16 != 0 {
            Lane::Scripts
        } else {
            self.0.set(v | bit);
            Lane::Shared
        }
    }

    #[inline]
    fn bit(to: BackendIdx) -> u32 {
        1 << (to % 16)
    }
}

impl<'a> Sender<'a> {
    /// Sends a backend plan's requests. `Plan::Local` and `Plan::Session` are the session's,
    /// never given here.
    #[inline]
    pub(crate) fn send(&self, plan: Plan, merge_proto: Proto) -> Pending {
        match plan {
            Plan::One(s) => Pending::One(self.request(s)),
            Plan::Gather { parts, merge } => Pending::Gather(Box::new(Gather {
                parts: parts
                    .into_iter()
                    .map(|s| Pending::One(self.request(s)))
                    .collect(),
                merge,
                proto: merge_proto,
            })),
            p @ (Plan::Local(_) | Plan::Session(_)) => {
                unreachable!("the session carries out {p:?} itself")
            }
        }
    }

    /// The lane of a data request to backend `to` (`BatchLanes::lane_for`).
    #[inline]
    pub(crate) fn lane_for(&self, to: BackendIdx) -> Lane {
        self.lanes.lane_for(to)
    }

    #[inline]
    pub(crate) fn request(&self, s: Send) -> ReplyRx {
        match s.channel {
            Channel::Data => self.data(s.to, s.bytes, 0),
            // The proxy reads the control channel's replies itself (INFO, COMMAND …), in the
            // client's protocol so that forwarded ones (COMMAND, TIME) need no conversion.
            Channel::Control => {
                let w = &self.worker;
                w.pool.send(
                    self.table.backend_addr(s.to),
                    self.proto,
                    &w.control_login(),
                    s.bytes,
                    Some(self.account),
                )
            }
        }
    }

    /// A `NOLOOP` session's own connections, if `to` is a master (replicas and prefix
    /// routes' targets take the shared connections).
    #[inline]
    pub(crate) fn own_for(&self, to: BackendIdx) -> Option<&'a Rc<OwnConns>> {
        self.own
            .filter(|_| (to as usize) < self.table.backends().len())
    }

    /// A data request (`skip` replies dropped before the one returned) to backend `to`: on a
    /// `NOLOOP` session's own connection to a master, else on the lane of this batch. A
    /// prefix route's target (another cluster's proxy) gets the route's login.
    #[inline]
    pub(crate) fn data(&self, to: BackendIdx, bytes: Bytes, skip: u32) -> ReplyRx {
        let addr = self.table.backend_addr(to);
        let login = self.table.login_for(to, self.login);
        match self.own_for(to) {
            Some(own) => own.send_block(addr, login, bytes, skip, Some(self.account), false),
            _ => self.worker.pool.send_block_on(
                self.lane_for(to),
                addr,
                self.proto,
                login,
                bytes,
                skip,
                Some(self.account),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_takes_its_own_lane_only_where_nothing_of_the_batch_went_before_it() {
        let lanes = BatchLanes::default();
        assert_eq!(lanes.lane_for(3), Lane::Shared);
        // Backend 3 has a request of this batch on the shared lane: a script stays behind it.
        lanes.pin(3);
        assert_eq!(lanes.lane_for(3), Lane::Shared);
        // Backend 5 has none: the script and the batch's later requests to 5 take the scripts
        // lane; other backends stay shared.
        lanes.pin(5);
        assert_eq!(lanes.lane_for(5), Lane::Scripts);
        assert_eq!(lanes.lane_for(5), Lane::Scripts);
        assert_eq!(lanes.lane_for(7), Lane::Shared);
        lanes.pin(9);
        assert_eq!(lanes.lane_for(9), Lane::Scripts);
        lanes.clear();
        lanes.pin(3);
        assert_eq!(lanes.lane_for(3), Lane::Scripts);
        // Backends sharing a bit (3 and 19) are kept apart conservatively.
        lanes.clear();
        lanes.lane_for(19);
        lanes.pin(3);
        assert_eq!(lanes.lane_for(3), Lane::Shared);
    }
}
