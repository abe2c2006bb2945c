//! The admin API's routes, each with its `#[utoipa::path]`: the open ones (`/health`,
//! `/metrics`) and those behind the proxy secret (`/api/proxy/…`). HTTP to [`ProxyAdmin`]
//! and back; the answers are `tessera-wire` shapes.
//!
//! ```text
//! GET  /health              "ok" (503 "stopped" once a stopping proxy routes nothing)
//! GET  /metrics             Prometheus text
//! GET  /api/proxy/info      token, addresses, epoch, sessions
//! GET  /api/proxy/stats     totals, ops per second, per-command counts, backend counters
//! GET  /api/proxy/slots     cumulative ops, bytes in and bytes out of each slot with traffic
//! GET  /api/proxy/commandlog?type=slow|large-request|large-reply  the proxy's command log
//! GET  /api/proxy/hotkeys   the top keys by ops and by bytes over the recent window
//! GET  /api/proxy/topology  the topology last applied
//! PUT  /api/proxy/topology  apply a newer topology
//! GET  /api/proxy/masters   whether this proxy reaches each group's master now
//! GET  /api/proxy/replicas  each replica and whether reads may go to it now
//! GET  /api/proxy/plugins   plugins in force            PUT: load a catalog
//! GET  /api/proxy/plugins/{name}/metrics  samples
//! GET  /api/proxy/users     the users table in force    PUT: apply a newer one
//! GET  /api/proxy/mirror    mirror settings, counters, samples   PUT: the dashboard's push
//! GET  /api/proxy/routes    where each key prefix routed to another cluster goes now
//! POST /api/proxy/pubsub/counts  this proxy's subscribers of some channels (another proxy asks)
//! ```

use std::sync::Arc;
use std::sync::atomic::Ordering::{self, Relaxed};

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ProxyAdmin, apply_catalog, probe_master};
use crate::telemetry::{ProxyGauges, render_proxy};
use tessera_http::error::{ApiError, bearer_matches};
use tessera_model::router::{MastersSeen, PushAck, Topology};
use tessera_model::users::UsersDoc;
use tessera_wire::VersionAck;
use tessera_wire::error::ErrorBody;
use tessera_wire::mirror::{MirrorDoc, ProxyMirror};
use tessera_wire::plugins::{Catalog, CatalogApplied, ProxyPlugins, Sample};
use tessera_wire::pubsub::{MAX_COUNTED_NAMES, SubCounts, SubCountsQuery};
use tessera_wire::read_policy::ReplicasSeen;
use tessera_wire::routes::RouteStatus;
use tessera_wire::telemetry::{
    BackendCounters, CommandLogQuery, HotKeysQuery, HotKeysView, ProxyInfo, ProxyLog, ProxyStats,
    SlotCounts,
};
use tessera_wire::topology::MastersQuery;
use tessera_wire::users::ProxyUsers;

type Body<T> = Result<Json<T>, JsonRejection>;

/// The routes open to anyone.
pub(super) fn open() -> OpenApiRouter<Arc<ProxyAdmin>> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(metrics))
}

/// The routes behind the proxy secret.
pub(super) fn secret() -> OpenApiRouter<Arc<ProxyAdmin>> {
    OpenApiRouter::new()
        .routes(routes!(info))
        .routes(routes!(stats))
        .routes(routes!(slot_counts))
        .routes(routes!(hotkeys))
        .routes(routes!(topology, push_topology))
        .routes(routes!(masters_seen))
        .routes(routes!(replicas_seen))
        .routes(routes!(plugins_list, plugins_apply))
        .routes(routes!(plugin_samples))
        .routes(routes!(users_list, users_apply))
        .routes(routes!(mirror_view, mirror_apply))
        .routes(routes!(command_log))
        .routes(routes!(routes_seen))
        .routes(routes!(pubsub_counts))
}

/// Every `/api/proxy/…` call of a cluster-mode proxy must carry the proxy secret.
pub(super) async fn require_secret(
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

/// Liveness
#[utoipa::path(
    get,
    path = "/health",
    tag = "meta",
    operation_id = "health",
    responses(
        (status = 200, description = "The proxy is serving.", body = String, content_type = "text/plain"),
        (status = 503, description = "The proxy is stopping: it routes no command any more and has left the store (`stopped`).", body = String, content_type = "text/plain")
    )
)]
async fn health(State(a): State<Arc<ProxyAdmin>>) -> (axum::http::StatusCode, &'static str) {
    if a.stopped.load(std::sync::atomic::Ordering::Acquire) {
        // The dashboard reads this word: a departed proxy that says it routes nothing does
        // not hold a push (`dashboard::push`).
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "stopped")
    } else {
        (axum::http::StatusCode::OK, "ok")
    }
}

