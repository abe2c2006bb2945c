//! Stage 3 of the data path, the plugin layer: which plugins see a command, and what they
//! decide. It returns a [`Decision`] and never dispatches anything itself: a rewrite is handed
//! back as the commands to plan (each classified on its own, unseen by plugins), and observers
//! are applied by the session to the reply once it is resolved.
//!
//! A command no plugin hooks costs one atomic load and one bitmap test. A hooked command is
//! copied into each hooking plugin's arena (values left out for plugins that asked only for
//! keys). PASS goes on to the next plugin; DENY and REPLY answer at once; REWRITE hands back
//! new commands; OBSERVE lets the command through and shows the plugin its reply.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use tessera_plugin_abi::{self as abi, ArgIn, RewriteArg, RewriteView};
use tessera_wasm::{
    BatchCmd, CallError, ChainStep, CmdOutcome, FailPolicy, Generation, InstanceRef, ReplyOutcome,
    Verdict, WorkerChain,
};

use super::Session;
use crate::stages::classify::Classified;
use tessera_model::command::{Kind, Local};
use tessera_model::error::DataError;
use tessera_resp::Request;

/// A plugin that asked to see the reply of the command it passed: its instance (kept alive
/// across a reload until the reply), its context and its failure policy. No reference count
/// is taken on the generation: an observed command pays one `Rc` clone.
struct Observer {
    inst: InstanceRef,
    ctx: u64,
    fail: FailPolicy,
    /// The plugin asked for the reply's head and size, not a copy (`observe_heads`).
    heads: bool,
}

/// The plugins that watch one command's reply, in chain order. One is held inline: an
/// observing plugin (metrics) costs no allocation per command.
#[derive(Default)]
pub(super) struct Observers(SmallVec<[Observer; 1]>);

/// What the plugin layer decided for a command.
pub(super) enum Decision {
    /// Plan and send it as usual; the observers see its reply.
    Continue(Observers),
    /// A plugin answered (its reply or its denial); earlier plugins observe it.
    Reply(Bytes, Observers),
    /// A plugin rewrote it into other commands (boxed: rare, and it would make every
    /// decision of a pipeline larger).
    Rewrite(Box<Rewrite>),
    /// The chain failed closed: the command gets this error.
    Fail(DataError),
}

/// A plugin's rewrite of a command: the commands, whose replies `merge` joins.
pub(super) struct Rewrite {
    /// The plugin that rewrote it.
    pub(super) name: String,
    pub(super) commands: Vec<Request>,
    pub(super) merge: RewriteMerge,
    pub(super) observers: Observers,
}

/// How a rewrite's replies become one.
pub(super) enum RewriteMerge {
    /// A merge code of the ABI, done by the host.
    Host(u32),
    /// The plugin's own `on_reply` merges them.
    Plugin(PluginMerge),
}

/// A rewrite whose replies go back to the plugin that made it. The instance stays alive
/// across a reload until this command is answered.
pub(super) struct PluginMerge {
    inst: InstanceRef,
    ctx: u64,
    name: String,
    conn: u64,
}

fn failed(name: &str, reason: &str) -> DataError {
    DataError::PluginFailed {
        name: name.into(),
        reason: reason.into(),
    }
}

/// A call that failed: too large an input, a fault, a dead instance (its text says which).
fn call_failed(name: &str, e: &CallError) -> DataError {
    DataError::PluginCall {
        name: name.into(),
        detail: e.to_string().into(),
    }
}

fn error_bytes(text: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(text.len() + 3);
    b.extend_from_slice(b"-");
    b.extend_from_slice(text);
    b.extend_from_slice(b"\r\n");
    b.freeze()
}

