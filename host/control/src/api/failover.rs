//! Automatic failover's and the read policy's routes (docs/failover.md,
//! docs/replica-reads.md): HTTP to `dashboard::failover` and `dashboard::read_policy`.
//!
//! ```text
//! GET /api/failover      settings, down groups not failing over and why, recent failovers
//! PUT /api/failover      {"enabled"?, "max_lag_bytes"?, …} → the same             (admin)
//! GET /api/read-policy   {"policy": {"mode", "max_lag_ms"}, "replicas": [...]}
//! PUT /api/read-policy   {"mode"?, "max_lag_ms"?} → the same                      (admin)
//! ```

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Body;
use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;
use tessera_wire::error::ErrorBody;
use tessera_wire::failover::{FailoverChange, FailoverView};
use tessera_wire::read_policy::{ReadPolicyChange, ReadPolicyView};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(failover, set_failover))
        .routes(routes!(read_policy, set_read_policy))
}

/// Automatic failover
///
/// Its settings, why down groups are not failing over, a promotion decided and not yet
/// completed, servers waiting to rejoin as replicas, and recent failovers (newest first, the
/// last 20).
#[utoipa::path(
    get,
    path = "/api/failover",
    tag = "failover",
    operation_id = "getFailover",
    responses((status = 200, description = "Settings, down groups not failing over and why, recent failovers.", body = FailoverView))
)]
async fn failover(State(d): State<Arc<Dashboard>>) -> Json<FailoverView> {
    Json(d.failover_view())
}

/// Change automatic failover's settings
///
/// The fields given are set; persisted in the cluster's failover document.
#[utoipa::path(
    put,
    path = "/api/failover",
    tag = "failover",
    operation_id = "setFailover",
    request_body = FailoverChange,
    responses(
        (status = 200, description = "Settings, down groups not failing over and why, recent failovers.", body = FailoverView),
        (status = 400, description = "An unknown field, or a value out of range.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn set_failover(
    State(d): State<Arc<Dashboard>>,
    body: Body<FailoverChange>,
) -> Result<Json<FailoverView>, ApiError> {
    let Json(change) = body?;
    Ok(Json(d.set_failover(change).await?))
}

/// Read policy: where read-only commands go
///
/// The policy, and each replica: bytes behind its master as the dashboard's health checks
/// last saw it, and how fresh the proxies' own probes proved it, in ms like the policy's
/// bound (docs/replica-reads.md). Every registered proxy is asked; one that does not answer
/// within 2 s is listed as unreachable.
#[utoipa::path(
    get,
    path = "/api/read-policy",
    tag = "failover",
    operation_id = "getReadPolicy",
    responses(
        (status = 200, description = "The read policy and each replica as the health checks and the proxies last saw it.", body = ReadPolicyView),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn read_policy(State(d): State<Arc<Dashboard>>) -> Result<Json<ReadPolicyView>, ApiError> {
    Ok(Json(d.read_policy_view().await?))
}

/// Change the read policy
///
/// The fields given are set. Persisted in the cluster's read-policy document, then pushed to
/// every online proxy with the next topology epoch (the call returns once all have
/// acknowledged it).
#[utoipa::path(
    put,
    path = "/api/read-policy",
    tag = "failover",
    operation_id = "setReadPolicy",
    request_body = ReadPolicyChange,
    responses(
        (status = 200, description = "The read policy and each replica as the health checks and the proxies last saw it.", body = ReadPolicyView),
        (status = 400, description = "An unknown field or mode, or `max_lag_ms` outside 200-3600000.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge the new topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn set_read_policy(
    State(d): State<Arc<Dashboard>>,
    body: Body<ReadPolicyChange>,
) -> Result<Json<ReadPolicyView>, ApiError> {
    let Json(change) = body?;
    Ok(Json(d.set_read_policy(change).await?))
}
