//! Commands on a slot being handed to another group, held in the proxy until the handoff's
//! next table arrives, then sent to the new owner, instead of answered `-TRYAGAIN`.
//!
//! A migration's first barrier phase blocks a slot on every proxy (no proxy serves it, so no
//! write can land on the source after the mover starts); the second routes it to the target.
//! Between the two pushes, a command on that slot waits here: it ends its pipeline batch (the
//! replies before it leave, the commands after it wait behind it, as on a server), counts as
//! in flight for no table while it waits, and is routed again, classified afresh, under each
//! table that arrives. Past `slot_hold` (a barrier held up by an unreachable proxy) it gets
//! the `-TRYAGAIN` it would have had at once.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::Batch;
use super::pubsub_counts;
use super::scripts;
use super::send::Sender;
use crate::backend::ReplyResult;
use crate::stages::classify::classify;
use crate::stages::plan::{Own, Plan, plan};
use crate::worker::Worker;
use tessera_model::command::Options;
use tessera_model::error::DataError;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::users::User;
use tessera_resp::{Proto, Request};

/// How often a held command looks at the table even without a swap (a swap wakes it at once).
const RECHECK: Duration = Duration::from_millis(50);

/// A command whose slot was blocked when it was planned.
pub(crate) struct Held {
    pub(crate) worker: Rc<Worker>,
    /// The slot found blocked.
    pub(crate) slot: u16,
    pub(crate) req: Request,
    pub(crate) rights: Option<Arc<User>>,
    pub(crate) proto: Proto,
    pub(crate) login: Login,
    pub(crate) account: Rc<OutputAccount>,
    /// A `NOLOOP` session's own connections to the masters.
    pub(crate) own: Option<Rc<super::own_conns::OwnConns>>,
}

impl Held {
    /// Waits for a table that serves the command's slots, then sends it and waits for its
    /// reply (counted in flight under the table it was routed with). Not started until
    /// first polled: it runs after the replies before it in the client's pipeline.
    pub(crate) async fn run(self) -> ReplyResult {
        let worker = self.worker.clone();
        let deadline = tokio::time::Instant::now() + worker.shared.config.slot_hold();
        let mut swaps = worker.shared.swaps();
        loop {
            // As in `blocking`: a swap after this line is seen by `changed` below; one before
            // it counts this batch in its new phase.
            swaps.borrow_and_update();
            let batch = Batch::enter(worker.clone());
            let table = worker.shared.router.load_full();
            let policy = worker.shared.policy();
            let c = classify(&self.req, &policy, self.rights.as_deref())?;
            let sender = Sender {
                worker: &worker,
                table: &table,
                proto: self.proto,
                login: &self.login,
                account: &self.account,
                // Sent once the batch's earlier replies are in: no order to keep.
                lanes: &Default::default(),
                own: self.own.as_ref(),
            };
            let pending = match plan(&c, &table) {
                Err(e @ DataError::SlotBlocked(_)) => {
                    drop(batch);
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        return Err(e);
                    }
                    let wait = RECHECK.min(deadline - now);
                    let _ = tokio::time::timeout(wait, swaps.changed()).await;
                    continue;
                }
                Err(e) => return Err(e),
                // A PUBLISH on the slot, counted as through any session.
                Ok(Plan::Session(Own::Counted(p))) => pubsub_counts::counted(&sender, p, &c),
                // Proxy-answered commands are never planned against a slot.
                Ok(Plan::Local(_) | Plan::Session(_)) => {
                    return Err(DataError::SlotBlocked(self.slot));
                }
                // A script call keeps its recovery of a script missing on the new owner.
                Ok(p) if c.cmd.options == Options::ScriptCall => scripts::send_call(&sender, &c, p),
                Ok(p) => sender.send(p, self.proto),
            };
            let reply = pending.resolve(&self.account).await;
            drop(batch);
            // Held for the client until written, like any reply a backend delivers for it
            // (the session takes it when it writes it).
            if let Ok(b) = &reply {
                self.account.charge(b.len());
            }
            return reply;
        }
    }
}
