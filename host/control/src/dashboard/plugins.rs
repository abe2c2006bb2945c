//! The cluster's plugin catalog: upload modules, configure, enable, order, remove; every
//! change is checked first (the module's ABI, and `init` with the config in a probe instance,
//! so a config the plugin refuses is refused here with the plugin's own message), persisted,
//! then pushed to every online proxy with a barrier, like a topology change. Modules are
//! compiled on a blocking thread, one at a time, and uploaded one at a time; a catalog may
//! enable at most `tessera_wire::plugins::MAX_ENABLED` plugins (what every proxy's pool is sized for).

use std::sync::{Arc, OnceLock};

use futures_util::future::join_all;
use tessera_wasm::{Runtime, RuntimeConfig, valid_plugin_name};
use tokio::sync::{Semaphore, SemaphorePermit};
use tracing::{info, warn};

use super::Dashboard;
use super::push::{ProxyFailure, PushError};
use crate::Error;
use tessera_store::catalog;
use tessera_store::model::{self, ProxyModel};
use tessera_wire::plugin_hooks::{self, HookLatency};
use tessera_wire::plugins::TrackMetrics;
use tessera_wire::plugins::{
    Catalog, PluginConfigChange, PluginEntry, PluginMetrics, ProxyPlugins, Sample,
};

/// How long one proxy may take to answer a read of its plugins.
const PROXY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The dashboard's runtime for probing plugins (created on first use).
static PROBE: OnceLock<Arc<Runtime>> = OnceLock::new();
/// A module upload in progress: its bytes are held and compiled one upload at a time.
static UPLOADING: Semaphore = Semaphore::const_new(1);
/// Compiling and probing, on a blocking thread: one at a time, so that neither a large module
/// nor many calls at once take more than one core from the API.
static COMPILING: Semaphore = Semaphore::const_new(1);

/// The upload slot, held for the whole upload (reading the body included).
///
/// # Errors
/// 503 while another upload holds it.
pub fn upload_slot() -> Result<SemaphorePermit<'static>, Error> {
    UPLOADING.try_acquire().map_err(|_| {
        Error::Busy(
            "another plugin module upload is being read or checked: send this one again when \
             it finishes"
                .into(),
        )
    })
}

/// Runs `f` (compiling or probing a module) on a blocking thread, one at a time.
pub(super) async fn compiling<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    let _turn = COMPILING
        .acquire()
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(e.to_string()))
}

pub(super) fn probe_runtime() -> Result<Arc<Runtime>, Error> {
    if let Some(r) = PROBE.get() {
        return Ok(r.clone());
    }
    let r = Runtime::new(
        RuntimeConfig {
            max_instances: 16,
            max_memory: tessera_wasm::PluginSpec::MAX_MEMORY_LIMIT,
            ..RuntimeConfig::default()
        },
        None,
    )
    .map_err(|e| Error::Internal(format!("plugin runtime: {e}")))?;
    Ok(PROBE.get_or_init(|| r).clone())
}

/// An uploaded module, checked before anything is stored: within the size limit, and one the
/// plugin runtime compiles and whose ABI it accepts (a stable version or a canary alike).
///
/// # Errors
/// 400 too large; 422 refused by the runtime.
pub(super) async fn checked_module(wasm: Vec<u8>) -> Result<Arc<Vec<u8>>, Error> {
    if wasm.len() > tessera_wire::plugins::MAX_MODULE {
        return Err(Error::invalid(format!(
            "module of {} bytes is over the {} MiB limit",
            wasm.len(),
            tessera_wire::plugins::MAX_MODULE >> 20
        )));
    }
    let rt = probe_runtime()?;
    let wasm = Arc::new(wasm);
    let w = wasm.clone();
    compiling(move || rt.check_module(&w))
        .await?
        .map_err(|e| Error::PluginRefused(e.0))?;
    Ok(wasm)
}

pub(super) fn check_name(name: &str) -> Result<(), Error> {
    if valid_plugin_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid plugin name {name:?}: use letters, digits, '-' and '_' (at most 64)"
        )))
    }
}

pub(super) fn not_found(name: &str) -> Error {
    Error::not_found(format!("no plugin named {name} in this cluster"))
}

/// 409 for a catalog that enables more plugins than a proxy runs.
fn check_enabled(cat: &Catalog) -> Result<(), Error> {
    let enabled = cat.plugins.iter().filter(|e| e.enabled).count();
    if enabled <= tessera_wire::plugins::MAX_ENABLED {
        return Ok(());
    }
    Err(Error::conflict(format!(
        "this would enable {enabled} plugins, over the limit of {max} a proxy runs (each worker \
         thread keeps an instance of every enabled plugin, in a pool sized for {max}): disable \
         one first",
        max = tessera_wire::plugins::MAX_ENABLED
    )))
}

