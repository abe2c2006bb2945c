//! Plugin routes: the dashboard's catalog API and the proxy's side of the catalog push.
//!
//! ```text
//! dashboard: GET    /api/plugins                      the catalog (chain order)
//!            PUT    /api/plugins/order                {"order": [names]}
//!            PUT    /api/plugins/{name}/module        raw .wasm bytes
//!            PUT    /api/plugins/{name}/config        {"config"?, "fail"?, "cpu_budget_ms"?, "memory_mb"?}
//!            POST   /api/plugins/{name}/enable|disable
//!            DELETE /api/plugins/{name}
//!            GET    /api/plugins/{name}/metrics       samples summed over proxies
//! proxy:     GET    /api/proxy/plugins                plugins in force
//!            PUT    /api/proxy/plugins                load a catalog (Bearer: proxy secret)
//!            GET    /api/proxy/plugins/{name}/metrics samples
//! ```

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{ApiError, bearer_matches, optional_json};
use super::proxy::ProxyAdmin;
use crate::dashboard::Dashboard;
use crate::dashboard::plugins::{ConfigChange, Sample};
use crate::plugins::catalog::{Catalog, MAX_MODULE};

pub(super) fn dashboard_routes() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/api/plugins", get(list))
        .route("/api/plugins/order", put(order))
        .route(
            "/api/plugins/{name}/module",
            put(upload).layer(DefaultBodyLimit::max(MAX_MODULE + 1024)),
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

async fn upload(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
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

// === proxy side ===

pub(super) fn proxy_routes() -> Router<Arc<ProxyAdmin>> {
    Router::new()
        .route("/api/proxy/plugins", get(proxy_list).put(proxy_apply))
        .route("/api/proxy/plugins/{name}/metrics", get(proxy_samples))
}

async fn proxy_list(State(a): State<Arc<ProxyAdmin>>) -> Json<Value> {
    let p = &a.shared.plugins;
    Json(json!({
        "catalog_version": p.catalog_version.load(Ordering::Relaxed),
        "chain_version": p.chain().version,
        "plugins": p.loaded(),
        "last_error": p.last_error(),
    }))
}

async fn proxy_apply(
    State(a): State<Arc<ProxyAdmin>>,
    headers: HeaderMap,
    body: Result<Json<Catalog>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    match &a.secret_sha256 {
        Some(h) if bearer_matches(&headers, h) => {}
        Some(_) => return Err(ApiError::unauthorized()),
        None => {
            return Err(ApiError::conflict(
                "this proxy runs in static mode: its plugins come from its command line or proxy.toml",
            ));
        }
    }
    let Json(cat) = body?;
    apply_catalog(&a, &cat).await?;
    Ok(Json(json!({
        "catalog_version": cat.version,
        "plugins": a.shared.plugins.loaded(),
    })))
}

/// Loads a catalog's enabled plugins into this proxy (modules from the store, cached).
///
/// # Errors
/// 409 for a catalog older than the one in force, 400 for one that does not load.
pub async fn apply_catalog(a: &ProxyAdmin, cat: &Catalog) -> Result<(), ApiError> {
    let plugins = &a.shared.plugins;
    let current = plugins.catalog_version.load(Ordering::Relaxed);
    if cat.version < current {
        return Err(ApiError::conflict(format!(
            "catalog version {} is older than the one in force ({current})",
            cat.version
        )));
    }
    let Some((store, paths)) = a.catalog_source.get() else {
        return Err(ApiError::conflict(
            "this proxy has no store to read plugin modules from",
        ));
    };
    let specs = a
        .blobs
        .specs(&**store, paths, cat)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    plugins.apply(specs).await.map_err(ApiError::bad_request)?;
    plugins
        .catalog_version
        .fetch_max(cat.version, Ordering::Relaxed);
    Ok(())
}

async fn proxy_samples(
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
