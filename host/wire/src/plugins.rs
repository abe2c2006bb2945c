//! A cluster's plugin catalog as the store keeps it and the API shows it (plugins in chain
//! order: config, enabled, fail policy, limits, module hash), the dashboard's changes to it,
//! the plugins running in one proxy, and the metric samples proxies report of their plugins.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::plugin_canary::{CANARY, PluginCanary, STABLE};
use crate::plugin_hooks::HookLatency;

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

/// Plugin names: what `/metrics` and error replies carry (letters, digits, `-` and `_`, at
/// most 64).
pub fn valid_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// One plugin in a cluster's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PluginEntry {
    /// Letters, digits, `-` and `_`, at most 64 characters.
    pub name: String,
    /// Of the module, hex.
    pub sha256: String,
    /// The module's size in bytes.
    pub size: u64,
    /// The plugin's own configuration (JSON), handed to its `init`.
    pub config: serde_json::Value,
    pub enabled: bool,
    /// What happens to a command while the plugin is unavailable: `closed` refuses it,
    /// `open` lets it through.
    pub fail: String,
    /// CPU time one call may use, ms (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget_ms: Option<u64>,
    /// Memory one instance may use, MiB (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<usize>,
    /// The most bytes of one command or observed reply copied into the plugin, KiB (default:
    /// a quarter of the memory limit); a larger one fails alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_kb: Option<usize>,
    pub updated_unix: u64,
    /// A candidate version that a share of the proxies runs instead (`plugin_canary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<PluginCanary>,
}

/// The catalog document: plugins in chain order (also the body of a push to a proxy,
/// `PUT /api/proxy/plugins`, and the answer of `PUT /api/plugins/order`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Catalog {
    pub version: u64,
    pub plugins: Vec<PluginEntry>,
}

/// A plugin of `GET /api/plugins`: its entry and its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ListedPlugin {
    #[serde(flatten)]
    pub entry: PluginEntry,
    /// 0 runs first.
    pub order: usize,
}

/// `PUT /api/plugins/{name}/config`: fields left out keep their value.
///
/// ```text
/// {"config": {"deny_commands": ["FLUSHALL"]}, "fail": "closed", "cpu_budget_ms": 5}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginConfigChange {
    /// The plugin's own configuration, probed with its `init` before it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    /// `open` or `closed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_kb: Option<usize>,
}

/// `PUT /api/plugins/order`: every plugin's name exactly once, first to run first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginOrder {
    pub order: Vec<String>,
}

/// One metric sample of a plugin, as a proxy reports it and the dashboard sums it. A
/// histogram gives two samples, `<name>_count` and `<name>_sum`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = PluginSample)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// `GET /api/plugins/{name}/metrics`: the plugin's samples summed per series over the
/// proxies that answered with it loaded.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PluginMetrics {
    /// Proxies that answered with the plugin loaded (0 for a disabled plugin).
    pub proxies: usize,
    pub samples: Vec<Sample>,
    /// The latency of its hook calls, histograms of those proxies merged by adding buckets.
    #[serde(default)]
    pub hooks: Vec<HookLatency>,
    /// The same by track: the stable version's proxies, then the canary's (while one
    /// runs), so that the two show side by side.
    #[serde(default)]
    pub tracks: Vec<TrackMetrics>,
}

/// One track of a plugin (its stable or its canary version) as the proxies run it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TrackMetrics {
    /// `stable` or `canary`.
    pub track: String,
    /// The module the proxies of this track report.
    pub sha256: String,
    /// Client addresses of the proxies that answered running this track.
    pub proxies: Vec<String>,
    /// Commands given to the plugin, those it denied, and its faults, summed over those
    /// proxies (each proxy's counts since it started).
    pub calls: u64,
    pub denies: u64,
    pub faults: u64,
    /// The plugin's own metrics (denies, errors, …), summed per series over those proxies.
    pub samples: Vec<Sample>,
    pub hooks: Vec<HookLatency>,
}

/// A plugin as it is running in one proxy.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LoadedPlugin {
    pub name: String,
    pub sha256: String,
    /// `stable`, or `canary` when this proxy runs the plugin's canary version.
    #[serde(default = "stable_track")]
    pub track: String,
    /// Bumped each time the plugin is loaded again (a new module or config).
    pub generation: u64,
    pub fail: String,
    /// The commands it hooks, their classes, whether it hooks every command, and the key
    /// prefixes it hooks.
    pub hooks: Vec<String>,
    pub hook_classes: Vec<String>,
    pub hooks_all: bool,
    pub key_prefixes: Vec<String>,
    pub calls: u64,
    /// Commands it denied.
    #[serde(default)]
    pub denies: u64,
    pub faults: u64,
    pub instances_created: u64,
    /// The latency of its hook calls in this proxy, per hook called at least once.
    #[serde(default)]
    pub hook_latency: Vec<HookLatency>,
}

/// `GET /api/proxy/plugins`: the plugins in force in one proxy.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyPlugins {
    /// The catalog version last applied (0: none pushed).
    pub catalog_version: u64,
    /// Bumped with every change of the running chain.
    pub chain_version: u64,
    pub plugins: Vec<LoadedPlugin>,
    /// Why the last change did not load.
    #[schema(required = true)]
    pub last_error: Option<String>,
}

/// The answer of `PUT /api/proxy/plugins`: the catalog version now in force and the plugins
/// it runs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CatalogApplied {
    pub catalog_version: u64,
    pub plugins: Vec<LoadedPlugin>,
}

fn stable_track() -> String {
    STABLE.into()
}

impl PluginEntry {
    /// The plugin's entry as canary `c` defines it (name, enabled and order are this entry's;
    /// the canary itself is not carried).
    pub fn as_candidate(&self, c: &PluginCanary) -> PluginEntry {
        PluginEntry {
            sha256: c.sha256.clone(),
            size: c.size,
            config: c.config.clone(),
            fail: c.fail.clone(),
            cpu_budget_ms: c.cpu_budget_ms,
            memory_mb: c.memory_mb,
            max_input_kb: c.max_input_kb,
            canary: None,
            ..self.clone()
        }
    }

    /// The version the proxy at `addr` runs: the canary's candidate when it selects the
    /// proxy, else this entry; with the track's name.
    pub fn for_proxy(&self, addr: &str) -> (PluginEntry, &'static str) {
        match &self.canary {
            Some(c) if c.selects(addr) => (self.as_candidate(c), CANARY),
            _ => (self.clone(), STABLE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin_canary::tests::canary;

    #[test]
    fn a_selected_proxy_runs_the_candidate_with_the_stable_name_and_order() {
        let stable = PluginEntry {
            name: "f".into(),
            sha256: "a".into(),
            size: 1,
            config: serde_json::json!({"v": 1}),
            enabled: true,
            fail: "closed".into(),
            cpu_budget_ms: Some(3),
            memory_mb: None,
            max_input_kb: None,
            updated_unix: 7,
            canary: Some(canary(0, &["p:1"])),
        };
        let (e, track) = stable.for_proxy("p:1");
        assert_eq!(track, CANARY);
        assert_eq!(
            (e.name.as_str(), e.sha256.as_str(), e.fail.as_str()),
            ("f", "b", "open")
        );
        assert_eq!(e.config, serde_json::json!({"v": 2}));
        assert!(e.enabled && e.canary.is_none() && e.cpu_budget_ms.is_none());
        let (e, track) = stable.for_proxy("p:2");
        assert_eq!((track, e.sha256.as_str()), (STABLE, "a"));
    }
}
