//! One backend connection: a task owning the socket, fed by a channel. It connects lazily on
//! the first request, logs in (see [`Login`]), writes every queued request in one syscall, and
//! hands each reply to the oldest waiting request, charging it to that request's client.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use tokio::time::Instant;
use tracing::{debug, warn};

use super::ReplyResult;
use super::local::{QueueRx, QueueTx, SlotRx, SlotTx, queue, slot};
use tessera_model::error::DataError;
use tessera_model::fence::Fence;
use tessera_model::limits::OutputAccount;
use tessera_model::login::{Login, LoginStep};
use tessera_model::tls::Stream;
use tessera_resp::{Proto, ReplyScanner};

/// Settings shared by every connection of a proxy.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    /// A connection with requests outstanding and no reply for this long is declared dead.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub stats: Arc<BackendStats>,
    /// A reply growing past this many bytes drops the connection (its requests fail): the
    /// bound on what a server that is not one of the cluster's (a mirror's shadow) can make
    /// the proxy hold. `usize::MAX` for the cluster's own servers.
    pub max_reply: usize,
    /// The proxy's fence (`tessera_model::fence`): checked before each write, so a request routed
    /// before the proxy froze is not written after it woke fenced. Never closed for a static
    /// proxy, nor for a server that is not one of the cluster's (a mirror's shadow).
    pub fence: Arc<Fence>,
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

struct Request {
    bytes: Bytes,
    /// Replies before the one delivered that belong to this request and are dropped (a
    /// transaction's `+OK` and `+QUEUED`s: only `EXEC`'s reply is the client's).
    skip: u32,
    tx: SlotTx<ReplyResult>,
    /// The client the reply is held for, until it takes it.
    account: Option<Rc<OutputAccount>>,
}

/// Where one reply will arrive. Its bytes are charged to the client's output account (if one
/// was given) from the moment they arrive: whoever takes the reply releases them
/// (`OutputAccount::release`); a reply never taken stays charged until the account goes,
/// with its session.
pub struct ReplyRx {
    rx: SlotRx<ReplyResult>,
}

impl ReplyRx {
    /// A reply that is `err` already: the request was never sent.
    pub fn failed(err: DataError) -> Self {
        let (tx, rx) = slot();
        let _ = tx.send(Err(err));
        Self { rx }
    }
}

impl Future for ReplyRx {
    /// The reply; a connection task gone without answering is `BackendDropped`.
    type Output = ReplyResult;

    #[inline]
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = std::task::ready!(std::pin::Pin::new(&mut self.rx).poll(cx));
        Poll::Ready(r.unwrap_or_else(|| Err(DataError::BackendDropped)))
    }
}

/// What a reporting connection ([`BackendConn::spawn_reporting`]) tells its owner, on the
/// worker's thread: pushes are what the server sends unasked (a `CLIENT TRACKING`
/// connection's invalidations).
pub enum ConnEvent {
    /// Logged in (its login's steps done) and about to write its first request.
    Connected,
    /// The connection broke; the next request connects again.
    Lost,
    /// An out-of-band `>` push.
    Push(Bytes),
}

/// Where a reporting connection's events go.
pub type Events = Rc<dyn Fn(ConnEvent)>;

/// A login step a reporting connection works out at each connect, run where its login's
/// steps allow (`Login::with_step`): one that names another connection, whose id is known
/// only once that one is connected. `Err` fails the connect with its reason.
pub type LateStep =
    Rc<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Result<LoginStep, String>>>>>;

/// Handle to a connection task; cheap to clone. The task ends once every handle is gone and
/// the requests in flight have their replies.
#[derive(Clone)]
pub struct BackendConn {
    tx: QueueTx<Request>,
    addr: Arc<str>,
}

