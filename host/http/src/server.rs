//! The one HTTP server loop of the dashboard's API, the console and a proxy's admin API. What
//! axum's own `serve` leaves open: at most [`MAX_CONNECTIONS`] connections at once (one over
//! the cap is closed as soon as it is accepted, so the process never runs out of file
//! descriptors however many a client opens), and [`HEADER_READ_TIMEOUT`] for a request's
//! headers (the first, and each next one on a kept-alive connection, so an idle connection
//! does not hold its place either). Every request carries its peer's address
//! (`ConnectInfo<SocketAddr>`): the throttle of failed credentials and the console's login
//! lockout count by it. HTTP/1.1 only, as every client of these APIs speaks it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt as _;
use tracing::{debug, warn};

/// Connections one server holds at once: a browser keeps up to 6 to a host alive, so a
/// console shared by dozens of operators needs some hundreds; this leaves room under the
/// common soft limit of 1024 descriptors for the store, health checks and pushes.
pub const MAX_CONNECTIONS: usize = 512;
/// Time a client has to send a request's headers, from the connection's start or the end of
/// the previous answer on it.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Refused connections are logged at most this often (with how many since the last log).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The bounds of one server; [`Limits::default`] is what the three servers use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            header_read_timeout: HEADER_READ_TIMEOUT,
        }
    }
}

/// Serves `router` on `listener` within the default [`Limits`] until `shutdown` completes,
/// then lets the requests in progress finish.
///
/// # Errors
/// None so far: accept errors are retried by the listener; kept for the callers' `?`.
pub async fn serve<L>(
    listener: L,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    serve_with(listener, router, Limits::default(), shutdown).await
}

/// [`serve`] with explicit limits.
///
/// # Errors
/// As [`serve`].
pub async fn serve_with<L>(
    mut listener: L,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let refusals = Refusals::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            conn = listener.accept() => conn,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Closed at once: holding it, even unread, would be what the cap is against.
            drop(io);
            refusals.count(peer, limits.max_connections);
            continue;
        };
        let router = router.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                router.clone().oneshot(req)
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(TokioIo::new(io), service);
            let mut conn = std::pin::pin!(conn);
            let mut stopping = false;
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            debug!(%peer, error = %e, "HTTP connection ended with an error");
                        }
                        break;
                    }
                    _ = stop.wait_for(|s| *s), if !stopping => {
                        // Answers the request in progress, if any, then closes.
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it ends: all permits back means all ended.
    let _all = permits
        .acquire_many(limits.max_connections as u32)
        .await
        .map_err(std::io::Error::other)?;
    Ok(())
}

/// Counts connections refused over the cap and logs them at most every
/// [`REFUSAL_LOG_INTERVAL`], so that a flood of them does not flood the log as well.
#[derive(Default)]
struct Refusals {
    since_log: AtomicU64,
    logged: std::sync::Mutex<Option<Instant>>,
}

impl Refusals {
    fn count(&self, peer: SocketAddr, cap: usize) {
        let n = self.since_log.fetch_add(1, Ordering::Relaxed) + 1;
        let mut logged = self.logged.lock().unwrap_or_else(|p| p.into_inner());
        if logged.is_some_and(|t| t.elapsed() < REFUSAL_LOG_INTERVAL) {
            return;
        }
        *logged = Some(Instant::now());
        self.since_log.store(0, Ordering::Relaxed);
        warn!(
            %peer,
            refused = n,
            max_connections = cap,
            "HTTP connections over the cap closed at once"
        );
    }
}
