//! The proxy process: a listener, and worker threads that each run their own single-threaded
//! runtime with their own sessions and backend connections (so a request and its reply never
//! cross threads). Accepted sockets are handed to workers round-robin.
//!
//! Shutdown (SIGTERM): stop accepting, let every session finish the commands it has read,
//! close idle sessions, exit.

pub mod cluster;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::backend::{BackendOptions, Pool};
use crate::config::ProxyConfig;
use crate::error::DataError;
use crate::router::{Router, SlotTable};
use crate::session::Session;
use crate::worker::{Admission, Shared, Worker};

/// A bound proxy, not yet serving.
pub struct Proxy {
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Binds the listen address; static mode routes with the slots split over `backends`.
    ///
    /// # Errors
    /// Invalid configuration or the address cannot be bound.
    pub fn bind(config: ProxyConfig) -> anyhow::Result<Self> {
        config.validate()?;
        let router = Arc::new(Router::new(SlotTable::split_evenly(&config.backends)));
        Self::bind_with_router(config, router)
    }

    /// Binds with a routing table managed elsewhere (cluster mode swaps it at run time).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn bind_with_router(config: ProxyConfig, router: Arc<Router>) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind(&config.listen)
            .with_context(|| format!("binding {}", config.listen))?;
        listener.set_nonblocking(true)?;
        let listen_addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(config, router, listen_addr));
        Ok(Self { listener, shared })
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
            let (tx, rx) = mpsc::unbounded_channel::<(std::net::TcpStream, Admission)>();
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
        info!(addr = %shared.listen_addr, threads, backends = ?shared.config.backends, "proxy listening");
        tokio::pin!(shutdown);
        let mut next = 0usize;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => {
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
                        let _ = stream.try_write(&DataError::MaxClients.reply());
                        warn!(%peer, "connection refused: max_clients reached");
                        continue;
                    };
                    // A failed send drops the admission with the socket: the slot is free again.
                    let _ = workers[next % threads].send((stream.into_std()?, admission));
                    next = next.wrapping_add(1);
                }
            }
        }
        info!("shutting down: no new connections; finishing in-flight commands");
        drop(listener);
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
    mut rx: mpsc::UnboundedReceiver<(std::net::TcpStream, Admission)>,
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
        };
        let worker = Rc::new(Worker::new(
            shared.clone(),
            Pool::new(opts, shared.config.backend_connections),
        ));
        tokio::task::spawn_local(plugin_ticks(worker.clone()));
        let mut sessions = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                s = rx.recv() => {
                    let Some(s) = s else { break };
                    let worker = worker.clone();
                    let stop = stop.clone();
                    let (s, admission) = s;
                    sessions.spawn_local(async move {
                        // Held until the task ends, however it ends.
                        let _admission = admission;
                        match tokio::net::TcpStream::from_std(s) {
                            Ok(stream) => Session::new(worker, stream, stop).run().await,
                            Err(e) => warn!(error = %e, "registering an accepted socket failed"),
                        }
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