/// Requests larger than this are written straight from their own buffer, not copied.
const COPY_LIMIT: usize = 8 * 1024;
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How soon a connection refused at login by a server busy with a script tries again.
const BUSY_RETRY: Duration = Duration::from_millis(25);
/// Read buffer size; it doubles while a large reply arrives.
const READ_CHUNK: usize = 16 * 1024;

impl BackendConn {
    /// Starts the connection task on the current thread's `LocalSet`.
    pub fn spawn(addr: Arc<str>, proto: Proto, login: Login, opts: BackendOptions) -> Self {
        Self::spawn_owned(addr, proto, login, opts).0
    }

    /// Like `spawn`, with the task's abort handle: aborting it closes the socket at once,
    /// even with a request still waiting (a blocked command).
    pub fn spawn_owned(
        addr: Arc<str>,
        proto: Proto,
        login: Login,
        opts: BackendOptions,
    ) -> (Self, tokio::task::AbortHandle) {
        Self::start(addr, proto, login, opts, None)
    }

    /// Like `spawn_owned`, telling `events` of its connects, losses and pushes, and running
    /// `late` in its login at each connect.
    pub fn spawn_reporting(
        addr: Arc<str>,
        proto: Proto,
        login: Login,
        opts: BackendOptions,
        events: Events,
        late: Option<LateStep>,
    ) -> (Self, tokio::task::AbortHandle) {
        Self::start(addr, proto, login, opts, Some((events, late)))
    }

    fn start(
        addr: Arc<str>,
        proto: Proto,
        login: Login,
        opts: BackendOptions,
        reporting: Option<(Events, Option<LateStep>)>,
    ) -> (Self, tokio::task::AbortHandle) {
        let (tx, rx) = queue();
        let (events, late) = match reporting {
            Some((events, late)) => (Some(events), late),
            None => (None, None),
        };
        let task = ConnTask {
            addr: addr.clone(),
            proto,
            login,
            opts,
            rx,
            events,
            late,
        };
        let handle = tokio::task::spawn_local(task.run());
        (Self { tx, addr }, handle.abort_handle())
    }

    /// Queues `bytes` (exact RESP) and returns where its reply will arrive; the reply is held
    /// on `account`'s behalf until taken.
    pub fn send(&self, bytes: Bytes, account: Option<&Rc<OutputAccount>>) -> ReplyRx {
        self.send_block(bytes, 0, account)
    }

    /// Queues `bytes`, several requests written contiguously, whose last reply is the one
    /// returned: the `skip` replies before it are read and dropped.
    pub fn send_block(
        &self,
        bytes: Bytes,
        skip: u32,
        account: Option<&Rc<OutputAccount>>,
    ) -> ReplyRx {
        let (tx, rx) = slot();
        let req = Request {
            bytes,
            skip,
            tx,
            account: account.cloned(),
        };
        if let Err(r) = self.tx.send(req) {
            let _ =
                r.tx.send(Err(unavailable(&self.addr, "connection task stopped")));
        }
        ReplyRx { rx }
    }

    pub fn addr(&self) -> &Arc<str> {
        &self.addr
    }
}

fn unavailable(addr: &Arc<str>, reason: &str) -> DataError {
    DataError::BackendUnavailable {
        addr: addr.clone(),
        reason: reason.into(),
    }
}

struct ConnTask {
    addr: Arc<str>,
    proto: Proto,
    login: Login,
    opts: BackendOptions,
    rx: QueueRx<Request>,
    events: Option<Events>,
    late: Option<LateStep>,
}

/// A request written and waiting for its reply.
struct InFlight {
    at: Instant,
    skip: u32,
    tx: SlotTx<ReplyResult>,
    account: Option<Rc<OutputAccount>>,
}

impl InFlight {
    /// A request that is not written, to answer with an error.
    fn unwritten(req: Request) -> Self {
        InFlight {
            at: Instant::now(),
            skip: req.skip,
            tx: req.tx,
            account: req.account,
        }
    }

