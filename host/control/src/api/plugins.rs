//! The dashboard's plugin catalog routes (`dashboard::plugins`; the proxy's side of a
//! catalog push is `tessera_proxy::admin`).
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

use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, State};
use bytes::Bytes;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::dashboard::Dashboard;
use crate::dashboard::plugins::upload_slot;
use tessera_http::error::{ApiError, body_within, optional_json};
use tessera_wire::Empty;
use tessera_wire::error::ErrorBody;
use tessera_wire::plugins::{
    Catalog, ListedPlugin, MAX_MODULE, PluginConfigChange, PluginEntry, PluginMetrics, PluginOrder,
};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(order))
        // The handler reads the body itself, within MAX_MODULE, once it has the upload slot.
        .routes(routes!(upload).layer(DefaultBodyLimit::disable()))
        .routes(routes!(configure))
        .routes(routes!(enable))
        .routes(routes!(disable))
        .routes(routes!(remove))
        .routes(routes!(plugin_metrics))
}

/// List the plugin catalog
///
/// Every plugin of the cluster, in chain order (the order the proxies run them in).
#[utoipa::path(
    get,
    path = "/api/plugins",
    tag = "plugins",
    operation_id = "listPlugins",
    responses(
        (status = 200, description = "The catalog's plugins, each with its `order`.", body = Vec<ListedPlugin>),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn list(State(d): State<Arc<Dashboard>>) -> Result<Json<Vec<ListedPlugin>>, ApiError> {
    let cat = d.plugins().await?;
    Ok(Json(
        cat.plugins
            .into_iter()
            .enumerate()
            .map(|(order, entry)| ListedPlugin { entry, order })
            .collect(),
    ))
}

/// Upload a plugin module
///
/// The `.wasm` file as the raw body (at most 8 MiB; one upload at a time: a second one
/// meanwhile is a 503). It is checked first (a Tessera plugin of a supported ABI). A new
/// plugin is appended to the chain, disabled, with config `{}` and fail `closed`; a replaced
/// one keeps its settings, and if enabled is probed with them and rolled out to every online
/// proxy. A catalog holds at most 64 plugins.
#[utoipa::path(
    put,
    path = "/api/plugins/{name}/module",
    tag = "plugins",
    operation_id = "uploadPlugin",
    params(("name" = String, Path, description = "Plugin name: letters, digits, `-` and `_`, at most 64.")),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "The module."),
    responses(
        (status = 200, description = "The plugin's entry.", body = PluginEntry),
        (status = 400, description = "An empty body, a bad name, or a module that is not a Tessera plugin (or whose init refuses its config).", body = ErrorBody),
        (status = 409, description = "A new plugin for a catalog that holds 64 already.", body = ErrorBody),
        (status = 413, description = "A module over 8 MiB.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable, or another upload is being read or checked.", body = ErrorBody),
    )
)]
async fn upload(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Result<Json<PluginEntry>, ApiError> {
    let _slot = upload_slot()?;
    let module = module_body(body, "the .wasm file").await?;
    Ok(Json(d.upload_plugin(&name, module).await?))
}

/// A module upload's body: at most `MAX_MODULE` of it, not empty. Read only once the caller
/// holds the upload slot (`upload_slot`: one upload at a time, so at most one module's bytes
/// are held and compiled).
pub(super) async fn module_body(body: axum::body::Body, send: &str) -> Result<Vec<u8>, ApiError> {
    let what = format!("a plugin module ({} MiB)", MAX_MODULE >> 20);
    let body = body_within(body, MAX_MODULE, &what).await?;
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "empty body: send {send} as the request body"
        )));
    }
    Ok(body.to_vec())
}