/// Prometheus metrics
///
/// The proxy's counters and gauges, its plugins' own metrics, the mirror's, the hot-key
/// cache's and the prefix routes'.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    operation_id = "metrics",
    responses((status = 200, description = "Prometheus text exposition format.", body = String, content_type = "text/plain"))
)]
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
    render_limits(s, &mut out);
    s.plugins.render_metrics(&mut out);
    s.mirror.stats.render(&mut out);
    s.hot_cache.stats.render(s.config.hot_cache.on(), &mut out);
    s.router.targets.render(&mut out);
    out
}

/// The proxy's caps beside what it holds against them (`docs/limits.md`), and its fence, for
/// alerts near a cap (`ops/prometheus/tessera-alerts.yml`).
fn render_limits(s: &crate::worker::Shared, out: &mut String) {
    use std::fmt::Write;
    let fenced = !s.router.fence.serving();
    let series: [(&str, &str, &str, u64); 8] = [
        (
            "tessera_max_clients",
            "gauge",
            "Client connections the proxy admits (max_clients)",
            s.config.max_clients as u64,
        ),
        (
            "tessera_rejected_connections_total",
            "counter",
            "Connections closed at once because max_clients were open",
            s.stats.rejected_connections.load(Relaxed),
        ),
        (
            "tessera_maint_moving_sent_total",
            "counter",
            "Clients that asked for maintenance notifications told MOVING as the proxy drained",
            s.stats.moving_sent.load(Relaxed),
        ),
        (
            "tessera_request_buffer_bytes",
            "gauge",
            "Bytes of clients' unfinished requests held, all clients",
            s.requests.used() as u64,
        ),
        (
            "tessera_request_buffer_limit_bytes",
            "gauge",
            "Cap on clients' unfinished requests, all clients (query_buffer_total)",
            s.requests.limit() as u64,
        ),
        (
            "tessera_reply_buffer_bytes",
            "gauge",
            "Bytes of replies held for clients that have not read them, all clients",
            s.replies.used() as u64,
        ),
        (
            "tessera_reply_buffer_limit_bytes",
            "gauge",
            "Cap on replies held for clients, all clients (output_buffer_total)",
            s.replies.limit() as u64,
        ),
        (
            "tessera_fenced",
            "gauge",
            "1 while the proxy refuses to route: unsure of its registration in the store, or stopping",
            fenced as u64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    }
}

/// Who and where the proxy is
///
/// Its token, addresses, epoch, sessions, version, and the version of the users table in
/// force (0: proxy.toml's); the dashboard's health loop pushes the current table to a proxy
/// behind.
#[utoipa::path(
    get,
    path = "/api/proxy/info",
    tag = "proxy",
    operation_id = "proxyInfo",
    responses((status = 200, description = "The proxy.", body = ProxyInfo))
)]
async fn info(State(a): State<Arc<ProxyAdmin>>) -> Json<ProxyInfo> {
    Json(a.info())
}

/// Traffic counters
///
/// Totals, ops per second, per-command counts, backend counters.
#[utoipa::path(
    get,
    path = "/api/proxy/stats",
    tag = "proxy",
    operation_id = "proxyStats",
    responses((status = 200, description = "The proxy's counters.", body = ProxyStats))
)]
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
        latency_buckets: s.command_stats.latency_counts(),
    })
}

/// Per-slot traffic
///
/// Cumulative counters per slot since the proxy started, only slots with traffic (parallel
/// arrays). A command counts once, on its first key's slot; keyless commands are not
/// counted.
#[utoipa::path(
    get,
    path = "/api/proxy/slots",
    tag = "proxy",
    operation_id = "proxySlots",
    responses((status = 200, description = "The slots with traffic and their counters.", body = SlotCounts))
)]
async fn slot_counts(State(a): State<Arc<ProxyAdmin>>) -> Json<SlotCounts> {
    Json(a.shared.slot_stats.counts())
}

