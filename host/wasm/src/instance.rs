//! One warm instance of a plugin generation on one worker thread, and the calls into it.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use tessera_plugin_abi::{self as abi, Arena, ArgIn, ManifestView};
use wasmtime::{Memory, Store, StoreLimitsBuilder, Trap, TypedFunc, UpdateDeadline};

use crate::client::ClientLookup;
use crate::cputime::thread_cpu_time;
use crate::fault::{CallError, Fault, Input, InputTooLarge};
use crate::generation::Generation;
use crate::hook_latency::{Hook, SampleTicks};
use crate::hooks::Hooks;
use crate::host_state::{CallClock, HostState};
use crate::plugin::PluginShared;
use crate::spec::PluginSpec;

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

struct Exports {
    reserve: TypedFunc<(i32, i32), i32>,
    init: TypedFunc<i32, i64>,
    on_command: TypedFunc<(i64, i32, i32), i64>,
    on_reply: TypedFunc<(i64, i64, i32), i64>,
    /// Optional (`tp_on_commands`): without it a batch is one call per command.
    on_commands: Option<TypedFunc<(i64, i32), i64>>,
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
    /// The most bytes one call may copy into `in` (`PluginSpec::input_limit`).
    input_limit: usize,
    pub generation: u64,
    /// Which of this instance's hook calls are timed (`hook_latency`).
    ticks: SampleTicks,
}

