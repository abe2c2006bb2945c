//! [`PluginSpec`]: everything that defines one version of a plugin (module, config, fail
//! policy, limits), as the operator gave it. Checked by `Runtime::load`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tessera_wire::plugins::PluginEntry;

use crate::fault::FailPolicy;

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
    /// The most bytes one call may copy into the plugin's arena (a command's argument table,
    /// or an observed reply); `None`: [`PluginSpec::DEFAULT_INPUT_SHARE`] of the memory limit.
    /// A larger input fails that command before anything is copied (see
    /// [`PluginSpec::input_limit`]).
    pub max_input: Option<usize>,
}

impl PluginSpec {
    pub const DEFAULT_CPU_BUDGET: Duration = Duration::from_millis(5);
    pub const DEFAULT_MEMORY_LIMIT: usize = 64 << 20;
    /// The largest memory limit a plugin may be given: what the dashboard's check and every
    /// proxy's runtime are sized for (`RuntimeConfig::max_memory`), named once so that the
    /// dashboard accepts exactly what a proxy can load.
    pub const MAX_MEMORY_LIMIT: usize = 256 << 20;
    /// The default input limit is the memory limit divided by this (16 MiB of 64 MiB): the
    /// arena holds the input in the plugin's own memory, next to whatever the plugin does
    /// with it, so an input near the memory cap would fault the instance instead.
    pub const DEFAULT_INPUT_SHARE: usize = 4;
    /// The smallest input limit `load` accepts: every command name and a few keys must fit.
    pub const MIN_INPUT_LIMIT: usize = 4 << 10;

    pub fn new(name: impl Into<String>, wasm: Vec<u8>, config: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            wasm: Arc::new(wasm),
            config,
            fail: FailPolicy::default(),
            cpu_budget: Self::DEFAULT_CPU_BUDGET,
            memory_limit: Self::DEFAULT_MEMORY_LIMIT,
            max_input: None,
        }
    }

    /// Applies optional limits from a config (CPU budget in ms, memory in MiB; at least 1 each).
    pub fn with_limits(mut self, cpu_budget_ms: Option<u64>, memory_mb: Option<usize>) -> Self {
        if let Some(ms) = cpu_budget_ms {
            self.cpu_budget = Duration::from_millis(ms.max(1));
        }
        if let Some(mb) = memory_mb {
            self.memory_limit = mb.max(1).saturating_mul(1 << 20);
        }
        self
    }

    /// Applies an optional input limit from a config (`max_input_kb`, KiB). `Runtime::load`
    /// refuses one below [`PluginSpec::MIN_INPUT_LIMIT`] or above half the memory limit.
    pub fn with_input_limit(mut self, max_input_kb: Option<usize>) -> Self {
        if let Some(kb) = max_input_kb {
            self.max_input = Some(kb.saturating_mul(1 << 10));
        }
        self
    }

    /// The input limit in force, bytes.
    pub fn input_limit(&self) -> usize {
        self.max_input
            .unwrap_or(self.memory_limit / Self::DEFAULT_INPUT_SHARE)
    }

    /// Why the limits cannot work together, worded for the operator.
    pub(crate) fn check_limits(&self) -> Result<(), String> {
        let Some(limit) = self.max_input else {
            return Ok(());
        };
        if limit < Self::MIN_INPUT_LIMIT {
            return Err(format!(
                "input limit of {} KiB is below the minimum of {} KiB",
                limit >> 10,
                Self::MIN_INPUT_LIMIT >> 10
            ));
        }
        if limit > self.memory_limit / 2 {
            return Err(format!(
                "input limit of {} KiB is above half the plugin's memory limit of {} MiB (the input is copied into that memory)",
                limit >> 10,
                self.memory_limit >> 20
            ));
        }
        Ok(())
    }
}

pub use tessera_wire::plugins::valid_plugin_name;

impl PluginSpec {
    /// The runtime spec of a catalog entry with its module bytes.
    ///
    /// # Errors
    /// A bad fail policy, or a config that does not serialize.
    pub fn from_entry(entry: &PluginEntry, wasm: Arc<Vec<u8>>) -> anyhow::Result<PluginSpec> {
        let mut spec = PluginSpec::new(entry.name.clone(), Vec::new(), Vec::new());
        spec.wasm = wasm;
        spec.config = serde_json::to_vec(&entry.config)?;
        spec.fail = FailPolicy::parse(&entry.fail).with_context(|| {
            format!("plugin {}: fail must be \"open\" or \"closed\"", entry.name)
        })?;
        Ok(spec
            .with_limits(entry.cpu_budget_ms, entry.memory_mb)
            .with_input_limit(entry.max_input_kb))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_limit_defaults_to_a_quarter_of_memory_and_is_checked() {
        let s = PluginSpec::new("p", vec![], vec![]);
        assert_eq!(s.input_limit(), 16 << 20);
        let s = s.with_limits(None, Some(8));
        assert_eq!(s.input_limit(), 2 << 20);
        assert_eq!(s.check_limits(), Ok(()));
        let s = s.with_input_limit(Some(4097));
        assert_eq!(s.input_limit(), 4097 << 10);
        assert!(s.check_limits().unwrap_err().contains("above half"));
        let s = s.with_input_limit(Some(1));
        assert!(s.check_limits().unwrap_err().contains("below the minimum"));
        let s = s.with_input_limit(Some(64));
        assert_eq!((s.input_limit(), s.check_limits()), (64 << 10, Ok(())));
    }
}
