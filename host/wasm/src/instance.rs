//! One warm instance of a plugin generation on one worker thread, and the calls into it.

use std::sync::Arc;
use std::time::Duration;

use tessera_plugin_abi::{self as abi, Arena, ArgIn, ManifestView};
use wasmtime::{Memory, Store, StoreLimits, StoreLimitsBuilder, Trap, TypedFunc, UpdateDeadline};

use crate::cputime::thread_cpu_time;
use crate::metrics::Series;
use crate::plugin::{Generation, Hooks, PluginShared};
use crate::runtime::ClientLookup;

/// Why a call did not produce an action. The instance is dead afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub reason: String,
    /// Index into `plugin::FAULT_REASONS`.
    pub(crate) kind: usize,
}

impl Fault {
    /// The plugin produced something the host cannot use.
    pub fn bad_output(msg: impl Into<String>) -> Self {
        Self {
            reason: msg.into(),
            kind: 3,
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// What `on_command` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdOutcome {
    Pass,
    /// Error text without `-` and CRLF (CR/LF already replaced).
    Deny(Vec<u8>),
    /// One RESP reply (not validated here).
    Reply(Vec<u8>),
    /// A rewrite block with `count` commands, validated by `RewriteView::parse`.
    Rewrite {
        merge: u32,
        ctx: u64,
        count: u32,
        block: Vec<u8>,
    },
    Observe(u64),
}

/// What `on_reply` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyOutcome {
    Pass,
    Replace(Vec<u8>),
    Error(Vec<u8>),
}

/// Per-call clock for the CPU budget.
#[derive(Debug, Default)]
pub(crate) struct CallClock {
    ticks: u32,
    cpu_start: Option<Duration>,
    budget: Duration,
    max_ticks: u32,
    /// Set by the deadline callback when it stops a call.
    stopped: Option<&'static str>,
}

/// The data of an instance's `Store`.
pub(crate) struct HostState {
    limits: StoreLimits,
    pub(crate) memory: Option<Memory>,
    pub(crate) plugin: Arc<PluginShared>,
    pub(crate) clients: Arc<dyn ClientLookup>,
    pub(crate) in_init: bool,
    pub(crate) series: Vec<Option<(Arc<Series>, crate::metrics::Kind)>>,
    clock: CallClock,
    memory_limit: usize,
}

struct Exports {
    reserve: TypedFunc<(i32, i32), i32>,
    init: TypedFunc<i32, i64>,
    on_command: TypedFunc<(i64, i32, i32), i64>,
    on_reply: TypedFunc<(i64, i64, i32), i64>,
    on_close: Option<TypedFunc<i64, ()>>,
    on_tick: Option<TypedFunc<(), ()>>,
    arena_ptr: u32,
}

/// A live instance. Not `Sync`: it belongs to one worker thread.
pub struct Instance {
    store: Store<HostState>,
    memory: Memory,
    exports: Exports,
    arena: Arena,
    dead: bool,
    pub generation: u64,
}

fn trap_fault(e: wasmtime::Error, clock: &CallClock, memory_limit: usize) -> Fault {
    if let Some(what) = clock.stopped {
        return Fault {
            reason: what.to_owned(),
            kind: 1,
        };
    }
    let text = format!("{e:#}");
    if text.contains("forcing trap when growing memory") {
        return Fault {
            reason: format!("memory limit of {} MiB exceeded", memory_limit >> 20),
            kind: 2,
        };
    }
    let reason = match e.downcast_ref::<Trap>() {
        Some(Trap::UnreachableCodeReached) => "trap: unreachable (the plugin panicked)".to_owned(),
        Some(Trap::StackOverflow) => "trap: stack overflow".to_owned(),
        Some(Trap::MemoryOutOfBounds) => "trap: out-of-bounds memory access".to_owned(),
        Some(Trap::Interrupt) => "CPU budget exceeded".to_owned(),
        Some(t) => format!("trap: {t}"),
        None => {
            // First line only: backtraces stay in the logs.
            let line = text.lines().next().unwrap_or("trap").to_owned();
            format!("trap: {line}")
        }
    };
    Fault { reason, kind: 0 }
}

impl Instance {
    /// Instantiates `generation` (without calling `init`).
    pub(crate) fn new(
        gen_pre: &wasmtime::InstancePre<HostState>,
        engine: &wasmtime::Engine,
        shared: Arc<PluginShared>,
        clients: Arc<dyn ClientLookup>,
        cpu_budget: Duration,
        memory_limit: usize,
        generation: u64,
    ) -> Result<Self, String> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(memory_limit)
            .instances(1)
            .trap_on_grow_failure(true)
            .build();
        let budget_ms = cpu_budget.as_millis().max(1) as u32;
        let mut store = Store::new(
            engine,
            HostState {
                limits,
                memory: None,
                plugin: shared.clone(),
                clients,
                in_init: false,
                series: Vec::new(),
                clock: CallClock {
                    budget: cpu_budget,
                    max_ticks: budget_ms.saturating_mul(10).max(20),
                    ..CallClock::default()
                },
                memory_limit,
            },
        );
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_callback(|mut ctx| {
            let c = &mut ctx.data_mut().clock;
            c.ticks += 1;
            let now = thread_cpu_time();
            let Some(start) = c.cpu_start else {
                // First tick inside this call: start measuring CPU from here.
                c.cpu_start = Some(now);
                return Ok(UpdateDeadline::Continue(1));
            };
            if now.saturating_sub(start) > c.budget {
                c.stopped = Some("CPU budget exceeded");
                return Ok(UpdateDeadline::Interrupt);
            }
            if c.ticks > c.max_ticks {
                c.stopped = Some("call took too long (wall clock)");
                return Ok(UpdateDeadline::Interrupt);
            }
            Ok(UpdateDeadline::Continue(1))
        });
        store.set_epoch_deadline(1_000);
        let inst = gen_pre
            .instantiate(&mut store)
            .map_err(|e| format!("instantiation failed: {e:#}"))?;
        let memory = inst
            .get_memory(&mut store, "memory")
            .ok_or("the module exports no memory")?;
        store.data_mut().memory = Some(memory);
        macro_rules! func {
            ($name:expr) => {
                inst.get_typed_func(&mut store, $name)
                    .map_err(|e| format!("export {}: {e}", $name))?
            };
        }
        let arena_fn: TypedFunc<(), i32> = func!(abi::export::ARENA);
        let reserve = func!(abi::export::RESERVE);
        let init = func!(abi::export::INIT);
        let on_command = func!(abi::export::ON_COMMAND);
        let on_reply = func!(abi::export::ON_REPLY);
        let on_close = inst.get_typed_func(&mut store, abi::export::ON_CLOSE).ok();
        let on_tick = inst.get_typed_func(&mut store, abi::export::ON_TICK).ok();
        let clock_budget = cpu_budget;
        let _ = clock_budget;
        store.data_mut().clock.reset();
        store.set_epoch_deadline(1);
        let arena_ptr = arena_fn.call(&mut store, ()).map_err(|e| {
            format!(
                "tp_arena failed: {}",
                trap_fault(e, &store.data().clock, memory_limit)
            )
        })? as u32;
        let mut me = Self {
            store,
            memory,
            exports: Exports {
                reserve,
                init,
                on_command,
                on_reply,
                on_close,
                on_tick,
                arena_ptr,
            },
            arena: Arena::default(),
            dead: false,
            generation,
        };
        me.read_arena().map_err(|f| f.reason)?;
        Ok(me)
    }

