//! The dashboard's mirror routes: the cluster-wide view and settings (docs/mirroring.md); a
//! proxy's own `/api/proxy/mirror` is in `proxy`.
//!
//! ```text
//! GET    /api/mirror         the cluster's settings, counters summed over proxies, samples
//! PUT    /api/mirror         {"target", "mode"?, "password"?, "max_queue"?, …}: mirror on
//! DELETE /api/mirror         mirror off
//! ```

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;

use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;
use tessera_wire::mirror::MirrorConfig;

type Body<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

// === dashboard ===

pub(super) fn dashboard_routes() -> Router<Arc<Dashboard>> {
    Router::new().route("/api/mirror", get(view).put(set).delete(off))
}

async fn view(State(d): State<Arc<Dashboard>>) -> Result<Json<Value>, ApiError> {
    d.mirror_view().await.map(Json)
}

async fn set(
    State(d): State<Arc<Dashboard>>,
    body: Body<MirrorConfig>,
) -> Result<Json<Value>, ApiError> {
    let Json(config) = body?;
    config.validate().map_err(ApiError::bad_request)?;
    d.set_mirror(Some(config)).await?;
    d.mirror_view().await.map(Json)
}

async fn off(State(d): State<Arc<Dashboard>>) -> Result<Json<Value>, ApiError> {
    d.set_mirror(None).await?;
    d.mirror_view().await.map(Json)
}