/// Configure a plugin
///
/// Changes the config, the fail policy or the limits; fields left out keep their value. A
/// config the plugin's `init` refuses is a 400 with the plugin's message (e.g.
/// `filter: unknown class "admn"`) and nothing is stored.
#[utoipa::path(
    put,
    path = "/api/plugins/{name}/config",
    tag = "plugins",
    operation_id = "configurePlugin",
    params(("name" = String, Path, description = "Plugin name: letters, digits, `-` and `_`, at most 64.")),
    request_body = PluginConfigChange,
    responses(
        (status = 200, description = "The plugin's entry after the change.", body = PluginEntry),
        (status = 400, description = "No body, an unknown field, a bad fail policy, or a config the plugin refuses.", body = ErrorBody),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 409, description = "The catalog document would pass 1 MiB (configs make it).", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn configure(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<PluginEntry>, ApiError> {
    let change: PluginConfigChange = optional_json(&body)?.ok_or_else(|| {
        ApiError::bad_request("body must be {\"config\": …, \"fail\"?: \"open\"|\"closed\"}")
    })?;
    Ok(Json(d.configure_plugin(&name, change).await?))
}

/// Enable a plugin
///
/// Probes the plugin with its config, then every online proxy loads it before the call
/// returns. A catalog enables at most 16 plugins (what each proxy's instance pool is sized
/// for): enabling one more is a 409.
#[utoipa::path(
    post,
    path = "/api/plugins/{name}/enable",
    tag = "plugins",
    operation_id = "enablePlugin",
    params(("name" = String, Path, description = "Plugin name: letters, digits, `-` and `_`, at most 64.")),
    responses(
        (status = 200, description = "The plugin's entry.", body = PluginEntry),
        (status = 400, description = "Its init refuses its config.", body = ErrorBody),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 409, description = "16 plugins are enabled already.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn enable(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<PluginEntry>, ApiError> {
    Ok(Json(d.enable_plugin(&name, true).await?))
}

/// Disable a plugin
///
/// Every online proxy unloads it before the call returns; it stays in the catalog.
#[utoipa::path(
    post,
    path = "/api/plugins/{name}/disable",
    tag = "plugins",
    operation_id = "disablePlugin",
    params(("name" = String, Path, description = "Plugin name: letters, digits, `-` and `_`, at most 64.")),
    responses(
        (status = 200, description = "The plugin's entry.", body = PluginEntry),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn disable(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<PluginEntry>, ApiError> {
    Ok(Json(d.enable_plugin(&name, false).await?))
}

/// Reorder the chain
///
/// Sets the chain order, every plugin's name exactly once; the catalog is pushed to every
/// online proxy before the call returns.
#[utoipa::path(
    put,
    path = "/api/plugins/order",
    tag = "plugins",
    operation_id = "orderPlugins",
    request_body = PluginOrder,
    responses(
        (status = 200, description = "The catalog in its new order.", body = Catalog),
        (status = 400, description = "No body, or not every plugin exactly once.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn order(State(d): State<Arc<Dashboard>>, body: Bytes) -> Result<Json<Catalog>, ApiError> {
    let o: PluginOrder = optional_json(&body)?
        .ok_or_else(|| ApiError::bad_request("body must be {\"order\": [names]}"))?;
    Ok(Json(d.order_plugins(o.order).await?))
}

/// Remove a plugin
///
/// Removes it from the catalog and every online proxy; its module is deleted from the store
/// unless another entry uses it.
#[utoipa::path(
    delete,
    path = "/api/plugins/{name}",
    tag = "plugins",
    operation_id = "deletePlugin",
    params(("name" = String, Path, description = "Plugin name: letters, digits, `-` and `_`, at most 64.")),
    responses(
        (status = 200, description = "Removed.", body = Empty),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the catalog.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn remove(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    d.delete_plugin(&name).await?;
    Ok(Json(Empty {}))
}

/// A plugin's metrics
///
/// The plugin's own metrics (those it registered), fetched from every registered proxy (3 s
/// each) and summed per series; `proxies` counts those that answered with it loaded (0 for a
/// disabled plugin).
#[utoipa::path(
    get,
    path = "/api/plugins/{name}/metrics",
    tag = "plugins",
    operation_id = "pluginMetrics",
    params(("name" = String, Path, description = "Plugin name: letters, digits, `-` and `_`, at most 64.")),
    responses(
        (status = 200, description = "Samples summed over the proxies that answered.", body = PluginMetrics),
        (status = 404, description = "No such plugin.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn plugin_metrics(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<PluginMetrics>, ApiError> {
    Ok(Json(d.plugin_metrics(&name).await?))
}
