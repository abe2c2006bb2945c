//! One backend connection: a task owning the socket, fed by a channel. It connects lazily on
//! the first request, writes every queued request in one syscall, and hands each reply to the
//! oldest waiting request.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{BackendError, ReplyResult};
use crate::resp::{Proto, ReplyScanner};

/// Settings shared by every connection of a proxy.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    /// A connection with requests outstanding and no reply for this long is declared dead.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub stats: Arc<BackendStats>,
}

/// Counters shared by every backend connection of a proxy (INFO and /metrics read them).
#[derive(Debug, Default)]
pub struct BackendStats {
    /// Requests written to backends.
    pub requests: AtomicU64,
    /// Write batches (one per syscall round): requests / batches is the pipelining factor.
    pub batches: AtomicU64,
    pub connects: AtomicU64,
    pub connect_failures: AtomicU64,
    pub connection_losses: AtomicU64,
}

struct Pending {
    req: Bytes,
    tx: oneshot::Sender<ReplyResult>,
}

/// Receives one reply.
pub type ReplyRx = oneshot::Receiver<ReplyResult>;

/// Handle to a connection task; cheap to clone.
#[derive(Clone)]
pub struct BackendConn {
    tx: mpsc::UnboundedSender<Pending>,
    addr: Arc<str>,
}

/// Requests larger than this are written straight from their own buffer, not copied.
const COPY_LIMIT: usize = 8 * 1024;
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl BackendConn {
    /// Starts the connection task on the current thread's `LocalSet`.
    pub fn spawn(addr: Arc<str>, proto: Proto, opts: BackendOptions) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = ConnTask {
            addr: addr.clone(),
            proto,
            opts,
            rx,
        };
        tokio::task::spawn_local(task.run());
        Self { tx, addr }
    }

    /// Queues `req` (exact RESP bytes) and returns where its reply will arrive.
    pub fn send(&self, req: Bytes) -> ReplyRx {
        let (tx, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(p)) = self.tx.send(Pending { req, tx }) {
            let _ =
                p.tx.send(Err(unavailable(&self.addr, "connection task stopped")));
        }
        rx
    }

    pub fn addr(&self) -> &Arc<str> {
        &self.addr
    }
}

fn unavailable(addr: &Arc<str>, reason: &str) -> BackendError {
    BackendError::Unavailable {
        addr: addr.clone(),
        reason: reason.into(),
    }
}

struct ConnTask {
    addr: Arc<str>,
    proto: Proto,
    opts: BackendOptions,
    rx: mpsc::UnboundedReceiver<Pending>,
}

