//! `proxy.toml`: every setting of `tessera proxy`. Command-line flags override the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tessera_model::tls::{ClientAuth, ServerTlsFiles};
use tessera_model::users::{self, Users, UsersError};
use tessera_resp::Limits;

/// Settings of one proxy process.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// RESP listen address.
    pub listen: String,
    /// Bind `listen` and `tls_listen` with SO_REUSEPORT, so that a new proxy process can bind
    /// the same addresses while this one drains after SIGTERM (an upgrade in place; the
    /// kernel spreads new connections over the processes bound). Off by default: two proxies
    /// started on one address by mistake then fail to start rather than share it.
    pub reuse_port: bool,
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
    /// A client that has not authenticated this long after connecting is disconnected, when
    /// the proxy requires AUTH (0 = never). Idle unauthenticated sockets cannot fill
    /// `max_clients`.
    pub client_auth_timeout_ms: u64,
    /// Bytes a client may have sent of requests not yet complete (Redis's
    /// `client-query-buffer-limit`); over it, the client is closed.
    pub query_buffer_limit: usize,
    /// Bytes the whole proxy may hold for unfinished requests, all clients together; a client
    /// whose request would pass it is closed.
    pub query_buffer_total: usize,
    /// Bytes of replies held for a client that it has not read: over this it is closed at
    /// once (Redis's `client-output-buffer-limit` hard limit).
    pub output_buffer_hard: usize,
    /// … or over this for longer than `output_buffer_soft_seconds` (the soft limit).
    pub output_buffer_soft: usize,
    pub output_buffer_soft_seconds: u64,
    /// Bytes of unread replies the whole proxy may hold; the client that passes it is closed.
    pub output_buffer_total: usize,
    /// A backend with requests outstanding and no reply for this long is dropped and its
    /// in-flight requests fail.
    pub backend_timeout_ms: u64,
    pub backend_connect_timeout_ms: u64,
    /// Connections per backend address per worker thread (and per protocol version).
    pub backend_connections: usize,
    /// Dedicated connections per backend address, all workers together: one per client
    /// blocked in BLPOP, XREAD … BLOCK, WAIT …, or holding a WATCH. Past it those commands
    /// get a clear error (the shared connections are never blocked).
    pub dedicated_connections: usize,
    /// A command on a slot being handed to another group (a migration's barrier between its
    /// two pushes) waits in the proxy up to this long for the handoff, then is sent to the
    /// new owner; past it, `-TRYAGAIN` (0 = answer `-TRYAGAIN` at once).
    pub slot_hold_ms: u64,
    /// When set, clients must `AUTH` with it (or `HELLO … AUTH default <password>`).
    pub session_password: Option<String>,
    /// Allow cluster-wide admin commands (FLUSHALL, KEYS, SCAN, CONFIG, SCRIPT …) and the
    /// keyed commands Redis marks `@dangerous` (RESTORE, SORT with BY/GET …).
    pub admin_commands: bool,
    /// `PING` (outside pub/sub and transactions) goes to every master and answers `PONG` only
    /// when each does, so a server busy with a script answers `-BUSY` as it would directly.
    /// `false` (the default): the proxy answers it, as a check of the proxy alone.
    pub forward_ping: bool,
    /// How many databases clients may `SELECT` (0 … n-1; default 16, as Redis). Client
    /// database n ≥ 1 is the backends' n + 1 (`tessera_model::databases`), so backends need
    /// `databases` ≥ n + 1, in static and cluster mode.
    pub databases: Option<u32>,
    /// Set by `tessera proxy --cluster` (never read from a file): the topology comes from a
    /// dashboard, and slots move.
    #[serde(skip)]
    pub cluster_mode: bool,
    /// `PUBLISH`'s and `PUBSUB NUMSUB`'s counts include the other proxies' clients: when a
    /// channel has subscribers through another proxy, each such command asks every other
    /// proxy of the cluster (one admin-API round trip, at most 500 ms). `false` (the default):
    /// this proxy's clients are counted exactly and another proxy's as one subscriber, and no
    /// `PUBLISH` waits on the network (docs/pubsub.md).
    pub pubsub_cluster_counts: bool,
    /// Clients' commands run on the backends as a Redis ACL user confined to the proxy's
    /// policy (set up by the proxy at connect), so scripts cannot do what their callers may
    /// not. `false`: connections act as the backend admin user, and scripts and functions are
    /// refused.
    pub backend_acl: bool,
    /// Static mode: the backend user with full rights the proxy sets the confined user up
    /// with and runs its own requests as (cluster mode takes the cluster's). Unset: Redis's
    /// `default` user, without a password.
    pub backend_admin_user: Option<String>,
    pub backend_admin_password: Option<String>,
    /// How long SIGTERM waits for sessions to finish their in-flight commands.
    pub shutdown_grace_ms: u64,
    /// One call in this many of each plugin's `on_command`, `on_commands` and `on_reply` is
    /// timed into `tessera_plugin_hook_duration_seconds` (1: every call, at ~50 ns each;
    /// docs/plugins.md). 1 to 65536.
    pub plugin_hook_sample: u32,
    /// Static mode: WebAssembly plugins, in chain order (`[[plugins]]` tables).
    pub plugins: Vec<PluginFile>,
    /// Static mode: the users clients may AUTH as (`[[users]]` tables; docs/users.md).
    pub users: Vec<tessera_model::users::UserEntry>,
    /// A second RESP listener that speaks TLS, beside `listen` (docs/tls.md). Needs
    /// `tls_cert` and `tls_key`; both are reloaded when they change on disk.
    pub tls_listen: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Verify client certificates against this CA bundle.
    pub tls_client_ca: Option<PathBuf>,
    /// With `tls_client_ca`: `"required"` (default; no certificate, no connection) or
    /// `"optional"` (a certificate sent is verified, clients without one are served).
    pub tls_client_auth: ClientAuth,
    /// A TLS client that has not finished its handshake this long after connecting is
    /// closed (it holds a `max_clients` slot meanwhile).
    pub tls_handshake_timeout_ms: u64,
    /// Static mode: every backend speaks TLS (cluster mode: per group, `group create --tls`).
    pub backend_tls: bool,
    /// The CA bundle backends' certificates are verified against (needed by any TLS backend).
    pub backend_tls_ca: Option<PathBuf>,
    /// A client certificate and key for backends that require one (`tls-auth-clients yes`).
    pub backend_tls_cert: Option<PathBuf>,
    pub backend_tls_key: Option<PathBuf>,
    /// Static mode: mirror commands to a shadow target (`[mirror]`; docs/mirroring.md).
    pub mirror: Option<tessera_wire::mirror::MirrorConfig>,
    /// Commands taking at least this many µs from dispatch to complete reply enter the slow
    /// log (negative: off; 0: every command). See docs/commandlog.md.
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps (at most 10000; 0: off).
    pub slowlog_max_len: usize,
    /// Commands whose request is at least this many bytes enter the large-request log
    /// (negative: off).
    pub commandlog_request_larger_than: i64,
    pub commandlog_large_request_max_len: usize,
    /// Commands whose reply is at least this many bytes enter the large-reply log (negative: off).
    pub commandlog_reply_larger_than: i64,
    pub commandlog_large_reply_max_len: usize,
    /// Hot-key counting (`[hotkeys]`; docs/hotkeys.md).
    pub hotkeys: crate::telemetry::HotKeysConfig,
    /// The cache of hot keys (`[hot_cache]`; off unless prefixes are given; docs/hotkeys.md).
    pub hot_cache: crate::hotcache::HotCacheConfig,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            listen: "127.0.0.1:19000".into(),
            reuse_port: false,
            backends: Vec::new(),
            threads: 0,
            max_clients: 10_000,
            max_bulk_len: limits.max_bulk_len,
            max_multibulk_len: limits.max_multibulk_len,
            client_idle_timeout_ms: 0,
            client_auth_timeout_ms: 10_000,
            query_buffer_limit: 1 << 30,
            query_buffer_total: 1 << 30,
            output_buffer_hard: 256 << 20,
            output_buffer_soft: 64 << 20,
            output_buffer_soft_seconds: 60,
            output_buffer_total: 1 << 30,
            backend_timeout_ms: 30_000,
            backend_connect_timeout_ms: 3_000,
            backend_connections: 1,
            dedicated_connections: 1024,
            slot_hold_ms: 5_000,
            session_password: None,
            admin_commands: false,
            forward_ping: false,
            databases: None,
            cluster_mode: false,
            pubsub_cluster_counts: false,
            backend_acl: true,
            backend_admin_user: None,
            backend_admin_password: None,
            shutdown_grace_ms: 10_000,
            plugin_hook_sample: tessera_wasm::DEFAULT_HOOK_SAMPLE,
            plugins: Vec::new(),
            users: Vec::new(),
            tls_listen: None,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            tls_client_auth: ClientAuth::default(),
            tls_handshake_timeout_ms: tessera_model::tls::server::HANDSHAKE_TIMEOUT.as_millis()
                as u64,
            backend_tls: false,
            backend_tls_ca: None,
            backend_tls_cert: None,
            backend_tls_key: None,
            mirror: None,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            commandlog_request_larger_than: 1 << 20,
            commandlog_large_request_max_len: 128,
            commandlog_reply_larger_than: 1 << 20,
            commandlog_large_reply_max_len: 128,
            hotkeys: crate::telemetry::HotKeysConfig::default(),
            hot_cache: crate::hotcache::HotCacheConfig::default(),
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
    /// The databases clients may use (`databases`, or Redis's 16).
    pub fn databases(&self) -> u32 {
        self.databases
            .unwrap_or(tessera_model::databases::DEFAULT_DATABASES)
    }

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
        if let Some(m) = &self.mirror {
            m.validate()
                .map_err(|e| ConfigError::Invalid(format!("[mirror]: {e}")))?;
        }
        self.hotkeys.validate().map_err(ConfigError::Invalid)?;
        self.hot_cache.validate().map_err(ConfigError::Invalid)?;
        if self.hot_cache.on() && !self.hotkeys.enabled {
            return Err(ConfigError::Invalid(
                "hot_cache needs hot-key counting: [hotkeys] enabled = true".into(),
            ));
        }
        if let Some(n) = self.databases
            && !(1..=tessera_model::databases::MAX_DATABASES).contains(&n)
        {
            return Err(ConfigError::Invalid(format!(
                "databases = {n}: from 1 to {}",
                tessera_model::databases::MAX_DATABASES
            )));
        }
        if self.backends.is_empty() {
            return Err(ConfigError::Invalid(
                "no backends: give --backends or `backends = [...]`".into(),
            ));
        }
        if self.backends.len() > tessera_model::router::SLOTS {
            return Err(ConfigError::Invalid("more backends than slots".into()));
        }
        if self.max_clients == 0 || self.max_multibulk_len == 0 || self.max_bulk_len == 0 {
            return Err(ConfigError::Invalid(
                "max_clients, max_bulk_len and max_multibulk_len must be > 0".into(),
            ));
        }
        if self.query_buffer_limit == 0 || self.query_buffer_total == 0 {
            return Err(ConfigError::Invalid(
                "query_buffer_limit and query_buffer_total must be > 0".into(),
            ));
        }
        if self.output_buffer_soft > self.output_buffer_hard || self.output_buffer_total == 0 {
            return Err(ConfigError::Invalid(
                "output_buffer_soft must not exceed output_buffer_hard, and output_buffer_total must be > 0"
                    .into(),
            ));
        }
        if !(1..=65_536).contains(&self.plugin_hook_sample) {
            return Err(ConfigError::Invalid(format!(
                "plugin_hook_sample must be 1 (time every plugin call) to 65536, not {}",
                self.plugin_hook_sample
            )));
        }
        let cap = crate::telemetry::COMMANDLOG_MAX_LEN;
        if [
            self.slowlog_max_len,
            self.commandlog_large_request_max_len,
            self.commandlog_large_reply_max_len,
        ]
        .iter()
        .any(|&n| n > cap)
        {
            return Err(ConfigError::Invalid(format!(
                "slowlog_max_len and commandlog_*_max_len must be at most {cap}"
            )));
        }
        Ok(())
    }

    /// The command log's thresholds and lengths.
    pub fn commandlog(&self) -> crate::telemetry::CommandLogSettings {
        crate::telemetry::CommandLogSettings {
            slow_us: self.slowlog_log_slower_than,
            slow_max_len: self.slowlog_max_len,
            request_bytes: self.commandlog_request_larger_than,
            request_max_len: self.commandlog_large_request_max_len,
            reply_bytes: self.commandlog_reply_larger_than,
            reply_max_len: self.commandlog_large_reply_max_len,
        }
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_bulk_len: self.max_bulk_len,
            max_multibulk_len: self.max_multibulk_len,
        }
    }

    pub fn output_limits(&self) -> tessera_model::limits::OutputLimits {
        tessera_model::limits::OutputLimits {
            hard: self.output_buffer_hard,
            soft: self.output_buffer_soft,
            soft_for: Duration::from_secs(self.output_buffer_soft_seconds),
        }
    }

    pub fn slot_hold(&self) -> Duration {
        Duration::from_millis(self.slot_hold_ms)
    }

    pub fn auth_timeout(&self) -> Option<Duration> {
        (self.client_auth_timeout_ms > 0)
            .then(|| Duration::from_millis(self.client_auth_timeout_ms))
    }

    /// The static table of a proxy: its `[[users]]` and `session_password`.
    ///
    /// # Errors
    /// As `Users::new`; also a default password set both ways.
    pub fn users_table(&self) -> Result<Users, UsersError> {
        let session = self.session_password.as_deref();
        let default_hashed = self
            .users
            .iter()
            .any(|u| u.name == users::DEFAULT_USER && u.password.is_some());
        if session.is_some() && default_hashed {
            return Err(UsersError::TwoDefaultPasswords);
        }
        Users::new(&self.users, session, 0, users::Source::Config)
    }

    /// The static-mode backend admin user, if configured.
    pub fn backend_admin(&self) -> Option<tessera_model::redis_client::Credential> {
        self.backend_admin_password.as_ref().map(|password| {
            tessera_model::redis_client::Credential {
                user: self
                    .backend_admin_user
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                password: password.clone(),
            }
        })
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

    /// The TLS listener's files, when `tls_listen` is set.
    ///
    /// # Errors
    /// `tls_listen` without a certificate or key, or TLS files without `tls_listen`.
    pub fn tls_files(&self) -> Result<Option<ServerTlsFiles>, ConfigError> {
        match (&self.tls_listen, &self.tls_cert, &self.tls_key) {
            (Some(_), Some(cert), Some(key)) => Ok(Some(ServerTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
                client_auth: self.tls_client_auth,
            })),
            (Some(_), _, _) => Err(ConfigError::Invalid(
                "tls_listen needs tls_cert and tls_key".into(),
            )),
            (None, None, None) if self.tls_client_ca.is_none() => Ok(None),
            (None, ..) => Err(ConfigError::Invalid(
                "tls_cert, tls_key and tls_client_ca are for tls_listen: set it too".into(),
            )),
        }
    }

    pub fn tls_handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.tls_handshake_timeout_ms.max(1))
    }

    /// The backend CA and client certificate.
    pub fn backend_tls_files(&self) -> tessera_model::tls::backend::BackendTlsFiles {
        tessera_model::tls::backend::BackendTlsFiles {
            ca: self.backend_tls_ca.clone(),
            cert: self.backend_tls_cert.clone(),
            key: self.backend_tls_key.clone(),
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
    /// The most bytes of one command (or observed reply) copied into the plugin, KiB
    /// (default: a quarter of the memory limit).
    pub max_input_kb: Option<usize>,
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
        Ok(spec
            .with_limits(self.cpu_budget_ms, self.memory_mb)
            .with_input_limit(self.max_input_kb))
    }
}

