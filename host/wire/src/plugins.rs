//! A cluster's plugin catalog as the store keeps it and the API shows it (plugins in chain
//! order: config, enabled, fail policy, limits, module hash), and the metric samples proxies
//! report of their plugins.

use serde::{Deserialize, Serialize};

/// The largest module the catalog accepts. The plugins shipped are 140–230 KiB; every byte
/// costs compile time on the dashboard (its check) and on each proxy at every push (about
/// 0.4 s of one core per MiB: a 28 MB module took 9–13 s), so the cap leaves ample room for
/// real plugins and keeps one compile to a few seconds.
pub const MAX_MODULE: usize = 8 << 20;
/// The most plugins a catalog may enable. Every proxy sizes its pool of plugin instances for
/// this many (`PluginHost`: one warm instance per plugin per worker thread, two during a
/// reload), so the dashboard refuses a catalog over it before persisting or pushing it, and a
/// proxy refuses one pushed anyway and keeps the plugins in force.
pub const MAX_ENABLED: usize = 16;
/// The most plugins a catalog holds, enabled or not: each is a module of up to
/// [`MAX_MODULE`] in the store, read back by every proxy that enables it.
pub const MAX_PLUGINS: usize = 64;
/// The largest catalog document (configs included): under etcd's request limit (1.5 MiB, the
/// document is one key) and the 2 MB a proxy's admin API accepts for a push, so a catalog the
/// dashboard saves is one every store keeps and every proxy takes.
pub const MAX_CATALOG_BYTES: usize = 1 << 20;

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
