//! The routes open to anyone: liveness, the Prometheus scrape and the API's own description.
//!
//! ```text
//! GET /health             ok
//! GET /metrics            Prometheus text: gauges only, no bodies, configs or tokens
//! GET /api/openapi.json   the OpenAPI document (docs/openapi.json is the same)
//! ```

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::dashboard::Dashboard;

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
}

/// Liveness
#[utoipa::path(
    get,
    path = "/health",
    tag = "meta",
    operation_id = "health",
    responses((status = 200, description = "The dashboard is serving.", body = String, content_type = "text/plain"))
)]
async fn health() -> &'static str {
    "ok"
}

/// Prometheus metrics
///
/// Gauges only (group and server health, the epoch, slot counts): no bodies, configs or
/// tokens, and no call to the proxies.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    operation_id = "metrics",
    responses((status = 200, description = "Prometheus text exposition format.", body = String, content_type = "text/plain"))
)]
async fn metrics(State(d): State<Arc<Dashboard>>) -> String {
    crate::dashboard::metrics::render(&d)
}

/// This document
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "meta",
    operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI 3.1 description of this API.", body = serde_json::Value))
)]
async fn openapi() -> impl IntoResponse {
    // Derived once: the document depends on the code only.
    static DOC: OnceLock<String> = OnceLock::new();
    let doc = DOC.get_or_init(|| tessera_http::openapi::to_json(&super::document()));
    ([(header::CONTENT_TYPE, "application/json")], doc.as_str())
}