#[cfg(test)]
mod tests {
    // How `[[users]]` and `session_password` become the users table (the table's own rules
    // are tested in tessera-model's `users`).
    mod users {
        use super::super::*;
        use tessera_model::users::*;
        use tessera_plugin_abi::class;

        fn entry(name: &str, password: &str) -> UserEntry {
            UserEntry {
                name: name.into(),
                password: Some(hash_password(password)),
                commands: None,
                key_prefix: None,
                databases: None,
                enabled: true,
            }
        }

        fn config(session_password: Option<&str>, users: Vec<UserEntry>) -> ProxyConfig {
            ProxyConfig {
                session_password: session_password.map(str::to_owned),
                users,
                ..ProxyConfig::default()
            }
        }

        #[test]
        fn without_password_or_table_default_is_nopass() {
            let users = config(None, vec![]).users_table().unwrap();
            assert!(!users.auth_required());
            assert!(users.default_is_nopass());
            let u = users.connect_as().unwrap();
            assert_eq!(u.name, "default");
            assert_eq!(u.allowed_classes, None);
            // As Redis answers with nopass: any password is fine for default …
            assert!(users.authenticate(b"default", b"whatever").is_some());
            // … but no other name exists.
            assert!(users.authenticate(b"alice", b"whatever").is_none());
        }

