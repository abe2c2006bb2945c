//! The dispatch stages of one request, each handing its value to the next:
//!
//! ```text
//! Decoded → classify → plugins (Decision) → plan (Plan) → send (Pending) → Queued
//! ```
//!
//! Every command passes `plan`: what the session carries out itself (transactions, WAIT,
//! subscriptions, blocking commands) is a [`Plan::Session`], what it answers a
//! [`Plan::Local`]. The first key's slot is hashed once, by classify, and read from the
//! classification by every later stage.

use std::sync::Arc;

use super::blocking;
use super::hold;
use super::hot_cache;
use super::lookahead::Decoded;
use super::plugins::{self, Decision, RewriteMerge};
use super::pubsub_counts;
use super::queued::{Extra, KeyAt, NO_SLOT, Queued, QueuedReply};
use super::reply::{Gather, Pending};
use super::scripts;
use super::send::Sender;
use super::transaction;
use super::{Replies, Session};
use crate::stages::classify::{Classified, classify};
use crate::stages::merge::Merge;
use crate::stages::plan::{Channel, Own, Plan, plan, to_all};
use tessera_model::command::{CommandTable, Kind, Local, Options, PubSub};
use tessera_model::error::{DataError, Side};
use tessera_model::router::SlotTable;
use tessera_resp::Request;

impl Session {
    /// One request through classify, the plugin layer, plan and send: its place in the
    /// reply order.
    pub(super) fn dispatch(&mut self, next: Decoded) -> Queued {
        let Decoded {
            req,
            classified,
            decision,
        } = next;
        let c = match classified {
            Some(kept) => kept.on(&req),
            None => match classify(&req, &self.worker.shared.policy(), self.rights.as_deref()) {
                Ok(c) => c,
                Err(e) => {
                    let e = match CommandTable::get().lookup(&req) {
                        Ok(cmd) => self.tx.never_queued(cmd).unwrap_or(e),
                        Err(_) => e,
                    };
                    self.tx.refused();
                    let mut q = Queued::error(None, &e);
                    // Refused, it still takes its turn under CLIENT REPLY (as in Redis).
                    q.done.silent = self.silenced();
                    return q;
                }
            },
        };
        if let Some(e) = self.db_refused(&c) {
            self.tx.refused();
            let mut q = Queued::error(None, &e);
            q.done.silent = self.silenced();
            return q;
        }
        let client_reply = c.cmd.kind == Kind::Local(Local::Client) && c.cmd.name == "CLIENT|REPLY";
        // RESET ends OFF before it answers, as Redis does; a SKIP still takes its reply.
        let reset_ends_off =
            c.cmd.kind == Kind::Local(Local::Reset) && self.replies == Replies::Off;
        // Taken before the command runs (a SKIP is used up by it), so that a reply carrying
        // pub/sub messages can leave out only its own part (`subscribed_ping`).
        self.silent = !client_reply && !reset_ends_off && self.silenced();
        let in_transaction = self.tx.queuing();
        let mut q = self.through_plugins(&c, decision);
        if !in_transaction && !matches!(q.reply, QueuedReply::One(Pending::Ready(_))) {
            // Its reply may come from a connection other than a transaction's: an EXEC later
            // in the batch waits for it (`transaction`).
            self.sent_ahead = true;
        }
        q.done.silent = if client_reply {
            // Its own reply, under the mode it just set: only ON answers.
            self.replies != Replies::On
        } else if matches!(
            c.cmd.kind,
            Kind::PubSub(
                PubSub::Subscribe
                    | PubSub::Unsubscribe
                    | PubSub::PSubscribe
                    | PubSub::PUnsubscribe
                    | PubSub::SSubscribe
                    | PubSub::SUnsubscribe
            )
        ) {
            // Pushes, which Redis sends whatever CLIENT REPLY says, as it does messages.
            false
        } else if self.silent && self.subscribed_ping_kind(&c) {
            // Left out already: the messages it carried are not.
            false
        } else {
            self.silent
        };
        // Forwarded to the backends, not answered or refused by the proxy or a plugin, nor
        // queued in a transaction (on its server); the shadow mirrors database 0
        // (docs/mirroring.md).
        if self.worker.shared.mirror.on()
            && self.db() == 0
            && !self.tx.queuing()
            && !matches!(
                q.reply,
                QueuedReply::One(Pending::Ready(_) | Pending::After(..))
            )
            && let Some(t) = self.worker.shared.mirror.ticket(&c, self.proto)
        {
            q.done.extra.get_or_insert_default().mirror = Some(t);
        }
        // A command on several slots (MGET split, …) counts on its first key's slot.
        if let Some(&k) = c.keys.first() {
            q.done.slot = if self.routes_on {
                // Another cluster's keys (a prefix route) are that cluster's to count.
                let slot = c.first_slot(&self.worker.shared.router.load());
                if SlotTable::is_routed(slot) {
                    NO_SLOT
                } else {
                    slot.0
                }
            } else {
                c.hashed.0
            };
            if self.worker.hotkeys.wants() {
                let (start, len) = req.arg_range(k as usize);
                q.done.hot_key = std::num::NonZeroU32::new(start).map(|start| KeyAt { start, len });
            }
        }
        q.done.timed = !c.blocks() && c.cmd.kind != Kind::Wait;
        q.done.req = req.into_bytes();
        q
    }