/// Hot keys
///
/// This proxy's top keys by ops and by bytes over its window (`telemetry::HotKeys`), and its
/// hot-key cache's figures (docs/hotkeys.md).
#[utoipa::path(
    get,
    path = "/api/proxy/hotkeys",
    tag = "proxy",
    operation_id = "proxyHotKeys",
    params(HotKeysQuery),
    responses(
        (status = 200, description = "The rankings.", body = HotKeysView),
        (status = 400, description = "A limit outside 1-1000, or an unknown parameter.", body = ErrorBody),
    )
)]
async fn hotkeys(
    State(a): State<Arc<ProxyAdmin>>,
    query: Result<Query<HotKeysQuery>, QueryRejection>,
) -> Result<Json<HotKeysView>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let s = &a.shared;
    let mut view = s.hotkeys.view(q.limit().map_err(ApiError::bad_request)?);
    view.hot_cache = s.hot_cache.stats.figures(s.config.hot_cache.on());
    Ok(Json(view))
}

/// The topology in force
#[utoipa::path(
    get,
    path = "/api/proxy/topology",
    tag = "proxy",
    operation_id = "proxyTopology",
    responses(
        (status = 200, description = "The topology last applied.", body = Topology),
        (status = 404, description = "None yet (static mode, or not loaded).", body = ErrorBody),
    )
)]
async fn topology(State(a): State<Arc<ProxyAdmin>>) -> Result<Json<Topology>, ApiError> {
    a.topology
        .lock()
        .expect("topology lock poisoned")
        .clone()
        .map(Json)
        .ok_or_else(|| ApiError::not_found("no topology pushed yet (static mode, or not loaded)"))
}

/// Apply a newer topology
///
/// The dashboard's push: applied unless older than the epoch in force, then answered once no
/// command routed with the previous table is in flight (the barrier's guarantee).
#[utoipa::path(
    put,
    path = "/api/proxy/topology",
    tag = "proxy",
    operation_id = "pushTopology",
    request_body = Topology,
    responses(
        (status = 200, description = "Applied: the proxy routes with this epoch only.", body = PushAck),
        (status = 400, description = "A malformed topology, or one that does not describe every slot.", body = ErrorBody),
        (status = 409, description = "An older epoch, one implausibly far ahead, or a static proxy.", body = ErrorBody),
        (status = 503, description = "Applied, but commands routed the old way are still in flight.", body = ErrorBody),
    )
)]
async fn push_topology(
    State(a): State<Arc<ProxyAdmin>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<PushAck>, ApiError> {
    a.refuse_static("this proxy runs in static mode: its topology is fixed")?;
    let topo = topology_of(&headers, &body)?;
    a.apply(topo, true).await.map(Json)
}

/// A pushed topology, parsed by serde_json directly. axum's `Json` tracks the path of every
/// value it parses (for its error message), which was the larger part of a proxy's CPU per
/// push (profiled, issue 28); the path is worked out only for a body that does not parse.
fn topology_of(headers: &axum::http::HeaderMap, body: &[u8]) -> Result<Topology, ApiError> {
    let json = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|t| {
            t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
        });
    if !json {
        return Err(ApiError::bad_request(
            "Expected request with `Content-Type: application/json`",
        ));
    }
    match serde_json::from_slice(body) {
        Ok(topo) => Ok(topo),
        Err(_) => Json::<Topology>::from_bytes(body)
            .map(|Json(t)| t)
            .map_err(ApiError::from),
    }
}

/// The replicas this proxy may read from now
///
/// The read policy in force and each replica of the topology as this proxy's own probes last
/// proved it (docs/replica-reads.md).
#[utoipa::path(
    get,
    path = "/api/proxy/replicas",
    tag = "proxy",
    operation_id = "proxyReplicas",
    responses((status = 200, description = "The policy and the replicas.", body = ReplicasSeen))
)]
async fn replicas_seen(State(a): State<Arc<ProxyAdmin>>) -> Json<ReplicasSeen> {
    Json(a.shared.router.load().replicas_seen())
}

/// Whether this proxy reaches each master now
///
/// One fresh connection and PING to each master of the topology in force (only those: the
/// caller cannot make this proxy connect anywhere else), or of one group with `?group=N`,
/// within 500 ms each. Automatic failover's quorum asks it (docs/failover.md).
#[utoipa::path(
    get,
    path = "/api/proxy/masters",
    tag = "proxy",
    operation_id = "proxyMasters",
    params(MastersQuery),
    responses(
        (status = 200, description = "Each master and whether it answered.", body = MastersSeen),
        (status = 400, description = "A group that is not a number.", body = ErrorBody),
        (status = 409, description = "A static proxy takes part in no failover.", body = ErrorBody),
    )
)]
async fn masters_seen(
    State(a): State<Arc<ProxyAdmin>>,
    query: Result<Query<MastersQuery>, QueryRejection>,
) -> Result<Json<MastersSeen>, ApiError> {
    a.refuse_static("this proxy runs in static mode: it takes part in no failover")?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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

/// The plugins in force
#[utoipa::path(
    get,
    path = "/api/proxy/plugins",
    tag = "proxy",
    operation_id = "proxyPlugins",
    responses((status = 200, description = "The catalog version applied and the plugins it runs.", body = ProxyPlugins))
)]
async fn plugins_list(State(a): State<Arc<ProxyAdmin>>) -> Json<ProxyPlugins> {
    let p = &a.shared.plugins;
    Json(ProxyPlugins {
        catalog_version: p.catalog_version.load(Ordering::Relaxed),
        chain_version: p.chain().version,
        plugins: p.loaded(),
        last_error: p.last_error(),
    })
}

