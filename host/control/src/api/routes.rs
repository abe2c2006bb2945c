//! The key prefix routes' HTTP (docs/prefix-routes.md): to `dashboard::routes`.
//!
//! ```text
//! GET /api/routes   {"routes": [{"prefix", "cluster", "user"}], "clusters": [...], "proxies": [...]}
//! PUT /api/routes   {"routes": [{"prefix", "cluster", "user"?, "password"?}]} → the same   (admin)
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
use tessera_wire::routes::{RoutesChange, RoutesView};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new().routes(routes!(view, set))
}

/// Key prefixes routed to other clusters
///
/// The routes (never a password), the other clusters of the store, and where each proxy
/// forwards each prefix now.
#[utoipa::path(
    get,
    path = "/api/routes",
    tag = "routes",
    operation_id = "getRoutes",
    responses(
        (status = 200, description = "The routes, the other clusters of the store, and where each proxy forwards each prefix now.", body = RoutesView),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn view(State(d): State<Arc<Dashboard>>) -> Result<Json<RoutesView>, ApiError> {
    Ok(Json(d.prefix_routes_view().await?))
}

/// Replace the key prefix routes
///
/// The whole list. A `user` without `password` keeps the password stored for that prefix and
/// user. Persisted in the cluster's routes document, then pushed to every online proxy with
/// the next topology epoch (the call returns once all have acknowledged it).
#[utoipa::path(
    put,
    path = "/api/routes",
    tag = "routes",
    operation_id = "setRoutes",
    request_body = RoutesChange,
    responses(
        (status = 200, description = "The routes, the other clusters of the store, and where each proxy forwards each prefix now.", body = RoutesView),
        (status = 400, description = "More than 32 routes; an empty, over-long or repeated prefix, or one that takes `__tessera:` along; a cluster not in the store, or this one; a password without a user.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge the new topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn set(
    State(d): State<Arc<Dashboard>>,
    body: Body<RoutesChange>,
) -> Result<Json<RoutesView>, ApiError> {
    let Json(change) = body?;
    Ok(Json(d.set_prefix_routes(change).await?))
}
