//! Plugins in the proxy: the chain in force (published atomically), how a catalog (static
//! files or the cluster's store) becomes generations, and the mapping from the proxy's command
//! table to the plugin ABI's command ids and classes.
//!
//! The per-command work is in `session::plugins`; the runtime itself in `tessera-wasm`.

pub mod catalog;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use arc_swap::ArcSwap;
use tessera_wasm::{
    Chain, ClientFacts, ClientLookup, Generation, PluginSpec, Runtime, RuntimeConfig,
};

use crate::clients::ClientRegistry;
use tessera_model::command::{CommandId, CommandTable};

/// ABI command id and class bits per proxy command id.
static ABI: LazyLock<Vec<(u16, u32)>> = LazyLock::new(|| {
    CommandTable::get()
        .iter()
        .map(|c| (tessera_plugin_abi::command_id(c.name), c.abi_class()))
        .collect()
});

/// The ABI command id and class of a proxy command.
#[inline]
pub fn abi_of(id: CommandId) -> (u16, u32) {
    ABI.get(id.0 as usize).copied().unwrap_or((0, 0))
}

/// A plugin as it is running in this proxy.
pub use tessera_wire::plugins::LoadedPlugin;

/// Instances the pool keeps for loading (each new generation's `init` runs in a probe first).
const LOAD_INSTANCES: u32 = 32;

/// The size of a proxy's pool of plugin instances with `threads` workers: each worker holds
/// one instance per plugin, two while a reload replaces it, for up to
/// [`tessera_wire::plugins::MAX_ENABLED`] plugins, plus [`LOAD_INSTANCES`].
fn instance_pool(threads: usize) -> u32 {
    let per_worker = 2 * tessera_wire::plugins::MAX_ENABLED as u32;
    (threads.max(1) as u32)
        .saturating_mul(per_worker)
        .saturating_add(LOAD_INSTANCES)
}

/// Client facts for the `client_info` import, from the proxy's registry.
struct Clients(Arc<ClientRegistry>);

impl ClientLookup for Clients {
    fn client(&self, conn: u64) -> Option<ClientFacts> {
        self.0.facts(conn)
    }
}

/// The proxy's plugin state: the runtime (created when the first plugin loads) and the chain.
pub struct PluginHost {
    runtime: OnceLock<Arc<Runtime>>,
    chain: ArcSwap<Chain>,
    clients: Arc<ClientRegistry>,
    version: AtomicU64,
    /// Serializes reloads.
    reload: tokio::sync::Mutex<()>,
    /// The catalog version last applied (cluster mode), 0 before any.
    pub catalog_version: AtomicU64,
    max_instances: u32,
    /// One hot hook call in this many is timed (`plugin_hook_sample`).
    hook_sample: u32,
    last_error: Mutex<Option<String>>,
    /// Plugins of the chain in force that run their canary version in this proxy.
    canaries: Mutex<Vec<String>>,
}

impl PluginHost {
    pub fn new(clients: Arc<ClientRegistry>, threads: usize, hook_sample: u32) -> Self {
        Self {
            runtime: OnceLock::new(),
            chain: ArcSwap::from_pointee(Chain::default()),
            clients,
            version: AtomicU64::new(0),
            reload: tokio::sync::Mutex::new(()),
            catalog_version: AtomicU64::new(0),
            max_instances: instance_pool(threads),
            hook_sample,
            last_error: Mutex::new(None),
            canaries: Mutex::new(Vec::new()),
        }
    }

    /// Commands some plugin of the chain in force denies to every client (`NAME` or
    /// `CONTAINER|SUB`): the backends' confined user is not given them, so no script runs
    /// them either.
    pub fn denied_to_all(&self) -> tessera_wasm::DeniedToAll {
        self.chain().denied_to_all()
    }

    /// The chain in force (one atomic load).
    #[inline]
    pub fn chain(&self) -> arc_swap::Guard<Arc<Chain>> {
        self.chain.load()
    }

    pub fn runtime(&self) -> anyhow::Result<&Arc<Runtime>> {
        if let Some(r) = self.runtime.get() {
            return Ok(r);
        }
        let r = Runtime::new(
            RuntimeConfig {
                max_instances: self.max_instances,
                max_memory: PluginSpec::MAX_MEMORY_LIMIT,
                hook_sample: self.hook_sample,
            },
            Some(Arc::new(Clients(self.clients.clone()))),
        )?;
        Ok(self.runtime.get_or_init(|| r))
    }

    /// Loads `specs` (in chain order) and makes them the chain in force. Generations whose
    /// module, config and limits are unchanged are kept as they are (warm instances stay);
    /// every new one is compiled and its `init` run in a probe first, so a bad module or
    /// config is refused before anything changes. Commands already dispatched finish on the
    /// generation they started with.
    ///
    /// # Errors
    /// The first plugin that cannot load, with the reason.
    pub async fn apply(&self, specs: Vec<PluginSpec>) -> Result<Vec<LoadedPlugin>, String> {
        self.apply_tracked(specs, Vec::new()).await
    }