impl Session {
    /// Runs the plugin chain on a classified command.
    pub(super) fn run_plugins(&mut self, c: &Classified<'_>) -> Decision {
        if !self.plugins_on {
            return Decision::Continue(Observers::default());
        }
        // An Rc clone (not the Arc'd shared state): no atomic on the path of every command.
        let worker = self.worker.clone();
        let shared = &worker.shared;
        let chain = shared.plugins.chain();
        if chain.is_empty()
            || matches!(
                c.cmd.kind,
                Kind::Local(Local::Auth | Local::Hello | Local::Quit)
            )
        {
            return Decision::Continue(Observers::default());
        }
        let (id, class) = crate::plugins::abi_of(c.cmd.id);
        if !chain.hooks_any(id, class) {
            return Decision::Continue(Observers::default());
        }
        let mut slot = worker.plugins.borrow_mut();
        let wc = match &mut *slot {
            Some(wc) => wc,
            None => match shared.plugins.runtime() {
                Ok(rt) => slot.insert(WorkerChain::new(rt.clone())),
                Err(e) => return Decision::Fail(DataError::PluginsUnavailable(e.to_string())),
            },
        };
        wc.sync(&chain);
        let req = c.req;
        let conn = self.reg.info.id;
        let mut observers = Observers::default();
        for i in 0..wc.len() {
            // The chain just synced: its i-th generation is the worker's i-th (no Arc clone).
            let g = &chain.plugins[i];
            let Some(values) = g.hooks.wants(id, class) else {
                continue;
            };
            if !g.hooks.keys_match(c.key_args())
                || g.hooks.gated_out(id, class, c.key_args(), value_lens(c))
            {
                continue;
            }
            let inst = match wc.step(i) {
                ChainStep::Call(inst) => inst,
                ChainStep::Unavailable(reason) => match g.spec.fail.when_unavailable() {
                    Verdict::Skip => continue,
                    Verdict::Fail => return Decision::Fail(failed(g.name(), &reason)),
                },
            };
            let args = args_of(c, values);
            let outcome = inst.borrow_mut().on_command(conn, id, class, &args);
            if let Some(d) = settle(wc, i, g, &inst, outcome, req, conn, &mut observers) {
                return d;
            }
        }
        Decision::Continue(observers)
    }

    /// Runs the chain on a run of classified commands read together (see `lookahead`): each
    /// plugin gets, in one call, every command of the run it hooks that earlier plugins let
    /// through. Per command the result is what [`Session::run_plugins`] decides for it alone.
    pub(super) fn run_plugins_batch(&mut self, cs: &[Classified<'_>]) -> Vec<Decision> {
        let worker = self.worker.clone();
        let shared = &worker.shared;
        let chain = shared.plugins.chain();
        let n = cs.len();
        let mut observers: Vec<Observers> = (0..n).map(|_| Observers::default()).collect();
        let mut ended: Vec<Option<Decision>> = (0..n).map(|_| None).collect();
        let ids: SmallVec<[(u16, u32); 32]> = cs
            .iter()
            .map(|c| crate::plugins::abi_of(c.cmd.id))
            .collect();
        let hooked = |&(id, class): &(u16, u32)| chain.hooks_any(id, class);
        if ids.iter().any(hooked) {
            let mut slot = worker.plugins.borrow_mut();
            let wc = match &mut *slot {
                Some(wc) => Some(wc),
                None => match shared.plugins.runtime() {
                    Ok(rt) => Some(slot.insert(WorkerChain::new(rt.clone()))),
                    Err(e) => {
                        for (k, d) in ended.iter_mut().enumerate() {
                            if hooked(&ids[k]) {
                                *d = Some(Decision::Fail(DataError::PluginsUnavailable(
                                    e.to_string(),
                                )));
                            }
                        }
                        None
                    }
                },
            };
            if let Some(wc) = wc {
                wc.sync(&chain);
                let conn = self.reg.info.id;
                for i in 0..wc.len() {
                    let g = &chain.plugins[i];
                    let run = PluginRun { i, g, conn };
                    run.call(wc, cs, &ids, &mut ended, &mut observers);
                }
            }
        }
        ended
            .into_iter()
            .zip(observers)
            .map(|(d, o)| d.unwrap_or(Decision::Continue(o)))
            .collect()
    }

    /// Tells the plugins that asked that this connection closed.
    pub(super) fn plugins_close(&self) {
        if self.worker.shared.plugins.chain().is_empty() {
            return;
        }
        // `try_`: called from `Drop`, where a chain still borrowed (a panic inside a plugin
        // call) must not become a second panic; a close missed then costs the plugins one
        // stale entry for this connection, not the proxy.
        if let Ok(mut wc) = self.worker.plugins.try_borrow_mut()
            && let Some(wc) = wc.as_mut()
        {
            wc.close(self.reg.info.id);
        }
    }
}

/// One plugin of the chain over a batch of commands.
struct PluginRun<'g> {
    i: usize,
    g: &'g std::sync::Arc<Generation>,
    conn: u64,
}

