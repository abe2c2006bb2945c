//! A proxy's admin HTTP API (`--admin-listen`): health, Prometheus metrics, stats for the
//! dashboard, and the pushes (topology, plugins, users, mirror) the dashboard's barrier waits
//! on. This file holds the admin state and the operations the pushes apply; the routes and
//! their OpenAPI document are `routes` and `openapi`.
//!
//! In cluster mode every `/api/proxy/…` route, reads included, needs the cluster's proxy
//! secret (`Authorization: Bearer`): the plugin configs, the users table and the topology are
//! the dashboard's to read. `/health` and `/metrics` stay open for load balancers and
//! Prometheus. A static proxy has no secret: its admin listener is the operator's own
//! (`docs/secrets.md`).

mod openapi;
mod routes;

pub use openapi::document;

use std::sync::atomic::Ordering::{self, Relaxed};
use std::sync::{Arc, Mutex};

use axum::Router;

use crate::worker::Shared;
use tessera_http::error::ApiError;
use tessera_model::router::{MasterSeen, PushAck, ToTable, Topology};
use tessera_model::users::{Users, UsersDoc};
use tessera_wire::plugins::Catalog;
use tessera_wire::telemetry::ProxyInfo;

/// How long a push waits for commands routed with the previous table to finish.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(4);
/// How far past the epoch in force a pushed topology may be. A dashboard steps the epoch by
/// one per change (a migration by a few per slot), so a larger jump is a forged or corrupt
/// push, and applying it (say epoch `u64::MAX`) would make every later, real one stale.
pub const MAX_EPOCH_STEP: u64 = 1 << 20;

/// State behind a proxy's admin API.
pub struct ProxyAdmin {
    pub shared: Arc<Shared>,
    /// Registration token (cluster mode) or empty (static mode).
    pub token: String,
    pub admin_addr: String,
    /// sha256 of the secret a dashboard must present to push; `None` refuses pushes.
    pub secret_sha256: Option<String>,
    pub topology: Mutex<Option<Topology>>,
    /// Serializes applies (the in-flight drain requires it).
    applying: tokio::sync::Mutex<()>,
    /// Commands per second over the last sampling interval.
    pub ops_per_sec: std::sync::atomic::AtomicU64,
    /// Cluster mode: where pushed plugin catalogs' modules are read from.
    pub catalog_source:
        std::sync::OnceLock<(Arc<dyn tessera_store::Store>, tessera_store::model::Paths)>,
    pub blobs: crate::plugins::catalog::BlobCache,
    /// Cluster mode: the client address this proxy registered, which a plugin canary selects
    /// proxies by.
    pub client_addr: std::sync::OnceLock<String>,
    /// Serializes users table applies (a version check, then a swap).
    users_applying: Mutex<()>,
    /// Why the last users table offered (pushed or read at start) was not applied.
    users_error: Mutex<Option<String>>,
    /// Refused proxy secrets by address (`auth_throttle`).
    auth_throttle: tessera_http::auth_throttle::AuthThrottle,
    /// Set once a stopping proxy has closed its fence for good: it routes nothing any more,
    /// and `/health` says so (`server::cluster`'s shutdown, `docs/operations.md`).
    pub stopped: std::sync::atomic::AtomicBool,
}

