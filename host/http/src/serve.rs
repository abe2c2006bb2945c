//! Serving an axum router: the one place the dashboard's, the console's and a proxy's admin
//! HTTP servers are started, so that their bounds are the same.

/// Serves `router` on `listener` until `shutdown` completes.
///
/// # Errors
/// The server failed.
pub async fn serve<L>(
    listener: L,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