impl PluginRun<'_> {
    /// Gives the plugin every command still going that it hooks, in as few calls as its
    /// input limit allows; a fault costs the command that caused it, and the commands after
    /// it go to a fresh instance.
    fn call(
        &self,
        wc: &mut WorkerChain,
        cs: &[Classified<'_>],
        ids: &[(u16, u32)],
        ended: &mut [Option<Decision>],
        observers: &mut [Observers],
    ) {
        let g = self.g;
        // The commands it hooks, each with where its arguments lie in one flat table (one
        // allocation for the run, not one per command).
        let mut sel: SmallVec<[(usize, usize, usize); 32]> = SmallVec::new();
        let mut args: Vec<ArgIn<'_>> = Vec::with_capacity(cs.len() * 4);
        for (k, c) in cs.iter().enumerate() {
            let (id, class) = ids[k];
            if ended[k].is_some() {
                continue;
            }
            let Some(values) = g.hooks.wants(id, class) else {
                continue;
            };
            if !g.hooks.keys_match(c.key_args())
                || g.hooks.gated_out(id, class, c.key_args(), value_lens(c))
            {
                continue;
            }
            let start = args.len();
            args.extend(args_iter(c, values));
            sel.push((k, start, args.len()));
        }
        if sel.is_empty() {
            return;
        }
        let batch: Vec<BatchCmd<'_>> = sel
            .iter()
            .map(|&(k, start, end)| BatchCmd {
                cmd: ids[k].0,
                class: ids[k].1,
                args: &args[start..end],
            })
            .collect();
        let sel: SmallVec<[usize; 32]> = sel.iter().map(|&(k, ..)| k).collect();
        let mut results = Vec::with_capacity(sel.len());
        let mut pos = 0;
        while pos < sel.len() {
            let inst = match wc.step(self.i) {
                ChainStep::Call(inst) => inst,
                ChainStep::Unavailable(reason) => {
                    if g.spec.fail.when_unavailable() == Verdict::Fail {
                        for &k in &sel[pos..] {
                            ended[k] = Some(Decision::Fail(failed(g.name(), &reason)));
                        }
                    }
                    return;
                }
            };
            let done = inst
                .borrow_mut()
                .on_commands(self.conn, &batch[pos..], &mut results);
            for (j, outcome) in results.drain(..).enumerate() {
                let k = sel[pos + j];
                ended[k] = settle(
                    wc,
                    self.i,
                    g,
                    &inst,
                    outcome,
                    cs[k].req,
                    self.conn,
                    &mut observers[k],
                );
            }
            pos += done.max(1);
        }
    }
}

/// The argument table of a command as a plugin sees it (values elided unless it asked).
fn args_of<'r>(c: &Classified<'r>, values: bool) -> SmallVec<[ArgIn<'r>; 8]> {
    args_iter(c, values).collect()
}

fn args_iter<'r, 'c>(
    c: &'c Classified<'r>,
    values: bool,
) -> impl Iterator<Item = ArgIn<'r>> + use<'r, 'c> {
    let req = c.req;
    (0..req.argc()).map(move |a| {
        let key = c.keys.contains(&(a as u32));
        ArgIn {
            bytes: req.arg(a),
            key,
            elide: !values && a != 0 && !key,
        }
    })
}

/// The lengths of a command's values: its arguments after the name that are not keys.
fn value_lens<'c>(c: &'c Classified<'_>) -> impl Iterator<Item = usize> + 'c {
    (1..c.req.argc())
        .filter(|&a| !c.keys.contains(&(a as u32)))
        .map(|a| c.req.arg(a).len())
}