        #[test]
        fn session_password_is_the_default_users_password() {
            let users = config(Some("s3cret"), vec![]).users_table().unwrap();
            assert!(users.auth_required());
            assert!(users.connect_as().is_none());
            assert!(!users.default_is_nopass());
            assert!(users.authenticate(b"default", b"s3cret").is_some());
            assert!(users.authenticate(b"default", b"wrong").is_none());
            assert!(users.authenticate(b"alice", b"s3cret").is_none());
        }

        #[test]
        fn named_users_need_their_own_password() {
            let mut bob = entry("bob", "bobpw");
            bob.commands = Some(vec!["read".into(), "WRITE".into()]);
            bob.key_prefix = Some("tenant1:".into());
            let users = config(None, vec![entry("alice", "alicepw"), bob])
                .users_table()
                .unwrap();
            // A table alone leaves default nopass, as in Redis.
            assert!(!users.auth_required());
            let alice = users.authenticate(b"alice", b"alicepw").unwrap();
            assert_eq!(alice.name, "alice");
            assert!(users.authenticate(b"alice", b"bobpw").is_none());
            let bob = users.authenticate(b"bob", b"bobpw").unwrap();
            assert_eq!(bob.allowed_classes, Some(class::READ | class::WRITE));
            assert_eq!(bob.key_prefix.as_deref(), Some(&b"tenant1:"[..]));
            assert!(bob.may_touch(b"tenant1:x"));
            assert!(!bob.may_touch(b"tenant2:x"));
            assert!(alice.may_touch(b"anything"));
        }

