//! Mirror routes: a proxy's own counters, samples and settings, the dashboard's push to it,
//! and the dashboard's cluster-wide view and settings (docs/mirroring.md).
//!
//! ```text
//! GET    /api/proxy/mirror   settings in force, counters by command, dropped, samples
//! PUT    /api/proxy/mirror   apply a mirror document (Bearer: the proxy secret)
//! GET    /api/mirror         the cluster's settings, counters summed over proxies, samples
//! PUT    /api/mirror         {"target", "mode"?, "password"?, "max_queue"?, …}: mirror on
//! DELETE /api/mirror         mirror off
//! ```

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::proxy::ProxyAdmin;
use crate::dashboard::Dashboard;
use crate::http_error::ApiError;
use crate::mirror::{MirrorConfig, MirrorDoc};

type Body<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

// === proxy ===

/// `GET /api/proxy/mirror`.
pub(super) async fn proxy_view(State(a): State<Arc<ProxyAdmin>>) -> Json<Value> {
    let m = &a.shared.mirror;
    Json(json!({
        "token": a.token,
        "version": m.version(),
        "config": m.config().map(|c| c.view()),
        "figures": m.stats.figures(),
        "samples": m.stats.samples(),
    }))
}

/// `PUT /api/proxy/mirror`: the dashboard's push.
pub(super) async fn proxy_apply(
    State(a): State<Arc<ProxyAdmin>>,
    body: Body<MirrorDoc>,
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