    pub fn is_dead(&self) -> bool {
        self.dead
    }

    fn read_arena(&mut self) -> Result<(), Fault> {
        let data = self.memory.data(&self.store);
        let p = self.exports.arena_ptr as usize;
        let a = data
            .get(p..p + Arena::SIZE)
            .and_then(Arena::decode)
            .ok_or_else(|| Fault::bad_output("arena descriptor outside memory"))?;
        let inside = |off: u32, cap: u32| {
            (off as usize)
                .checked_add(cap as usize)
                .is_some_and(|e| e <= data.len())
        };
        if !inside(a.in_off, a.in_cap) || !inside(a.out_off, a.out_cap) {
            return Err(Fault::bad_output("arena buffers outside memory"));
        }
        self.arena = a;
        Ok(())
    }

    /// Runs a guest function under the CPU budget; a failure kills the instance.
    fn guarded<R>(
        &mut self,
        f: impl FnOnce(&mut Store<HostState>, &Exports) -> wasmtime::Result<R>,
    ) -> Result<R, Fault> {
        if self.dead {
            return Err(Fault {
                reason: "instance is dead".into(),
                kind: 0,
            });
        }
        self.store.data_mut().clock.reset();
        self.store.set_epoch_deadline(1);
        match f(&mut self.store, &self.exports) {
            Ok(r) => Ok(r),
            Err(e) => {
                let st = self.store.data();
                let fault = trap_fault(e, &st.clock, st.memory_limit);
                self.dead = true;
                st.plugin.count_fault(fault.kind);
                Err(fault)
            }
        }
    }