    /// A user whose `databases` leave out the session's (it connected in database 0, or its
    /// rights changed since its SELECT): its commands there are refused, but for those the
    /// proxy answers itself (SELECT, AUTH, PING …) and `DBSIZE`'s excepted.
    fn db_refused(&self, c: &Classified<'_>) -> Option<DataError> {
        let user = self.rights.as_deref()?;
        user.databases.as_ref()?;
        let db = self.db();
        let local = matches!(c.cmd.kind, Kind::Local(l) if l != Local::Dbsize);
        (!local && !user.may_use_db(db)).then(|| DataError::NoPermDb {
            user: user.name.as_str().into(),
            db,
        })
    }

    /// Whether the reply of the command being dispatched is left out (`CLIENT REPLY`): every
    /// one while OFF, the one after a SKIP.
    fn silenced(&mut self) -> bool {
        match self.replies {
            Replies::On => false,
            Replies::Off => true,
            Replies::Skip => {
                self.replies = Replies::On;
                true
            }
        }
    }

    /// A classified request through the plugin layer (unless its decision was made ahead
    /// with the rest of its run, `lookahead`), then plan and send.
    fn through_plugins(&mut self, c: &Classified<'_>, decided: Option<Decision>) -> Queued {
        let id = Some(c.cmd.id);
        if let Some(e) = self.pubsub_refuses(c) {
            return Queued::error(id, &e);
        }
        let decision = match decided {
            Some(d) => d,
            None => self.run_plugins(c),
        };
        if self.tx.queuing() && !transaction::runs_while_queuing(c.cmd.kind) {
            // Between MULTI and EXEC a plugin may let a command through or refuse it; what
            // it would answer or rewrite cannot be part of the block sent to the server.
            let e = match decision {
                Decision::Continue(obs) => {
                    return Queued::new(QueuedReply::One(self.queue(c)), obs, id);
                }
                Decision::Fail(e) => e,
                Decision::Reply(..) | Decision::Rewrite(_) => {
                    DataError::NotInTransaction(tessera_model::error::display_name(c.cmd.name))
                }
            };
            self.tx.refused();
            return Queued::error(id, &e);
        }
        let mut hot_fill = None;
        // Counted when sent, so a GET later in this batch is not answered from the cache
        // (nor a GET of another worker filled) with what this write is about to change.
        let mut hot_write = crate::hotcache::Written::Nothing;
        let (reply, observers) = match decision {
            Decision::Continue(obs) => {
                hot_write = self.hot_cache_written(c);
                self.worker.hot_cache.wrote(&hot_write);
                let reply = match self.hot_cache_lookup(c) {
                    hot_cache::Cached::Hit(b) => Pending::Ready(b),
                    hot_cache::Cached::Fill(t) => {
                        let reply = self.execute(c);
                        hot_fill = self.hot_cache_ask_ttl(t);
                        reply
                    }
                    hot_cache::Cached::Pass => self.execute(c),
                };
                self.tracked(c);
                (QueuedReply::One(reply), obs)
            }
            Decision::Reply(b, obs) => (QueuedReply::One(Pending::Ready(b)), obs),
            Decision::Fail(e) => return Queued::error(id, &e),
            Decision::Rewrite(rewrite) => {
                let plugins::Rewrite {
                    name,
                    commands,
                    merge,
                    observers,
                } = *rewrite;
                let parts = commands
                    .into_iter()
                    .map(|r| self.execute_rewritten(&name, r, &mut hot_write))
                    .collect();
                let reply = match merge {
                    RewriteMerge::Host(code) => {
                        QueuedReply::One(Pending::Gather(Box::new(Gather {
                            parts,
                            merge: Merge::Abi(code),
                            proto: self.proto,
                        })))
                    }
                    RewriteMerge::Plugin(pm) => QueuedReply::PluginMerged(Box::new((parts, pm))),
                };
                (reply, observers)
            }
        };
        let mut q = Queued::new(reply, observers, id);
        if hot_fill.is_some() || hot_write != crate::hotcache::Written::Nothing {
            q.done.extra = Some(Box::new(Extra {
                mirror: None,
                hot_fill,
                hot_write,
            }));
        }
        q
    }

