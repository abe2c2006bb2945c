//! The process-wide engine, module cache (`module_cache`), linker and epoch ticker; loading a
//! plugin version.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};
use tessera_plugin_abi as abi;
use wasmtime::{
    Config, Engine, ExternType, InstanceAllocationStrategy, Linker, Module, OptLevel,
    PoolingAllocationConfig, ValType,
};

use crate::client::{ClientLookup, NoClients};
use crate::fault::{FAULT_REASONS, Fault};
use crate::generation::Generation;
use crate::host_state::HostState;
use crate::imports;
use crate::instance::{Instance, instantiate_and_init};
use crate::module_cache::ModuleCache;
use crate::plugin::PluginShared;
use crate::spec::{PluginSpec, valid_plugin_name};

/// Sizing of the pooling allocator.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Instances alive at once, all plugins and threads together (workers × plugins × 2 for
    /// reloads, plus probes).
    pub max_instances: u32,
    /// The largest memory any one instance may have (per-plugin limits are at most this).
    pub max_memory: usize,
    /// One call in this many of the hot hooks (`on_command`, `on_commands`, `on_reply`) is
    /// timed into the hook latency histograms, per instance; 1 times every call.
    pub hook_sample: u32,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_instances: 128,
            max_memory: PluginSpec::DEFAULT_MEMORY_LIMIT,
            hook_sample: crate::hook_latency::DEFAULT_SAMPLE,
        }
    }
}

/// Why a plugin version could not be loaded. The message is meant for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// A per-plugin counter on `/metrics`: its name, help text, and how to read it.
type Counter = (&'static str, &'static str, fn(&PluginShared) -> u64);

pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    modules: Mutex<ModuleCache>,
    shared: Mutex<FxHashMap<String, Arc<PluginShared>>>,
    pub(crate) clients: Arc<dyn ClientLookup>,
    config: RuntimeConfig,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .finish()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Builds the engine and starts the epoch ticker (one thread, 1 ms).
    ///
    /// # Errors
    /// The engine configuration was refused (e.g. no virtual memory for the pool).
    pub fn new(
        config: RuntimeConfig,
        clients: Option<Arc<dyn ClientLookup>>,
    ) -> anyhow::Result<Arc<Self>> {
        // The hook latency clock calibrates itself on first use: here, not in a hook call.
        let _ = quanta::Instant::now();
        let mut pool = PoolingAllocationConfig::new();
        pool.total_core_instances(config.max_instances)
            .total_memories(config.max_instances)
            .total_tables(config.max_instances)
            .max_memory_size(config.max_memory);
        let mut c = Config::new();
        // One thread per compile: a module is compiled on the caller's (blocking) thread only,
        // so a large upload costs one core for a while, not every core of a proxy serving
        // clients or of a dashboard answering its API.
        c.epoch_interruption(true)
            .parallel_compilation(false)
            .cranelift_opt_level(OptLevel::Speed)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .max_wasm_stack(512 << 10)
            .wasm_backtrace_max_frames(None)
            .concurrency_support(false);
        let engine = Engine::new(&c).map_err(|e| anyhow::anyhow!("wasm engine: {e:#}"))?;
        let mut linker = Linker::new(&engine);
        imports::link(&mut linker).map_err(|e| anyhow::anyhow!("wasm imports: {e:#}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("tessera-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(1));
                        engine.increment_epoch();
                    }
                })?;
        }
        Ok(Arc::new(Self {
            engine,
            linker,
            modules: Mutex::default(),
            shared: Mutex::default(),
            clients: clients.unwrap_or_else(|| Arc::new(NoClients)),
            config,
            stop,
        }))
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The shared state of a plugin name (created on first use, kept across reloads).
    fn shared_for(&self, name: &str) -> Arc<PluginShared> {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(PluginShared::new(name, self.config.hook_sample)))
            .clone()
    }

    /// The module of `wasm`: from the cache, or compiled (and not cached yet: `checked` keeps
    /// it once the ABI checks pass, so a refused module is never kept).
    fn compile(&self, wasm: &[u8]) -> Result<([u8; 32], Module), LoadError> {
        let sha: [u8; 32] = Sha256::digest(wasm).into();
        if let Some(m) = self
            .modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&sha)
        {
            return Ok((sha, m));
        }
        if !wasm.starts_with(b"\0asm") {
            return Err(LoadError(
                "not a WebAssembly module (no \\0asm header)".into(),
            ));
        }
        let module = Module::new(&self.engine, wasm)
            .map_err(|e| LoadError(format!("invalid WebAssembly module: {e:#}")))?;
        Ok((sha, module))
    }

    /// Checks `module` (the ABI, then linking) and keeps it in the cache once it passed.
    fn checked(
        &self,
        sha: [u8; 32],
        module: &Module,
    ) -> Result<((bool, bool), wasmtime::InstancePre<HostState>), LoadError> {
        let abi = Self::check_abi(module)?;
        let pre = self
            .linker
            .instantiate_pre(module)
            .map_err(|e| LoadError(format!("cannot link the module: {e:#}")))?;
        self.modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sha, module.clone());
        Ok((abi, pre))
    }

    /// Compiled modules kept now, and their compiled bytes (bounded: `module_cache`).
    pub fn cached_modules(&self) -> (usize, usize) {
        self.modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .usage()
    }

    /// Checks the ABI marker first, then the exports and imports ABI v1 requires.
    fn check_abi(module: &Module) -> Result<(bool, bool), LoadError> {
        let mut marker = false;
        let mut other_version = None;
        let mut has_close = false;
        let mut has_tick = false;
        let mut funcs = FxHashMap::default();
        for e in module.exports() {
            if e.name() == abi::ABI_MARKER {
                marker = true;
            } else if let Some(v) = e.name().strip_prefix("tessera_plugin_abi_v") {
                other_version = Some(v.to_owned());
            }
            if let ExternType::Func(f) = e.ty() {
                let params: Vec<ValType> = f.params().collect();
                let results: Vec<ValType> = f.results().collect();
                funcs.insert(e.name().to_owned(), (params, results));
            }
            has_close |= e.name() == abi::export::ON_CLOSE;
            has_tick |= e.name() == abi::export::ON_TICK;
        }
        if !marker {
            return Err(LoadError(match other_version {
                Some(v) => {
                    format!("plugin ABI v{v} is not supported by this proxy (it supports v1)")
                }
                None => format!(
                    "not a Tessera plugin: the module does not export {}",
                    abi::ABI_MARKER
                ),
            }));
        }
        use ValType::{I32, I64};
        let required: [(&str, &[ValType], &[ValType]); 5] = [
            (abi::export::ARENA, &[], &[I32]),
            (abi::export::RESERVE, &[I32, I32], &[I32]),
            (abi::export::INIT, &[I32], &[I64]),
            (abi::export::ON_COMMAND, &[I64, I32, I32], &[I64]),
            (abi::export::ON_REPLY, &[I64, I64, I32], &[I64]),
        ];
        let same = |a: &[ValType], b: &[ValType]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y))
        };
        for (name, params, results) in required {
            match funcs.get(name) {
                None => return Err(LoadError(format!("the module does not export {name}"))),
                Some((p, r)) if !same(p, params) || !same(r, results) => {
                    return Err(LoadError(format!("export {name} has the wrong signature")));
                }
                _ => {}
            }
        }
        for i in module.imports() {
            if i.module() != abi::IMPORT_MODULE {
                return Err(LoadError(format!(
                    "the module imports {}::{}; plugins may only import from \"{}\" (build for wasm32-unknown-unknown, without WASI)",
                    i.module(),
                    i.name(),
                    abi::IMPORT_MODULE
                )));
            }
        }
        Ok((has_close, has_tick))
    }

    /// Checks that `wasm` is a module this runtime can load (compiles it and checks the ABI
    /// marker, exports and imports) without running it. Returns its sha256.
    ///
    /// # Errors
    /// Worded for the operator.
    pub fn check_module(&self, wasm: &[u8]) -> Result<String, LoadError> {
        let (sha, module) = self.compile(wasm)?;
        self.checked(sha, &module)?;
        Ok(hex::encode(sha))
    }

    /// Loads one version of a plugin: compiles (or reuses) the module, checks the ABI, and
    /// runs `init(config)` in a probe instance. A config the plugin refuses is an error with
    /// the plugin's own message. Blocking (compilation): call from a blocking thread.
    ///
    /// # Errors
    /// Every reason is worded for the operator.
    pub fn load(&self, spec: PluginSpec) -> Result<Arc<Generation>, LoadError> {
        if !valid_plugin_name(&spec.name) {
            return Err(LoadError(format!(
                "invalid plugin name {:?}: use letters, digits, '-' and '_' (at most 64)",
                spec.name
            )));
        }
        if spec.memory_limit > self.config.max_memory {
            return Err(LoadError(format!(
                "memory limit {} MiB is above the proxy's maximum of {} MiB",
                spec.memory_limit >> 20,
                self.config.max_memory >> 20
            )));
        }
        spec.check_limits()
            .map_err(|e| LoadError(format!("plugin {}: {e}", spec.name)))?;
        if spec.config.len() > spec.input_limit() {
            return Err(LoadError(format!(
                "plugin {}: its config of {} bytes is over its input limit of {} bytes",
                spec.name,
                spec.config.len(),
                spec.input_limit()
            )));
        }
        let (sha, module) = self.compile(&spec.wasm)?;
        let ((has_close, has_tick), pre) = self.checked(sha, &module)?;
        let shared = self.shared_for(&spec.name);
        let id = Generation::next_id();
        let mut probe = Instance::new(
            &pre,
            &self.engine,
            shared.clone(),
            self.clients.clone(),
            &spec,
            id,
        )
        .map_err(LoadError)?;
        let hooks = match probe.init(&spec.config) {
            Ok(Ok(h)) => h,
            Ok(Err(msg)) => {
                return Err(LoadError(format!(
                    "plugin {} refused its config: {msg}",
                    spec.name
                )));
            }
            Err(e) => {
                let why = e
                    .fault()
                    .map_or_else(|| e.to_string(), |f| f.reason.clone());
                return Err(LoadError(format!(
                    "plugin {} failed in init: {why}",
                    spec.name
                )));
            }
        };
        Ok(Arc::new(Generation {
            id,
            sha256: hex::encode(sha),
            spec,
            hooks,
            shared,
            pre,
            has_close,
            has_tick,
        }))
    }

    /// A fresh instance of `g` with `init` run (for a worker thread).
    ///
    /// # Errors
    /// The instance could not be created or its `init` failed: the plugin is unavailable.
    pub fn instantiate(&self, g: &Generation) -> Result<Instance, Fault> {
        instantiate_and_init(g, &self.engine, self.clients.clone())
    }

    /// Prometheus text for every plugin this runtime has loaded: the runtime's own counters
    /// and each plugin's metrics.
    pub fn render_metrics(&self, out: &mut String) {
        let shared: Vec<Arc<PluginShared>> = self
            .shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        if shared.is_empty() {
            return;
        }
        let counters: [Counter; 4] = [
            (
                "tessera_plugin_calls_total",
                "Commands given to plugins (on_command, alone or in a batch).",
                |s| s.calls.load(Ordering::Relaxed),
            ),
            (
                "tessera_plugin_batches_total",
                "Calls into plugins that gave them several commands of one pipeline at once (tp_on_commands).",
                |s| s.batches.load(Ordering::Relaxed),
            ),
            (
                "tessera_plugin_batched_calls_total",
                "Commands given to plugins in tp_on_commands calls (part of tessera_plugin_calls_total): divided by tessera_plugin_batches_total, the commands per batch.",
                |s| s.batched_calls.load(Ordering::Relaxed),
            ),
            (
                "tessera_plugin_denies_total",
                "Commands plugins denied (answered with the plugin's error, not sent to Redis).",
                |s| s.denies.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            for s in &shared {
                let _ = writeln!(out, "{name}{{plugin=\"{}\"}} {}", s.name, value(s));
            }
        }
        let _ = writeln!(
            out,
            "# HELP tessera_plugin_hook_duration_seconds Wall time of one call into a plugin, by hook; a tp_on_commands call (hook on_commands) is one observation for all its commands; on_command, on_commands and on_reply are sampled (one call in plugin_hook_sample)."
        );
        let _ = writeln!(out, "# TYPE tessera_plugin_hook_duration_seconds histogram");
        for s in &shared {
            s.latency.render(&s.name, out);
        }
        let _ = writeln!(
            out,
            "# HELP tessera_plugin_faults_total Plugin calls that failed, by reason; the instance was replaced."
        );
        let _ = writeln!(out, "# TYPE tessera_plugin_faults_total counter");
        for s in &shared {
            for (i, r) in FAULT_REASONS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "tessera_plugin_faults_total{{plugin=\"{}\",reason=\"{r}\"}} {}",
                    s.name,
                    s.faults[i].load(Ordering::Relaxed)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tessera_plugin_inputs_refused_total Commands and replies not given to a plugin because they were over its input limit."
        );
        let _ = writeln!(out, "# TYPE tessera_plugin_inputs_refused_total counter");
        for s in &shared {
            for (i, input) in ["command", "reply"].iter().enumerate() {
                let _ = writeln!(
                    out,
                    "tessera_plugin_inputs_refused_total{{plugin=\"{}\",input=\"{input}\"}} {}",
                    s.name,
                    s.inputs_refused[i].load(Ordering::Relaxed)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tessera_plugin_instances_created_total Plugin instances created on worker threads."
        );
        let _ = writeln!(out, "# TYPE tessera_plugin_instances_created_total counter");
        for s in &shared {
            let _ = writeln!(
                out,
                "tessera_plugin_instances_created_total{{plugin=\"{}\"}} {}",
                s.name,
                s.instances.load(Ordering::Relaxed)
            );
        }
        for s in &shared {
            s.metrics.render(&s.name, out);
        }
    }

    /// A plugin's shared state, if it was ever loaded.
    pub fn plugin(&self, name: &str) -> Option<Arc<PluginShared>> {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }
}
