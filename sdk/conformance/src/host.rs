//! The suite's side of the runtime: a plugin loaded in the real `tessera-wasm` runtime, calls
//! made as the proxy makes them (hooked commands only, values per the manifest), and a log of
//! every fault with whether the next command was served by a fresh instance.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use tessera_wasm::{
    BatchCmd, CallError, CmdOutcome, Generation, Hooks, Instance, LoadError, PluginSpec,
    ReplyOutcome, Runtime, RuntimeConfig,
};

use crate::corpus::Described;

/// How the plugin is loaded.
#[derive(Debug, Clone)]
pub struct Limits {
    pub cpu_budget_ms: u64,
    pub memory_mb: usize,
}

/// One call that faulted.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    /// `on_command SET k v`, `on_reply +OK` …
    pub call: String,
    pub reason: String,
    /// Whether a fresh instance then answered a command the plugin had answered before, the
    /// same way (`None`: there was no such command to replay).
    pub contained: Option<bool>,
    /// Whether a fresh instance (with its `init`) could be created after the fault.
    pub fresh: bool,
}

/// A loaded plugin and the instance calls go to.
pub struct Host {
    pub runtime: Arc<Runtime>,
    pub generation: Arc<Generation>,
    instance: Option<Instance>,
    pub faults: Vec<FaultRecord>,
    /// A command answered without a fault, and its answer: replayed after a fault.
    control: Option<(Described, CmdOutcome)>,
}

impl Host {
    /// Loads the module (ABI checks, `init` in a probe) in a runtime of its own.
    ///
    /// # Errors
    /// The runtime's reason, worded for the operator.
    pub fn load(name: &str, wasm: &[u8], config: &[u8], l: &Limits) -> Result<Self, LoadError> {
        let runtime = Runtime::new(RuntimeConfig::default(), None)
            .map_err(|e| LoadError(format!("runtime: {e:#}")))?;
        let spec = PluginSpec::new(name, wasm.to_vec(), config.to_vec())
            .with_limits(Some(l.cpu_budget_ms), Some(l.memory_mb));
        let generation = runtime.load(spec)?;
        Ok(Self {
            runtime,
            generation,
            instance: None,
            faults: Vec::new(),
            control: None,
        })
    }

    pub fn hooks(&self) -> &Hooks {
        &self.generation.hooks
    }

    /// `Some(values)` if the manifest selects this command (the host's own test: bitmap,
    /// classes, key prefixes), `None` if the plugin must never see it.
    pub fn selects(&self, d: &Described) -> Option<bool> {
        let h = self.hooks();
        let values = h.wants(d.id, d.class)?;
        h.keys_match(d.key_args()).then_some(values)
    }

    /// Commands given to the plugin so far (`tessera_plugin_calls_total`).
    pub fn calls(&self) -> u64 {
        self.generation.shared.calls.load(Relaxed)
    }

    /// Instances created so far, probes aside.
    pub fn instances_created(&self) -> u64 {
        self.generation.shared.instances.load(Relaxed)
    }

    /// Drops the current instance: the next call gets a fresh one.
    pub fn renew(&mut self) {
        self.instance = None;
    }

    /// The current instance, created with `init` if there is none.
    pub fn instance(&mut self) -> Result<&mut Instance, String> {
        if self.instance.as_ref().is_none_or(Instance::is_dead) {
            let inst = self
                .runtime
                .instantiate(&self.generation)
                .map_err(|f| format!("a fresh instance could not be created: {f}"))?;
            self.instance = Some(inst);
        }
        Ok(self.instance.as_mut().expect("just set"))
    }

    /// `on_command` for a command the manifest selects (`None` if it does not, or the call
    /// gave no verdict: a fault is logged, an input over the limit is the caller's to test).
    pub fn command(&mut self, conn: u64, d: &Described) -> Option<Result<CmdOutcome, CallError>> {
        let values = self.selects(d)?;
        let table = d.table(values);
        let r = match self.instance() {
            Ok(inst) => inst.on_command(conn, d.id, d.class, &table),
            Err(e) => {
                self.log(format!("on_command {}", d.label()), e);
                return None;
            }
        };
        match &r {
            Ok(o) if self.control.is_none() => self.control = Some((d.clone(), o.clone())),
            Err(CallError::Fault(f)) => {
                self.log(format!("on_command {}", d.label()), f.reason.clone())
            }
            _ => {}
        }
        Some(r)
    }

