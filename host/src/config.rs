//! `proxy.toml`: every setting of `tessera proxy`. Command-line flags override the file.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::resp::Limits;

/// Settings of one proxy process.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// RESP listen address.
    pub listen: String,
    /// Static mode: backend addresses; the 1024 slots are split evenly over them, in order.
    pub backends: Vec<String>,
    /// Worker threads, each with its own sessions and backend connections (0 = one per two CPUs).
    pub threads: usize,
    /// Connections over this count are answered `-ERR max number of clients reached` and closed.
    pub max_clients: usize,
    pub max_bulk_len: usize,
    pub max_multibulk_len: usize,
    /// A client silent for this long is disconnected (0 = never).
    pub client_idle_timeout_ms: u64,
    /// A backend with requests outstanding and no reply for this long is dropped and its
    /// in-flight requests fail.
    pub backend_timeout_ms: u64,
    pub backend_connect_timeout_ms: u64,
    /// Connections per backend address per worker thread (and per protocol version).
    pub backend_connections: usize,
    /// When set, clients must `AUTH` with it (or `HELLO … AUTH default <password>`).
    pub session_password: Option<String>,
    /// Allow cluster-wide admin commands (FLUSHALL, KEYS, SCAN, CONFIG, SCRIPT …).
    pub admin_commands: bool,
    /// How long SIGTERM waits for sessions to finish their in-flight commands.
    pub shutdown_grace_ms: u64,
    /// Static mode: WebAssembly plugins, in chain order (`[[plugins]]` tables).
    pub plugins: Vec<PluginFile>,
    /// Static mode: the users clients may AUTH as (`[[users]]` tables; docs/users.md).
    pub users: Vec<crate::users::UserEntry>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            listen: "127.0.0.1:19000".into(),
            backends: Vec::new(),
            threads: 0,
            max_clients: 10_000,
            max_bulk_len: limits.max_bulk_len,
            max_multibulk_len: limits.max_multibulk_len,
            client_idle_timeout_ms: 0,
            backend_timeout_ms: 30_000,
            backend_connect_timeout_ms: 3_000,
            backend_connections: 1,
            session_password: None,
            admin_commands: false,
            shutdown_grace_ms: 10_000,
            plugins: Vec::new(),
            users: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("parsing {path}: {source}")]
    Parse {
        path: String,
        source: Box<toml::de::Error>,
    },
    #[error("invalid setting: {0}")]
    Invalid(String),
}

impl ProxyConfig {
    /// Reads and validates a config file.
    ///
    /// # Errors
    /// The file cannot be read, is not valid TOML, has an unknown key, or a value is out of range.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: p.clone(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: p,
            source: Box::new(source),
        })
    }

    /// # Errors
    /// A setting that cannot work, with the reason.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.backends.is_empty() {
            return Err(ConfigError::Invalid(
                "no backends: give --backends or `backends = [...]`".into(),
            ));
        }
        if self.backends.len() > crate::router::SLOTS {
            return Err(ConfigError::Invalid("more backends than slots".into()));
        }
        if self.max_clients == 0 || self.max_multibulk_len == 0 || self.max_bulk_len == 0 {
            return Err(ConfigError::Invalid(
                "max_clients, max_bulk_len and max_multibulk_len must be > 0".into(),
            ));
        }
        Ok(())
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_bulk_len: self.max_bulk_len,
            max_multibulk_len: self.max_multibulk_len,
        }
    }

    /// Worker threads: as configured, or one per two CPUs. Measured on 2 cores shared with
    /// Redis and the load generator, one worker served 0.80–0.89× direct Redis at c50 P1
    /// where two served 0.48–0.54×: a worker batches more sessions' requests into each
    /// backend write, and fewer threads contend with Redis for the CPUs (docs/bench.md).
    pub fn threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
        }
    }

    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.client_idle_timeout_ms > 0)
            .then(|| Duration::from_millis(self.client_idle_timeout_ms))
    }
}

/// A plugin given on the command line or in proxy.toml (static mode).
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PluginFile {
    /// Defaults to the file name without `.wasm`.
    pub name: Option<String>,
    pub path: std::path::PathBuf,
    /// A JSON file with the plugin's config.
    pub config: Option<std::path::PathBuf>,
    /// Inline JSON config (instead of `config`).
    pub config_json: Option<String>,
    /// "closed" (default) or "open".
    pub fail: Option<String>,
    pub cpu_budget_ms: Option<u64>,
    pub memory_mb: Option<usize>,
}

impl PluginFile {
    /// Reads the module and config.
    ///
    /// # Errors
    /// Unreadable files, a bad name or policy.
    pub fn to_spec(&self) -> anyhow::Result<tessera_wasm::PluginSpec> {
        use anyhow::Context;
        let name = match &self.name {
            Some(n) => n.clone(),
            None => self
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().replace("tessera_plugin_", ""))
                .unwrap_or_default(),
        };
        let wasm = std::fs::read(&self.path)
            .with_context(|| format!("reading plugin {}", self.path.display()))?;
        let config = match (&self.config, &self.config_json) {
            (Some(p), _) => std::fs::read(p)
                .with_context(|| format!("reading plugin config {}", p.display()))?,
            (None, Some(j)) => j.clone().into_bytes(),
            (None, None) => b"{}".to_vec(),
        };
        let mut spec = tessera_wasm::PluginSpec::new(name, wasm, config);
        if let Some(f) = &self.fail {
            spec.fail = tessera_wasm::FailPolicy::parse(f).with_context(|| {
                format!(
                    "plugin {}: fail must be \"open\" or \"closed\", not {f:?}",
                    spec.name
                )
            })?;
        }
        Ok(spec.with_limits(self.cpu_budget_ms, self.memory_mb))
    }
}
