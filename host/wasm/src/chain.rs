//! The ordered plugins in force (published atomically), and each worker thread's warm
//! instances of them.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fault::Fault;
use crate::generation::Generation;
use crate::hooks::{DeniedToAll, Hooks};
use crate::instance::Instance;
use crate::runtime::Runtime;

/// The plugin chain in force: immutable; a reload publishes a new one.
#[derive(Debug, Default)]
pub struct Chain {
    pub version: u64,
    pub plugins: Vec<Arc<Generation>>,
    union: Hooks,
}

impl Chain {
    pub fn new(version: u64, plugins: Vec<Arc<Generation>>) -> Self {
        let mut union = Hooks::default();
        for p in &plugins {
            union.union(&p.hooks);
        }
        Self {
            version,
            plugins,
            union,
        }
    }

    /// Whether any plugin hooks this command (one bitmap test: unhooked commands never enter
    /// Wasm).
    #[inline]
    pub fn hooks_any(&self, id: u16, class: u32) -> bool {
        !self.plugins.is_empty() && self.union.wants(id, class).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// What the chain's plugins, together, declare they deny to every client (the union of
    /// each [`Generation::denied_to_all`]).
    pub fn denied_to_all(&self) -> DeniedToAll {
        let mut all = DeniedToAll::default();
        for g in &self.plugins {
            all.union(g.denied_to_all());
        }
        all
    }
}

/// A shared handle on a worker's instance: commands in flight keep the instance that started
/// them (their `on_reply` must run where their `on_command` ran), even after a reload.
pub type InstanceRef = Rc<RefCell<Instance>>;

/// What the host loop does next for one plugin of the chain.
pub enum ChainStep {
    /// Call this instance.
    Call(InstanceRef),
    /// The plugin cannot run now (instantiation or `init` failed, or it is backing off after
    /// such failures): not the command's doing, so its policy applies
    /// (`FailPolicy::when_unavailable`).
    Unavailable(String),
}

struct Slot {
    generation: Arc<Generation>,
    instance: Option<InstanceRef>,
    retry_at: Option<Instant>,
    /// Instantiations (with `init`) that failed in a row; call faults do not count.
    failures: u32,
    last_fault: Option<Instant>,
    last_reason: String,
    next_tick: Option<Instant>,
    /// When a call fault was last logged, and how many were not logged since.
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl Slot {
    fn new(generation: Arc<Generation>) -> Self {
        Self {
            generation,
            instance: None,
            retry_at: None,
            failures: 0,
            last_fault: None,
            last_reason: String::new(),
            next_tick: None,
            logged_at: None,
            unlogged: 0,
        }
    }
}

/// Call faults logged per plugin per worker: at most one a second (a client can fault a
/// plugin on every command it sends; the metric counts them all).
const FAULT_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Backoff after the n-th failed instantiation in a row: the first retry is immediate, then
/// 100 ms doubling up to 30 s.
fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_millis(100u64 << (n - 2).min(9)).min(Duration::from_secs(30)),
    }
}

/// One worker thread's view of the chain.
pub struct WorkerChain {
    runtime: Arc<Runtime>,
    chain: Arc<Chain>,
    slots: Vec<Slot>,
}

