//! The proxy process: a listener (and, with `tls_listen`, a TLS one beside it), and worker
//! threads that each run their own single-threaded runtime with their own sessions and
//! backend connections (so a request and its reply never cross threads). Accepted sockets are
//! handed to workers round-robin; a TLS socket's handshake runs on its worker, within
//! `tls_handshake_timeout_ms`, holding its `max_clients` slot.
//!
//! Shutdown (SIGTERM): stop accepting, let every session finish the commands it has read,
//! close idle sessions, exit.

pub mod cluster;
pub mod replica_probe;
pub mod routes;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::backend::{BackendOptions, Pool};
use crate::config::ProxyConfig;
use crate::session::Session;
use crate::worker::{Admission, Shared, Worker};
use tessera_model::error::DataError;
use tessera_model::router::{Router, SlotTable};

/// A bound proxy, not yet serving.
pub struct Proxy {
    listener: std::net::TcpListener,
    tls_listener: Option<std::net::TcpListener>,
    shared: Arc<Shared>,
}

/// An accepted socket on its way to a worker: its `max_clients` slot, and whether it came in
/// on the TLS listener.
type Accepted = (std::net::TcpStream, Admission, bool);

impl Proxy {
    /// Binds the listen address; static mode routes with the slots split over `backends`.
    ///
    /// # Errors
    /// Invalid configuration or the address cannot be bound.
    pub fn bind(config: ProxyConfig) -> anyhow::Result<Self> {
        config.validate()?;
        if config.backend_tls {
            tessera_model::tls::backend::backends()
                .mark(config.backends.iter().map(|b| (b.as_str(), true)));
        }
        let router = Arc::new(Router::new(SlotTable::split_evenly(&config.backends)));
        Self::bind_with_router(config, router)
    }

    /// Binds with a routing table managed elsewhere (cluster mode swaps it at run time).
    /// Loads the TLS files (listener and backends) first.
    ///
    /// # Errors
    /// An address cannot be bound, or a TLS file does not load.
    pub fn bind_with_router(config: ProxyConfig, router: Arc<Router>) -> anyhow::Result<Self> {
        tessera_model::tls::backend::backends()
            .configure(&config.backend_tls_files())
            .context("backend TLS")?;
        let tls = match config.tls_files()? {
            Some(files) => {
                Some(tessera_model::tls::ServerTls::load(files).context("tls_cert/tls_key")?)
            }
            None => None,
        };
        let listener = listen_on(&config.listen, config.reuse_port)
            .with_context(|| format!("binding {}", config.listen))?;
        let listen_addr = listener.local_addr()?;
        let tls_listener = match &config.tls_listen {
            Some(addr) => Some(
                listen_on(addr, config.reuse_port)
                    .with_context(|| format!("binding tls_listen {addr}"))?,
            ),
            None => None,
        };
        let mut shared = Shared::new(config, router, listen_addr);
        if let (Some(l), Some(tls)) = (&tls_listener, tls) {
            shared.tls = Some((l.local_addr()?, tls));
        }
        Ok(Self {
            listener,
            tls_listener,
            shared: Arc::new(shared),
        })
    }

    /// The TLS listener's address, when there is one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.shared.tls.as_ref().map(|(a, _)| *a)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.listen_addr
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Serves until `shutdown` completes, then drains sessions and returns.
    ///
    /// # Errors
    /// The listener or a worker thread could not start.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let shared = self.shared;
        let threads = shared.config.threads();
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut workers = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (tx, rx) = mpsc::unbounded_channel::<Accepted>();
            let shared = shared.clone();
            let stop = stop_rx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("tessera-worker-{i}"))
                .spawn(move || worker_main(shared, rx, stop))
                .context("spawning a worker thread")?;
            workers.push(tx);
            handles.push(handle);
        }
        let listener = TcpListener::from_std(self.listener)?;
        let tls_listener = match self.tls_listener {
            Some(l) => Some(TcpListener::from_std(l)?),
            None => None,
        };
        if let Some((addr, tls)) = &shared.tls {
            tls.spawn_reload("proxy");
            info!(%addr, "proxy listening for TLS");
        }
        info!(addr = %shared.listen_addr, threads, backends = ?shared.config.backends, "proxy listening");
        tokio::pin!(shutdown);
        let mut next = 0usize;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = accept(&listener, tls_listener.as_ref()) => {
                    let (accepted, tls) = accepted;
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of file descriptors and the like: back off, don't spin.
                            warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    shared.stats.connections.fetch_add(1, Ordering::Relaxed);
                    let Some(admission) = shared.admit() else {
                        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                        // Before a handshake there is no way to say why: just close.
                        if !tls {
                            let _ = stream.try_write(&DataError::MaxClients.reply());
                        }
                        warn!(%peer, "connection refused: max_clients reached");
                        continue;
                    };
                    // A failed send drops the admission with the socket: the slot is free again.
                    let _ = workers[next % threads].send((stream.into_std()?, admission, tls));
                    next = next.wrapping_add(1);
                }
            }
        }
        info!("shutting down: no new connections; finishing in-flight commands");
        shared.draining.store(true, Ordering::Relaxed);
        drop(listener);
        drop(tls_listener);
        let _ = stop_tx.send(true);
        drop(workers);
        tokio::task::spawn_blocking(move || {
            for h in handles {
                let _ = h.join();
            }
        })
        .await?;
        info!("proxy stopped");
        Ok(())
    }
}

