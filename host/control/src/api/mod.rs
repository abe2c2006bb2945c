//! The dashboard's REST API (docs/api.md): axum routes, each handler with its
//! `#[utoipa::path]`, so the router and the OpenAPI document (`openapi`) come from one list
//! and cannot disagree. Handlers translate HTTP to `Dashboard` operations and back; the logic
//! lives in `dashboard` and `migrate`, the shapes in `tessera-wire`, and the one mapping of
//! the control plane's errors to HTTP answers in `error`.

mod audit;
mod audit_sentence;
mod backups;
mod cluster;
mod commandlog;
mod error;
mod events;
mod failover;
mod history;
mod meta;
mod migrations;
mod mirror;
pub mod openapi;
mod plugin_canary;
mod plugins;
mod routes;
mod tokens;
mod users;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use utoipa_axum::router::OpenApiRouter;

use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;

pub use tessera_http::error::{bearer_matches, optional_json};

/// A JSON body, or the reason it is not one (a 400 through `ApiError`).
type Body<T> = Result<axum::Json<T>, axum::extract::rejection::JsonRejection>;

/// Every route of the API, each registered with its handler's `#[utoipa::path]`.
fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(meta::routes())
        .merge(cluster::routes())
        .merge(failover::routes())
        .merge(routes::routes())
        .merge(mirror::routes())
        .merge(migrations::routes())
        .merge(commandlog::routes())
        .merge(plugins::routes())
        .merge(plugin_canary::routes())
        .merge(users::routes())
        .merge(tokens::routes())
        .merge(audit::routes())
        .merge(backups::routes())
        .merge(history::routes())
        .merge(events::routes())
}

/// The dashboard's API: the routes, behind the token and role checks and the audit log.
pub fn router(d: Arc<Dashboard>) -> Router {
    let (router, _) = routes().split_for_parts();
    let audit = d.audit_log();
    router
        .fallback(|| async { ApiError::not_found("no such route: see /api/openapi.json") })
        // Outermost first: the token (401 without a valid one), then the audit record (only
        // of calls that passed it, so strangers cannot flood the log), then the role (403,
        // recorded with the token that was refused). Which role each route needs: `access`.
        .layer(middleware::from_fn(tokens::permit))
        .layer(middleware::from_fn_with_state(audit.clone(), audit::record))
        .layer(middleware::from_fn_with_state(
            tokens::Gate::new(d.clone(), audit),
            tokens::authenticate,
        ))
        .with_state(d)
}

/// The API's OpenAPI document, derived from the routes (`tessera openapi`, and served at
/// `/api/openapi.json`).
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = routes().split_for_parts();
    openapi::finish(doc)
}
