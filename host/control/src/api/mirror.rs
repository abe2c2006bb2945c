//! The dashboard's mirror routes: the cluster-wide view and settings (docs/mirroring.md); a
//! proxy's own `/api/proxy/mirror` is in `tessera_proxy::admin`.
//!
//! ```text
//! GET    /api/mirror         the cluster's settings, counters summed over proxies, samples
//! PUT    /api/mirror         {"target", "mode"?, "password"?, "max_queue"?, …}: mirror on
//! DELETE /api/mirror         mirror off
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
use tessera_wire::mirror::{MirrorConfig, MirrorView};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new().routes(routes!(view, set, off))
}

/// Mirroring to a shadow target
///
/// The settings in force, every registered proxy's counters summed (sent, compared,
/// mismatched by command, dropped by reason, shadow errors, queue now) and each proxy's
/// state, and the newest mismatch samples of all proxies. Asks every registered proxy (5 s
/// limit each); one not reached is listed with its error.
#[utoipa::path(
    get,
    path = "/api/mirror",
    tag = "mirror",
    operation_id = "getMirror",
    responses(
        (status = 200, description = "The cluster's mirror settings, counters summed over the proxies, and the latest mismatches.", body = MirrorView),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn view(State(d): State<Arc<Dashboard>>) -> Result<Json<MirrorView>, ApiError> {
    Ok(Json(d.mirror_view().await?))
}

/// Mirror to a shadow target
///
/// Replaces the settings (all but `target` optional), persists them in the cluster's mirror
/// document with the next version and pushes them to every online proxy.
#[utoipa::path(
    put,
    path = "/api/mirror",
    tag = "mirror",
    operation_id = "setMirror",
    request_body = MirrorConfig,
    responses(
        (status = 200, description = "The cluster's mirror settings, counters summed over the proxies, and the latest mismatches.", body = MirrorView),
        (status = 400, description = "An unknown field or a value out of range.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge it.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn set(
    State(d): State<Arc<Dashboard>>,
    body: Body<MirrorConfig>,
) -> Result<Json<MirrorView>, ApiError> {
    let Json(config) = body?;
    config.validate().map_err(ApiError::bad_request)?;
    d.set_mirror(Some(config)).await?;
    Ok(Json(d.mirror_view().await?))
}

/// Stop mirroring
///
/// Persisted and pushed like a change; counters are kept.
#[utoipa::path(
    delete,
    path = "/api/mirror",
    tag = "mirror",
    operation_id = "deleteMirror",
    responses(
        (status = 200, description = "The cluster's mirror settings, counters summed over the proxies, and the latest mismatches.", body = MirrorView),
        (status = 502, description = "Saved, but some proxies did not acknowledge it.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn off(State(d): State<Arc<Dashboard>>) -> Result<Json<MirrorView>, ApiError> {
    d.set_mirror(None).await?;
    Ok(Json(d.mirror_view().await?))
}
