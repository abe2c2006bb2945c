//! The listener the dashboard and the console serve axum on: plain HTTP, or HTTPS when given
//! a [`ServerTls`]. Handshakes run in their own tasks (at most [`MAX_HANDSHAKES`] at once,
//! each within the handshake timeout), so a client that never finishes one holds neither the
//! accept loop nor, for long, a slot.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};
use tracing::debug;

use tessera_model::tls::server::HANDSHAKE_TIMEOUT;
use tessera_model::tls::{ServerTls, Stream};

/// Handshakes in progress at once; more connections wait in the kernel's backlog.
pub const MAX_HANDSHAKES: usize = 256;

/// An HTTP(S) listener for `axum::serve`.
pub struct HttpListener {
    addr: SocketAddr,
    inner: Inner,
}

enum Inner {
    Plain(TcpListener),
    /// Connections that finished their handshake, from the accept task.
    Tls(mpsc::Receiver<(Stream, SocketAddr)>),
}

impl HttpListener {
    /// Serves plain HTTP on `listener`, or HTTPS with `tls`. Needs a tokio runtime (the
    /// accept task and the certificate reload task start here).
    ///
    /// # Errors
    /// The listener has no local address.
    pub fn new(listener: TcpListener, tls: Option<Arc<ServerTls>>) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let inner = match tls {
            None => Inner::Plain(listener),
            Some(tls) => {
                tls.spawn_reload("https");
                let (tx, rx) = mpsc::channel(64);
                tokio::spawn(accept_tls(listener, tls, tx));
                Inner::Tls(rx)
            }
        };
        Ok(Self { addr, inner })
    }

    pub fn is_tls(&self) -> bool {
        matches!(self.inner, Inner::Tls(_))
    }
}

async fn accept_tls(
    listener: TcpListener,
    tls: Arc<ServerTls>,
    tx: mpsc::Sender<(Stream, SocketAddr)>,
) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (tcp, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                debug!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        if tx.is_closed() {
            return;
        }
        let (tls, tx) = (tls.clone(), tx.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tls.accept(tcp, HANDSHAKE_TIMEOUT).await {
                Ok(s) => {
                    let _ = tx.send((s, peer)).await;
                }
                Err(e) => debug!(%peer, error = %e, "TLS handshake failed"),
            }
        });
    }
}

impl axum::serve::Listener for HttpListener {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match &mut self.inner {
            Inner::Plain(l) => {
                // axum's own accept loop for a TcpListener (it retries errors).
                let (s, a) = axum::serve::Listener::accept(l).await;
                (Stream::Plain(s), a)
            }
            Inner::Tls(rx) => match rx.recv().await {
                Some(c) => c,
                // The accept task is gone (its runtime is stopping): accept nothing more.
                None => std::future::pending().await,
            },
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
