//! The dashboard's plugin catalog routes (the proxy's side of a catalog push is in `proxy.rs`).
//!
//! ```text
//! GET    /api/plugins                      the catalog (chain order)
//! PUT    /api/plugins/order                {"order": [names]}
//! PUT    /api/plugins/{name}/module        raw .wasm bytes
//! PUT    /api/plugins/{name}/config        {"config"?, "fail"?, "cpu_budget_ms"?, "memory_mb"?, "max_input_kb"?}
//! POST   /api/plugins/{name}/enable|disable
//! DELETE /api/plugins/{name}
//! GET    /api/plugins/{name}/metrics       samples summed over proxies
//! ```

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::dashboard::Dashboard;
use crate::dashboard::plugins::{ConfigChange, upload_slot};
use tessera_http::error::{ApiError, body_within, optional_json};
use tessera_wire::plugins::{Catalog, MAX_MODULE};

pub(super) fn dashboard_routes() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/api/plugins", get(list))
        .route("/api/plugins/order", put(order))
        // The handler reads the body itself, within MAX_MODULE, once it has the upload slot.
        .route(
            "/api/plugins/{name}/module",
            put(upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/api/plugins/{name}/config", put(configure))
        .route("/api/plugins/{name}/enable", post(enable))
        .route("/api/plugins/{name}/disable", post(disable))
        .route("/api/plugins/{name}", axum::routing::delete(remove))
        .route("/api/plugins/{name}/metrics", get(plugin_metrics))
}

async fn list(State(d): State<Arc<Dashboard>>) -> Result<Json<Value>, ApiError> {
    let cat = d.plugins().await?;
    let plugins: Vec<Value> = cat
        .plugins
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut v = serde_json::to_value(e).unwrap_or_default();
            v["order"] = json!(i);
            v
        })
        .collect();
    Ok(Json(Value::Array(plugins)))
}

/// One upload at a time (a 503 for another meanwhile), so at most one module's bytes are held
/// and compiled; the body is read only once the slot is taken, and at most [`MAX_MODULE`]
/// of it.
async fn upload(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Result<Json<Value>, ApiError> {
    let _slot = upload_slot()?;
    let what = format!("a plugin module ({} MiB)", MAX_MODULE >> 20);
    let body = body_within(body, MAX_MODULE, &what).await?;
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "empty body: send the .wasm file as the request body",
        ));
    }
    let e = d.upload_plugin(&name, body.to_vec()).await?;
    Ok(Json(serde_json::to_value(e).unwrap_or_default()))
}

async fn configure(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let change: ConfigChange = optional_json(&body)?.ok_or_else(|| {
        ApiError::bad_request("body must be {\"config\": …, \"fail\"?: \"open\"|\"closed\"}")
    })?;
    let e = d.configure_plugin(&name, change).await?;
    Ok(Json(serde_json::to_value(e).unwrap_or_default()))
}

async fn enable(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let e = d.enable_plugin(&name, true).await?;
    Ok(Json(serde_json::to_value(e).unwrap_or_default()))
}

async fn disable(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let e = d.enable_plugin(&name, false).await?;
    Ok(Json(serde_json::to_value(e).unwrap_or_default()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Order {
    order: Vec<String>,
}

async fn order(State(d): State<Arc<Dashboard>>, body: Bytes) -> Result<Json<Catalog>, ApiError> {
    let o: Order = optional_json(&body)?
        .ok_or_else(|| ApiError::bad_request("body must be {\"order\": [names]}"))?;
    Ok(Json(d.order_plugins(o.order).await?))
}

async fn remove(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    d.delete_plugin(&name).await?;
    Ok(Json(json!({})))
}

async fn plugin_metrics(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(d.plugin_metrics(&name).await?))
}
