//! HTTP APIs (axum): the proxy's admin API and the dashboard's REST API. Routes, DTOs and the
//! error → HTTP mapping only; the logic lives in `proxy`, `dashboard` and `coordinator`.

mod audit;
mod commandlog;
pub mod dashboard;
mod mirror;
mod plugins;
pub mod proxy;
mod read_policy;
mod routes;
mod tokens;
pub use proxy::apply_catalog as plugins_apply;

pub use crate::http_error::{ApiError, bearer_matches, optional_json};
pub use audit::ACTOR_HEADER;
pub use tokens::{ROLE_HEADER, TOKEN_HEADER};

/// Serves `router` on `listener` until `shutdown` completes, within the bounds every HTTP
/// server of Tessera has (`http_server`: connection cap, header-read timeout).
///
/// # Errors
/// The server failed.
pub async fn serve<L>(
    listener: L,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
{
    crate::http_server::serve(listener, router, shutdown).await
}