    /// Plans a classified command and carries the plan out: sent to the backends, answered by
    /// the session, or run on the session's own state.
    #[inline]
    fn execute(&mut self, c: &Classified<'_>) -> Pending {
        if self.fenced && !matches!(c.cmd.kind, Kind::Local(_)) {
            return Pending::error(&DataError::Fenced);
        }
        let table = self.worker.shared.router.load();
        match plan(c, &table) {
            Ok(Plan::Local(Local::Ping))
                if self.worker.shared.config.forward_ping && !self.subs.subscribed() =>
            {
                self.forward_ping(c, &table)
            }
            Ok(Plan::Local(l)) => self.local(l, c),
            Ok(Plan::Session(own)) => self.own(own, c),
            Ok(p) => {
                if c.cmd.runs_script
                    && let Plan::One(s) = &p
                {
                    // Off the shared connections when no order forbids it, so that the others'
                    // commands meanwhile get the server's own `-BUSY` if it runs long.
                    self.lanes.pin(s.to);
                }
                match c.cmd.options {
                    Options::ScriptCall => scripts::send_call(&self.sender(&table), c, p),
                    Options::ScriptLoad => self.script_load(c, p, &table),
                    _ => self.sender(&table).send(p, self.proto),
                }
            }
            Err(DataError::SlotBlocked(slot)) if !self.tx.queuing() => self.hold(c, slot),
            Err(e) => Pending::error(&e),
        }
    }

    /// `forward_ping`: PING to every master, their first error or the first `PONG`.
    #[cold]
    fn forward_ping(&mut self, c: &Classified<'_>, table: &Arc<SlotTable>) -> Pending {
        if c.req.argc() > 2 {
            return Pending::error(&DataError::WrongArity("ping".into()));
        }
        match to_all(table, c.req.as_bytes(), Channel::Data, Merge::First) {
            Ok(p) => self.sender(table).send(p, self.proto),
            Err(e) => Pending::error(&e),
        }
    }

    /// What the session carries out with state of its own.
    fn own(&mut self, own: Own, c: &Classified<'_>) -> Pending {
        match own {
            Own::Transaction(t) => self.transaction(t, c),
            Own::Wait => {
                let wait = blocking::wait(self.worker.clone(), c.req.as_bytes().clone());
                Pending::Blocked(Box::pin(wait))
            }
            Own::Subscription(p) => self.subscription(p, c),
            Own::Counted(p) => {
                let table = self.worker.shared.router.load();
                pubsub_counts::counted(&self.sender(&table), p, c)
            }
            Own::Blocking(slot) => {
                let b = blocking::Blocking {
                    worker: self.worker.clone(),
                    proto: self.proto,
                    login: self.login.clone(),
                    account: self.account.clone(),
                    slot,
                    client: self.reg.info.id,
                    req: c.req.clone(),
                    stop: self.stop.clone(),
                    own: self.own_conns().cloned(),
                };
                Pending::Blocked(Box::pin(b.run()))
            }
        }
    }

    /// A command on a slot being handed over: held until the handoff's next table.
    #[cold]
    fn hold(&mut self, c: &Classified<'_>, slot: u16) -> Pending {
        if self.worker.shared.config.slot_hold_ms == 0 {
            return Pending::error(&DataError::SlotBlocked(slot));
        }
        let held = hold::Held {
            worker: self.worker.clone(),
            slot,
            req: c.req.clone(),
            rights: self.rights.clone(),
            proto: self.proto,
            login: self.login.clone(),
            account: self.account.clone(),
            own: self.own_conns().cloned(),
        };
        Pending::Blocked(Box::pin(held.run()))
    }

    /// One command of a plugin's rewrite: classified like any (so a rewrite gets no rights
    /// its client lacks), not shown to plugins again. What it may write is added to `written`
    /// (and counted now, as for any command sent).
    fn execute_rewritten(
        &mut self,
        plugin: &str,
        req: Request,
        written: &mut crate::hotcache::Written,
    ) -> Pending {
        let policy = self.worker.shared.policy();
        match classify(&req, &policy, self.rights.as_deref()) {
            Ok(c) => {
                let w = self.hot_cache_written(&c);
                self.worker.hot_cache.wrote(&w);
                written.add(w);
                self.execute(&c)
            }
            Err(e) if e.side() == Side::Client => Pending::error(&DataError::PluginBadRewrite {
                name: plugin.into(),
                reason: e.to_string().into(),
            }),
            Err(e) => Pending::error(&e),
        }
    }

    pub(super) fn sender<'a>(&'a self, table: &'a SlotTable) -> Sender<'a> {
        Sender {
            worker: &self.worker,
            table,
            proto: self.proto,
            login: &self.login,
            account: &self.account,
            lanes: &self.lanes,
            own: self.own_conns(),
        }
    }
}
