//! The plugin chain on the command path: which plugins see a command, what they decide, and
//! how rewritten commands and observed replies come back together.
//!
//! A command no plugin hooks costs one atomic load and one bitmap test. A hooked command is
//! copied into each hooking plugin's arena (values left out for plugins that asked only for
//! keys). PASS goes on to the next plugin; DENY and REPLY answer at once; REWRITE dispatches
//! the new commands (each routed by its own slot) and merges their replies; OBSERVE lets the
//! command through and shows the plugin its reply.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use tessera_plugin_abi::{self as abi, ArgIn, RewriteArg, RewriteView};
use tessera_wasm::{
    CallError, ChainStep, CmdOutcome, FailPolicy, InstanceRef, ReplyOutcome, Verdict, WorkerChain,
};

use super::Session;
use super::gather::Pending;
use crate::command::{Command, CommandTable, Kind, Local};
use crate::resp::{Frame, Proto, Request};

/// A plugin that asked to see the reply of the command it passed.
pub(crate) struct Observer {
    inst: InstanceRef,
    ctx: u64,
    generation: std::sync::Arc<tessera_wasm::Generation>,
}

/// The replies of a rewrite, merged by the host or by the plugin's `on_reply`.
pub(crate) struct Rewritten {
    parts: Vec<Pending>,
    merge: u32,
    ctx: u64,
    /// The instance that made the rewrite (for `merge = plugin`): it stays alive across a
    /// reload until this command is answered.
    inst: InstanceRef,
    name: String,
    conn: u64,
    proto: Proto,
}

/// A command's reply seen by observers before it reaches the client.
pub(crate) struct Observed {
    inner: Pending,
    observers: SmallVec<[Observer; 2]>,
    conn: u64,
}

pub(super) enum Decision {
    /// Dispatch the command as usual (the observers, if any, see its reply).
    Continue(SmallVec<[Observer; 2]>),
    Done(Pending),
}

fn failed(name: &str, reason: &str) -> Frame {
    Frame::error(format!("ERR plugin {name} failed: {reason}"))
}

/// A plugin call that gave no verdict: `ERR plugin <name> failed: <reason>`, or `ERR plugin
/// <name> cannot take this command: …` for an input over the plugin's limit.
fn call_failed(name: &str, e: &CallError) -> Frame {
    Frame::error(format!("ERR plugin {name} {e}"))
}