/// Load a catalog
///
/// The dashboard's push: the catalog's enabled plugins are loaded (modules read from the
/// store, cached) before the answer.
#[utoipa::path(
    put,
    path = "/api/proxy/plugins",
    tag = "proxy",
    operation_id = "pushPlugins",
    request_body = Catalog,
    responses(
        (status = 200, description = "Loaded.", body = CatalogApplied),
        (status = 400, description = "A malformed catalog, or one that does not load.", body = ErrorBody),
        (status = 409, description = "An older version than the one in force, or a static proxy.", body = ErrorBody),
        (status = 503, description = "A module could not be read from the store.", body = ErrorBody),
    )
)]
async fn plugins_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Body<Catalog>,
) -> Result<Json<CatalogApplied>, ApiError> {
    a.refuse_static(
        "this proxy runs in static mode: its plugins come from its command line or proxy.toml",
    )?;
    let Json(cat) = body?;
    apply_catalog(&a, &cat).await?;
    Ok(Json(CatalogApplied {
        catalog_version: cat.version,
        plugins: a.shared.plugins.loaded(),
    }))
}

/// A plugin's own metrics
#[utoipa::path(
    get,
    path = "/api/proxy/plugins/{name}/metrics",
    tag = "proxy",
    operation_id = "proxyPluginMetrics",
    params(("name" = String, Path, description = "The plugin's name.")),
    responses(
        (status = 200, description = "The plugin's samples in this proxy.", body = Vec<Sample>),
        (status = 404, description = "No plugin of that name is loaded.", body = ErrorBody),
    )
)]
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

/// The users table in force
///
/// Its version, where it came from, whether a fresh connection must AUTH, the entries without
/// their hashes, and why the last table offered was not applied.
#[utoipa::path(
    get,
    path = "/api/proxy/users",
    tag = "proxy",
    operation_id = "proxyUsers",
    responses((status = 200, description = "The table in force.", body = ProxyUsers))
)]
async fn users_list(State(a): State<Arc<ProxyAdmin>>) -> Json<ProxyUsers> {
    let users = a.shared.users.load();
    Json(ProxyUsers {
        version: users.version(),
        source: users.source(),
        auth_required: users.auth_required(),
        default_nopass: users.default_is_nopass(),
        users: users.views().to_vec(),
        last_error: a.users_error.lock().expect("users lock poisoned").clone(),
    })
}

/// This proxy's subscribers of some channels
///
/// For each name, the subscriptions this proxy's hubs hold on the servers and its clients'
/// (with `patterns`, those of the patterns each channel matches added): what another proxy
/// of the cluster needs to turn a server's `PUBLISH` or `PUBSUB NUMSUB` count into a count of
/// clients (docs/pubsub.md).
#[utoipa::path(
    post,
    path = "/api/proxy/pubsub/counts",
    tag = "proxy",
    operation_id = "proxyPubSubCounts",
    request_body = SubCountsQuery,
    responses(
        (status = 200, description = "The counts, in the order of the names.", body = SubCounts),
        (status = 400, description = "No names, more than 1024, or a name that is not hex.", body = ErrorBody),
    )
)]
async fn pubsub_counts(
    State(a): State<Arc<ProxyAdmin>>,
    body: Body<SubCountsQuery>,
) -> Result<Json<SubCounts>, ApiError> {
    let Json(q) = body?;
    if q.names_hex.is_empty() || q.names_hex.len() > MAX_COUNTED_NAMES {
        return Err(ApiError::bad_request(format!(
            "names_hex must hold 1 to {MAX_COUNTED_NAMES} names, got {}",
            q.names_hex.len()
        )));
    }
    let names = q
        .names_hex
        .iter()
        .map(|h| hex::decode(h).map(bytes::Bytes::from))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::bad_request(format!("a name is not hex: {e}")))?;
    let space = if q.shard {
        crate::pubsub::Space::Shard
    } else {
        crate::pubsub::Space::Channel
    };
    let counts = a.shared.sub_counts.of(space, &names, q.patterns);
    Ok(Json(SubCounts { counts }))
}

