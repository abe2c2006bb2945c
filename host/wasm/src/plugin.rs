//! State shared by every generation and instance of one plugin (by name): its key-value
//! namespace, its metrics, and the runtime's counters about it. Kept across hot reloads.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::fault::{FAULT_REASONS, Input};
use crate::hook_latency::HookLatencies;
use crate::metrics::PluginMetrics;
use crate::state::SharedState;

/// State shared by every generation and instance of one plugin (by name).
#[derive(Debug, Default)]
pub struct PluginShared {
    pub name: String,
    pub state: SharedState,
    pub metrics: PluginMetrics,
    /// Commands given to `on_command` (alone or in a batch).
    pub calls: AtomicU64,
    /// `tp_on_commands` calls: each gave the plugin several commands at once.
    pub batches: AtomicU64,
    /// Commands given in those `tp_on_commands` calls (part of `calls`).
    pub batched_calls: AtomicU64,
    /// Commands the plugin denied (answered with its error, not sent on).
    pub denies: AtomicU64,
    /// The wall time of guest calls, per hook (a sample of the hot hooks' calls).
    pub latency: HookLatencies,
    /// Faults by reason (`FAULT_REASONS` order).
    pub faults: [AtomicU64; FAULT_REASONS.len()],
    /// Inputs refused as over the input limit: commands, replies.
    pub inputs_refused: [AtomicU64; 2],
    pub instances: AtomicU64,
    pub logs_dropped: AtomicU64,
    log_budget: Mutex<(f64, Option<Instant>)>,
}

impl PluginShared {
    pub(crate) fn new(name: &str, hook_sample: u32) -> Self {
        Self {
            name: name.to_owned(),
            latency: HookLatencies::new(hook_sample),
            ..Self::default()
        }
    }

    /// Rate limit for the log import: 20 messages a second, bursts of 100.
    pub(crate) fn log_allowed(&self) -> bool {
        let now = Instant::now();
        let mut b = self.log_budget.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, last) = &mut *b;
        let elapsed = last.map_or(100.0, |l| now.duration_since(l).as_secs_f64() * 20.0);
        *tokens = (*tokens + elapsed).min(100.0);
        *last = Some(now);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            self.logs_dropped.fetch_add(1, Relaxed);
            false
        }
    }

    pub(crate) fn count_fault(&self, kind: usize) {
        self.faults[kind.min(FAULT_REASONS.len() - 1)].fetch_add(1, Relaxed);
    }

    pub(crate) fn count_refused(&self, input: Input) {
        let i = match input {
            Input::Command => 0,
            Input::Reply => 1,
        };
        self.inputs_refused[i].fetch_add(1, Relaxed);
    }
}