        #[test]
        fn a_default_entry_can_disable_the_default_user() {
            let mut d = UserEntry {
                name: "default".into(),
                password: None,
                commands: None,
                key_prefix: None,
                databases: None,
                enabled: false,
            };
            let users = config(None, vec![d.clone(), entry("alice", "pw")])
                .users_table()
                .unwrap();
            assert!(users.auth_required());
            assert!(users.authenticate(b"default", b"anything").is_none());
            assert!(users.authenticate(b"alice", b"pw").is_some());
            // With a password of its own instead, default needs it.
            d.enabled = true;
            d.password = Some(hash_password("dpw"));
            let users = config(None, vec![d.clone()]).users_table().unwrap();
            assert!(users.auth_required());
            assert!(users.authenticate(b"default", b"dpw").is_some());
            // Set both ways in one proxy.toml, it is ambiguous.
            assert_eq!(
                config(Some("x"), vec![d.clone()])
                    .users_table()
                    .unwrap_err(),
                UsersError::TwoDefaultPasswords
            );
            // A cluster's default entry wins over a proxy's session_password.
            let doc = UsersDoc {
                schema: 1,
                version: 3,
                users: vec![d],
            };
            let users = Users::from_document(&doc, Some("x")).unwrap();
            assert!(users.authenticate(b"default", b"dpw").is_some());
            assert!(users.authenticate(b"default", b"x").is_none());
            assert_eq!(users.version(), 3);
            assert_eq!(users.source(), Source::Cluster);
        }