    fn fail(&mut self, fault: Fault) -> Fault {
        self.dead = true;
        self.store.data().plugin.count_fault(fault.kind);
        fault
    }

    /// Makes `in` at least `len` bytes.
    fn ensure_in(&mut self, len: usize) -> Result<(), Fault> {
        if len <= self.arena.in_cap as usize {
            return Ok(());
        }
        let Ok(len32) = i32::try_from(len) else {
            return Err(self.fail(Fault::bad_output("input larger than 2 GiB")));
        };
        let rc = self.guarded(|s, e| e.reserve.call(s, (len32, 0)))?;
        if rc < 0 {
            return Err(self.fail(Fault {
                reason: format!("plugin could not reserve {len} bytes for its input"),
                kind: 2,
            }));
        }
        self.read_arena().map_err(|f| self.fail(f))?;
        if (self.arena.in_cap as usize) < len {
            return Err(self.fail(Fault::bad_output(
                "tp_reserve did not grow the input buffer",
            )));
        }
        Ok(())
    }

    /// The `out` bytes of the last call (re-reading the descriptor: the guest may have grown it).
    fn out(&mut self, len: u32) -> Result<Vec<u8>, Fault> {
        self.read_arena().map_err(|f| self.fail(f))?;
        if len > self.arena.out_cap {
            return Err(self.fail(Fault::bad_output("output longer than the out buffer")));
        }
        let data = self.memory.data(&self.store);
        let start = self.arena.out_off as usize;
        Ok(data[start..start + len as usize].to_vec())
    }

    /// Runs `tp_init(config)`; the plugin's refusal is `Ok(Err(message))`.
    pub(crate) fn init(&mut self, config: &[u8]) -> Result<Result<Hooks, String>, Fault> {
        self.ensure_in(config.len())?;
        let start = self.arena.in_off as usize;
        self.memory.data_mut(&mut self.store)[start..start + config.len()].copy_from_slice(config);
        self.store.data_mut().in_init = true;
        let len = config.len() as i32;
        let r = self.guarded(|s, e| e.init.call(s, len));
        self.store.data_mut().in_init = false;
        let (action, _, out_len) = abi::unpack(r?);
        let out = self.out(out_len)?;
        match action {
            abi::INIT_OK => {
                let m = ManifestView::parse(&out)
                    .ok_or_else(|| self.fail(Fault::bad_output("malformed manifest")))?;
                Ok(Hooks::from_manifest(&m).map_err(|e| self.fail(Fault::bad_output(e)).reason))
            }
            abi::INIT_ERROR => Ok(Err(String::from_utf8_lossy(&out).into_owned())),
            other => Err(self.fail(Fault::bad_output(format!(
                "tp_init returned action {other}"
            )))),
        }
    }

