//! The dashboard's REST API (docs/api.md; OpenAPI at /api/openapi.json). Handlers translate
//! HTTP to `Dashboard` operations and shape the replies; no logic of their own.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::dashboard::failover::{FailoverView, GroupStatus, SettingsChange};
use crate::dashboard::{Dashboard, ServerHealth};
use tessera_http::error::{ApiError, optional_json};
use tessera_model::router::GroupId;
use tessera_store::model::{ProxyState, SlotAction};
use tessera_wire::telemetry::ProxyStats;

type Body<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

pub fn router(d: Arc<Dashboard>) -> Router {
    let audit = d.audit_log();
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .route("/api/openapi.json", get(openapi))
        .route("/api/overview", get(overview))
        .route("/api/groups", get(groups).post(create_group))
        .route("/api/groups/{id}", delete(delete_group))
        .route("/api/groups/{id}/servers", post(add_server))
        .route("/api/groups/{id}/servers/{addr}", delete(remove_server))
        .route("/api/groups/{id}/promote", post(promote))
        .route("/api/failover", get(failover).put(set_failover))
        .route("/api/slots", get(slots))
        .route("/api/slots/assign", post(assign_slots))
        .route("/api/proxies", get(proxies))
        .route("/api/proxies/{token}/online", post(proxy_online))
        .route("/api/proxies/{token}/offline", post(proxy_offline))
        .route("/api/stats", get(stats))
        .route("/api/migrations", get(migrations).post(migrate))
        .route("/api/migrations/abort", post(abort))
        .route("/api/migrations/throttle", put(set_throttle))
        .route("/api/rebalance", post(rebalance))
        .route("/api/slots/stats", get(slot_stats))
        .route("/api/hotkeys", get(hotkeys))
        .route("/api/users", get(list_users))
        .route("/api/users/{name}", put(set_user).delete(delete_user))
        .route("/api/audit", super::audit::list_route(audit.clone()))
        .merge(super::plugins::dashboard_routes())
        .merge(super::commandlog::dashboard_routes())
        .merge(super::tokens::routes())
        .merge(super::mirror::dashboard_routes())
        .merge(super::read_policy::routes())
        .merge(super::routes::routes())
        .fallback(|| async { ApiError::not_found("no such route: see /api/openapi.json") })
        // Outermost first: the token (401 without a valid one), then the audit record (only
        // of calls that passed it, so strangers cannot flood the log), then the role (403,
        // recorded with the token that was refused). Which role each route needs: `access`.
        .layer(middleware::from_fn(super::tokens::permit))
        .layer(middleware::from_fn_with_state(
            audit.clone(),
            super::audit::record,
        ))
        .layer(middleware::from_fn_with_state(
            super::tokens::Gate::new(d.clone(), audit),
            super::tokens::authenticate,
        ))
        .with_state(d)
}

async fn openapi() -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
}

async fn metrics(State(d): State<Arc<Dashboard>>) -> String {
    crate::dashboard::metrics::render(&d)
}

fn parse_group(id: &str) -> Result<GroupId, ApiError> {
    id.parse::<u32>()
        .map(GroupId)
        .map_err(|_| ApiError::bad_request(format!("group id {id:?} is not a number")))
}

#[derive(Serialize)]
struct ServerView {
    addr: String,
    role: &'static str,
    #[serde(flatten)]
    health: ServerHealth,
    lag_bytes: Option<i64>,
}

#[derive(Serialize)]
struct GroupView {
    id: GroupId,
    slots: usize,
    down: bool,
    tls: bool,
    servers: Vec<ServerView>,
    /// While down: why automatic failover is not (yet) replacing the master.
    #[serde(skip_serializing_if = "Option::is_none")]
    failover: Option<GroupStatus>,
}

