//! The key prefix routes' HTTP (docs/prefix-routes.md): to `dashboard::routes`.
//!
//! ```text
//! GET /api/routes   {"routes": [{"prefix", "cluster", "user"}], "clusters": [...], "proxies": [...]}
//! PUT /api/routes   {"routes": [{"prefix", "cluster", "user"?, "password"?}]} → the same   (admin)
//! ```

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};

use crate::dashboard::Dashboard;
use crate::dashboard::routes::{RoutesChange, RoutesView};
use tessera_http::error::ApiError;

pub(super) fn routes() -> Router<Arc<Dashboard>> {
    Router::new().route("/api/routes", get(view).put(set))
}

async fn view(State(d): State<Arc<Dashboard>>) -> Result<Json<RoutesView>, ApiError> {
    d.prefix_routes_view().await.map(Json)
}

async fn set(
    State(d): State<Arc<Dashboard>>,
    body: Result<Json<RoutesChange>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<RoutesView>, ApiError> {
    let Json(change) = body?;
    d.set_prefix_routes(change).await.map(Json)
}