impl Session {
    /// Runs the plugin chain on a command (after the auth gate).
    pub(super) fn run_plugins(&mut self, cmd: &'static Command, req: &Request) -> Decision {
        // An Rc clone (not the Arc'd shared state): no atomic on the path of every command.
        let worker = self.worker.clone();
        let shared = &worker.shared;
        let chain = shared.plugins.chain();
        if chain.is_empty()
            || matches!(
                cmd.kind,
                Kind::Local(Local::Auth | Local::Hello | Local::Quit)
            )
        {
            return Decision::Continue(SmallVec::new());
        }
        let (id, class) = crate::plugins::abi_of(cmd.id);
        if !chain.hooks_any(id, class) {
            return Decision::Continue(SmallVec::new());
        }
        let mut slot = worker.plugins.borrow_mut();
        let wc = match &mut *slot {
            Some(wc) => wc,
            None => match shared.plugins.runtime() {
                Ok(rt) => slot.insert(WorkerChain::new(rt.clone())),
                Err(e) => {
                    return Decision::Done(self.error(format!("ERR plugins unavailable: {e}")));
                }
            },
        };
        wc.sync(&chain);
        let keys = cmd.key_indices(req);
        let conn = self.reg.info.id;
        let mut observers: SmallVec<[Observer; 2]> = SmallVec::new();
        for i in 0..wc.len() {
            // The chain just synced: its i-th generation is the worker's i-th (no Arc clone).
            let g = &chain.plugins[i];
            let Some(values) = g.hooks.wants(id, class) else {
                continue;
            };
            if !g
                .hooks
                .keys_match(keys.iter().map(|&k| req.arg(k as usize)))
            {
                continue;
            }
            let inst = match wc.step(i) {
                ChainStep::Call(inst) => inst,
                ChainStep::Unavailable(reason) => match g.spec.fail {
                    FailPolicy::Open => continue,
                    FailPolicy::Closed => {
                        return Decision::Done(self.reply(failed(g.name(), &reason)));
                    }
                },
            };
            let args: SmallVec<[ArgIn<'_>; 8]> = (0..req.argc())
                .map(|a| {
                    let key = keys.contains(&(a as u32));
                    ArgIn {
                        bytes: req.arg(a),
                        key,
                        elide: !values && a != 0 && !key,
                    }
                })
                .collect();
            let outcome = inst.borrow_mut().on_command(conn, id, class, &args);
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    if let Some(f) = e.fault() {
                        wc.report_fault(i, f);
                    }
                    // Fail-open never passes a command that was too large for the plugin or
                    // made it fault: any client could skip the plugin that way.
                    match g.spec.fail.when_command_failed(&e) {
                        Verdict::Skip => continue,
                        Verdict::Fail => {
                            return Decision::Done(self.reply(call_failed(g.name(), &e)));
                        }
                    }
                }
            };
            match outcome {
                CmdOutcome::Pass => {}
                CmdOutcome::Observe(ctx) => observers.push(Observer {
                    inst,
                    ctx,
                    generation: g.clone(),
                }),
                CmdOutcome::Deny(text) => {
                    let mut b = BytesMut::with_capacity(text.len() + 3);
                    b.extend_from_slice(b"-");
                    b.extend_from_slice(&text);
                    b.extend_from_slice(b"\r\n");
                    return Decision::Done(observe(Pending::Ready(b.freeze()), observers, conn));
                }
                CmdOutcome::Reply(bytes) => {
                    // One complete RESP reply: checked by the runtime.
                    return Decision::Done(observe(Pending::Ready(bytes.into()), observers, conn));
                }
                CmdOutcome::Rewrite {
                    merge,
                    ctx,
                    count,
                    block,
                } => {
                    drop(slot);
                    let pending =
                        self.rewrite(req, &block, count, merge, ctx, inst, g.name(), conn);
                    return Decision::Done(observe(pending, observers, conn));
                }
            }
        }
        Decision::Continue(observers)
    }

    /// Dispatches a rewrite's commands (each routed on its own; plugins do not see them).
    #[allow(clippy::too_many_arguments)]
    fn rewrite(
        &mut self,
        req: &Request,
        block: &[u8],
        count: u32,
        merge: u32,
        ctx: u64,
        inst: InstanceRef,
        name: &str,
        conn: u64,
    ) -> Pending {
        // Validated by the runtime already; a failure here is a bug, answered as an error.
        let Ok(view) = RewriteView::parse(block, count) else {
            return self.reply(failed(name, "malformed rewrite"));
        };
        let mut parts = Vec::with_capacity(count as usize);
        for c in view.commands() {
            let Ok(c) = c else {
                return self.reply(failed(name, "malformed rewrite"));
            };
            let args: Vec<&[u8]> = c
                .map(|a| match a {
                    Ok(RewriteArg::Bytes(b)) => b,
                    Ok(RewriteArg::Input(i)) => req.get(i as usize).unwrap_or_default(),
                    Err(_) => &[],
                })
                .collect();
            let sub = Request::from_args(&args);
            let part = match CommandTable::get().lookup(&sub) {
                Ok(cmd) => self.dispatch_command(cmd, sub),
                Err(e) => self.error(format!("ERR plugin {name} rewrote into a bad command: {e}")),
            };
            parts.push(part);
        }
        Pending::Plugin(Box::new(Rewritten {
            parts,
            merge,
            ctx,
            inst,
            name: name.to_owned(),
            conn,
            proto: self.proto,
        }))
    }

    /// Tells the plugins that asked that this connection closed.
    pub(super) fn plugins_close(&self) {
        if self.worker.shared.plugins.chain().is_empty() {
            return;
        }
        if let Some(wc) = self.worker.plugins.borrow_mut().as_mut() {
            wc.close(self.reg.info.id);
        }
    }
}

