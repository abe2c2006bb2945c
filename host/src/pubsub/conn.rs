//! A hub's subscriber connection to one backend: a task that logs in, speaks RESP3 (so every
//! message and confirmation is a `>` push and cannot be mistaken for a reply), writes the
//! hub's (un)subscribe requests and hands each push to the hub. Not a shared pipelined
//! connection: nothing on it waits for a reply. On a broken connection it reconnects with
//! backoff and subscribes again everything the hub wants on that backend; messages published
//! while it was down are lost, as they are for a direct client that reconnects.

use std::rc::Weak;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{Hub, HubInner};
use crate::backend::Login;
use crate::resp::ReplyScanner;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;

/// Handle to a subscriber connection task; the task ends when the handle is dropped.
pub(super) struct SubConn {
    tx: mpsc::UnboundedSender<Bytes>,
}

impl SubConn {
    pub(super) fn spawn(addr: Arc<str>, login: Login, hub: Weak<HubInner>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::task::spawn_local(run(addr, login, hub, rx));
        Self { tx }
    }

    /// Queues a request (exact RESP). Lost if the connection is down: the hub's state is
    /// what a reconnect subscribes.
    pub(super) fn send(&self, req: Bytes) {
        let _ = self.tx.send(req);
    }
}

async fn run(
    addr: Arc<str>,
    login: Login,
    hub: Weak<HubInner>,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
) {
    let mut failures: u32 = 0;
    loop {
        match tokio::time::timeout(CONNECT_TIMEOUT, connect(&addr, &login)).await {
            Ok(Ok(stream)) => {
                if failures > 0 {
                    debug!(%addr, "subscriber connection reconnected");
                }
                failures = 0;
                // What is queued is covered by the hub's state, read after it.
                while rx.try_recv().is_ok() {}
                let Some(inner) = hub.upgrade() else { return };
                let first = Hub { inner }.resubscriptions(&addr);
                match serve(stream, first, &mut rx, &hub).await {
                    Ok(()) => return,
                    Err(reason) => warn!(%addr, %reason, "subscriber connection lost"),
                }
            }
            Ok(Err(reason)) => {
                failures += 1;
                warn!(%addr, %reason, failures, "subscriber connection failed");
            }
            Err(_) => {
                failures += 1;
                warn!(%addr, failures, "subscriber connection timed out");
            }
        }
        let backoff =
            (Duration::from_millis(25) * 2u32.saturating_pow(failures.min(10))).min(MAX_BACKOFF);
        let until = tokio::time::Instant::now() + backoff;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                r = rx.recv() => if r.is_none() { return },
            }
        }
    }
}

/// Serves one connection: `Ok` when the hub let it go, `Err` with why it broke.
async fn serve(
    stream: TcpStream,
    first: Vec<Bytes>,
    rx: &mut mpsc::UnboundedReceiver<Bytes>,
    hub: &Weak<HubInner>,
) -> Result<(), String> {
    let (mut r, mut w) = stream.into_split();
    for req in first {
        w.write_all(&req).await.map_err(|e| e.to_string())?;
    }
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut scanner = ReplyScanner::default();
    let mut pending = Vec::new();
    loop {
        tokio::select! {
            n = rx.recv_many(&mut pending, 64) => {
                if n == 0 {
                    return Ok(());
                }
                for req in pending.drain(..) {
                    w.write_all(&req).await.map_err(|e| e.to_string())?;
                }
            }
            read = r.read_buf(&mut rbuf) => {
                match read {
                    Ok(0) => return Err("connection closed by server".into()),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
                let Some(inner) = hub.upgrade() else { return Ok(()) };
                let hub = Hub { inner };
                while let Some(n) = scanner.next_len(&rbuf).map_err(|e| e.to_string())? {
                    let frame = rbuf.split_to(n).freeze();
                    match frame.first() {
                        Some(b'>') => hub.deliver(frame),
                        Some(b'-' | b'!') => warn!(
                            error = %String::from_utf8_lossy(&frame).trim_end(),
                            "subscriber connection: request refused"
                        ),
                        _ => {}
                    }
                }
                if rbuf.capacity() - rbuf.len() < 4096 {
                    rbuf.reserve(rbuf.len().max(READ_CHUNK));
                }
            }
        }
    }
}

/// Connects, runs the login's steps and switches to RESP3.
async fn connect(addr: &str, login: &Login) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    for step in login.steps.iter() {
        s.write_all(&step.request)
            .await
            .map_err(|e| e.to_string())?;
        let reply = read_one(&mut s).await?;
        if !(step.accept)(&reply) {
            return Err(format!(
                "{} refused: {}",
                step.what,
                String::from_utf8_lossy(&reply).trim_end()
            ));
        }
    }
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
    Ok(s)
}

/// Reads exactly one reply (the handshake's; nothing else is in flight then).
async fn read_one(s: &mut TcpStream) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(512);
    let mut scanner = ReplyScanner::default();
    loop {
        if let Some(n) = scanner.next_len(&buf).map_err(|e| e.to_string())? {
            return Ok(buf.split_to(n).freeze());
        }
        if buf.capacity() - buf.len() < 512 {
            buf.reserve(buf.len().max(512));
        }
        if s.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("connection closed during handshake".into());
        }
    }
}