fn trap_fault(e: wasmtime::Error, clock: &CallClock, memory_limit: usize) -> Fault {
    if let Some(what) = clock.stopped {
        return Fault::new(Fault::CPU, what);
    }
    let text = format!("{e:#}");
    if text.contains("forcing trap when growing memory") {
        return Fault::new(
            Fault::MEMORY,
            format!("memory limit of {} MiB exceeded", memory_limit >> 20),
        );
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
    Fault::new(Fault::TRAP, reason)
}

impl Instance {
    /// Instantiates a generation's module (without calling `init`).
    pub(crate) fn new(
        gen_pre: &wasmtime::InstancePre<HostState>,
        engine: &wasmtime::Engine,
        shared: Arc<PluginShared>,
        clients: Arc<dyn ClientLookup>,
        spec: &PluginSpec,
        generation: u64,
    ) -> Result<Self, String> {
        let memory_limit = spec.memory_limit;
        let limits = StoreLimitsBuilder::new()
            .memory_size(memory_limit)
            .instances(1)
            .trap_on_grow_failure(true)
            .build();
        let budget_ms = spec.cpu_budget.as_millis().max(1) as u32;
        let mut store = Store::new(
            engine,
            HostState {
                limits,
                memory: None,
                plugin: shared,
                clients,
                in_init: false,
                series: Vec::new(),
                clock: CallClock {
                    budget: spec.cpu_budget,
                    max_ticks: budget_ms.saturating_mul(10).max(20),
                    ..CallClock::default()
                },
                memory_limit,
            },
        );
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_callback(|mut ctx| {
            // In a batch, the budget is per command: the guest's progress counter restarts it.
            let progress = ctx.data().clock.progress.and_then(|at| {
                let mem = ctx.data().memory?.data(&ctx);
                let b = mem.get(at..at.checked_add(4)?)?;
                Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            });
            let c = &mut ctx.data_mut().clock;
            if let Some(p) = progress
                && p != c.last_progress
            {
                c.last_progress = p;
                c.ticks = 0;
                c.cpu_start = None;
            }
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
        let on_commands = inst
            .get_typed_func(&mut store, abi::export::ON_COMMANDS)
            .ok();
        let on_close = inst.get_typed_func(&mut store, abi::export::ON_CLOSE).ok();
        let on_tick = inst.get_typed_func(&mut store, abi::export::ON_TICK).ok();
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
                on_commands,
                on_close,
                on_tick,
                arena_ptr,
            },
            arena: Arena::default(),
            dead: false,
            input_limit: spec.input_limit(),
            generation,
            ticks: SampleTicks::default(),
        };
        me.read_arena().map_err(|f| f.reason)?;
        Ok(me)
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.store.data().plugin.name
    }

    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The most bytes one call may copy into the plugin (its spec's input limit).
    pub fn input_limit(&self) -> usize {
        self.input_limit
    }

    fn read_arena(&mut self) -> Result<(), Fault> {
        let data = self.memory.data(&self.store);
        let p = self.exports.arena_ptr as usize;
        let a = data
            .get(p..p.saturating_add(Arena::SIZE))
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

    /// Runs a guest function under the CPU budget; a failure kills the instance. A call of a
    /// `hook` that the sample picks is timed (wall time, faulted or not) into the plugin's
    /// latency histogram.
    fn guarded<R>(
        &mut self,
        hook: Option<Hook>,
        f: impl FnOnce(&mut Store<HostState>, &Exports) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        if self.dead {
            return Err(CallError::Dead);
        }
        self.store.data_mut().clock.reset();
        self.store.set_epoch_deadline(1);
        // A sample of the calls (`hook_latency`); quanta: the TSC where it is invariant, a
        // third of the cost of `std::time::Instant`.
        let sample = self.store.data().plugin.latency.sample();
        let timed = hook.filter(|&h| self.ticks.take(h, sample));
        let start = timed.map(|_| quanta::Instant::now());
        let r = f(&mut self.store, &self.exports);
        if let (Some(hook), Some(start)) = (timed, start) {
            let took = quanta::Instant::now().duration_since(start);
            self.store.data().plugin.latency.observe(hook, took);
        }
        match r {
            Ok(r) => Ok(r),
            Err(e) => {
                let st = self.store.data();
                let fault = trap_fault(e, &st.clock, st.memory_limit);
                self.dead = true;
                st.plugin.count_fault(fault.kind);
                Err(CallError::Fault(fault))
            }
        }
    }

    /// The plugin produced something unusable: the instance is dead, the fault counted.
    pub(crate) fn fail(&mut self, fault: Fault) -> CallError {
        self.dead = true;
        self.store.data().plugin.count_fault(fault.kind);
        CallError::Fault(fault)
    }

    /// Refuses an input over the limit before anything is copied; the instance is unharmed.
    pub(crate) fn admit(&self, input: Input, size: usize) -> Result<(), CallError> {
        if self.dead {
            return Err(CallError::Dead);
        }
        if size <= self.input_limit {
            return Ok(());
        }
        self.store.data().plugin.count_refused(input);
        Err(CallError::TooLarge(InputTooLarge {
            input,
            size,
            limit: self.input_limit,
        }))
    }

    /// Makes `in` at least `len` bytes, and returns it.
    pub(crate) fn input_buffer(&mut self, len: usize) -> Result<&mut [u8], CallError> {
        if len > self.arena.in_cap as usize {
            let Ok(len32) = i32::try_from(len) else {
                return Err(self.fail(Fault::bad_output("input larger than 2 GiB")));
            };
            let rc = self.guarded(None, |s, e| e.reserve.call(s, (len32, 0)))?;
            if rc < 0 {
                return Err(self.fail(Fault::new(
                    Fault::MEMORY,
                    format!("plugin could not reserve {len} bytes for its input"),
                )));
            }
            self.read_arena().map_err(|f| self.fail(f))?;
            if (self.arena.in_cap as usize) < len {
                return Err(self.fail(Fault::bad_output(
                    "tp_reserve did not grow the input buffer",
                )));
            }
        }
        // In memory (checked when the descriptor was read, and memory never shrinks), but
        // checked again rather than trusted: this must never panic.
        let start = self.arena.in_off as usize;
        if start + len > self.memory.data_size(&self.store) {
            return Err(self.fail(Fault::bad_output("arena input outside memory")));
        }
        Ok(&mut self.memory.data_mut(&mut self.store)[start..start + len])
    }

    /// Where the last call's `out_len` bytes are (re-reading the descriptor: the guest may
    /// have grown `out`), checked against the advertised capacity and the memory.
    pub(crate) fn out_range(&mut self, len: u32) -> Result<std::ops::Range<usize>, CallError> {
        self.read_arena().map_err(|f| self.fail(f))?;
        if len > self.arena.out_cap {
            return Err(self.fail(Fault::bad_output("output longer than the out buffer")));
        }
        let start = self.arena.out_off as usize;
        Ok(start..start + len as usize)
    }

    /// The `out` bytes of the last call.
    fn out(&mut self, len: u32) -> Result<Vec<u8>, CallError> {
        let r = self.out_range(len)?;
        match self.memory.data(&self.store).get(r) {
            Some(b) => Ok(b.to_vec()),
            None => Err(self.fail(Fault::bad_output("output outside memory"))),
        }
    }

    /// One complete RESP reply from `out`, or a bad-output fault (REPLY and REPLACE).
    fn out_reply(&mut self, len: u32) -> Result<Vec<u8>, CallError> {
        let b = self.out(len)?;
        if !abi::is_one_reply(&b) {
            return Err(self.fail(Fault::bad_output(
                "its reply is not one complete RESP reply",
            )));
        }
        Ok(b)
    }

    /// Runs `tp_init(config)`; the plugin's refusal is `Ok(Err(message))`.
    pub(crate) fn init(&mut self, config: &[u8]) -> Result<Result<Hooks, String>, CallError> {
        self.input_buffer(config.len())?.copy_from_slice(config);
        self.store.data_mut().in_init = true;
        let len = config.len() as i32;
        let r = self.guarded(None, |s, e| e.init.call(s, len));
        self.store.data_mut().in_init = false;
        let (action, _, out_len) = abi::unpack(r?);
        let out = self.out(out_len)?;
        match action {
            abi::INIT_OK => {
                let m = ManifestView::parse(&out)
                    .ok_or_else(|| self.fail(Fault::bad_output("malformed manifest")))?;
                match Hooks::from_manifest(&m) {
                    Ok(h) => Ok(Ok(h)),
                    Err(e) => Err(self.fail(Fault::bad_output(e))),
                }
            }
            abi::INIT_ERROR => Ok(Err(String::from_utf8_lossy(&out).into_owned())),
            other => Err(self.fail(Fault::bad_output(format!(
                "tp_init returned action {other}"
            )))),
        }
    }

    /// Calls `tp_on_command`. `args` are the argv with key flags and elision already decided.
    ///
    /// # Errors
    /// [`CallError::TooLarge`] when the argument table would be over the input limit (nothing
    /// was copied, the instance lives); [`CallError::Fault`] when the call faulted or its
    /// output is unusable (the instance is dead).
    pub fn on_command(
        &mut self,
        conn: u64,
        cmd: u16,
        class: u32,
        args: &[ArgIn<'_>],
    ) -> Result<CmdOutcome, CallError> {
        let size = abi::command_size(args.iter().copied());
        self.admit(Input::Command, size)?;
        let dst = self.input_buffer(size)?;
        if abi::encode_command(dst, class, args.len(), args.iter().copied()).is_none() {
            return Err(CallError::Fault(Fault::bad_output(
                "argument longer than 1 GiB",
            )));
        }
        let nargs = args.len() as i32;
        let r = self.guarded(Some(Hook::OnCommand), |s, e| {
            e.on_command.call(s, (conn as i64, cmd as i32, nargs))
        })?;
        self.store.data().plugin.calls.fetch_add(1, Relaxed);
        if r == 0 {
            return Ok(CmdOutcome::Pass);
        }
        let (action, _, out_len) = abi::unpack(r);
        match action {
            abi::action::PASS => Ok(CmdOutcome::Pass),
            abi::action::OBSERVE => self.observe_ctx(out_len).map(CmdOutcome::Observe),
            _ => {
                let out = self.out(out_len)?;
                let o = outcome_of(r, &out, args.len()).map_err(|f| self.fail(f));
                if let Ok(CmdOutcome::Deny(_)) = &o {
                    self.count_deny();
                }
                o
            }
        }
    }

    /// Whether the module exports `tp_on_commands`.
    pub(crate) fn has_batch(&self) -> bool {
        self.exports.on_commands.is_some()
    }

    /// Where `in` starts in the guest's memory.
    pub(crate) fn input_offset(&self) -> usize {
        self.arena.in_off as usize
    }

    /// The guest's memory, to read output in place.
    /// Counts a command the plugin denied.
    pub(crate) fn count_deny(&self) {
        self.store.data().plugin.denies.fetch_add(1, Relaxed);
    }

    pub(crate) fn memory_bytes(&self) -> &[u8] {
        self.memory.data(&self.store)
    }

    /// Counts commands given to the plugin in one `tp_on_commands` call
    /// (`tessera_plugin_calls_total` and `tessera_plugin_batched_calls_total`).
    pub(crate) fn count_batched_calls(&self, n: usize) {
        let p = &self.store.data().plugin;
        p.calls.fetch_add(n as u64, Relaxed);
        p.batched_calls.fetch_add(n as u64, Relaxed);
    }

    /// Counts one `tp_on_commands` call (`tessera_plugin_batches_total`).
    pub(crate) fn count_batch(&self) {
        self.store.data().plugin.batches.fetch_add(1, Relaxed);
    }

    /// Calls `tp_on_commands(conn, n)` under the CPU budget, per command: the deadline
    /// callback watches the progress counter at `progress` in memory.
    pub(crate) fn guarded_batch(
        &mut self,
        progress: usize,
        conn: u64,
        n: usize,
    ) -> Result<i64, CallError> {
        let Some(f) = self.exports.on_commands.clone() else {
            return Err(CallError::Dead);
        };
        let clock = &mut self.store.data_mut().clock;
        clock.progress = Some(progress);
        clock.last_progress = 0;
        let r = self.guarded(Some(Hook::OnCommands), |s, _| {
            f.call(s, (conn as i64, n as i32))
        });
        self.store.data_mut().clock.progress = None;
        r
    }

    /// The batch's progress counter (commands finished), read from `in` after a fault.
    pub(crate) fn batch_progress(&self, n: usize) -> usize {
        let start = self.arena.in_off as usize;
        self.memory_bytes()
            .get(start..)
            .map_or(0, |input| abi::batch::batch_done(input, n))
    }

    /// The whole `out` buffer as the descriptor describes it now (after a fault: the guest
    /// re-advertises `out` before it counts a command done). `None` if it is not in memory.
    pub(crate) fn out_range_after_fault(&mut self) -> Option<std::ops::Range<usize>> {
        let data = self.memory.data(&self.store);
        let p = self.exports.arena_ptr as usize;
        let a = data
            .get(p..p.checked_add(Arena::SIZE)?)
            .and_then(Arena::decode)?;
        let start = a.out_off as usize;
        let end = start.checked_add(a.out_cap as usize)?;
        (end <= data.len()).then_some(start..end)
    }

    /// The u64 ctx of an OBSERVE, read in place (no allocation on the path of every observed
    /// command). `out_len` comes from the plugin: it is checked against `out_cap` and the
    /// memory like any other output, never trusted.
    fn observe_ctx(&mut self, out_len: u32) -> Result<u64, CallError> {
        if out_len < 8 {
            // Lenient since ABI v1 shipped: no ctx means ctx 0.
            return Ok(0);
        }
        let r = self.out_range(out_len)?;
        let ctx = self
            .memory
            .data(&self.store)
            .get(r.start..r.start + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes);
        match ctx {
            Some(ctx) => Ok(ctx),
            None => Err(self.fail(Fault::bad_output("observe ctx outside memory"))),
        }
    }

    /// Calls `tp_on_reply` with an observed reply's head and size (a plugin that asked for
    /// heads, `Hooks::observe_heads`): a few bytes copied, whatever the reply's size.
    ///
    /// # Errors
    /// As [`Instance::on_reply`].
    pub fn on_reply_head(
        &mut self,
        conn: u64,
        ctx: u64,
        reply: &[u8],
    ) -> Result<ReplyOutcome, CallError> {
        let replies = [reply];
        let size = abi::reply_heads_size(&replies);
        self.admit(Input::Reply, size)?;
        let dst = self.input_buffer(size)?;
        if abi::encode_reply_heads(dst, &replies).is_none() {
            return Err(CallError::Fault(Fault::bad_output("reply table")));
        }
        self.reply_call(conn, ctx, 1)
    }

    /// Calls `tp_on_reply` with raw RESP replies.
    ///
    /// # Errors
    /// As [`Instance::on_command`]; a reply table over the input limit is
    /// [`CallError::TooLarge`] with [`Input::Reply`].
    pub fn on_reply(
        &mut self,
        conn: u64,
        ctx: u64,
        replies: &[&[u8]],
    ) -> Result<ReplyOutcome, CallError> {
        let size = abi::replies_size(replies.iter().copied());
        self.admit(Input::Reply, size)?;
        let dst = self.input_buffer(size)?;
        if abi::encode_replies(dst, replies.len(), replies.iter().copied()).is_none() {
            return Err(CallError::Fault(Fault::bad_output("reply table")));
        }
        self.reply_call(conn, ctx, replies.len() as i32)
    }

    /// `tp_on_reply` on the reply table in `in`, and its outcome.
    fn reply_call(&mut self, conn: u64, ctx: u64, n: i32) -> Result<ReplyOutcome, CallError> {
        let r = self.guarded(Some(Hook::OnReply), |s, e| {
            e.on_reply.call(s, (conn as i64, ctx as i64, n))
        })?;
        if r == 0 {
            return Ok(ReplyOutcome::Pass);
        }
        let (action, _, out_len) = abi::unpack(r);
        match action {
            abi::reply_action::PASS => Ok(ReplyOutcome::Pass),
            abi::reply_action::REPLACE => Ok(ReplyOutcome::Replace(self.out_reply(out_len)?)),
            abi::reply_action::ERROR => Ok(ReplyOutcome::Error(sanitize_error(self.out(out_len)?))),
            other => Err(self.fail(Fault::bad_output(format!("unknown reply action {other}")))),
        }
    }

    pub fn on_close(&mut self, conn: u64) -> Result<(), CallError> {
        match self.exports.on_close.clone() {
            Some(f) => self.guarded(Some(Hook::OnClose), |s, _| f.call(s, conn as i64)),
            None => Ok(()),
        }
    }

    pub fn on_tick(&mut self) -> Result<(), CallError> {
        match self.exports.on_tick.clone() {
            Some(f) => self.guarded(Some(Hook::OnTick), |s, _| f.call(s, ())),
            None => Ok(()),
        }
    }
}

/// A command's outcome from its packed result and its `out` bytes (any action but PASS and
/// OBSERVE read from memory elsewhere). Plugin output: anything unusable is a fault.
pub(crate) fn outcome_of(r: i64, out: &[u8], nargs: usize) -> Result<CmdOutcome, Fault> {
    let (action, count, _) = abi::unpack(r);
    match action {
        abi::action::PASS => Ok(CmdOutcome::Pass),
        abi::action::DENY => Ok(CmdOutcome::Deny(sanitize_error(out.to_vec()))),
        abi::action::REPLY if abi::is_one_reply(out) => Ok(CmdOutcome::Reply(out.to_vec())),
        abi::action::REPLY => Err(Fault::bad_output(
            "its reply is not one complete RESP reply",
        )),
        abi::action::REWRITE => rewrite_of(count, out, nargs),
        // Lenient since ABI v1 shipped: no ctx means ctx 0.
        abi::action::OBSERVE => Ok(CmdOutcome::Observe(
            out.get(..8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes),
        )),
        other => Err(Fault::bad_output(format!("unknown action {other}"))),
    }
}

fn rewrite_of(count: u32, block: &[u8], nargs: usize) -> Result<CmdOutcome, Fault> {
    let view = abi::RewriteView::parse(block, count)
        .map_err(|e| Fault::bad_output(format!("malformed rewrite: {e:?}")))?;
    for c in view.commands() {
        let c = c.map_err(|e| Fault::bad_output(format!("{e:?}")))?;
        for a in c {
            if let Ok(abi::RewriteArg::Input(i)) = a
                && i as usize >= nargs
            {
                return Err(Fault::bad_output(format!(
                    "rewrite refers to argument {i} of a {nargs}-argument command"
                )));
            }
        }
    }
    Ok(CmdOutcome::Rewrite {
        merge: view.merge,
        ctx: view.ctx,
        count,
        block: block.to_vec(),
    })
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

/// Builds a generation's instance and runs its `init`. A failure here is the plugin being
/// unavailable (not any command's doing): the worker backs off when it keeps failing.
pub(crate) fn instantiate_and_init(
    g: &Generation,
    engine: &wasmtime::Engine,
    clients: Arc<dyn ClientLookup>,
) -> Result<Instance, Fault> {
    let mut inst = Instance::new(&g.pre, engine, g.shared.clone(), clients, &g.spec, g.id)
        .map_err(|reason| Fault::new(Fault::TRAP, reason))?;
    match inst.init(&g.spec.config) {
        Ok(Ok(_)) => {
            g.shared.instances.fetch_add(1, Relaxed);
            Ok(inst)
        }
        Ok(Err(msg)) => Err(Fault::new(
            Fault::TRAP,
            format!("init refused its config: {msg}"),
        )),
        Err(CallError::Fault(f)) => Err(f),
        Err(e) => Err(Fault::new(Fault::TRAP, format!("init: {e}"))),
    }
}