/// What plugin `i`'s answer does to a command: `None` goes on to the next plugin (PASS,
/// OBSERVE, or a failure its policy skips); `Some` ends the command's way through the chain.
#[allow(clippy::too_many_arguments)]
fn settle(
    wc: &mut WorkerChain,
    i: usize,
    g: &std::sync::Arc<Generation>,
    inst: &InstanceRef,
    outcome: Result<CmdOutcome, CallError>,
    req: &Request,
    conn: u64,
    observers: &mut Observers,
) -> Option<Decision> {
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            if let Some(f) = e.fault() {
                wc.report_fault(i, f);
            }
            // Fail-open never passes a command that was too large for the plugin or made it
            // fault: any client could skip the plugin that way.
            return match g.spec.fail.when_command_failed(&e) {
                Verdict::Skip => None,
                Verdict::Fail => Some(Decision::Fail(call_failed(g.name(), &e))),
            };
        }
    };
    Some(match outcome {
        CmdOutcome::Pass => return None,
        CmdOutcome::Observe(ctx) => {
            observers.0.push(Observer {
                inst: inst.clone(),
                ctx,
                fail: g.spec.fail,
                heads: g.hooks.observe_heads,
            });
            return None;
        }
        CmdOutcome::Deny(text) => Decision::Reply(error_bytes(&text), std::mem::take(observers)),
        // One complete RESP reply: checked by the runtime.
        CmdOutcome::Reply(bytes) => Decision::Reply(bytes.into(), std::mem::take(observers)),
        CmdOutcome::Rewrite {
            merge,
            ctx,
            count,
            block,
        } => {
            let Some(commands) = rewritten(req, &block, count) else {
                // Validated by the runtime already; a failure here is a bug.
                return Some(Decision::Fail(failed(g.name(), "malformed rewrite")));
            };
            let merge = if merge == abi::merge::PLUGIN {
                RewriteMerge::Plugin(PluginMerge {
                    inst: inst.clone(),
                    ctx,
                    name: g.name().to_owned(),
                    conn,
                })
            } else {
                RewriteMerge::Host(merge)
            };
            Decision::Rewrite(Box::new(Rewrite {
                name: g.name().to_owned(),
                commands,
                merge,
                observers: std::mem::take(observers),
            }))
        }
    })
}

/// The commands of a rewrite block (arguments may refer back to the original request's).
fn rewritten(req: &Request, block: &[u8], count: u32) -> Option<Vec<Request>> {
    let view = RewriteView::parse(block, count).ok()?;
    let mut out = Vec::with_capacity(count as usize);
    for c in view.commands() {
        let args: Vec<&[u8]> = c
            .ok()?
            .map(|a| match a {
                Ok(RewriteArg::Bytes(b)) => Some(b),
                Ok(RewriteArg::Input(i)) => Some(req.get(i as usize).unwrap_or_default()),
                Err(_) => None,
            })
            .collect::<Option<_>>()?;
        out.push(Request::from_args(&args));
    }
    Some(out)
}

impl Observers {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Shows the reply at `out[at..]` to each observer, last plugin first (the first plugin
    /// of the chain sees the reply last, as it would wrap the others). An observer may replace
    /// it; only a replacement copies anything.
    pub(super) fn apply(self, conn: u64, out: &mut BytesMut, at: usize) {
        for o in self.0.into_iter().rev() {
            let fail = o.fail;
            let mut inst = o.inst.borrow_mut();
            let r = if o.heads {
                inst.on_reply_head(conn, o.ctx, &out[at..])
            } else {
                inst.on_reply(conn, o.ctx, &[&out[at..]])
            };
            let replacement = match r {
                Ok(ReplyOutcome::Pass) => continue,
                // One complete RESP reply: checked by the runtime.
                Ok(ReplyOutcome::Replace(b)) => Bytes::from(b),
                Ok(ReplyOutcome::Error(t)) => error_bytes(&t),
                // Too large to observe, a fault, a dead instance: the observer's policy
                // decides (fail-open passes the reply unobserved).
                Err(e) => match fail.when_reply_failed(&e) {
                    Verdict::Skip => continue,
                    Verdict::Fail => call_failed(inst.name(), &e).reply(),
                },
            };
            drop(inst);
            out.truncate(at);
            out.extend_from_slice(&replacement);
        }
    }
}

impl PluginMerge {
    /// The plugin's merge of a rewrite's replies.
    pub(super) fn merge(self, replies: &[Bytes], out: &mut BytesMut) {
        let refs: Vec<&[u8]> = replies.iter().map(|r| &r[..]).collect();
        let r = self.inst.borrow_mut().on_reply(self.conn, self.ctx, &refs);
        let reply = match r {
            Ok(ReplyOutcome::Pass) if replies.len() == 1 => replies[0].clone(),
            Ok(ReplyOutcome::Pass) => {
                failed(&self.name, "passed a merge of several replies").reply()
            }
            // One complete RESP reply: checked by the runtime.
            Ok(ReplyOutcome::Replace(b)) => Bytes::from(b),
            Ok(ReplyOutcome::Error(t)) => error_bytes(&t),
            // A rewrite cannot fail open: the original command was never sent.
            Err(e) => call_failed(&self.name, &e).reply(),
        };
        out.extend_from_slice(&reply);
    }
}