/// The next connection on either listener, and whether it is the TLS one's.
async fn accept(
    plain: &TcpListener,
    tls: Option<&TcpListener>,
) -> (std::io::Result<(tokio::net::TcpStream, SocketAddr)>, bool) {
    match tls {
        None => (plain.accept().await, false),
        Some(tls) => tokio::select! {
            a = plain.accept() => (a, false),
            a = tls.accept() => (a, true),
        },
    }
}

/// A session on an accepted socket: the TLS handshake first when it came in on the TLS
/// listener (bounded by `tls_handshake_timeout_ms`; a client that fails it, a plain-text
/// one included, is closed).
async fn start_session(
    worker: Rc<Worker>,
    s: std::net::TcpStream,
    tls: bool,
    stop: watch::Receiver<bool>,
) {
    let tcp = match tokio::net::TcpStream::from_std(s) {
        Ok(tcp) => tcp,
        Err(e) => return warn!(error = %e, "registering an accepted socket failed"),
    };
    let stream = match (&worker.shared.tls, tls) {
        (Some((_, server)), true) => {
            let peer = tcp.peer_addr().ok();
            let timeout = worker.shared.config.tls_handshake_timeout();
            let mut stop = stop.clone();
            tokio::select! {
                r = server.accept(tcp, timeout) => match r {
                    Ok(s) => s,
                    Err(e) => {
                        let failures = &worker.shared.stats.tls_handshake_failures;
                        failures.fetch_add(1, Ordering::Relaxed);
                        return debug!(?peer, error = %e, "TLS handshake failed");
                    }
                },
                _ = stop.changed() => return,
            }
        }
        _ => tessera_model::tls::Stream::Plain(tcp),
    };
    Session::new(worker, stream, stop).run().await
}

/// Runs the plugins' `on_tick` hooks on this worker's instances.
async fn plugin_ticks(worker: Rc<Worker>) {
    let mut every = tokio::time::interval(Duration::from_millis(50));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if worker.shared.plugins.chain().is_empty() {
            continue;
        }
        if let Some(wc) = worker.plugins.borrow_mut().as_mut() {
            wc.tick(Instant::now());
        }
    }
}

fn worker_main(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Accepted>,
    mut stop: watch::Receiver<bool>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("building a worker runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let opts = BackendOptions {
            timeout: Duration::from_millis(shared.config.backend_timeout_ms.max(1)),
            connect_timeout: Duration::from_millis(shared.config.backend_connect_timeout_ms.max(1)),
            stats: shared.backend_stats.clone(),
            max_reply: usize::MAX,
            fence: shared.router.fence.clone(),
        };
        let worker = Rc::new(Worker::new(
            shared.clone(),
            Pool::new(opts, shared.config.backend_connections),
        ));
        tokio::task::spawn_local(plugin_ticks(worker.clone()));
        tokio::task::spawn_local(worker.hotkeys.clone().run());
        let mut sessions = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                s = rx.recv() => {
                    let Some(s) = s else { break };
                    let worker = worker.clone();
                    let stop = stop.clone();
                    let (s, admission, tls) = s;
                    sessions.spawn_local(async move {
                        // Held until the task ends, however it ends.
                        let _admission = admission;
                        start_session(worker, s, tls, stop).await;
                    });
                }
                Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
                _ = stop.changed() => break,
            }
        }
        let grace = Duration::from_millis(shared.config.shutdown_grace_ms);
        if tokio::time::timeout(grace, async {
            while sessions.join_next().await.is_some() {}
        })
        .await
        .is_err()
        {
            warn!(
                left = sessions.len(),
                "sessions still busy after the shutdown grace period; closing them"
            );
            sessions.abort_all();
        }
    });
}

/// Pending connections a RESP listener queues before the proxy accepts them.
const BACKLOG: i32 = 1024;

/// A non-blocking listener on `addr` (its first address), with SO_REUSEADDR as std sets it and,
/// with `reuse_port`, SO_REUSEPORT: another process that sets it too may then bind the same
/// address, and the kernel spreads new connections over both (docs/operations.md, "Upgrading
/// a proxy in place").
fn listen_on(addr: &str, reuse_port: bool) -> anyhow::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let at = std::net::ToSocketAddrs::to_socket_addrs(addr)?
        .next()
        .with_context(|| format!("{addr} resolves to no address"))?;
    let socket = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&at.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
