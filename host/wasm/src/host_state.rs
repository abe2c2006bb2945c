//! [`HostState`]: the data of an instance's `Store`, which the host imports read and write,
//! and the per-call clock the CPU deadline uses. Below the imports and the instance: it imports
//! only the plugin's shared state, its metrics and the client lookup.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Memory, StoreLimits};

use crate::client::ClientLookup;
use crate::metrics::{Kind, Series};
use crate::plugin::PluginShared;

/// Per-call clock for the CPU budget.
#[derive(Debug, Default)]
pub(crate) struct CallClock {
    pub(crate) ticks: u32,
    pub(crate) cpu_start: Option<Duration>,
    pub(crate) budget: Duration,
    pub(crate) max_ticks: u32,
    /// Set by the deadline callback when it stops a call.
    pub(crate) stopped: Option<&'static str>,
    /// During a batch call: where the guest's progress counter is in memory. When it moves,
    /// the callback starts the budget again (the budget is per command).
    pub(crate) progress: Option<usize>,
    pub(crate) last_progress: u32,
}

impl CallClock {
    pub(crate) fn reset(&mut self) {
        self.ticks = 0;
        self.cpu_start = None;
        self.stopped = None;
    }
}

/// The data of an instance's `Store`.
pub(crate) struct HostState {
    pub(crate) limits: StoreLimits,
    pub(crate) memory: Option<Memory>,
    pub(crate) plugin: Arc<PluginShared>,
    pub(crate) clients: Arc<dyn ClientLookup>,
    pub(crate) in_init: bool,
    /// Series handles resolved by this instance (index = series id).
    pub(crate) series: Vec<Option<(Arc<Series>, Kind)>>,
    pub(crate) clock: CallClock,
    pub(crate) memory_limit: usize,
}