impl ConnTask {
    async fn run(mut self) {
        let mut failures: u32 = 0;
        while let Some(first) = self.rx.recv().await {
            match self.connect().await {
                Ok(stream) => {
                    self.opts.stats.connects.fetch_add(1, Ordering::Relaxed);
                    if failures > 0 {
                        debug!(addr = %self.addr, "backend reconnected");
                    }
                    failures = 0;
                    let reason = self.serve(stream, first).await;
                    if self.rx.is_closed() && self.rx.is_empty() {
                        return;
                    }
                    self.opts
                        .stats
                        .connection_losses
                        .fetch_add(1, Ordering::Relaxed);
                    warn!(addr = %self.addr, %reason, "backend connection lost");
                }
                Err(reason) => {
                    self.opts
                        .stats
                        .connect_failures
                        .fetch_add(1, Ordering::Relaxed);
                    failures += 1;
                    warn!(addr = %self.addr, %reason, failures, "backend connect failed");
                    let err = unavailable(&self.addr, &reason);
                    let _ = first.tx.send(Err(err.clone()));
                    // Fail fast while the server stays down instead of queueing behind it.
                    let backoff = (Duration::from_millis(25)
                        * 2u32.saturating_pow(failures.min(10)))
                    .min(MAX_BACKOFF);
                    let until = Instant::now() + backoff;
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep_until(until) => break,
                            p = self.rx.recv() => match p {
                                Some(p) => { let _ = p.tx.send(Err(err.clone())); }
                                None => return,
                            },
                        }
                    }
                }
            }
        }
    }

    async fn connect(&self) -> Result<TcpStream, String> {
        let fut = async {
            let mut s = TcpStream::connect(&*self.addr)
                .await
                .map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            if self.proto == Proto::Resp3 {
                s.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
                    .await
                    .map_err(|e| e.to_string())?;
                let reply = read_one(&mut s).await?;
                if !reply.starts_with(b"%") {
                    return Err(format!(
                        "HELLO 3 refused: {}",
                        String::from_utf8_lossy(&reply).trim_end()
                    ));
                }
            }
            Ok(s)
        };
        match tokio::time::timeout(self.opts.connect_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "connect timed out after {} ms",
                self.opts.connect_timeout.as_millis()
            )),
        }
    }

    /// Runs the connection until it breaks; returns why. Requests in flight are failed here;
    /// requests still queued stay queued for the next connection.
    async fn serve(&mut self, stream: TcpStream, first: Pending) -> String {
        let (mut r, mut w) = stream.into_split();
        let inflight: std::cell::RefCell<VecDeque<(Instant, oneshot::Sender<ReplyResult>)>> =
            Default::default();
        let timeout = self.opts.timeout;
        let rx = &mut self.rx;
        let stats = &self.opts.stats;
        let writer = async {
            let mut batch = vec![first];
            let mut wbuf = BytesMut::with_capacity(16 * 1024);
            loop {
                let now = Instant::now();
                stats
                    .requests
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                stats.batches.fetch_add(1, Ordering::Relaxed);
                for p in batch.drain(..) {
                    inflight.borrow_mut().push_back((now, p.tx));
                    if p.req.len() >= COPY_LIMIT {
                        if !wbuf.is_empty() {
                            w.write_all(&wbuf).await.map_err(|e| e.to_string())?;
                            wbuf.clear();
                        }
                        w.write_all(&p.req).await.map_err(|e| e.to_string())?;
                    } else {
                        wbuf.extend_from_slice(&p.req);
                    }
                }
                if !wbuf.is_empty() {
                    w.write_all(&wbuf).await.map_err(|e| e.to_string())?;
                    wbuf.clear();
                }
                if rx.recv_many(&mut batch, 512).await == 0 {
                    return Err::<(), String>("proxy worker stopped".into());
                }
            }
        };
        let reader = async {
            let mut rbuf = BytesMut::with_capacity(16 * 1024);
            let mut scanner = ReplyScanner::default();
            loop {
                loop {
                    match scanner.next_len(&rbuf) {
                        Ok(Some(n)) => {
                            let reply = rbuf.split_to(n).freeze();
                            if reply.first() == Some(&b'>') {
                                continue; // out-of-band push; never requested, never routed
                            }
                            match inflight.borrow_mut().pop_front() {
                                Some((_, tx)) => {
                                    let _ = tx.send(Ok(reply));
                                }
                                None => return Err::<(), String>("reply without a request".into()),
                            }
                        }
                        Ok(None) => break,
                        Err(e) => return Err(format!("protocol error from server: {e}")),
                    }
                }
                if rbuf.capacity() - rbuf.len() < 4096 {
                    rbuf.reserve(16 * 1024);
                }
                match tokio::time::timeout(timeout, r.read_buf(&mut rbuf)).await {
                    Ok(Ok(0)) => return Err("connection closed by server".into()),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(e.to_string()),
                    Err(_) => {
                        let stuck = inflight
                            .borrow()
                            .front()
                            .is_some_and(|(at, _)| at.elapsed() >= timeout);
                        if stuck {
                            return Err(format!("no reply for {} ms", timeout.as_millis()));
                        }
                    }
                }
            }
        };
        let reason = tokio::select! {
            r = writer => r.err().unwrap_or_default(),
            r = reader => r.err().unwrap_or_default(),
        };
        let err = unavailable(&self.addr, &reason);
        for (_, tx) in inflight.into_inner() {
            let _ = tx.send(Err(err.clone()));
        }
        reason
    }
}

/// Reads exactly one reply (used only during the handshake).
async fn read_one(s: &mut TcpStream) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(512);
    let mut scanner = ReplyScanner::default();
    loop {
        if let Some(n) = scanner.next_len(&buf).map_err(|e| e.to_string())? {
            return Ok(buf.split_to(n).freeze());
        }
        if s.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("connection closed during handshake".into());
        }
    }
}