impl ProxyAdmin {
    pub fn new(
        shared: Arc<Shared>,
        token: String,
        admin_addr: String,
        secret_sha256: Option<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            shared,
            token,
            admin_addr,
            secret_sha256,
            topology: Mutex::new(None),
            applying: tokio::sync::Mutex::new(()),
            ops_per_sec: Default::default(),
            catalog_source: std::sync::OnceLock::new(),
            blobs: Default::default(),
            client_addr: std::sync::OnceLock::new(),
            users_applying: Mutex::new(()),
            users_error: Mutex::new(None),
            auth_throttle: tessera_http::auth_throttle::AuthThrottle::new("proxy secret"),
            stopped: Default::default(),
        })
    }

    /// The admin API: `/health` and `/metrics` open, every `/api/proxy/…` route behind the
    /// proxy secret (in cluster mode).
    pub fn router(self: Arc<Self>) -> Router {
        let (api, _) = routes::secret().split_for_parts();
        let api = api.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            routes::require_secret,
        ));
        let (open, _) = routes::open().split_for_parts();
        open.merge(api).with_state(self)
    }

    fn epoch(&self) -> u64 {
        self.shared.router.load().epoch
    }

    pub fn info(&self) -> ProxyInfo {
        ProxyInfo {
            token: self.token.clone(),
            addr: self.shared.listen_addr.to_string(),
            admin_addr: self.admin_addr.clone(),
            epoch: self.epoch(),
            sessions: self.shared.clients.len(),
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            uptime_secs: self.shared.started.elapsed().as_secs(),
            users_version: self.shared.users.load().version(),
            fenced: !self.shared.router.fence.serving(),
            draining: self
                .shared
                .draining
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Samples the command total once a second for `ops_per_sec`. Runs until the process ends.
    pub async fn sample_ops(self: Arc<Self>) {
        let mut last = self.shared.command_stats.total().0;
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            let now = self.shared.command_stats.total().0;
            self.ops_per_sec.store(now.saturating_sub(last), Relaxed);
            last = now;
        }
    }

    /// Applies a topology unless it is older than the one in force, or, when `pushed`, more
    /// than [`MAX_EPOCH_STEP`] newer; then waits until no command routed with the previous
    /// table is in flight (the barrier's guarantee). The table read from the store at start
    /// is not `pushed`: it may be any distance from the proxy's initial epoch 0.
    ///
    /// # Errors
    /// 409 for an older epoch or an implausible jump; 400 for a topology that does not
    /// describe every slot; 503 when commands routed the old way are still in flight after
    /// `DRAIN_LIMIT`.
    pub async fn apply(&self, topo: Topology, pushed: bool) -> Result<PushAck, ApiError> {
        let _serial = self.applying.lock().await;
        let epoch = self.epoch();
        if topo.epoch < epoch {
            return Err(ApiError::conflict(format!(
                "stale topology: epoch {} is older than the epoch in force, {epoch}",
                topo.epoch
            )));
        }
        if pushed && topo.epoch - epoch > MAX_EPOCH_STEP {
            tracing::warn!(
                epoch,
                pushed = topo.epoch,
                "refused a pushed topology whose epoch jumps implausibly"
            );
            return Err(ApiError::conflict(format!(
                "implausible topology: epoch {} is more than {MAX_EPOCH_STEP} past the epoch in \
                 force, {epoch} (a dashboard steps it by one per change); not applied. If the \
                 cluster's epoch really moved that far, restart this proxy: it reads the table \
                 from the store",
                topo.epoch
            )));
        }
        let table = self.table_of(&topo)?;
        // Before the swap: the first request to a TLS group's master connects with TLS.
        tessera_model::tls::backend::backends().mark(
            topo.groups
                .iter()
                .filter_map(|g| Some((g.master.as_deref()?, g.tls))),
        );
        // And to its replicas (reads under the read policy, and their probes).
        tessera_model::tls::backend::backends().mark(
            topo.groups
                .iter()
                .flat_map(|g| g.replicas.iter().map(move |r| (r.as_str(), g.tls))),
        );
        self.shared.router.swap(table);
        *self.topology.lock().expect("topology lock poisoned") = Some(topo.clone());
        if let Err(left) = self.shared.drain(DRAIN_LIMIT).await {
            return Err(ApiError::unavailable(format!(
                "epoch {} applied, but {left} command batches routed with the previous table are still in flight",
                topo.epoch
            )));
        }
        tracing::info!(epoch = topo.epoch, "topology applied");
        Ok(PushAck {
            token: self.token.clone(),
            epoch: topo.epoch,
        })
    }
}

// === impl ProxyAdmin: prefix routes ===

impl ProxyAdmin {
    /// The table of `topo` with this proxy's replica freshness and prefix route targets.
    ///
    /// # Errors
    /// 400 for a topology that does not build.
    fn table_of(&self, topo: &Topology) -> Result<tessera_model::router::SlotTable, ApiError> {
        let r = &self.shared.router;
        topo.to_table_with(&r.replicas, &r.targets)
            .map_err(|e| ApiError::bad_request(e.to_string()))
    }

    /// The prefix routes of the topology in force (none before the first).
    pub fn prefix_routes(&self) -> Vec<tessera_model::router::prefix::PrefixRoute> {
        let t = self.topology.lock().expect("topology lock poisoned");
        t.as_ref().map(|t| t.routes.clone()).unwrap_or_default()
    }

    /// Builds the table in force afresh, with the prefix routes' current targets
    /// (`proxy::routes` found one changed): the same epoch and slots, so no drain — a command
    /// sent to the previous target is answered there.
    ///
    /// # Errors
    /// 400 for a topology that no longer builds (it did when applied).
    pub async fn reroute(&self) -> Result<(), ApiError> {
        let _serial = self.applying.lock().await;
        let topo = self
            .topology
            .lock()
            .expect("topology lock poisoned")
            .clone();
        let Some(topo) = topo else { return Ok(()) };
        let table = self.table_of(&topo)?;
        self.shared.router.swap(table);
        Ok(())
    }
}

