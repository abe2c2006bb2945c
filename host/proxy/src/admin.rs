//! A proxy's admin HTTP API (`--admin-listen`): health, Prometheus metrics, stats for the
//! dashboard, and the topology push that the dashboard's barrier waits on.
//!
//! In cluster mode every `/api/proxy/…` route, reads included, needs the cluster's proxy
//! secret (`Authorization: Bearer`): the plugin configs, the users table and the topology are
//! the dashboard's to read. `/health` and `/metrics` stay open for load balancers and
//! Prometheus. A static proxy has no secret: its admin listener is the operator's own
//! (`docs/secrets.md`).
//!
//! ```text
//! GET  /health              "ok"
//! GET  /metrics             Prometheus text
//! GET  /api/proxy/info      token, addresses, epoch, sessions
//! GET  /api/proxy/stats     totals, ops per second, per-command counts, backend counters
//! GET  /api/proxy/slots     cumulative ops, bytes in and bytes out of each slot with traffic
//! GET  /api/proxy/commandlog?type=slow|large-request|large-reply  the proxy's command log
//! GET  /api/proxy/hotkeys   the top keys by ops and by bytes over the recent window
//! GET  /api/proxy/topology  the topology last applied
//! GET  /api/proxy/masters   whether this proxy reaches each group's master now (Bearer: the
//!                           proxy secret; automatic failover's quorum asks it)
//! GET  /api/proxy/replicas  each replica and whether reads may go to it now (Bearer: the
//!                           proxy secret; docs/replica-reads.md)
//! PUT  /api/proxy/topology  apply a newer topology (Bearer: the cluster's proxy secret)
//! GET  /api/proxy/plugins   plugins in force
//! PUT  /api/proxy/plugins   load a catalog (Bearer: the proxy secret)
//! GET  /api/proxy/plugins/{name}/metrics  samples
//! GET  /api/proxy/users     the users table in force (never a hash)
//! PUT  /api/proxy/users     apply a newer users table (Bearer: the proxy secret)
//! GET  /api/proxy/mirror    mirror settings, counters, samples (PUT: the dashboard's push)
//! GET  /api/proxy/routes    where each key prefix routed to another cluster goes now
//! ```

use std::sync::atomic::Ordering::{self, Relaxed};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::telemetry::{ProxyGauges, render_proxy};
use crate::worker::Shared;
use tessera_http::error::{ApiError, bearer_matches};
use tessera_model::router::{MasterSeen, MastersSeen, PushAck, Topology};
use tessera_model::users::{Users, UsersDoc};
use tessera_wire::plugins::Catalog;
use tessera_wire::plugins::Sample;
use tessera_wire::telemetry::{BackendCounters, HotKeysQuery, ProxyInfo, ProxyStats};
use tessera_wire::telemetry::{CommandLogQuery, SlotCounts};

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
    /// Serializes users table applies (a version check, then a swap).
    users_applying: Mutex<()>,
    /// Why the last users table offered (pushed or read at start) was not applied.
    users_error: Mutex<Option<String>>,
    /// Refused proxy secrets by address (`auth_throttle`).
    auth_throttle: tessera_http::auth_throttle::AuthThrottle,
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
            users_applying: Mutex::new(()),
            users_error: Mutex::new(None),
            auth_throttle: tessera_http::auth_throttle::AuthThrottle::new("proxy secret"),
        })
    }

    pub fn router(self: Arc<Self>) -> Router {
        let api = Router::new()
            .route("/api/proxy/info", get(info))
            .route("/api/proxy/stats", get(stats))
            .route("/api/proxy/slots", get(slot_counts))
            .route("/api/proxy/hotkeys", get(hotkeys))
            .route("/api/proxy/topology", get(topology).put(push_topology))
            .route("/api/proxy/masters", get(masters_seen))
            .route("/api/proxy/replicas", get(replicas_seen))
            .route("/api/proxy/plugins", get(plugins_list).put(plugins_apply))
            .route("/api/proxy/plugins/{name}/metrics", get(plugin_samples))
            .route("/api/proxy/users", get(users_list).put(users_apply))
            .route("/api/proxy/mirror", get(mirror_view).put(mirror_apply))
            .route("/api/proxy/commandlog", get(command_log))
            .route("/api/proxy/routes", get(routes_seen))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                require_secret,
            ));
        Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/metrics", get(metrics))
            .merge(api)
            .with_state(self)
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