fn group_views(d: &Dashboard) -> Vec<GroupView> {
    let st = d.state.lock().expect("state lock poisoned");
    st.groups
        .values()
        .map(|g| {
            // The last known offset: a dead master's lag figures stay (failover uses them).
            let master_offset = g
                .master()
                .and_then(|m| st.servers.get(m))
                .and_then(|h| h.last_offset);
            GroupView {
                id: g.id,
                slots: st.slots.iter().filter(|s| s.group == Some(g.id)).count(),
                down: st.down.contains(&g.id),
                failover: d.failover.group_status(g.id),
                tls: g.tls,
                servers: g
                    .servers
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let health = st.servers.get(&s.addr).cloned().unwrap_or_default();
                        let lag = (i > 0)
                            .then(|| master_offset.zip(health.repl_offset).map(|(m, r)| m - r))
                            .flatten();
                        ServerView {
                            addr: s.addr.clone(),
                            role: if i == 0 { "master" } else { "replica" },
                            health,
                            lag_bytes: lag,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

async fn groups(State(d): State<Arc<Dashboard>>) -> Json<Vec<GroupView>> {
    Json(group_views(&d))
}

fn group_view(d: &Dashboard, id: GroupId) -> Result<Json<GroupView>, ApiError> {
    group_views(d)
        .into_iter()
        .find(|g| g.id == id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("group {id} does not exist")))
}

#[derive(Deserialize)]
struct CreateGroup {
    id: Option<u32>,
    /// The group's servers speak TLS only (docs/tls.md).
    #[serde(default)]
    tls: bool,
}

async fn create_group(
    State(d): State<Arc<Dashboard>>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b = optional_json::<CreateGroup>(&body)?;
    let (id, tls) = b.map_or((None, false), |b| (b.id, b.tls));
    let g = d.create_group(id, tls).await?;
    Ok((StatusCode::CREATED, group_view(&d, g.id)?).into_response())
}

async fn delete_group(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    d.delete_group(parse_group(&id)?).await?;
    Ok(Json(json!({})))
}

#[derive(Deserialize)]
struct ServerBody {
    addr: String,
    /// Adding a server with a password: a login of it that may create users (`user` defaults
    /// to `default`), used once to create the control plane's user, never stored.
    password: Option<String>,
    user: Option<String>,
}

async fn add_server(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    body: Body<ServerBody>,
) -> Result<Json<GroupView>, ApiError> {
    let Json(b) = body?;
    let login = b
        .password
        .map(|password| tessera_model::redis_client::Credential {
            user: b.user.unwrap_or_else(|| "default".into()),
            password,
        });
    let g = d
        .add_server(parse_group(&id)?, &b.addr, login.as_ref())
        .await?;
    group_view(&d, g.id)
}

async fn remove_server(
    State(d): State<Arc<Dashboard>>,
    Path((id, addr)): Path<(String, String)>,
) -> Result<Json<GroupView>, ApiError> {
    let g = d.remove_server(parse_group(&id)?, &addr).await?;
    group_view(&d, g.id)
}

async fn promote(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    body: Body<ServerBody>,
) -> Result<Json<GroupView>, ApiError> {
    let Json(b) = body?;
    let g = d.promote(parse_group(&id)?, &b.addr).await?;
    group_view(&d, g.id)
}

async fn failover(State(d): State<Arc<Dashboard>>) -> Json<FailoverView> {
    Json(d.failover_view())
}

async fn set_failover(
    State(d): State<Arc<Dashboard>>,
    body: Body<SettingsChange>,
) -> Result<Json<FailoverView>, ApiError> {
    let Json(change) = body?;
    d.set_failover(change).await.map(Json)
}

#[derive(Serialize)]
struct SlotView {
    id: u16,
    group: Option<GroupId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<SlotAction>,
}

async fn slots(State(d): State<Arc<Dashboard>>) -> Json<Vec<SlotView>> {
    let st = d.state.lock().expect("state lock poisoned");
    Json(
        st.slots
            .iter()
            .map(|s| SlotView {
                id: s.id,
                group: s.group,
                action: s.action.clone(),
            })
            .collect(),
    )
}

#[derive(Deserialize)]
struct AssignBody {
    from: u32,
    to: u32,
    group: u32,
}

async fn assign_slots(
    State(d): State<Arc<Dashboard>>,
    body: Body<AssignBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    let (epoch, assigned) = d.assign_slots(b.from, b.to, GroupId(b.group)).await?;
    Ok(Json(json!({"epoch": epoch, "assigned": assigned})))
}

#[derive(Serialize)]
struct ProxyView {
    token: String,
    addr: String,
    admin_addr: String,
    pid: u32,
    host: String,
    start_unix: u64,
    state: ProxyState,
    up: bool,
    epoch: Option<u64>,
    version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

async fn proxy_views(d: &Dashboard) -> Result<Vec<ProxyView>, ApiError> {
    let proxies = d.registered_proxies().await?;
    let st = d.state.lock().expect("state lock poisoned");
    Ok(proxies
        .into_iter()
        .map(|p| {
            let h = st.proxies.get(&p.token).cloned().unwrap_or_default();
            let state = if st.offline.contains(&p.token) {
                ProxyState::Offline
            } else {
                ProxyState::Online
            };
            ProxyView {
                state,
                up: h.up,
                epoch: h.epoch,
                error: h.error,
                token: p.token,
                addr: p.addr,
                admin_addr: p.admin_addr,
                pid: p.pid,
                host: p.host,
                start_unix: p.start_unix,
                version: p.version,
            }
        })
        .collect())
}

async fn proxies(State(d): State<Arc<Dashboard>>) -> Result<Json<Vec<ProxyView>>, ApiError> {
    proxy_views(&d).await.map(Json)
}

async fn set_online(d: &Dashboard, token: &str, online: bool) -> Result<Json<ProxyView>, ApiError> {
    d.set_proxy_online(token, online).await?;
    proxy_views(d)
        .await?
        .into_iter()
        .find(|p| p.token == token)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("proxy {token} went away")))
}

async fn proxy_online(
    State(d): State<Arc<Dashboard>>,
    Path(token): Path<String>,
) -> Result<Json<ProxyView>, ApiError> {
    set_online(&d, &token, true).await
}

async fn proxy_offline(
    State(d): State<Arc<Dashboard>>,
    Path(token): Path<String>,
) -> Result<Json<ProxyView>, ApiError> {
    set_online(&d, &token, false).await
}

/// Stats of every proxy and their sums: fetched at most once a second, and by one request at
/// a time, the others waiting for its answer (`dashboard::cache`).
pub async fn cached_stats(d: &Dashboard) -> Result<Value, ApiError> {
    d.stats.get_or_fetch(|| collect_stats(d)).await
}

/// Stats of every proxy, fetched now, and their sums.
async fn collect_stats(d: &Dashboard) -> Result<Value, ApiError> {
    let proxies = d.registered_proxies().await?;
    let fetched = join_all(proxies.iter().map(|p| async move {
        let r = d
            .proxy_call(reqwest::Method::GET, &p.admin_addr, "/api/proxy/stats")
            .timeout(std::time::Duration::from_secs(1))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        r.json::<ProxyStats>().await.map_err(|e| e.to_string())
    }))
    .await;
    let (mut ops_per_sec, mut ops_total, mut errors_total, mut sessions) = (0, 0, 0, 0);
    let mut commands: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let mut per_proxy = Vec::new();
    for (p, r) in proxies.iter().zip(fetched) {
        match r {
            Ok(s) => {
                ops_per_sec += s.ops_per_sec;
                ops_total += s.ops_total;
                errors_total += s.errors_total;
                sessions += s.sessions;
                for c in &s.commands {
                    let e = commands.entry(c.command.clone()).or_default();
                    e.0 += c.calls;
                    e.1 += c.errors;
                }
                per_proxy.push(serde_json::to_value(&s).expect("stats serialize"));
            }
            Err(e) => per_proxy.push(json!({"token": p.token, "error": e})),
        }
    }
    let mut commands: Vec<Value> = commands
        .into_iter()
        .map(|(c, (calls, errors))| json!({"command": c, "calls": calls, "errors": errors}))
        .collect();
    commands.sort_by(|a, b| b["calls"].as_u64().cmp(&a["calls"].as_u64()));
    Ok(json!({
        "ops_per_sec": ops_per_sec,
        "ops_total": ops_total,
        "errors_total": errors_total,
        "sessions": sessions,
        "commands": commands,
        "proxies": per_proxy,
    }))
}

async fn stats(State(d): State<Arc<Dashboard>>) -> Result<Json<Value>, ApiError> {
    cached_stats(&d).await.map(Json)
}

async fn overview(State(d): State<Arc<Dashboard>>) -> Result<Json<Value>, ApiError> {
    let stats = cached_stats(&d).await?;
    let proxies = proxy_views(&d).await?;
    let epoch = *d.ops.lock().await;
    let failover = d.failover_view();
    let st = d.state.lock().expect("state lock poisoned");
    let servers: Vec<&ServerHealth> = st.servers.values().collect();
    let info = d.info();
    Ok(Json(json!({
        "cluster": d.cluster,
        "epoch": epoch,
        "dashboard": {
            "admin_addr": info.admin_addr,
            "pid": std::process::id(),
            "host": tessera_store::hostname(),
            "version": info.version,
            "start_unix": info.start_unix,
        },
        "groups": st.groups.len(),
        "groups_down": st.down.len(),
        "failover": {
            "enabled": failover.settings.enabled,
            "max_lag_bytes": failover.settings.max_lag_bytes,
            "not_failing_over": failover.groups,
            "last": failover.events.first(),
        },
        "servers": st.groups.values().map(|g| g.servers.len()).sum::<usize>(),
        "servers_down": servers.iter().filter(|h| !h.up).count(),
        "proxies": proxies.len(),
        "proxies_online": proxies.iter().filter(|p| p.state == ProxyState::Online && p.up).count(),
        "slots_assigned": st.slots.iter().filter(|s| s.group.is_some()).count(),
        "slots_unassigned": st.slots.iter().filter(|s| s.group.is_none()).count(),
        "ops_per_sec": stats["ops_per_sec"],
        "routes": d.prefix_routes().iter().map(|r| json!({"prefix": r.prefix, "cluster": r.cluster})).collect::<Vec<_>>(),
        "memory_bytes": st.groups.values().filter_map(|g| g.master().and_then(|m| st.servers.get(m)).and_then(|h| h.memory_bytes)).sum::<u64>(),
        "keys": st.groups.values().filter_map(|g| g.master().and_then(|m| st.servers.get(m)).and_then(|h| h.keys)).sum::<u64>(),
    })))
}

async fn migrations(State(d): State<Arc<Dashboard>>) -> Json<crate::dashboard::MigrationStatus> {
    Json(d.migration_status())
}

#[derive(Deserialize)]
struct MigrateBody {
    from: u32,
    to: u32,
    group: u32,
    max_keys_per_sec: Option<u64>,
    max_mb_per_sec: Option<f64>,
}

/// A migration's speed cap; an absent or null field is no cap.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ThrottleBody {
    max_keys_per_sec: Option<u64>,
    max_mb_per_sec: Option<f64>,
}

impl ThrottleBody {
    fn limits(&self) -> Result<crate::migrate::throttle::Limits, ApiError> {
        if self.max_keys_per_sec == Some(0) {
            return Err(ApiError::bad_request(
                "max_keys_per_sec must be at least 1 (leave it out for no cap)",
            ));
        }
        let bytes = match self.max_mb_per_sec {
            None => None,
            Some(mb) if mb.is_finite() && mb > 0.0 && mb <= 1_000_000.0 => {
                Some((mb * 1024.0 * 1024.0) as u64)
            }
            Some(mb) => {
                return Err(ApiError::bad_request(format!(
                    "max_mb_per_sec must be above 0 and at most 1000000, not {mb}"
                )));
            }
        };
        Ok(crate::migrate::throttle::Limits {
            max_keys_per_sec: self.max_keys_per_sec,
            max_bytes_per_sec: bytes,
        })
    }
}

async fn migrate(
    State(d): State<Arc<Dashboard>>,
    body: Body<MigrateBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    let limits = ThrottleBody {
        max_keys_per_sec: b.max_keys_per_sec,
        max_mb_per_sec: b.max_mb_per_sec,
    }
    .limits()?;
    let queued = d.migrate_slots(b.from, b.to, GroupId(b.group)).await?;
    if !limits.is_none() {
        d.set_migration_throttle(limits).await?;
    }
    Ok(Json(json!({"queued": queued, "throttle": limits})))
}

async fn set_throttle(
    State(d): State<Arc<Dashboard>>,
    body: Body<ThrottleBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    let limits = b.limits()?;
    d.set_migration_throttle(limits).await?;
    Ok(Json(json!({"throttle": limits})))
}

#[derive(Deserialize, Default)]
struct AbortBody {
    /// Slots to abort; all when absent.
    slots: Option<Vec<u16>>,
}

async fn abort(
    State(d): State<Arc<Dashboard>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: AbortBody = optional_json(&body)?.unwrap_or_default();
    let aborted = d
        .abort_migrations(b.slots.map(|s| s.into_iter().collect()))
        .await?;
    Ok(Json(json!({"aborted": aborted})))
}

#[derive(Deserialize, Default)]
struct RebalanceBody {
    #[serde(default)]
    dry_run: bool,
    /// What to even out; absent: `weight` when weights are given, else `slots`.
    by: Option<crate::dashboard::RebalanceBy>,
    /// Group id → weight; an even split by slot count when absent.
    weights: Option<std::collections::BTreeMap<u32, u32>>,
    /// Load and memory: how far from the mean a group may stay, in percent (default 10).
    tolerance: Option<f64>,
    /// Moves planned earlier (a dry run's), queued as they are instead of planning again.
    moves: Option<Vec<crate::migrate::plan::Move>>,
}

async fn rebalance(
    State(d): State<Arc<Dashboard>>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    use crate::dashboard::RebalanceBy;
    let b: RebalanceBody = optional_json(&body)?.unwrap_or_default();
    if let Some(moves) = b.moves {
        if b.dry_run {
            return Err(ApiError::bad_request(
                "planned moves are queued, not planned",
            ));
        }
        d.queue_planned(&moves).await?;
        return Ok(Json(
            json!({"dry_run": false, "by": b.by, "moves": moves, "slots": moves.len()}),
        ));
    }
    let by = b.by.unwrap_or(if b.weights.is_some() {
        RebalanceBy::Weight
    } else {
        RebalanceBy::Slots
    });
    let tolerance = b.tolerance.unwrap_or(10.0);
    if !(0.0..=100.0).contains(&tolerance) {
        return Err(ApiError::bad_request(
            "tolerance is a percent of the mean, 0 to 100",
        ));
    }
    let weights = b
        .weights
        .map(|w| w.into_iter().map(|(g, w)| (GroupId(g), w)).collect());
    let plan = d
        .rebalance(by, weights, tolerance / 100.0, b.dry_run)
        .await?;
    let mut v = serde_json::to_value(&plan).expect("a plan serializes");
    v["dry_run"] = json!(b.dry_run);
    v["slots"] = json!(plan.moves.len());
    if let Some(t) = plan.tolerance {
        v["tolerance"] = json!(t * 100.0);
    }
    Ok(Json(v))
}

/// Per-slot ops/s, bytes/s, keys and memory, and per-group totals (`docs/api.md`).
async fn slot_stats(State(d): State<Arc<Dashboard>>) -> Json<crate::dashboard::SlotStatsView> {
    Json(d.slot_stats())
}

/// Every online proxy's hot keys, merged per key (`docs/hotkeys.md`).
async fn hotkeys(
    State(d): State<Arc<Dashboard>>,
    query: Result<
        axum::extract::Query<tessera_wire::telemetry::HotKeysQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<crate::dashboard::ClusterHotKeys>, ApiError> {
    let axum::extract::Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(Json(
        d.hotkeys(q.limit().map_err(ApiError::bad_request)?).await,
    ))
}

// === users ===

/// A user change is a few fields; anything bigger is not one.
const MAX_USER_BODY: usize = 16 * 1024;

async fn list_users(
    State(d): State<Arc<Dashboard>>,
) -> Result<Json<Vec<tessera_model::users::UserView>>, ApiError> {
    d.list_users().await.map(Json)
}

async fn set_user(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<tessera_model::users::UserView>, ApiError> {
    let body = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if body.len() > MAX_USER_BODY {
        return Err(ApiError::bad_request(format!(
            "a body of {} bytes is not a user change (at most {MAX_USER_BODY})",
            body.len()
        )));
    }
    let change: crate::dashboard::users::UserChange = optional_json(&body)?.ok_or_else(|| {
        ApiError::bad_request(
            "body must be {\"password\"?, \"commands\"?: [classes], \"key_prefix\"?, \"enabled\"?}",
        )
    })?;
    d.set_user(&name, change).await.map(Json)
}

async fn delete_user(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    d.delete_user(&name).await?;
    Ok(Json(json!({})))
}
