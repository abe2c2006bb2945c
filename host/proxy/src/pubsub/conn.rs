//! A hub's subscriber connection to one backend: a task that logs in, speaks RESP3 (so every
//! message and confirmation is a `>` push and cannot be mistaken for a reply), writes the
//! hub's (un)subscribe requests and hands each push to the hub. Not a shared pipelined
//! connection: the only replies awaited are of its own `PING tessera-sync-<n>` markers, sent
//! after a batch of subscriptions so that a client's confirmation waits until the backend has
//! them (as a direct client's does). On a broken connection it reconnects with
//! backoff and subscribes again everything the hub wants on that backend; messages published
//! while it was down are lost, as they are for a direct client that reconnects. A marker PING
//! every 10 s finds a server that vanished without closing the connection.
//!
//! A server busy with a script refuses the hub's requests with `-BUSY`, and an error does
//! not say which request it answers. So after one the connection asks a marker `PING` every
//! 25 ms, and the first the server answers (the script is over) ends it: the hub connects
//! again at once and subscribes everything it wants there, and the clients that waited for
//! a confirmation are answered after that (docs/pubsub.md, "A backend busy with a script").

use std::collections::VecDeque;
use std::rc::Weak;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Hub, HubInner};
use tessera_model::login::Login;
use tessera_model::tls::Stream;
use tessera_resp::ReplyScanner;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;
/// An idle subscriber connection sends a marker PING this often, and is declared dead when one
/// stays unanswered this long.
const KEEPALIVE: Duration = Duration::from_secs(10);

/// Handle to a subscriber connection task; the task ends when the handle is dropped.
pub(super) struct SubConn {
    tx: mpsc::UnboundedSender<Cmd>,
}

enum Cmd {
    /// A request (exact RESP) whose confirmations are pushes.
    Request(Bytes),
    /// Answer once the server has processed everything sent before (dropped unanswered if
    /// the connection breaks first).
    Sync(oneshot::Sender<()>),
}

/// The marker PING's argument; its reply is a bulk string, never a push.
const SYNC_PREFIX: &[u8] = b"tessera-sync-";
/// How often a connection whose requests a busy server refused asks whether it is over.
const BUSY_PROBE: Duration = Duration::from_millis(25);

/// Why [`serve`] gave a connection up.
enum Ended {
    /// It broke, or the server stopped answering.
    Broken(String),
    /// The server refused requests with `-BUSY` and now answers again: connect again at
    /// once, and answer these waiting syncs once the new connection has the hub's state.
    Refused(Vec<oneshot::Sender<()>>),
}

impl SubConn {
    pub(super) fn spawn(addr: Arc<str>, login: Login, hub: Weak<HubInner>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::task::spawn_local(run(addr, login, hub, rx));
        Self { tx }
    }

    /// Queues a request. If the connection is down it is replayed after the hub's state on
    /// reconnect, which it is already part of.
    pub(super) fn send(&self, req: Bytes) {
        let _ = self.tx.send(Cmd::Request(req));
    }

    /// Completes (with `Ok` or `Err` alike) once the backend has processed what was sent
    /// before, or the connection broke.
    pub(super) fn sync(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Cmd::Sync(tx));
        rx
    }
}

async fn run(
    addr: Arc<str>,
    login: Login,
    hub: Weak<HubInner>,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
) {
    let mut failures: u32 = 0;
    let mut connected_before = false;
    // Syncs to answer once a new connection has the hub's state (after a refusal).
    let mut carried: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        match tokio::time::timeout(CONNECT_TIMEOUT, connect(&addr, &login)).await {
            Ok(Ok(stream)) => {
                if failures > 0 {
                    debug!(%addr, "subscriber connection reconnected");
                }
                failures = 0;
                // What is still queued replays, after the state, the changes made to it since.
                let Some(inner) = hub.upgrade() else { return };
                let hub_now = Hub { inner };
                let first = hub_now.resubscriptions(&addr);
                if connected_before {
                    hub_now.reconnected(&addr);
                }
                connected_before = true;
                drop(hub_now);
                let waiting = std::mem::take(&mut carried);
                let served = match stream {
                    Stream::Plain(s) => {
                        let (r, w) = s.into_split();
                        serve(&addr, r, w, first, waiting, &mut rx, &hub).await
                    }
                    tls => {
                        let (r, w) = tokio::io::split(tls);
                        serve(&addr, r, w, first, waiting, &mut rx, &hub).await
                    }
                };
                let refused = match served {
                    Ok(()) => return,
                    Err(Ended::Refused(waiting)) => {
                        debug!(%addr, "subscriber connection: the server was busy; subscribing again");
                        carried = waiting;
                        true
                    }
                    Err(Ended::Broken(reason)) => {
                        warn!(%addr, %reason, "subscriber connection lost");
                        false
                    }
                };
                if let Some(inner) = hub.upgrade() {
                    Hub { inner }.link_down(&addr);
                }
                if refused {
                    continue;
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
                // A sync waits for nobody while the server is away (dropped: answered).
                r = rx.recv() => if r.is_none() { return },
            }
        }
        // A backend the hub no longer wants anything of (a failed master replaced) is not
        // retried until it does again.
        let Some(inner) = hub.upgrade() else { return };
        if !(Hub { inner }).wants(&addr) && rx.recv().await.is_none() {
            return;
        }
    }
}