async fn routes_seen(
    State(a): State<Arc<ProxyAdmin>>,
) -> Json<Vec<tessera_model::router::prefix::RouteStatus>> {
    Json(a.shared.router.targets.statuses())
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

async fn metrics(State(a): State<Arc<ProxyAdmin>>) -> String {
    let s = &a.shared;
    let mut out = render_proxy(
        &s.command_stats,
        &ProxyGauges {
            sessions: s.clients.len(),
            epoch: a.epoch(),
            backend: &s.backend_stats,
        },
    );
    s.plugins.render_metrics(&mut out);
    s.mirror.stats.render(&mut out);
    s.hot_cache.stats.render(s.config.hot_cache.on(), &mut out);
    s.router.targets.render(&mut out);
    out
}

async fn info(State(a): State<Arc<ProxyAdmin>>) -> Json<ProxyInfo> {
    Json(a.info())
}

/// Cumulative per-slot counters since the proxy started (only slots with traffic).
async fn slot_counts(State(a): State<Arc<ProxyAdmin>>) -> Json<SlotCounts> {
    Json(a.shared.slot_stats.counts())
}

/// The top keys by ops and by bytes over the window (`telemetry::HotKeys::view`).
async fn hotkeys(
    State(a): State<Arc<ProxyAdmin>>,
    query: Result<axum::extract::Query<HotKeysQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<tessera_wire::telemetry::HotKeysView>, ApiError> {
    let axum::extract::Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let mut view = a
        .shared
        .hotkeys
        .view(q.limit().map_err(ApiError::bad_request)?);
    let s = &a.shared;
    view.hot_cache = s.hot_cache.stats.figures(s.config.hot_cache.on());
    Ok(Json(view))
}

async fn stats(State(a): State<Arc<ProxyAdmin>>) -> Json<ProxyStats> {
    let s = &a.shared;
    let (ops_total, errors_total) = s.command_stats.total();
    let b = &s.backend_stats;
    Json(ProxyStats {
        token: a.token.clone(),
        epoch: a.epoch(),
        sessions: s.clients.len(),
        ops_total,
        errors_total,
        ops_per_sec: a.ops_per_sec.load(Relaxed),
        commands: s.command_stats.counts(),
        backend: BackendCounters {
            requests: b.requests.load(Relaxed),
            batches: b.batches.load(Relaxed),
            connects: b.connects.load(Relaxed),
            connect_failures: b.connect_failures.load(Relaxed),
            reconnects: b.connection_losses.load(Relaxed),
        },
        uptime_secs: s.started.elapsed().as_secs(),
    })
}

async fn topology(State(a): State<Arc<ProxyAdmin>>) -> Result<Json<Topology>, ApiError> {
    a.topology
        .lock()
        .expect("topology lock poisoned")
        .clone()
        .map(Json)
        .ok_or_else(|| ApiError::not_found("no topology pushed yet (static mode, or not loaded)"))
}

async fn push_topology(
    State(a): State<Arc<ProxyAdmin>>,
    body: Result<Json<Topology>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<PushAck>, ApiError> {
    a.refuse_static("this proxy runs in static mode: its topology is fixed")?;
    let Json(topo) = body?;
    a.apply(topo, true).await.map(Json)
}

/// Every `/api/proxy/…` call of a cluster-mode proxy must carry the proxy secret.
async fn require_secret(
    State(a): State<Arc<ProxyAdmin>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let Some(h) = &a.secret_sha256 else {
        return next.run(req).await;
    };
    let ip = match a.auth_throttle.admit(&req) {
        Ok(ip) => ip,
        Err(refused) => return *refused,
    };
    if bearer_matches(req.headers(), h) {
        return next.run(req).await;
    }
    // A missing secret costs no check: only a wrong one counts against the address.
    if tessera_http::error::bearer(req.headers()).is_some() {
        a.auth_throttle.refused(ip);
    }
    tessera_http::error::refuse_unread(&req, ApiError::unauthorized())
}

impl ProxyAdmin {
    /// A change pushed to a static proxy, which has nothing to push it with.
    fn refuse_static(&self, what: &str) -> Result<(), ApiError> {
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

#[derive(Deserialize)]
struct MastersQuery {
    group: Option<u32>,
}

/// Probes the masters of the topology in force (only those: the caller cannot make this
/// proxy connect anywhere else), or of one group with `?group=N`. Needs the proxy secret,
/// as a probe costs a connection to each master.
/// The replicas this proxy may read from now (docs/replica-reads.md).
async fn replicas_seen(
    State(a): State<Arc<ProxyAdmin>>,
) -> Json<tessera_model::router::replicas::ReplicasSeen> {
    Json(a.shared.router.load().replicas_seen())
}

async fn masters_seen(
    State(a): State<Arc<ProxyAdmin>>,
    query: Result<axum::extract::Query<MastersQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<MastersSeen>, ApiError> {
    a.refuse_static("this proxy runs in static mode: it takes part in no failover")?;
    let axum::extract::Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (epoch, targets): (u64, Vec<(u32, String)>) = {
        let topo = a.topology.lock().expect("topology lock poisoned");
        match &*topo {
            None => (0, Vec::new()),
            Some(t) => (
                t.epoch,
                t.groups
                    .iter()
                    .filter(|g| q.group.is_none_or(|id| g.id.0 == id))
                    .filter_map(|g| g.master.clone().map(|m| (g.id.0, m)))
                    .collect(),
            ),
        }
    };
    let masters = futures_util::future::join_all(
        targets
            .into_iter()
            .map(|(group, addr)| probe_master(group, addr)),
    )
    .await;
    Ok(Json(MastersSeen {
        token: a.token.clone(),
        epoch,
        masters,
    }))
}

/// A fresh connection and a PING, within [`PROBE_TIMEOUT`]: the proxy's pooled connections
/// are lazy and may be idle, so their state says little about a master right now.
async fn probe_master(group: u32, addr: String) -> MasterSeen {
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

async fn plugins_list(State(a): State<Arc<ProxyAdmin>>) -> Json<Value> {
    let p = &a.shared.plugins;
    Json(json!({
        "catalog_version": p.catalog_version.load(Ordering::Relaxed),
        "chain_version": p.chain().version,
        "plugins": p.loaded(),
        "last_error": p.last_error(),
    }))
}

async fn plugins_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Result<Json<Catalog>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    a.refuse_static(
        "this proxy runs in static mode: its plugins come from its command line or proxy.toml",
    )?;
    let Json(cat) = body?;
    apply_catalog(&a, &cat).await?;
    Ok(Json(json!({
        "catalog_version": cat.version,
        "plugins": a.shared.plugins.loaded(),
    })))
}

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
    let specs = a
        .blobs
        .specs(&**store, paths, cat)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    plugins.apply(specs).await.map_err(ApiError::bad_request)?;
    plugins
        .catalog_version
        .fetch_max(cat.version, Ordering::Relaxed);
    a.blobs.keep(cat);
    Ok(())
}

async fn plugin_samples(
    State(a): State<Arc<ProxyAdmin>>,
    Path(name): Path<String>,
) -> Result<Json<Vec<Sample>>, ApiError> {
    let samples = a.shared.plugins.samples(&name).ok_or_else(|| {
        ApiError::not_found(format!("no plugin named {name} was loaded in this proxy"))
    })?;
    Ok(Json(
        samples
            .into_iter()
            .map(|(name, labels, value)| Sample {
                name,
                labels: labels.into_iter().collect(),
                value,
            })
            .collect(),
    ))
}

// === users ===

/// The table in force: version, where it came from, whether a fresh connection must AUTH,
/// the entries without their hashes, and why the last table offered was not applied.
async fn users_list(State(a): State<Arc<ProxyAdmin>>) -> Json<Value> {
    let users = a.shared.users.load();
    Json(json!({
        "version": users.version(),
        "source": users.source(),
        "auth_required": users.auth_required(),
        "default_nopass": users.default_is_nopass(),
        "users": users.views(),
        "last_error": *a.users_error.lock().expect("users lock poisoned"),
    }))
}

async fn users_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Result<Json<UsersDoc>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    a.refuse_static("this proxy runs in static mode: its users come from proxy.toml")?;
    let Json(doc) = body?;
    let version = a.apply_users(&doc)?;
    Ok(Json(json!({ "version": version })))
}

/// `GET /api/proxy/commandlog`: this proxy's own log of one type (docs/commandlog.md).
async fn command_log(
    State(a): State<Arc<ProxyAdmin>>,
    q: Result<axum::extract::Query<CommandLogQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<tessera_wire::telemetry::ProxyLog>, ApiError> {
    let axum::extract::Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (log_type, count) = q.parse().map_err(ApiError::bad_request)?;
    let log = &a.shared.command_log;
    Ok(Json(tessera_wire::telemetry::ProxyLog {
        log_type,
        len: log.len(log_type),
        entries: log.get(log_type, count).iter().map(Into::into).collect(),
    }))
}

/// `GET /api/proxy/mirror`: settings in force, counters by command, dropped, samples
/// (docs/mirroring.md).
async fn mirror_view(State(a): State<Arc<ProxyAdmin>>) -> Json<Value> {
    let m = &a.shared.mirror;
    Json(json!({
        "token": a.token,
        "version": m.version(),
        "config": m.config().map(|c| c.view()),
        "figures": m.stats.figures(),
        "samples": m.stats.samples(),
    }))
}

/// `PUT /api/proxy/mirror`: the dashboard's push of a mirror document.
async fn mirror_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Result<Json<tessera_wire::mirror::MirrorDoc>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    if a.secret_sha256.is_none() {
        return Err(ApiError::conflict(
            "this proxy runs in static mode: its mirror comes from proxy.toml's [mirror]",
        ));
    }
    let Json(doc) = body?;
    a.shared.mirror.apply(&doc).map_err(|e| {
        if e.contains("older") {
            ApiError::conflict(e)
        } else {
            ApiError::bad_request(e)
        }
    })?;
    Ok(Json(json!({ "version": doc.version })))
}
