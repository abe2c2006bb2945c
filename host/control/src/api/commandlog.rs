//! What the proxies measure, merged over the cluster: the command log (`dashboard::commandlog`)
//! and the hot keys (`dashboard::hotkeys`). Their queries are the same as a proxy's own
//! routes' (`tessera_wire::telemetry`).
//!
//! ```text
//! GET /api/commandlog?type=slow|large-request|large-reply[&count=N]   (operator)
//! GET /api/hotkeys?limit=N
//! ```

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;
use tessera_wire::error::ErrorBody;
use tessera_wire::telemetry::{ClusterHotKeys, ClusterLog, CommandLogQuery, HotKeysQuery};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(cluster_log))
        .routes(routes!(hotkeys))
}

/// The cluster's command log (slow, large-request, large-reply)
///
/// Every registered proxy's SLOWLOG/COMMANDLOG of one type, merged newest first (by time,
/// then id); each entry names its proxy, and proxies that did not answer are listed. The
/// operator role: entries hold clients' keys and values. See docs/commandlog.md.
#[utoipa::path(
    get,
    path = "/api/commandlog",
    tag = "proxies",
    operation_id = "commandLog",
    params(CommandLogQuery),
    responses(
        (status = 200, description = "The merged log.", body = ClusterLog),
        (status = 400, description = "An unknown type.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn cluster_log(
    State(d): State<Arc<Dashboard>>,
    q: Result<Query<CommandLogQuery>, QueryRejection>,
) -> Result<Json<ClusterLog>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (log_type, count) = q.parse().map_err(ApiError::bad_request)?;
    Ok(Json(d.command_log(log_type, count).await?))
}

/// The cluster's hot keys
///
/// Every online proxy's top keys by operations and by bytes over its recent window (a
/// Count-Min sketch per worker thread, sliding sub-windows; docs/hotkeys.md), summed per key,
/// with the proxies that saw each key. Keys are shown at most `max_key_bytes` long, bytes
/// outside printable ASCII as `\xHH`. `hot_cache` sums the proxies' hot-key caches: hits,
/// misses, fills and invalidations since each proxy started, entries and bytes now.
#[utoipa::path(
    get,
    path = "/api/hotkeys",
    tag = "slots",
    operation_id = "hotKeys",
    params(HotKeysQuery),
    responses(
        (status = 200, description = "The merged rankings.", body = ClusterHotKeys),
        (status = 400, description = "A limit outside 1-1000, or an unknown parameter.", body = ErrorBody),
    )
)]
async fn hotkeys(
    State(d): State<Arc<Dashboard>>,
    q: Result<Query<HotKeysQuery>, QueryRejection>,
) -> Result<Json<ClusterHotKeys>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(Json(
        d.hotkeys(q.limit().map_err(ApiError::bad_request)?).await,
    ))
}