    /// Calls `tp_on_command`. `args` are the argv with key flags and elision already decided.
    pub fn on_command(
        &mut self,
        conn: u64,
        cmd: u16,
        class: u32,
        args: &[ArgIn<'_>],
    ) -> Result<CmdOutcome, Fault> {
        let size = abi::command_size(args.iter().copied());
        self.ensure_in(size)?;
        let start = self.arena.in_off as usize;
        let dst = &mut self.memory.data_mut(&mut self.store)[start..start + size];
        if abi::encode_command(dst, class, args.len(), args.iter().copied()).is_none() {
            return Err(Fault::bad_output("argument longer than 1 GiB"));
        }
        let nargs = args.len() as i32;
        let r = self.guarded(|s, e| e.on_command.call(s, (conn as i64, cmd as i32, nargs)))?;
        self.store
            .data()
            .plugin
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if r == 0 {
            return Ok(CmdOutcome::Pass);
        }
        let (action, count, out_len) = abi::unpack(r);
        match action {
            abi::action::PASS => Ok(CmdOutcome::Pass),
            abi::action::DENY => Ok(CmdOutcome::Deny(sanitize_error(self.out(out_len)?))),
            abi::action::REPLY => Ok(CmdOutcome::Reply(self.out(out_len)?)),
            abi::action::REWRITE => {
                let block = self.out(out_len)?;
                let view = abi::RewriteView::parse(&block, count).map_err(|e| {
                    self.fail(Fault::bad_output(format!("malformed rewrite: {e:?}")))
                })?;
                for c in view.commands() {
                    let c = c.map_err(|e| self.fail(Fault::bad_output(format!("{e:?}"))))?;
                    for a in c {
                        if let Ok(abi::RewriteArg::Input(i)) = a
                            && i as usize >= args.len()
                        {
                            return Err(self.fail(Fault::bad_output(format!(
                                "rewrite refers to argument {i} of a {}-argument command",
                                args.len()
                            ))));
                        }
                    }
                }
                Ok(CmdOutcome::Rewrite {
                    merge: view.merge,
                    ctx: view.ctx,
                    count,
                    block,
                })
            }
            abi::action::OBSERVE => {
                // Eight bytes read in place: no allocation on the path of every observed command.
                if out_len < 8 {
                    return Ok(CmdOutcome::Observe(0));
                }
                self.read_arena().map_err(|f| self.fail(f))?;
                let at = self.arena.out_off as usize;
                let data = self.memory.data(&self.store);
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[at..at + 8]);
                Ok(CmdOutcome::Observe(u64::from_le_bytes(b)))
            }
            other => Err(self.fail(Fault::bad_output(format!("unknown action {other}")))),
        }
    }

    /// Calls `tp_on_reply` with raw RESP replies.
    pub fn on_reply(
        &mut self,
        conn: u64,
        ctx: u64,
        replies: &[&[u8]],
    ) -> Result<ReplyOutcome, Fault> {
        let size = abi::replies_size(replies.iter().copied());
        self.ensure_in(size)?;
        let start = self.arena.in_off as usize;
        let dst = &mut self.memory.data_mut(&mut self.store)[start..start + size];
        abi::encode_replies(dst, replies.len(), replies.iter().copied())
            .ok_or_else(|| Fault::bad_output("reply table"))?;
        let n = replies.len() as i32;
        let r = self.guarded(|s, e| e.on_reply.call(s, (conn as i64, ctx as i64, n)))?;
        if r == 0 {
            return Ok(ReplyOutcome::Pass);
        }
        let (action, _, out_len) = abi::unpack(r);
        match action {
            abi::reply_action::PASS => Ok(ReplyOutcome::Pass),
            abi::reply_action::REPLACE => Ok(ReplyOutcome::Replace(self.out(out_len)?)),
            abi::reply_action::ERROR => Ok(ReplyOutcome::Error(sanitize_error(self.out(out_len)?))),
            other => Err(self.fail(Fault::bad_output(format!("unknown reply action {other}")))),
        }
    }

    pub fn on_close(&mut self, conn: u64) -> Result<(), Fault> {
        match self.exports.on_close.clone() {
            Some(f) => self.guarded(|s, _| f.call(s, conn as i64)),
            None => Ok(()),
        }
    }

    pub fn on_tick(&mut self) -> Result<(), Fault> {
        match self.exports.on_tick.clone() {
            Some(f) => self.guarded(|s, _| f.call(s, ())),
            None => Ok(()),
        }
    }
}

impl CallClock {
    fn reset(&mut self) {
        self.ticks = 0;
        self.cpu_start = None;
        self.stopped = None;
    }
}

/// Error text as one RESP error line: no CR/LF, non-empty.
fn sanitize_error(mut text: Vec<u8>) -> Vec<u8> {
    for b in &mut text {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    if text.is_empty() {
        text.extend_from_slice(b"ERR denied by plugin");
    }
    text
}

/// Builds a generation's instance and runs its `init`.
pub(crate) fn instantiate_and_init(
    g: &Generation,
    engine: &wasmtime::Engine,
    clients: Arc<dyn ClientLookup>,
) -> Result<Instance, Fault> {
    let mut inst = Instance::new(
        &g.pre,
        engine,
        g.shared.clone(),
        clients,
        g.spec.cpu_budget,
        g.spec.memory_limit,
        g.id,
    )
    .map_err(|reason| Fault { reason, kind: 0 })?;
    match inst.init(&g.spec.config)? {
        Ok(_) => {
            g.shared
                .instances
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(inst)
        }
        Err(msg) => Err(Fault {
            reason: format!("init refused its config: {msg}"),
            kind: 0,
        }),
    }
}