/// Serves one connection: `Ok` when the hub let it go, `Err` with why it broke.
/// `waiting`: syncs of an earlier connection, answered once this one has `first`.
async fn serve(
    addr: &Arc<str>,
    mut r: impl AsyncRead + Unpin,
    mut w: impl AsyncWrite + Unpin,
    first: Vec<Bytes>,
    waiting: Vec<oneshot::Sender<()>>,
    rx: &mut mpsc::UnboundedReceiver<Cmd>,
    hub: &Weak<HubInner>,
) -> Result<(), Ended> {
    let broken = |e: std::io::Error| Ended::Broken(e.to_string());
    let mut wbuf = BytesMut::new();
    for req in first {
        wbuf.extend_from_slice(&req);
    }
    // Markers sent and not answered yet: number, who waits (none for a keep-alive), when.
    let mut syncs: VecDeque<(u64, Option<oneshot::Sender<()>>, Instant)> = VecDeque::new();
    let mut next_sync: u64 = 0;
    for tx in waiting {
        next_sync += 1;
        wbuf.extend_from_slice(&marker(next_sync));
        syncs.push_back((next_sync, Some(tx), Instant::now()));
    }
    w.write_all(&wbuf).await.map_err(broken)?;
    w.flush().await.map_err(broken)?;
    wbuf.clear();
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut scanner = ReplyScanner::default();
    let mut pending = Vec::new();
    let mut keepalive = tokio::time::interval_at(Instant::now() + KEEPALIVE, KEEPALIVE);
    // Since a `-BUSY`: what was sent may not be on the server; markers ask when it is over.
    let mut refused = false;
    let mut probe = tokio::time::interval(BUSY_PROBE);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            _ = keepalive.tick() => {
                // An idle subscriber connection hears nothing from a server that vanished
                // without a reset: a marker it does not answer says so. A busy server answers
                // (`-BUSY`), and its markers stay unanswered until it is not.
                let silent = if refused {
                    heard.elapsed() >= KEEPALIVE
                } else {
                    syncs.front().is_some_and(|(_, _, at)| at.elapsed() >= KEEPALIVE)
                };
                if silent {
                    return Err(Ended::Broken(format!(
                        "no reply to a PING for {} s",
                        KEEPALIVE.as_secs()
                    )));
                }
                if refused {
                    // The probes ask already.
                    continue;
                }
                next_sync += 1;
                w.write_all(&marker(next_sync)).await.map_err(broken)?;
                w.flush().await.map_err(broken)?;
                syncs.push_back((next_sync, None, Instant::now()));
            }
            // Only whether one is answered matters: kept nowhere, however long the script.
            _ = probe.tick(), if refused => {
                w.write_all(&marker(0)).await.map_err(broken)?;
                w.flush().await.map_err(broken)?;
            }
            n = rx.recv_many(&mut pending, 64) => {
                if n == 0 {
                    return Ok(());
                }
                for cmd in pending.drain(..) {
                    match cmd {
                        Cmd::Request(req) => wbuf.extend_from_slice(&req),
                        Cmd::Sync(tx) => {
                            next_sync += 1;
                            wbuf.extend_from_slice(&marker(next_sync));
                            syncs.push_back((next_sync, Some(tx), Instant::now()));
                        }
                    }
                }
                w.write_all(&wbuf).await.map_err(broken)?;
                // A no-op on a plain socket; TLS may hold the last record back until it.
                w.flush().await.map_err(broken)?;
                wbuf.clear();
            }
            read = r.read_buf(&mut rbuf) => {
                match read {
                    Ok(0) => return Err(Ended::Broken("connection closed by server".into())),
                    Ok(_) => heard = Instant::now(),
                    Err(e) => return Err(broken(e)),
                }
                let Some(inner) = hub.upgrade() else { return Ok(()) };
                let hub = Hub { inner };
                while let Some(n) = scanner
                    .next_len(&rbuf)
                    .map_err(|e| Ended::Broken(e.to_string()))?
                {
                    let frame = rbuf.split_to(n).freeze();
                    match frame.first() {
                        Some(b'>') => hub.deliver(addr, frame),
                        Some(b'$') => {
                            let Some(n) = sync_mark(&frame) else { continue };
                            if refused {
                                // Answered: the server is free again. What it refused is
                                // asked again on a new connection, before anyone waiting
                                // here is answered.
                                let waiting = syncs.into_iter().filter_map(|(_, tx, _)| tx);
                                return Err(Ended::Refused(waiting.collect()));
                            }
                            while syncs.front().is_some_and(|(k, _, _)| *k <= n) {
                                if let Some((_, Some(tx), _)) = syncs.pop_front() {
                                    let _ = tx.send(());
                                }
                            }
                        }
                        Some(b'+') => hub.tracking_confirmed(addr),
                        Some(b'-') if frame.starts_with(b"-BUSY") => refused = true,
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

/// The request of sync marker `n`: `PING tessera-sync-<n>`, answered with its argument.
fn marker(n: u64) -> Vec<u8> {
    let mut arg = SYNC_PREFIX.to_vec();
    arg.extend_from_slice(n.to_string().as_bytes());
    let mut out = format!("*2\r\n$4\r\nPING\r\n${}\r\n", arg.len()).into_bytes();
    out.extend_from_slice(&arg);
    out.extend_from_slice(b"\r\n");
    out
}

/// The number of a sync marker's PING reply (`$n\r\ntessera-sync-<k>\r\n`).
fn sync_mark(frame: &[u8]) -> Option<u64> {
    let start = memchr::memchr(b'\n', frame)? + 1;
    let body = frame.get(start..frame.len().checked_sub(2)?)?;
    let digits = body.strip_prefix(SYNC_PREFIX)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Connects, runs the login's steps and switches to RESP3.
async fn connect(addr: &str, login: &Login) -> Result<Stream, String> {
    crate::backend::connect_logged_in(addr, login, tessera_resp::Proto::Resp3)
        .await
        .map_err(|e| e.to_string())
}