impl WorkerChain {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self {
            runtime,
            chain: Arc::new(Chain::default()),
            slots: Vec::new(),
        }
    }

    /// Adopts `chain` if it is not the one in use: slots of unchanged generations keep their
    /// instances; the others start cold. Instances still referenced by commands in flight live
    /// on until those finish.
    pub fn sync(&mut self, chain: &Arc<Chain>) {
        if Arc::ptr_eq(&self.chain, chain) {
            return;
        }
        let mut old: Vec<Slot> = std::mem::take(&mut self.slots);
        self.slots = chain
            .plugins
            .iter()
            .map(|g| {
                match old
                    .iter()
                    .position(|s| s.generation.id == g.id)
                    .map(|i| old.swap_remove(i))
                {
                    Some(s) => s,
                    None => Slot::new(g.clone()),
                }
            })
            .collect();
        self.chain = chain.clone();
    }

    pub fn chain(&self) -> &Arc<Chain> {
        &self.chain
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn generation(&self, i: usize) -> &Arc<Generation> {
        &self.slots[i].generation
    }

    /// The warm instance of plugin `i`, created (with `init`) if there is none. A dead
    /// instance (a call faulted it) is replaced at once, fresh from the generation's
    /// `InstancePre`: a fault costs the command that hit it, never the plugin for the other
    /// clients of this worker. Only instantiation that keeps failing backs off.
    pub fn step(&mut self, i: usize) -> ChainStep {
        let slot = &mut self.slots[i];
        if let Some(inst) = &slot.instance {
            if !inst.borrow().is_dead() {
                return ChainStep::Call(inst.clone());
            }
            slot.instance = None;
        }
        let now = Instant::now();
        if slot.retry_at.is_some_and(|t| now < t) {
            return ChainStep::Unavailable(format!("{} (backing off)", slot.last_reason));
        }
        match self.runtime.instantiate(&slot.generation) {
            Ok(inst) => {
                slot.failures = 0;
                slot.retry_at = None;
                let inst = Rc::new(RefCell::new(inst));
                slot.instance = Some(inst.clone());
                ChainStep::Call(inst)
            }
            Err(f) => {
                Self::instantiation_failed(slot, &f, now);
                ChainStep::Unavailable(f.reason)
            }
        }
    }

    fn instantiation_failed(slot: &mut Slot, f: &Fault, now: Instant) {
        if slot
            .last_fault
            .is_some_and(|t| now.duration_since(t) > Duration::from_secs(60))
        {
            slot.failures = 0;
        }
        slot.failures += 1;
        slot.last_fault = Some(now);
        slot.retry_at = Some(now + backoff(slot.failures));
        slot.last_reason = f.reason.clone();
        slot.instance = None;
        tracing::warn!(
            plugin = slot.generation.name(),
            reason = %f.reason,
            failures = slot.failures,
            "plugin instance could not be created; backing off"
        );
    }

    /// A call on plugin `i`'s instance faulted (the runtime marked it dead and counted the
    /// fault; the proxy reports faults it detects itself the same way). The instance is
    /// dropped and the next hooked command gets a fresh one, without backoff. Logged at most
    /// once a second per plugin and worker.
    pub fn report_fault(&mut self, i: usize, f: &Fault) {
        let now = Instant::now();
        let slot = &mut self.slots[i];
        slot.instance = None;
        if slot
            .logged_at
            .is_some_and(|t| now.duration_since(t) < FAULT_LOG_INTERVAL)
        {
            slot.unlogged += 1;
            return;
        }
        tracing::warn!(
            plugin = slot.generation.name(),
            reason = %f.reason,
            kind = f.kind(),
            not_logged_before = slot.unlogged,
            "plugin call faulted; the instance is replaced for the next command"
        );
        slot.logged_at = Some(now);
        slot.unlogged = 0;
    }

    /// Runs `on_close` on every plugin that asked for it.
    pub fn close(&mut self, conn: u64) {
        for i in 0..self.slots.len() {
            let g = &self.slots[i].generation;
            if !g.hooks.want_close || !g.has_close {
                continue;
            }
            if let Some(inst) = self.slots[i].instance.clone()
                && let Err(e) = inst.borrow_mut().on_close(conn)
                && let Some(f) = e.fault()
            {
                self.report_fault(i, f);
            }
        }
    }

    /// Runs `on_tick` on every warm instance whose period has come.
    pub fn tick(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let g = self.slots[i].generation.clone();
            if g.hooks.tick_ms == 0 || !g.has_tick {
                continue;
            }
            let period = Duration::from_millis(g.hooks.tick_ms as u64);
            let slot = &mut self.slots[i];
            match slot.next_tick {
                Some(t) if now < t => continue,
                _ => slot.next_tick = Some(now + period),
            }
            if let Some(inst) = slot.instance.clone()
                && let Err(e) = inst.borrow_mut().on_tick()
                && let Some(f) = e.fault()
            {
                self.report_fault(i, f);
            }
        }
    }
}
