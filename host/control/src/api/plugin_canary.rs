//! The dashboard's plugin canary routes (`dashboard::plugin_canary`): a candidate version of a
//! plugin run by a share of the proxies first, then promoted or rolled back.
//!
//! ```text
//! PUT    /api/plugins/{name}/canary/module     raw .wasm bytes: the candidate's module
//! POST   /api/plugins/{name}/canary            {"config"?, "fail"?, limits?, "percent"?, "proxies"?}
//! POST   /api/plugins/{name}/canary/promote
//! POST   /api/plugins/{name}/canary/rollback
//! ```
//! A plugin's metrics by track are in `GET /api/plugins/{name}/metrics` (`tracks`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, State};
use bytes::Bytes;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::dashboard::Dashboard;
use crate::dashboard::plugins::upload_slot;
use tessera_http::error::{ApiError, optional_json};
use tessera_wire::error::ErrorBody;
use tessera_wire::plugin_canary::{CanaryStart, MAX_CANARY_BODY};
use tessera_wire::plugins::PluginEntry;

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        // The handler reads the body itself, within MAX_MODULE, once it has the upload slot.
        .routes(routes!(upload_module).layer(DefaultBodyLimit::disable()))
        .routes(routes!(start).layer(DefaultBodyLimit::max(MAX_CANARY_BODY)))
        .routes(routes!(promote))
        .routes(routes!(rollback))
}

/// Upload a canary module
///
/// The candidate's `.wasm` file as the raw body (at most 8 MiB; one upload at a time, shared
/// with plugin uploads). It is checked and probed with the candidate's config; the stable
/// version is unchanged. It replaces a running canary's module (share and config kept), or
/// starts a canary with the stable version's settings on no proxy yet: give it a share with
/// `POST /api/plugins/{name}/canary`.
#[utoipa::path(
    put,
    path = "/api/plugins/{name}/canary/module",
    tag = "plugins",
    operation_id = "uploadCanaryModule",
    params(("name" = String, Path, description = "Plugin name.")),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "The candidate module."),
    responses(
        (status = 200, description = "The plugin's entry, with its `canary`.", body = PluginEntry),
        (status = 400, description = "An empty body, or a module that is not a Tessera plugin or whose init refuses the config.", body = ErrorBody),
        (status = 404, description = "No such plugin: upload it first.", body = ErrorBody),
        (status = 413, description = "A module over 8 MiB.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable, or another upload is being read or checked.", body = ErrorBody),
    )
)]
async fn upload_module(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Result<Json<PluginEntry>, ApiError> {
    let _slot = upload_slot()?;
    let module = super::plugins::module_body(body, "the candidate .wasm file").await?;
    Ok(Json(d.upload_canary_module(&name, module).await?))
}

/// Start or change a canary
///
/// The candidate's config, fail policy and limits (left out: the running canary's, or the
/// stable version's), and its share: `percent` of the proxies (0–100, by a stable hash of
/// each proxy's client address) and/or `proxies`, client addresses (at most 256). The
/// candidate is probed first; then every online proxy loads the catalog, the selected ones
/// running the candidate, before the call returns.
#[utoipa::path(
    post,
    path = "/api/plugins/{name}/canary",
    tag = "plugins",
    operation_id = "startCanary",
    params(("name" = String, Path, description = "Plugin name.")),
    request_body = CanaryStart,
    responses(
        (status = 200, description = "The plugin's entry, with its `canary`.", body = PluginEntry),
        (status = 400, description = "No body, an unknown field, a share out of bounds, a bad fail policy, or a candidate the plugin refuses.", body = ErrorBody),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 409, description = "The catalog document would pass 1 MiB.", body = ErrorBody),
        (status = 413, description = "A body over 256 KiB.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn start(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<PluginEntry>, ApiError> {
    let start: CanaryStart = optional_json(&body)?.ok_or_else(|| {
        ApiError::bad_request(
            "body must be {\"percent\"?: 0-100, \"proxies\"?: [addresses], \"config\"?: …}",
        )
    })?;
    Ok(Json(d.start_canary(&name, start).await?))
}

/// Promote a canary
///
/// The candidate becomes the plugin's version on every online proxy before the call
/// returns; the canary is cleared.
#[utoipa::path(
    post,
    path = "/api/plugins/{name}/canary/promote",
    tag = "plugins",
    operation_id = "promoteCanary",
    params(("name" = String, Path, description = "Plugin name.")),
    responses(
        (status = 200, description = "The plugin's entry after the change.", body = PluginEntry),
        (status = 400, description = "The candidate no longer loads.", body = ErrorBody),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 409, description = "The plugin has no canary.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn promote(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<PluginEntry>, ApiError> {
    Ok(Json(d.promote_canary(&name).await?))
}

/// Roll back a canary
///
/// Clears the canary: every online proxy runs the stable version again before the call
/// returns.
#[utoipa::path(
    post,
    path = "/api/plugins/{name}/canary/rollback",
    tag = "plugins",
    operation_id = "rollbackCanary",
    params(("name" = String, Path, description = "Plugin name.")),
    responses(
        (status = 200, description = "The plugin's entry after the change.", body = PluginEntry),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 409, description = "The plugin has no canary.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn rollback(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<PluginEntry>, ApiError> {
    Ok(Json(d.rollback_canary(&name).await?))
}