// === impl ProxyAdmin: users ===

impl ProxyAdmin {
    /// Applies a cluster's users table unless it is older than the one in force. The
    /// proxy's own `session_password` stays the default user's password unless the table
    /// gives `default` one.
    ///
    /// # Errors
    /// 409 for an older version; 400 for a table that does not compile (the one in force
    /// stays, and `GET /api/proxy/users` shows why in `last_error`).
    pub fn apply_users(&self, doc: &UsersDoc) -> Result<u64, ApiError> {
        let _serial = self.users_applying.lock().expect("users lock poisoned");
        let current = self.shared.users.load().version();
        if doc.version < current {
            return Err(ApiError::conflict(format!(
                "stale users table: version {} is older than the version in force, {current}",
                doc.version
            )));
        }
        let session = self.shared.config.session_password.as_deref();
        let users = Users::from_document(doc, session).map_err(|e| {
            let msg = format!("users table version {} not applied: {e}", doc.version);
            *self.users_error.lock().expect("users lock poisoned") = Some(msg.clone());
            ApiError::bad_request(msg)
        })?;
        self.shared.users.store(Arc::new(users));
        *self.users_error.lock().expect("users lock poisoned") = None;
        tracing::info!(
            version = doc.version,
            users = doc.users.len(),
            "users table applied"
        );
        Ok(doc.version)
    }

    /// Fails closed: no one can AUTH until a usable table arrives (a cluster's document
    /// that cannot be read or compiled at start-up, where there is no last good table).
    /// Version 0, whatever the bad document claims: its version must not hold back the
    /// good tables that follow.
    pub fn refuse_users(&self, reason: String) {
        let _serial = self.users_applying.lock().expect("users lock poisoned");
        tracing::error!(%reason, "no usable users table: every AUTH fails until the dashboard pushes one");
        self.shared.users.store(Arc::new(Users::refuse_all(0)));
        *self.users_error.lock().expect("users lock poisoned") = Some(reason);
    }
}

impl ProxyAdmin {
    /// A change pushed to a static proxy, which has nothing to push it with.
    pub(crate) fn refuse_static(&self, what: &str) -> Result<(), ApiError> {
        match self.secret_sha256 {
            Some(_) => Ok(()),
            None => Err(ApiError::conflict(what.to_owned())),
        }
    }
}

// === masters, as this proxy sees them ===

/// How long a probe of one master may take: a master that does not answer within it is
/// seen down. Well under the dashboard's wait for the whole answer (`failover::ASK_TIMEOUT`).
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// A fresh connection and a PING, within [`PROBE_TIMEOUT`]: the proxy's pooled connections
/// are lazy and may be idle, so their state says little about a master right now.
pub(crate) async fn probe_master(group: u32, addr: String) -> MasterSeen {
    let start = std::time::Instant::now();
    let probe = async {
        let mut c = tessera_model::redis_client::RedisClient::connect(&addr, PROBE_TIMEOUT).await?;
        c.cmd(&["PING"]).await.map(|_| ())
    };
    let r = match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
    };
    MasterSeen {
        group,
        reachable: r.is_ok(),
        rtt_us: r
            .is_ok()
            .then(|| u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)),
        error: r.err(),
        addr,
    }
}

// === plugins ===

/// Loads a catalog's enabled plugins into this proxy (modules from the store, cached).
///
/// # Errors
/// 409 for a catalog older than the one in force, 400 for one that does not load.
pub async fn apply_catalog(a: &ProxyAdmin, cat: &Catalog) -> Result<(), ApiError> {
    let plugins = &a.shared.plugins;
    let current = plugins.catalog_version.load(Ordering::Relaxed);
    if cat.version < current {
        return Err(ApiError::conflict(format!(
            "catalog version {} is older than the one in force ({current})",
            cat.version
        )));
    }
    let Some((store, paths)) = a.catalog_source.get() else {
        return Err(ApiError::conflict(
            "this proxy has no store to read plugin modules from",
        ));
    };
    let addr = a.client_addr.get().map_or("", String::as_str);
    let (specs, canaries) = a
        .blobs
        .specs(&**store, paths, cat, addr)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    plugins
        .apply_tracked(specs, canaries)
        .await
        .map_err(ApiError::bad_request)?;
    plugins
        .catalog_version
        .fetch_max(cat.version, Ordering::Relaxed);
    a.blobs.keep(cat);
    Ok(())
}