    /// [`PluginHost::apply`], where the plugins named in `canaries` are their canary
    /// version (reported as track `canary` in [`PluginHost::loaded`] and on `/metrics`).
    ///
    /// # Errors
    /// The first plugin that cannot load, with the reason.
    pub async fn apply_tracked(
        &self,
        specs: Vec<PluginSpec>,
        canaries: Vec<String>,
    ) -> Result<Vec<LoadedPlugin>, String> {
        let _guard = self.reload.lock().await;
        if specs.len() > tessera_wire::plugins::MAX_ENABLED {
            // Loading them would succeed (one probe at a time) and every worker would then
            // fail to instantiate past the pool: each command answered with the pool's error.
            let e = format!(
                "{} plugins enabled, over the limit of {} a proxy runs (its pool holds {} plugin \
                 instances: {} per worker thread, twice during a reload, and {} for loading); \
                 the plugins in force are unchanged",
                specs.len(),
                tessera_wire::plugins::MAX_ENABLED,
                self.max_instances,
                tessera_wire::plugins::MAX_ENABLED,
                LOAD_INSTANCES
            );
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
            return Err(e);
        }
        let runtime = self.runtime().map_err(|e| e.to_string())?.clone();
        let current = self.chain.load_full();
        let result = tokio::task::spawn_blocking(move || {
            let mut gens = Vec::with_capacity(specs.len());
            for spec in specs {
                let same = current.plugins.iter().find(|g| {
                    g.spec.name == spec.name
                        && *g.spec.wasm == *spec.wasm
                        && g.spec.config == spec.config
                        && g.spec.fail == spec.fail
                        && g.spec.cpu_budget == spec.cpu_budget
                        && g.spec.memory_limit == spec.memory_limit
                        && g.spec.max_input == spec.max_input
                });
                match same {
                    Some(g) => gens.push(g.clone()),
                    None => {
                        let name = spec.name.clone();
                        let g = runtime
                            .load(spec)
                            .map_err(|e| format!("plugin {name}: {e}"))?;
                        gens.push(g);
                    }
                }
            }
            Ok::<_, String>(gens)
        })
        .await
        .map_err(|e| format!("plugin loader stopped: {e}"))?;
        let gens = match result {
            Ok(g) => g,
            Err(e) => {
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                return Err(e);
            }
        };
        let version = self.version.fetch_add(1, Ordering::Relaxed) + 1;
        let names: Vec<&str> = gens.iter().map(|g| g.name()).collect();
        tracing::info!(version, plugins = ?names, canaries = ?canaries, "plugin chain in force");
        *self.canaries.lock().unwrap_or_else(|p| p.into_inner()) = canaries;
        self.chain.store(Arc::new(Chain::new(version, gens)));
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(self.loaded())
    }

    /// The plugins in force.
    pub fn loaded(&self) -> Vec<LoadedPlugin> {
        let canaries = self.canaries.lock().unwrap_or_else(|p| p.into_inner());
        self.chain
            .load()
            .plugins
            .iter()
            .map(|g| describe(g, track_of(&canaries, g.name())))
            .collect()
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Prometheus text of the runtime and every plugin's own metrics.
    pub fn render_metrics(&self, out: &mut String) {
        if let Some(r) = self.runtime.get() {
            r.render_metrics(out);
        }
        self.render_tracks(out);
    }

    /// `tessera_plugin_track`: one series per plugin in force naming the version this proxy
    /// runs (`track` stable or canary, and the module's `sha256`). A proxy runs one version of
    /// a plugin, so every plugin series of this proxy belongs to that track: joined on
    /// `instance` and `plugin`, it splits any of them by track without renaming one.
    fn render_tracks(&self, out: &mut String) {
        use std::fmt::Write as _;
        let chain = self.chain.load();
        if chain.plugins.is_empty() {
            return;
        }
        let canaries = self.canaries.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(
            out,
            "# HELP tessera_plugin_track The version of each plugin this proxy runs: its track (stable, or canary while a canary selects this proxy) and module."
        );
        let _ = writeln!(out, "# TYPE tessera_plugin_track gauge");
        for g in &chain.plugins {
            let _ = writeln!(
                out,
                "tessera_plugin_track{{plugin=\"{}\",track=\"{}\",sha256=\"{}\"}} 1",
                g.name(),
                track_of(&canaries, g.name()),
                g.sha256
            );
        }
    }

    /// A plugin's metric samples, for the admin API.
    pub fn samples(&self, name: &str) -> Option<Vec<tessera_wasm::metrics::Sample>> {
        Some(self.runtime.get()?.plugin(name)?.metrics.samples())
    }
}

fn track_of(canaries: &[String], name: &str) -> &'static str {
    if canaries.iter().any(|c| c == name) {
        tessera_wire::plugin_canary::CANARY
    } else {
        tessera_wire::plugin_canary::STABLE
    }
}

fn describe(g: &Generation, track: &str) -> LoadedPlugin {
    let classes = tessera_plugin_abi::class::NAMES
        .iter()
        .filter(|(_, bit)| g.hooks.classes & bit != 0)
        .map(|(n, _)| (*n).to_owned())
        .collect();
    LoadedPlugin {
        name: g.spec.name.clone(),
        sha256: g.sha256.clone(),
        track: track.into(),
        generation: g.id,
        fail: g.spec.fail.as_str().into(),
        hooks: g
            .hooks
            .command_names()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        hook_classes: classes,
        hooks_all: g.hooks.all,
        key_prefixes: g
            .hooks
            .prefixes
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
        calls: g.shared.calls.load(Ordering::Relaxed),
        denies: g.shared.denies.load(Ordering::Relaxed),
        faults: g
            .shared
            .faults
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .sum(),
        instances_created: g.shared.instances.load(Ordering::Relaxed),
        hook_latency: g.shared.latency.snapshot(),
    }
}