/// Wraps a reply so observers see it (in reverse order: the first plugin sees it last).
pub(super) fn observe(inner: Pending, observers: SmallVec<[Observer; 2]>, conn: u64) -> Pending {
    if observers.is_empty() {
        inner
    } else {
        Pending::Observed(Box::new(Observed {
            inner,
            observers,
            conn,
        }))
    }
}

fn error_bytes(text: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(text.len() + 3);
    b.extend_from_slice(b"-");
    b.extend_from_slice(text);
    b.extend_from_slice(b"\r\n");
    b.freeze()
}

impl Observed {
    /// The inner reply is written straight into `out`; observers read it there, and only a
    /// replacement copies anything.
    pub(crate) async fn write_into(self, out: &mut BytesMut) {
        let at = out.len();
        match self.inner {
            // The common cases without boxing a recursive future.
            Pending::Ready(b) => out.extend_from_slice(&b),
            Pending::One(rx) => match super::gather::flatten(rx.await) {
                Ok(b) => out.extend_from_slice(&b),
                Err(f) => f.encode(Proto::Resp2, out),
            },
            inner => Box::pin(inner.write_into(out)).await,
        }
        for o in self.observers.into_iter().rev() {
            let fail = o.generation.spec.fail;
            let name = o.generation.name();
            let r = o
                .inst
                .borrow_mut()
                .on_reply(self.conn, o.ctx, &[&out[at..]]);
            let replacement = match r {
                Ok(ReplyOutcome::Pass) => continue,
                // One complete RESP reply: checked by the runtime.
                Ok(ReplyOutcome::Replace(b)) => Bytes::from(b),
                Ok(ReplyOutcome::Error(t)) => error_bytes(&t),
                // Too large to observe, a fault, a dead instance: the observer's policy
                // decides (fail-open passes the reply unobserved).
                Err(e) => match fail.when_reply_failed(&e) {
                    Verdict::Skip => continue,
                    Verdict::Fail => call_failed(name, &e).to_bytes(Proto::Resp2),
                },
            };
            out.truncate(at);
            out.extend_from_slice(&replacement);
        }
    }
}

impl Rewritten {
    pub(crate) async fn write_into(self, out: &mut BytesMut) {
        let mut replies: Vec<Bytes> = Vec::with_capacity(self.parts.len());
        for p in self.parts {
            let mut b = BytesMut::new();
            Box::pin(p.write_into(&mut b)).await;
            replies.push(b.freeze());
        }
        if self.merge == abi::merge::PLUGIN {
            let refs: Vec<&[u8]> = replies.iter().map(|r| &r[..]).collect();
            let r = self.inst.borrow_mut().on_reply(self.conn, self.ctx, &refs);
            match r {
                Ok(ReplyOutcome::Pass) if replies.len() == 1 => out.extend_from_slice(&replies[0]),
                Ok(ReplyOutcome::Pass) => {
                    failed(&self.name, "passed a merge of several replies").encode(self.proto, out)
                }
                Ok(ReplyOutcome::Replace(b)) => out.extend_from_slice(&b),
                Ok(ReplyOutcome::Error(t)) => out.extend_from_slice(&error_bytes(&t)),
                // A rewrite cannot fail open: the original command was never sent.
                Err(e) => call_failed(&self.name, &e).encode(self.proto, out),
            }
            return;
        }
        // One implementation with the SDK's fake host (first error reply wins, SUM overflow
        // is an error): a plugin tested natively merges the same here.
        if let Err(e) = abi::merge::merge(self.merge, &replies, self.proto.into(), out) {
            Frame::error(format!("ERR {e}")).encode(self.proto, out);
        }
    }
}
