//! Stage 5 of the data path: a plan's requests go to the backends, on the worker's shared,
//! pipelined connections (the client's login for its commands, the proxy's control login for
//! its own), and the plan becomes the replies it waits for.

use std::rc::Rc;

use crate::backend::ReplyRx;
use crate::stages::plan::{Channel, MovePlan, Part, Plan, Send};
use crate::worker::Worker;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::router::SlotTable;
use tessera_resp::Proto;

use super::migrate::Moved;
use super::reply::{Gather, Pending};

/// What sending needs from the session: its worker, protocol, login and output account, and
/// the table the plan was made with.
pub(crate) struct Sender<'a> {
    pub(crate) worker: &'a Rc<Worker>,
    pub(crate) table: &'a SlotTable,
    pub(crate) proto: Proto,
    pub(crate) login: &'a Login,
    pub(crate) account: &'a Rc<OutputAccount>,
}

impl Sender<'_> {
    /// Sends a backend plan's requests. `Plan::Local` is the session's, never given here.
    #[inline]
    pub(crate) fn send(&self, plan: Plan, merge_proto: Proto) -> Pending {
        match plan {
            Plan::One(part) => self.part(part),
            Plan::Gather { parts, merge } => Pending::Gather(Box::new(Gather {
                parts: parts.into_iter().map(|p| self.part(p)).collect(),
                merge,
                proto: merge_proto,
            })),
            Plan::Local(l) => unreachable!("the session answers {l:?} itself"),
        }
    }

    #[inline]
    fn part(&self, part: Part) -> Pending {
        match part {
            Part::Send(s) => Pending::One(self.request(s)),
            Part::Move(m) => Pending::Moved(Box::new(self.moved(*m))),
        }
    }

    /// A command on a migrating slot, its keys' first move sent now (keeping the pipeline's
    /// order on the source); it runs on the target once they are there.
    pub(crate) fn moved(&self, m: MovePlan) -> Moved {
        Moved {
            worker: self.worker.clone(),
            source: self.table.backend_addr(m.source).clone(),
            target: self.table.backend_addr(m.target).clone(),
            proto: self.proto,
            login: self.login.clone(),
            account: self.account.clone(),
            keys: m.keys,
            req: m.bytes,
            aborting: m.aborting,
            epoch: m.epoch,
            first: None,
        }
        .start()
    }

    #[inline]
    pub(crate) fn request(&self, s: Send) -> ReplyRx {
        let addr = self.table.backend_addr(s.to);
        let w = &self.worker;
        match s.channel {
            // A prefix route's target (another cluster's proxy) gets the route's login.
            Channel::Data => w.pool.send(
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
