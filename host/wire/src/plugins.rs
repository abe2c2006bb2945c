//! A cluster's plugin catalog as the store keeps it and the API shows it (plugins in chain
//! order: config, enabled, fail policy, limits, module hash), and the metric samples proxies
//! report of their plugins.

use serde::{Deserialize, Serialize};

/// The largest module the catalog accepts.
pub const MAX_MODULE: usize = 32 << 20;

/// One plugin in a cluster's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginEntry {
    pub name: String,
    pub sha256: String,
    pub size: u64,
    /// The plugin's own configuration (JSON), handed to its `init`.
    pub config: serde_json::Value,
    pub enabled: bool,
    /// "closed" or "open".
    pub fail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<usize>,
    /// The most bytes of one command or observed reply copied into the plugin, KiB (default:
    /// a quarter of the memory limit); a larger one fails alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_kb: Option<usize>,
    pub updated_unix: u64,
}

/// The catalog document: plugins in chain order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u64,
    pub plugins: Vec<PluginEntry>,
}

/// One metric sample of a plugin, as a proxy reports it and the dashboard sums it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub value: f64,
}