/// 409 for a catalog document over [`tessera_wire::plugins::MAX_CATALOG_BYTES`] (plugins' configs make it).
fn check_size(cat: &Catalog) -> Result<(), Error> {
    let bytes = serde_json::to_vec(cat).map_or(usize::MAX, |v| v.len());
    if bytes <= tessera_wire::plugins::MAX_CATALOG_BYTES {
        return Ok(());
    }
    Err(Error::conflict(format!(
        "the catalog would be {bytes} bytes, over the limit of {} (it is stored as one \
         document and pushed to every proxy whole): make a plugin's config smaller",
        tessera_wire::plugins::MAX_CATALOG_BYTES
    )))
}

pub(super) fn entry_mut<'a>(
    cat: &'a mut Catalog,
    name: &str,
) -> Result<&'a mut PluginEntry, Error> {
    cat.plugins
        .iter_mut()
        .find(|e| e.name == name)
        .ok_or_else(|| not_found(name))
}

/// How long a proxy may take to load a pushed catalog (it compiles new modules first).
const PLUGINS_PUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Dashboard {
    pub async fn plugins(&self) -> Result<Catalog, Error> {
        Ok(catalog::read(&*self.store, &self.paths)
            .await
            .map_err(Error::CatalogUnavailable)?
            .0)
    }

    /// Runs the entry's `init` with its config in a probe instance.
    pub(super) async fn probe(&self, e: &PluginEntry, wasm: Arc<Vec<u8>>) -> Result<(), Error> {
        let spec = tessera_wasm::PluginSpec::from_entry(e, wasm)
            .map_err(|err| Error::PluginRefused(err.to_string()))?;
        let rt = probe_runtime()?;
        compiling(move || rt.load(spec).map(|_| ()))
            .await?
            .map_err(|err| Error::PluginRefused(err.0))
    }

    /// Probes an entry whose module is already in the store.
    pub(super) async fn probe_stored(&self, e: &PluginEntry) -> Result<(), Error> {
        let wasm = catalog::get_blob(&*self.store, &self.paths, &e.sha256)
            .await
            .map(Arc::new)
            .map_err(Error::CatalogUnavailable)?;
        self.probe(e, wasm).await
    }

    /// Persists the catalog with the next version and pushes it to every online proxy.
    ///
    /// # Errors
    /// 409 for a catalog enabling more plugins than a proxy runs (checked here, before
    /// anything is stored, so that no call can push one: a proxy would refuse it).
    pub(super) async fn save_catalog(&self, mut cat: Catalog) -> Result<Catalog, Error> {
        check_enabled(&cat)?;
        check_size(&cat)?;
        cat.version += 1;
        model::write(&*self.store, &catalog::catalog_key(&self.paths), &cat).await?;
        self.push_plugins(&cat).await?;
        Ok(cat)
    }

    /// Uploads (or replaces) a plugin's module. A new plugin starts disabled with config `{}`;
    /// a replaced one keeps its config, and if enabled is probed with it and rolled out.
    ///
    /// # Errors
    /// 400 for a module that is not a Tessera plugin (or whose init refuses the config).
    pub async fn upload_plugin(&self, name: &str, wasm: Vec<u8>) -> Result<PluginEntry, Error> {
        check_name(name)?;
        let wasm = checked_module(wasm).await?;
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        // Before the module is stored: a refused upload leaves nothing behind.
        if cat.plugins.len() >= tessera_wire::plugins::MAX_PLUGINS
            && !cat.plugins.iter().any(|e| e.name == name)
        {
            return Err(Error::conflict(format!(
                "the catalog holds {} plugins, the most it may: remove one first",
                tessera_wire::plugins::MAX_PLUGINS
            )));
        }
        let sha = catalog::put_blob(&*self.store, &self.paths, &wasm)
            .await
            .map_err(Error::CatalogUnavailable)?;
        let now = model::now_unix();
        let entry = match cat.plugins.iter_mut().find(|e| e.name == name) {
            Some(e) => {
                e.sha256 = sha;
                e.size = wasm.len() as u64;
                e.updated_unix = now;
                e.clone()
            }
            None => {
                let e = PluginEntry {
                    name: name.to_owned(),
                    sha256: sha,
                    size: wasm.len() as u64,
                    config: serde_json::json!({}),
                    enabled: false,
                    fail: "closed".into(),
                    cpu_budget_ms: None,
                    memory_mb: None,
                    max_input_kb: None,
                    updated_unix: now,
                    canary: None,
                };
                cat.plugins.push(e.clone());
                e
            }
        };
        if entry.enabled {
            self.probe(&entry, wasm).await?;
        }
        self.save_catalog(cat).await?;
        info!(plugin = name, sha256 = %entry.sha256, "plugin module uploaded");
        Ok(entry)
    }

    /// Changes a plugin's config, fail policy or limits (probed first when enabled, and when
    /// a config is given).
    ///
    /// # Errors
    /// 404 unknown plugin, 400 a refused config.
    pub async fn configure_plugin(
        &self,
        name: &str,
        change: PluginConfigChange,
    ) -> Result<PluginEntry, Error> {
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let e = entry_mut(&mut cat, name)?;
        let mut next = e.clone();
        if let Some(c) = change.config.clone() {
            next.config = c;
        }
        if let Some(f) = &change.fail {
            if tessera_wasm::FailPolicy::parse(f).is_none() {
                return Err(Error::invalid(format!(
                    "fail must be \"open\" or \"closed\", not {f:?}"
                )));
            }
            next.fail = f.clone();
        }
        if change.cpu_budget_ms.is_some() {
            next.cpu_budget_ms = change.cpu_budget_ms;
        }
        if change.memory_mb.is_some() {
            next.memory_mb = change.memory_mb;
        }
        if change.max_input_kb.is_some() {
            next.max_input_kb = change.max_input_kb;
        }
        next.updated_unix = model::now_unix();
        if next.enabled || change.config.is_some() {
            self.probe_stored(&next).await?;
        }
        *e = next.clone();
        self.save_catalog(cat).await?;
        info!(plugin = name, "plugin configured");
        Ok(next)
    }

    /// Enables or disables a plugin in every proxy.
    ///
    /// # Errors
    /// 404 unknown plugin, 400 when its config is refused.
    pub async fn enable_plugin(&self, name: &str, enabled: bool) -> Result<PluginEntry, Error> {
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let e = entry_mut(&mut cat, name)?;
        let probe = (enabled && !e.enabled).then(|| e.clone());
        e.enabled = enabled;
        e.updated_unix = model::now_unix();
        let out = e.clone();
        // The limit first: cheaper than the plugin's init, and its refusal is the clearer one.
        check_enabled(&cat)?;
        if let Some(probe) = probe {
            self.probe_stored(&probe).await?;
        }
        self.save_catalog(cat).await?;
        info!(
            plugin = name,
            enabled,
            "plugin {}",
            if enabled { "enabled" } else { "disabled" }
        );
        Ok(out)
    }

    /// Sets the chain order: `order` must name every plugin once.
    ///
    /// # Errors
    /// 400 when it does not.
    pub async fn order_plugins(&self, order: Vec<String>) -> Result<Catalog, Error> {
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let mut names: Vec<&str> = cat.plugins.iter().map(|e| e.name.as_str()).collect();
        let mut given: Vec<&str> = order.iter().map(String::as_str).collect();
        names.sort_unstable();
        given.sort_unstable();
        if names != given {
            return Err(Error::invalid(format!(
                "order must name every plugin exactly once: {}",
                names.join(", ")
            )));
        }
        cat.plugins.sort_by_key(|e| {
            order
                .iter()
                .position(|n| *n == e.name)
                .unwrap_or(usize::MAX)
        });
        let cat = self.save_catalog(cat).await?;
        info!(order = ?order, "plugin order changed");
        Ok(cat)
    }

    /// Removes a plugin from every proxy and the catalog.
    ///
    /// # Errors
    /// 404 unknown plugin.
    pub async fn delete_plugin(&self, name: &str) -> Result<(), Error> {
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let i = cat
            .plugins
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| not_found(name))?;
        let gone = cat.plugins.remove(i);
        let cat = self.save_catalog(cat).await?;
        self.drop_unused_blob(&cat, &gone.sha256).await;
        if let Some(c) = &gone.canary {
            self.drop_unused_blob(&cat, &c.sha256).await;
        }
        info!(plugin = name, "plugin removed");
        Ok(())
    }

    /// Deletes the module `sha` from the store unless an entry or a canary of `cat` uses it.
    pub(super) async fn drop_unused_blob(&self, cat: &Catalog, sha: &str) {
        let used = cat
            .plugins
            .iter()
            .any(|e| e.sha256 == sha || e.canary.as_ref().is_some_and(|c| c.sha256 == sha));
        if !used && let Err(e) = catalog::delete_blob(&*self.store, &self.paths, sha).await {
            warn!(sha256 = sha, error = %e, "could not delete the module blob");
        }
    }

    /// Pushes the catalog to every online proxy; all must load it.
    ///
    /// A proxy compiles every module it has not seen before it answers: hence more time than
    /// other pushes.
    pub(crate) async fn push_plugins(&self, cat: &Catalog) -> Result<usize, PushError> {
        const WHAT: &str = "plugin catalog version";
        let online = self.online_proxies(WHAT, cat.version).await?;
        let results = join_all(online.iter().map(|p| self.push_plugins_one(p, cat))).await;
        let results = self.excuse_gone(&online, results).await;
        super::push::settle(WHAT, cat.version, &online, results)
    }

    pub(crate) async fn push_plugins_one(
        &self,
        proxy: &ProxyModel,
        cat: &Catalog,
    ) -> Result<(), ProxyFailure> {
        self.put_to_proxy(proxy, "/api/proxy/plugins", cat, Some(PLUGINS_PUSH_TIMEOUT))
            .await
    }

    /// A plugin's metric samples summed over the registered proxies, and its hooks' latency
    /// histograms merged over them (buckets added, percentiles read from the sum); and the
    /// same by track, for the proxies that answered with the plugin loaded.
    pub async fn plugin_metrics(&self, name: &str) -> Result<PluginMetrics, Error> {
        let cat = self.plugins().await?;
        if !cat.plugins.iter().any(|e| e.name == name) {
            return Err(not_found(name));
        }
        let proxies = self.registered_proxies().await?;
        let path = format!("/api/proxy/plugins/{name}/metrics");
        let (loaded, samples) = futures_util::future::join(
            self.get_from_proxies::<ProxyPlugins>(&proxies, "/api/proxy/plugins", PROXY_TIMEOUT),
            self.get_from_proxies::<Vec<Sample>>(&proxies, &path, PROXY_TIMEOUT),
        )
        .await;
        let mut all_samples = Vec::new();
        let mut all_hooks = Vec::new();
        let mut tracks: Vec<TrackParts> = Vec::new();
        for ((p, loaded), samples) in proxies.iter().zip(loaded).zip(samples) {
            let plugin = loaded
                .ok()
                .and_then(|l| l.plugins.into_iter().find(|l| l.name == name));
            let samples = samples.ok();
            if let Some(s) = &samples {
                all_samples.push(s.clone());
            }
            let Some(plugin) = plugin else { continue };
            all_hooks.push(plugin.hook_latency.clone());
            let i = match tracks.iter().position(|(t, ..)| t.track == plugin.track) {
                Some(i) => i,
                None => {
                    tracks.push((
                        TrackMetrics {
                            track: plugin.track.clone(),
                            sha256: plugin.sha256.clone(),
                            proxies: Vec::new(),
                            calls: 0,
                            denies: 0,
                            faults: 0,
                            samples: Vec::new(),
                            hooks: Vec::new(),
                        },
                        Vec::new(),
                        Vec::new(),
                    ));
                    tracks.len() - 1
                }
            };
            let (t, s, h) = &mut tracks[i];
            t.proxies.push(p.addr.clone());
            t.calls = t.calls.saturating_add(plugin.calls);
            t.denies = t.denies.saturating_add(plugin.denies);
            t.faults = t.faults.saturating_add(plugin.faults);
            s.extend(samples);
            h.push(plugin.hook_latency);
        }
        // Stable first, then the canary.
        tracks.sort_by_key(|(t, ..)| t.track != tessera_wire::plugin_canary::STABLE);
        Ok(PluginMetrics {
            proxies: all_samples.len(),
            samples: sum_samples(all_samples),
            hooks: plugin_hooks::merge(all_hooks.iter().flatten()),
            tracks: tracks
                .into_iter()
                .map(|(mut t, s, h)| {
                    t.samples = sum_samples(s);
                    t.hooks = plugin_hooks::merge(h.iter().flatten());
                    t
                })
                .collect(),
        })
    }

    /// A plugin's metric samples of each registered proxy that answered with it loaded, by
    /// the proxy's token (the metrics history counts each proxy's counters apart, so that
    /// one restarting never makes a sum go back).
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub(crate) async fn plugin_samples(
        &self,
        name: &str,
    ) -> Result<Vec<(String, Vec<Sample>)>, Error> {
        let proxies = self.registered_proxies().await?;
        let path = format!("/api/proxy/plugins/{name}/metrics");
        let samples = self
            .get_from_proxies::<Vec<Sample>>(&proxies, &path, PROXY_TIMEOUT)
            .await;
        Ok(proxies
            .iter()
            .zip(samples)
            .filter_map(|(p, s)| Some((p.token.clone(), s.ok()?)))
            .collect())
    }
}

/// One track being summed: its figures, and the samples and hook histograms of its proxies.
type TrackParts = (TrackMetrics, Vec<Vec<Sample>>, Vec<Vec<HookLatency>>);

/// Samples of several proxies summed per series (name and labels).
fn sum_samples(per_proxy: Vec<Vec<Sample>>) -> Vec<Sample> {
    let mut sum: std::collections::BTreeMap<(String, Vec<(String, String)>), f64> =
        Default::default();
    for s in per_proxy.into_iter().flatten() {
        *sum.entry((s.name, s.labels.into_iter().collect()))
            .or_default() += s.value;
    }
    sum.into_iter()
        .map(|((name, labels), value)| Sample {
            name,
            labels: labels.into_iter().collect(),
            value,
        })
        .collect()
}
