//! Stage 5 of the data path: a plan's requests go to the backends, on the worker's shared,
//! pipelined connections (the client's login for its commands, the proxy's control login for
//! its own), and the plan becomes the replies it waits for.

use std::rc::Rc;

use crate::backend::{Lane, ReplyRx};
use crate::stages::plan::{Channel, Plan, Send};
use crate::worker::Worker;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::router::{BackendIdx, SlotTable};
use tessera_resp::Proto;

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
    pub(crate) pinned: Option<BackendIdx>,
}

impl Sender<'_> {
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

    /// The lane of a data request to backend `to`: the scripts lane for the one a script of
    /// this batch went to (so the client's later commands there stay behind it), else shared.
    #[inline]
    pub(crate) fn lane_for(&self, to: BackendIdx) -> Lane {
        if self.pinned == Some(to) {
            Lane::Scripts
        } else {
            Lane::Shared
        }
    }

    #[inline]
    pub(crate) fn request(&self, s: Send) -> ReplyRx {
        let addr = self.table.backend_addr(s.to);
        let w = &self.worker;
        match s.channel {
            // A prefix route's target (another cluster's proxy) gets the route's login.
            Channel::Data => w.pool.send_on(
                self.lane_for(s.to),
                addr,
                self.proto,
                self.table.login_for(s.to, self.login),
                s.bytes,
                Some(self.account),
            ),
            // The proxy reads the control channel's replies itself (INFO, COMMAND …), in the
            // client's protocol so that forwarded ones (COMMAND, TIME) need no conversion.
            Channel::Control => w.pool.send(
                addr,
                self.proto,
                &w.control_login(),
                s.bytes,
                Some(self.account),
            ),
        }
    }
}