        #[test]
        fn entries_read_from_toml_and_json_with_enabled_by_default() {
            let h = hash_password("pw");
            let toml_text = format!(
                "[[users]]\nname = \"alice\"\npassword = \"{h}\"\ncommands = [\"read\"]\nkey_prefix = \"t:\"\n"
            );
            let c: ProxyConfig = toml::from_str(&toml_text).unwrap();
            assert_eq!(c.users.len(), 1);
            assert!(c.users[0].enabled);
            let users = c.users_table().unwrap();
            assert!(users.authenticate(b"alice", b"pw").is_some());
            let unknown: Result<UserEntry, _> =
                serde_json::from_str(r#"{"name":"a","password":"x","colour":"red"}"#);
            assert!(unknown.is_err(), "unknown fields are refused");
            let doc: UsersDoc = serde_json::from_str(r#"{"version":2,"users":[]}"#).unwrap();
            assert_eq!(doc.version, 2);
        }
    }

    use super::*;

    #[test]
    fn tls_settings_go_together() {
        let mut c = ProxyConfig::default();
        assert!(c.tls_files().unwrap().is_none(), "TLS is off by default");
        c.tls_listen = Some("127.0.0.1:0".into());
        assert!(c.tls_files().is_err(), "a TLS listener needs a certificate");
        c.tls_cert = Some("c.pem".into());
        c.tls_key = Some("k.pem".into());
        let f = c.tls_files().unwrap().unwrap();
        assert_eq!((f.client_ca, f.client_auth), (None, ClientAuth::Required));
        c.tls_listen = None;
        assert!(
            c.tls_files().is_err(),
            "certificate files without a listener are a mistake"
        );
    }

    #[test]
    fn tls_client_auth_is_required_or_optional_in_the_file() {
        let c: ProxyConfig = toml::from_str("tls_client_auth = \"optional\"").unwrap();
        assert_eq!(c.tls_client_auth, ClientAuth::Optional);
        assert!(toml::from_str::<ProxyConfig>("tls_client_auth = \"sometimes\"").is_err());
    }
}