    fn deliver(self, r: ReplyResult) {
        let len = r.as_ref().map_or(0, Bytes::len);
        if let Some(a) = &self.account {
            a.charge(len);
        }
        if self.tx.send(r).is_err()
            && let Some(a) = &self.account
        {
            // The client is gone: nobody holds the reply.
            a.release(len);
        }
    }
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
                    self.tell(ConnEvent::Connected);
                    // Plain: the socket's own halves, no lock between them (the hot path);
                    // TLS: one state shared by both directions, so tokio's locked split.
                    let lost = match stream {
                        Stream::Plain(s) => {
                            let (r, w) = s.into_split();
                            self.serve(r, w, first).await
                        }
                        tls => {
                            let (r, w) = tokio::io::split(tls);
                            self.serve(r, w, first).await
                        }
                    };
                    if self.rx.is_closed() && self.rx.is_empty() {
                        return;
                    }
                    self.tell(ConnEvent::Lost);
                    self.opts
                        .stats
                        .connection_losses
                        .fetch_add(1, Ordering::Relaxed);
                    let reason = &lost.reason;
                    warn!(addr = %self.addr, %reason, "backend connection lost");
                    // A server that answered properly, or went quiet (the timeout spaced it
                    // already), is reconnected to at once: a restart, a pause. One that broke
                    // the protocol, sent a reply over `max_reply` or closed without answering
                    // would do the same again on the next connection, which costs a connect
                    // and a read of up to `max_reply` per request (a hostile mirror shadow):
                    // the next connect waits as after a failed one.
                    if lost.again_soon {
                        failures += 1;
                        let err = unavailable(&self.addr, reason);
                        if !self.back_off(failures, &err).await {
                            return;
                        }
                    } else {
                        failures = 0;
                    }
                }
                Err(ConnectError::Busy(reply)) => {
                    // Not a failure: the server is up and will serve once the script ends.
                    debug!(addr = %self.addr, "backend busy with a script at connect");
                    InFlight::unwritten(first).deliver(Ok(reply.clone()));
                    if !self.wait_busy(&reply).await {
                        return;
                    }
                }
                Err(ConnectError::Failed(reason)) => {
                    self.opts
                        .stats
                        .connect_failures
                        .fetch_add(1, Ordering::Relaxed);
                    failures += 1;
                    warn!(addr = %self.addr, %reason, failures, "backend connect failed");
                    let err = unavailable(&self.addr, &reason);
                    let _ = first.tx.send(Err(err.clone()));
                    if !self.back_off(failures, &err).await {
                        return;
                    }
                }
            }
        }
    }

    fn tell(&self, e: ConnEvent) {
        if let Some(events) = &self.events {
            events(e);
        }
    }

    /// Waits before the next connect (25 ms doubling per failure, at most `MAX_BACKOFF`),
    /// failing the requests that arrive meanwhile with `err`: fail fast while the server
    /// stays down instead of queueing behind it. `false` once every handle is gone.
    async fn back_off(&mut self, failures: u32, err: &DataError) -> bool {
        let backoff =
            (Duration::from_millis(25) * 2u32.saturating_pow(failures.min(10))).min(MAX_BACKOFF);
        let until = Instant::now() + backoff;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return true,
                r = self.rx.recv() => match r {
                    Some(r) => { let _ = r.tx.send(Err(err.clone())); }
                    None => return false,
                },
            }
        }
    }

    /// Waits `BUSY_RETRY` before connecting again to a server that was running a script,
    /// answering the requests that arrive meanwhile with its `-BUSY` reply, as the server
    /// itself answers any command then. `false` once every handle is gone.
    async fn wait_busy(&mut self, reply: &Bytes) -> bool {
        let until = Instant::now() + BUSY_RETRY;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return true,
                r = self.rx.recv() => match r {
                    Some(r) => InFlight::unwritten(r).deliver(Ok(reply.clone())),
                    None => return false,
                },
            }
        }
    }

    async fn connect(&self) -> Result<Stream, ConnectError> {
        let fut = async {
            let login = match &self.late {
                Some(late) => self.login.with_step(late().await?, self.login.id),
                None => self.login.clone(),
            };
            connect_logged_in(&self.addr, &login, self.proto).await
        };
        match tokio::time::timeout(self.opts.connect_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(ConnectError::Failed(format!(
                "connect timed out after {} ms",
                self.opts.connect_timeout.as_millis()
            ))),
        }
    }

    /// Runs the connection until it breaks, or until every handle is gone and the requests
    /// in flight have their replies; returns why. Requests in flight when it breaks are failed
    /// here; requests still queued stay queued for the next connection.
    async fn serve(
        &mut self,
        mut r: impl AsyncRead + Unpin,
        mut w: impl AsyncWrite + Unpin,
        first: Request,
    ) -> Lost {
        let inflight: std::cell::RefCell<VecDeque<InFlight>> = Default::default();
        // Set when no handle is left: the reader ends once nothing is in flight.
        let closed = std::cell::Cell::new(false);
        let served = std::cell::Cell::new(false);
        let wake = tokio::sync::Notify::new();
        let timeout = self.opts.timeout;
        let rx = &mut self.rx;
        let stats = &self.opts.stats;
        let fence = &self.opts.fence;
        let events = &self.events;
        let writer = async {
            let mut batch = vec![first];
            let mut wbuf = BytesMut::with_capacity(16 * 1024);
            loop {
                if !fence.serving() {
                    // Routed with a table this proxy may no longer hold (it froze or lost the
                    // store between routing and now): failed, certainly unwritten.
                    for req in batch.drain(..) {
                        InFlight::unwritten(req).deliver(Err(DataError::Fenced));
                    }
                }
                let now = Instant::now();
                if !batch.is_empty() {
                    stats
                        .requests
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    stats.batches.fetch_add(1, Ordering::Relaxed);
                }
                // The batch's requests in `inflight` (its back), and whether any byte of the
                // batch has reached the socket.
                let (mut queued, mut started) = (0usize, false);
                let mut reqs = batch.drain(..);
                let mut fenced = false;
                while let Some(req) = reqs.next() {
                    inflight.borrow_mut().push_back(InFlight {
                        at: now,
                        skip: req.skip,
                        tx: req.tx,
                        account: req.account,
                    });
                    queued += 1;
                    if req.bytes.len() < COPY_LIMIT {
                        wbuf.extend_from_slice(&req.bytes);
                        continue;
                    }
                    if !wbuf.is_empty() {
                        fenced = write_fenced(&mut w, &wbuf, fence, started).await?;
                        wbuf.clear();
                        started |= !fenced;
                    }
                    if !fenced {
                        fenced = write_fenced(&mut w, &req.bytes, fence, started).await?;
                        started |= !fenced;
                    }
                    if fenced {
                        // The fence closed before this batch wrote a byte: every request of it
                        // fails as unwritten, and the connection stays in step.
                        for req in reqs.by_ref() {
                            InFlight::unwritten(req).deliver(Err(DataError::Fenced));
                        }
                    }
                }
                drop(reqs);
                if !fenced && !wbuf.is_empty() {
                    fenced = write_fenced(&mut w, &wbuf, fence, started).await?;
                }
                wbuf.clear();
                if fenced {
                    let mut inflight = inflight.borrow_mut();
                    let from = inflight.len() - queued;
                    for f in inflight.drain(from..) {
                        f.deliver(Err(DataError::Fenced));
                    }
                }
                // A no-op on a plain socket; TLS may hold the last record back until it.
                w.flush().await.map_err(|e| e.to_string())?;
                if rx.recv_many(&mut batch, 512).await == 0 {
                    closed.set(true);
                    wake.notify_one();
                    return std::future::pending::<Result<(), String>>().await;
                }
            }
        };
        let reader = async {
            let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
            let mut scanner = ReplyScanner::default();
            loop {
                loop {
                    match scanner.next_len(&rbuf) {
                        Ok(Some(n)) => {
                            let reply = rbuf.split_to(n).freeze();
                            if reply.first() == Some(&b'>') {
                                // Out-of-band: never requested, never routed; only a
                                // reporting connection's owner hears of it.
                                if let Some(events) = events {
                                    events(ConnEvent::Push(reply));
                                }
                                continue;
                            }
                            let mut inflight = inflight.borrow_mut();
                            match inflight.front_mut() {
                                Some(f) if f.skip > 0 => f.skip -= 1,
                                Some(_) => {
                                    let f = inflight.pop_front().expect("front exists");
                                    f.deliver(Ok(reply));
                                    served.set(true);
                                }
                                None => {
                                    return Err::<(), (String, Ending)>((
                                        "reply without a request".into(),
                                        Ending::Misbehaved,
                                    ));
                                }
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            return Err((
                                format!("protocol error from server: {e}"),
                                Ending::Misbehaved,
                            ));
                        }
                    }
                }
                if closed.get() && inflight.borrow().is_empty() {
                    return Err(("no longer used".into(), Ending::Quiet));
                }
                if rbuf.len() > self.opts.max_reply {
                    // The reply is dropped, not read to its end: its request learns why.
                    if let Some(f) = inflight.borrow_mut().pop_front() {
                        f.deliver(Err(DataError::ReplyTooLarge {
                            addr: self.addr.clone(),
                            limit: self.opts.max_reply,
                        }));
                    }
                    return Err((
                        format!("a reply over {} bytes", self.opts.max_reply),
                        Ending::Misbehaved,
                    ));
                }
                grow(&mut rbuf);
                let read = tokio::select! {
                    r = tokio::time::timeout(timeout, r.read_buf(&mut rbuf)) => r,
                    _ = wake.notified() => continue,
                };
                match read {
                    Ok(Ok(0)) => {
                        return Err(("connection closed by server".into(), Ending::Closed));
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err((e.to_string(), Ending::Closed)),
                    Err(_) => {
                        let stuck = inflight
                            .borrow()
                            .front()
                            .is_some_and(|f| f.at.elapsed() >= timeout);
                        if stuck {
                            return Err((
                                format!("no reply for {} ms", timeout.as_millis()),
                                Ending::Quiet,
                            ));
                        }
                    }
                }
            }
        };
        let (reason, ending) = tokio::select! {
            r = writer => (r.err().unwrap_or_default(), Ending::Closed),
            r = reader => r.err().unwrap_or((String::new(), Ending::Quiet)),
        };
        let err = unavailable(&self.addr, &reason);
        for f in inflight.into_inner() {
            f.deliver(Err(err.clone()));
        }
        Lost {
            reason,
            again_soon: match ending {
                Ending::Misbehaved => true,
                Ending::Closed => !served.get(),
                Ending::Quiet => false,
            },
        }
    }
}

/// How a connection ended.
struct Lost {
    reason: String,
    /// The next connection would likely end the same way at once: the server broke the
    /// protocol, sent a reply over `max_reply`, or closed without answering anything.
    again_soon: bool,
}

/// What ended a connection, as the reader saw it.
enum Ending {
    /// A protocol error, a reply over `max_reply`, a reply nobody asked for.
    Misbehaved,
    /// Closed by the server, or a socket error.
    Closed,
    /// No reply within the timeout (which already spaces reconnects), or no longer used.
    Quiet,
}

/// Writes all of `buf` while the fence stays open, checking it in the same poll as each
/// write to the socket: no `.await` lies between a check and its write, so a proxy that
/// froze after one check and wakes past its fence writes nothing more (a freeze within that
/// one poll is closed at the servers; see `tessera_model::fence`). `Ok(true)`: fenced before
/// any of `buf` was written (the caller fails its requests as unwritten), which `started`
/// (part of the batch already written) turns into an error: a request half on the wire
/// leaves the connection out of step, so it is dropped and its requests' outcome is unknown.
///
/// # Errors
/// A socket error, or the fence closing partway.
async fn write_fenced(
    w: &mut (impl AsyncWrite + Unpin),
    buf: &[u8],
    fence: &Fence,
    started: bool,
) -> Result<bool, String> {
    let mut at = 0;
    std::future::poll_fn(|cx| {
        while at < buf.len() {
            if !fence.serving() {
                return Poll::Ready(if at == 0 && !started {
                    Ok(true)
                } else {
                    Err("the fence closed partway through a write".into())
                });
            }
            match std::pin::Pin::new(&mut *w).poll_write(cx, &buf[at..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err("the socket took no bytes".into())),
                Poll::Ready(Ok(n)) => at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(false))
    })
    .await
}

/// Makes room to read more. An unfinished reply that fills the buffer doubles it: growing a
/// shared `BytesMut` by a fixed step copies the whole reply each time (quadratic in a large
/// reply's size; a 10 MB reply stalled every client of the worker).
fn grow(rbuf: &mut BytesMut) {
    if rbuf.capacity() - rbuf.len() < 4096 {
        rbuf.reserve(rbuf.len().max(READ_CHUNK));
    }
}

/// Connects to `addr` (with TLS if its group is marked so, see `tls::backend`), runs
/// `login`'s steps and, for RESP3, `HELLO 3`: a connection that acts as the login's user and
/// speaks `proto` (every backend connection's handshake, the shared ones', the dedicated
/// ones' and the pub/sub hub's).
///
/// # Errors
/// The server is busy running a script ([`ConnectError::Busy`]: `ACL SETUSER` is refused
/// then), the connection failed, or a step's reply was refused (its text says which).
pub async fn connect_logged_in(
    addr: &str,
    login: &Login,
    proto: Proto,
) -> Result<Stream, ConnectError> {
    let mut s = tessera_model::tls::backend::backends()
        .connect(addr)
        .await?;
    for step in login.steps.iter() {
        s.send_all(&step.request).await.map_err(|e| e.to_string())?;
        let reply = read_one(&mut s).await?;
        if !(step.accept)(&reply) {
            if reply.starts_with(b"-BUSY ") {
                return Err(ConnectError::Busy(reply));
            }
            return Err(ConnectError::Failed(format!(
                "{} refused: {}",
                step.what,
                String::from_utf8_lossy(&reply).trim_end()
            )));
        }
    }
    if proto == Proto::Resp3 {
        s.send_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let reply = read_one(&mut s).await?;
        if !reply.starts_with(b"%") {
            return Err(ConnectError::Failed(format!(
                "HELLO 3 refused: {}",
                String::from_utf8_lossy(&reply).trim_end()
            )));
        }
    }
    Ok(s)
}

/// Why a connection could not be made ready to serve.
#[derive(Debug)]
pub enum ConnectError {
    /// A login step was answered `-BUSY`: the server is running a script or a function. Its
    /// reply, which is what Redis answers any command with until the script ends.
    Busy(Bytes),
    /// The connection failed, or a login step was refused (the text says which).
    Failed(String),
}

impl From<String> for ConnectError {
    fn from(reason: String) -> Self {
        Self::Failed(reason)
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Busy(reply) => write!(
                f,
                "the server is busy running a script: {}",
                String::from_utf8_lossy(reply).trim_end()
            ),
            Self::Failed(reason) => f.write_str(reason),
        }
    }
}

/// Reads exactly one reply (used only during the handshake).
async fn read_one(s: &mut Stream) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(512);
    let mut scanner = ReplyScanner::default();
    loop {
        if let Some(n) = scanner.next_len(&buf).map_err(|e| e.to_string())? {
            return Ok(buf.split_to(n).freeze());
        }
        grow(&mut buf);
        if s.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("connection closed during handshake".into());
        }
    }
}
