//! A plugin's loaded version (generation), its hook manifest, and the state all its
//! generations share.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tessera_plugin_abi::{self as abi, ManifestView};
use wasmtime::InstancePre;

use crate::instance::HostState;
use crate::metrics::PluginMetrics;
use crate::state::SharedState;

/// What happens to a command when the plugin cannot run (trap, deadline, memory, backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailPolicy {
    /// The command is refused with `-ERR plugin <name> failed: <reason>` (security plugins).
    #[default]
    Closed,
    /// The command proceeds as if the plugin had passed (observability plugins).
    Open,
}

impl FailPolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "closed" | "fail_closed" => Some(Self::Closed),
            "open" | "fail_open" => Some(Self::Open),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
        }
    }
}

/// Everything that defines one version of a plugin.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    pub name: String,
    pub wasm: Arc<Vec<u8>>,
    pub config: Vec<u8>,
    pub fail: FailPolicy,
    /// CPU time one call may use.
    pub cpu_budget: Duration,
    /// Linear memory one instance may grow to.
    pub memory_limit: usize,
}

impl PluginSpec {
    pub const DEFAULT_CPU_BUDGET: Duration = Duration::from_millis(5);
    pub const DEFAULT_MEMORY_LIMIT: usize = 64 << 20;

    /// Applies optional limits from a config (CPU budget in ms, memory in MiB; at least 1 each).
    pub fn with_limits(mut self, cpu_budget_ms: Option<u64>, memory_mb: Option<usize>) -> Self {
        if let Some(ms) = cpu_budget_ms {
            self.cpu_budget = Duration::from_millis(ms.max(1));
        }
        if let Some(mb) = memory_mb {
            self.memory_limit = mb.max(1) << 20;
        }
        self
    }

    pub fn new(name: impl Into<String>, wasm: Vec<u8>, config: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            wasm: Arc::new(wasm),
            config,
            fail: FailPolicy::default(),
            cpu_budget: Self::DEFAULT_CPU_BUDGET,
            memory_limit: Self::DEFAULT_MEMORY_LIMIT,
        }
    }
}

/// Plugin names: what `/metrics` and error replies carry.
pub fn valid_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// State shared by every generation and instance of one plugin (by name).
#[derive(Debug, Default)]
pub struct PluginShared {
    pub name: String,
    pub state: SharedState,
    pub metrics: PluginMetrics,
    pub calls: AtomicU64,
    pub faults: [AtomicU64; 4],
    pub instances: AtomicU64,
    pub logs_dropped: AtomicU64,
    pub(crate) log_budget: std::sync::Mutex<(f64, Option<std::time::Instant>)>,
}

/// Fault reasons counted per plugin (index into `PluginShared::faults`).
pub const FAULT_REASONS: [&str; 4] = ["trap", "cpu_budget", "memory", "bad_output"];

impl PluginShared {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// Rate limit for the log import: 20 messages a second, bursts of 100.
    pub(crate) fn log_allowed(&self) -> bool {
        let now = std::time::Instant::now();
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

    pub(crate) fn count_fault(&self, reason: usize) {
        self.faults[reason.min(3)].fetch_add(1, Relaxed);
    }
}

/// The hook manifest compiled for the hot path: a bitmap over ABI command ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    commands: [u64; 4],
    values: [u64; 4],
    pub classes: u32,
    pub all: bool,
    pub class_values: bool,
    pub prefixes: Vec<Vec<u8>>,
    pub want_close: bool,
    pub tick_ms: u32,
}

fn bit(map: &[u64; 4], id: u16) -> bool {
    let id = id as usize;
    id < 256 && map[id / 64] & (1 << (id % 64)) != 0
}

fn set_bit(map: &mut [u64; 4], id: u16) {
    let id = id as usize;
    if id < 256 {
        map[id / 64] |= 1 << (id % 64);
    }
}

impl Hooks {
    pub(crate) fn from_manifest(m: &ManifestView<'_>) -> Result<Self, String> {
        if m.version != abi::ABI_VERSION {
            return Err(format!("manifest version {} is not 1", m.version));
        }
        let mut h = Hooks {
            classes: m.classes,
            all: m.flags & abi::MF_ALL != 0,
            class_values: m.flags & abi::MF_CLASS_VALUES != 0,
            want_close: m.flags & abi::MF_WANT_CLOSE != 0,
            tick_ms: m.tick_ms,
            ..Hooks::default()
        };
        for (id, flags) in m.commands() {
            if id == 0 || id as usize >= abi::COMMAND_NAMES.len() {
                return Err(format!("manifest hooks unknown command id {id}"));
            }
            set_bit(&mut h.commands, id);
            if flags & abi::HOOK_VALUES != 0 {
                set_bit(&mut h.values, id);
            }
        }
        h.prefixes = m.prefixes().map(<[u8]>::to_vec).collect();
        Ok(h)
    }

    /// Whether the plugin wants this command, and whether with values.
    #[inline]
    pub fn wants(&self, id: u16, class: u32) -> Option<bool> {
        let by_class = self.all || self.classes & class != 0;
        if bit(&self.commands, id) {
            Some(bit(&self.values, id) || (self.class_values && by_class))
        } else if by_class {
            Some(self.class_values)
        } else {
            None
        }
    }

    /// Whether any key matches the prefix filter (always true without prefixes).
    #[inline]
    pub fn keys_match<'a>(&self, mut keys: impl Iterator<Item = &'a [u8]>) -> bool {
        self.prefixes.is_empty() || keys.any(|k| self.prefixes.iter().any(|p| k.starts_with(p)))
    }

    /// Hooked command names, for the admin API.
    pub fn command_names(&self) -> Vec<&'static str> {
        (1..abi::COMMAND_NAMES.len() as u16)
            .filter(|&id| bit(&self.commands, id))
            .map(abi::command_name)
            .collect()
    }

    pub(crate) fn union(&mut self, o: &Hooks) {
        for i in 0..4 {
            self.commands[i] |= o.commands[i];
            self.values[i] |= o.values[i];
        }
        self.classes |= o.classes;
        self.all |= o.all;
    }
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// One loaded version of a plugin.
pub struct Generation {
    pub id: u64,
    pub spec: PluginSpec,
    pub sha256: String,
    pub hooks: Hooks,
    pub shared: Arc<PluginShared>,
    pub(crate) pre: InstancePre<HostState>,
    pub(crate) has_close: bool,
    pub(crate) has_tick: bool,
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("id", &self.id)
            .field("name", &self.spec.name)
            .field("sha256", &self.sha256)
            .field("hooks", &self.hooks)
            .finish()
    }
}

impl Generation {
    pub(crate) fn next_id() -> u64 {
        NEXT_GENERATION.fetch_add(1, Relaxed)
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }
}