/// Apply a users table
///
/// The dashboard's push. One that does not compile is refused and the table in force stays
/// (`last_error` says why).
#[utoipa::path(
    put,
    path = "/api/proxy/users",
    tag = "proxy",
    operation_id = "pushUsers",
    request_body = UsersDoc,
    responses(
        (status = 200, description = "Applied.", body = VersionAck),
        (status = 400, description = "A malformed table, or one that does not compile.", body = ErrorBody),
        (status = 409, description = "An older version than the one in force, or a static proxy.", body = ErrorBody),
    )
)]
async fn users_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Body<UsersDoc>,
) -> Result<Json<VersionAck>, ApiError> {
    a.refuse_static("this proxy runs in static mode: its users come from proxy.toml")?;
    let Json(doc) = body?;
    let version = a.apply_users(&doc)?;
    Ok(Json(VersionAck { version }))
}

/// The proxy's command log
///
/// Its own log of one type, newest first, as SLOWLOG GET / COMMANDLOG GET answer it
/// (arguments that are not UTF-8 shown with U+FFFD; docs/commandlog.md).
#[utoipa::path(
    get,
    path = "/api/proxy/commandlog",
    tag = "proxy",
    operation_id = "proxyCommandLog",
    params(CommandLogQuery),
    responses(
        (status = 200, description = "The log.", body = ProxyLog),
        (status = 400, description = "An unknown type.", body = ErrorBody),
    )
)]
async fn command_log(
    State(a): State<Arc<ProxyAdmin>>,
    q: Result<Query<CommandLogQuery>, QueryRejection>,
) -> Result<Json<ProxyLog>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (log_type, count) = q.parse().map_err(ApiError::bad_request)?;
    let log = &a.shared.command_log;
    Ok(Json(ProxyLog {
        log_type,
        len: log.len(log_type),
        threshold: log.threshold(log_type),
        max_len: log.max_len(log_type),
        entries: log.get(log_type, count).iter().map(Into::into).collect(),
    }))
}

/// The proxy's mirror
///
/// Settings in force, counters by command, drops, and its last 32 mismatches
/// (docs/mirroring.md).
#[utoipa::path(
    get,
    path = "/api/proxy/mirror",
    tag = "proxy",
    operation_id = "proxyMirror",
    responses((status = 200, description = "The mirror.", body = ProxyMirror))
)]
async fn mirror_view(State(a): State<Arc<ProxyAdmin>>) -> Json<ProxyMirror> {
    let m = &a.shared.mirror;
    Json(ProxyMirror {
        token: a.token.clone(),
        version: m.version(),
        config: m.config().map(|c| c.view()),
        figures: m.stats.figures(),
        samples: m.stats.samples(),
    })
}

/// Apply a mirror document
///
/// The dashboard's push. A static proxy's mirror is proxy.toml's `[mirror]`.
#[utoipa::path(
    put,
    path = "/api/proxy/mirror",
    tag = "proxy",
    operation_id = "pushMirror",
    request_body = MirrorDoc,
    responses(
        (status = 200, description = "Applied.", body = VersionAck),
        (status = 400, description = "A malformed document, or invalid settings.", body = ErrorBody),
        (status = 409, description = "An older version than the one in force, or a static proxy.", body = ErrorBody),
    )
)]
async fn mirror_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Body<MirrorDoc>,
) -> Result<Json<VersionAck>, ApiError> {
    a.refuse_static("this proxy runs in static mode: its mirror comes from proxy.toml's [mirror]")?;
    let Json(doc) = body?;
    a.shared.mirror.apply(&doc).map_err(|e| {
        if e.contains("older") {
            ApiError::conflict(e)
        } else {
            ApiError::bad_request(e)
        }
    })?;
    Ok(Json(VersionAck {
        version: doc.version,
    }))
}

/// Where each routed prefix goes now
///
/// `target` is null when no proxy of that cluster answers; `error` says why
/// (docs/prefix-routes.md).
#[utoipa::path(
    get,
    path = "/api/proxy/routes",
    tag = "proxy",
    operation_id = "proxyRoutes",
    responses((status = 200, description = "Each prefix route and its target.", body = Vec<RouteStatus>))
)]
async fn routes_seen(State(a): State<Arc<ProxyAdmin>>) -> Json<Vec<RouteStatus>> {
    Json(a.shared.router.targets.statuses())
}