    /// The selected commands of `cmds` through `tp_on_commands` (or one call each, for a
    /// module without it), as the proxy gives a pipeline's run; one result per command given.
    pub fn batch(&mut self, conn: u64, cmds: &[Described]) -> Vec<Result<CmdOutcome, CallError>> {
        let tables: Vec<(u16, u32, Vec<tessera_plugin_abi::ArgIn<'_>>)> = cmds
            .iter()
            .map(|d| (d.id, d.class, d.table(self.selects(d).unwrap_or(false))))
            .collect();
        let batch: Vec<BatchCmd<'_>> = tables
            .iter()
            .map(|(cmd, class, args)| BatchCmd {
                cmd: *cmd,
                class: *class,
                args,
            })
            .collect();
        let mut results = Vec::with_capacity(batch.len());
        let mut done = 0;
        while done < batch.len() {
            let Ok(inst) = self.instance() else { break };
            done += inst.on_commands(conn, &batch[done..], &mut results).max(1);
        }
        for (d, r) in cmds.iter().zip(&results) {
            if let Err(CallError::Fault(f)) = r {
                self.log(
                    format!("on_commands (batch) at {}", d.label()),
                    f.reason.clone(),
                );
            }
        }
        results
    }

    /// `on_reply` with `replies` (heads only if the manifest asked for heads and there is
    /// one reply, as for an observed command).
    pub fn reply(&mut self, conn: u64, ctx: u64, replies: &[&[u8]]) -> Option<ReplyOutcome> {
        let heads = self.hooks().observe_heads && replies.len() == 1;
        let label = format!("on_reply {}", show(replies.first().copied().unwrap_or(b"")));
        let r = match self.instance() {
            Ok(inst) if heads => inst.on_reply_head(conn, ctx, replies[0]),
            Ok(inst) => inst.on_reply(conn, ctx, replies),
            Err(e) => {
                self.log(label, e);
                return None;
            }
        };
        match r {
            Ok(o) => Some(o),
            Err(e) => {
                self.log(label, e.to_string());
                None
            }
        }
    }

    /// `on_close` and `on_tick`, if the manifest asks for them.
    pub fn close_and_tick(&mut self, conn: u64) {
        let (close, tick) = (self.hooks().want_close, self.hooks().tick_ms > 0);
        if close {
            let r = self.instance().map(|i| i.on_close(conn));
            if let Ok(Err(e)) = r {
                self.log(format!("on_close {conn}"), e.to_string());
            }
        }
        if tick {
            let r = self.instance().map(Instance::on_tick);
            if let Ok(Err(e)) = r {
                self.log("on_tick".into(), e.to_string());
            }
        }
    }

    /// Logs a fault, then replays the control command on a fresh instance.
    fn log(&mut self, call: String, reason: String) {
        self.renew();
        let fresh = self.instance().is_ok();
        let contained = self.control.clone().map(|(d, before)| {
            let values = self.selects(&d).unwrap_or(false);
            let table = d.table(values);
            match self.instance() {
                Ok(inst) => inst
                    .on_command(0, d.id, d.class, &table)
                    .is_ok_and(|after| same(&before, &after)),
                Err(_) => false,
            }
        });
        self.faults.push(FaultRecord {
            call,
            reason,
            contained,
            fresh,
        });
    }
}

/// Whether two outcomes are the same answer (an observer's ctx may carry a time: only the
/// action counts for OBSERVE).
pub fn same(a: &CmdOutcome, b: &CmdOutcome) -> bool {
    match (a, b) {
        (CmdOutcome::Observe(_), CmdOutcome::Observe(_)) => true,
        _ => a == b,
    }
}

/// An outcome as the report shows it.
pub fn describe(o: &CmdOutcome) -> String {
    match o {
        CmdOutcome::Pass => "pass".into(),
        CmdOutcome::Deny(t) => format!("deny {:?}", String::from_utf8_lossy(t)),
        CmdOutcome::Reply(r) => format!("reply {}", show(r)),
        CmdOutcome::Rewrite { merge, count, .. } => {
            format!("rewrite into {count} commands (merge {merge})")
        }
        CmdOutcome::Observe(ctx) => format!("observe (ctx {ctx})"),
    }
}

/// RESP bytes as one readable line.
pub fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(48)])
        .escape_debug()
        .to_string();
    if b.len() > 48 {
        format!("{s}…({} B)", b.len())
    } else {
        s
    }
}
