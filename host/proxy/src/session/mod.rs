//! One client connection: a loop of named stages, each handing a value to the next.
//!
//! ```text
//! read → decode (resp, lookahead) → classify (stages::classify) → plugins (plugins)
//!      → plan (stages::plan) → send (send)                          [dispatch: → Queued]
//!      → resolve (respond, reply, stages::merge) → after_reply → write   [respond]
//! ```
//!
//! A pipeline read in one go is dispatched as a whole (up to `MAX_BATCH` commands) before any
//! reply is awaited, so its commands run concurrently on every backend they touch; replies
//! still leave in order. What the session holds for its client is bounded: the bytes of an
//! unfinished request (`query_buffer_limit`, and the proxy-wide `query_buffer_total`), the
//! replies it has not read (`output_buffer_*`, see `limits`), and the commands in flight.

mod after_reply;
mod blocking;
mod commandlog;
mod dispatch;
mod hold;
mod hot_cache;
mod local;
mod lookahead;
mod maintenance;
mod own_conns;
mod plugins;
mod pubsub;
mod pubsub_counts;
mod queued;
mod reply;
mod respond;
mod scripts;
mod send;
#[cfg(test)]
mod stage_tests;
#[cfg(test)]
mod tests;
mod tracking;
mod transaction;

use std::rc::Rc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::clients::Registration;
use crate::worker::Worker;
use queued::Queued;
use tessera_model::error::{DataError, Side};
use tessera_model::limits::{OutputAccount, Overflow};
use tessera_model::login::Login;
use tessera_model::tls::Stream;
use tessera_model::users::User;
use tessera_resp::{Limits, Proto, RequestDecoder};
use transaction::Transaction;

/// Read buffer size; a pipeline larger than this is handled over several rounds.
const READ_CHUNK: usize = crate::buffers::CHUNK;
/// Commands of one client dispatched before their replies are awaited; more wait in the read
/// buffer (bounds the replies and bookkeeping one client has in flight).
const MAX_BATCH: usize = 1024;

pub struct Session {
    worker: Rc<Worker>,
    /// Plain TCP or TLS (the handshake is done before the session starts).
    stream: Stream,
    stop: watch::Receiver<bool>,
    reg: Registration,
    decoder: RequestDecoder,
    proto: Proto,
    /// Whose rights the session has; `None` until it authenticates (when AUTH is required).
    rights: Option<std::sync::Arc<User>>,
    /// The backend login for its commands (in its database), and the logins version it was
    /// made for.
    login: Login,
    login_version: u64,
    /// The users table version `rights` was read from: a new table applies to the session
    /// from its next batch.
    users_version: u64,
    /// The proxy was fenced when the batch being dispatched was read (`fence::Fence`).
    fenced: bool,
    /// The table in force routes key prefixes to other clusters (read once per batch).
    routes_on: bool,
    /// Bytes held for this client's replies.
    account: Rc<OutputAccount>,
    /// Bytes of the read buffer counted against the proxy's request memory (given back when
    /// the session is dropped, however it ends).
    input: tessera_model::limits::Held,
    auth_failures: u32,
    /// After a failed AUTH: nothing more is read before then.
    pause_until: Option<tokio::time::Instant>,
    /// Set by QUIT: answer, then close.
    closing: bool,
    /// A command of this batch outside a transaction awaits a reply (from a connection that
    /// keeps no order with a transaction's own).
    sent_ahead: bool,
    /// Which lane this batch's data requests take, per backend (`Lane::Scripts`).
    lanes: send::BatchLanes,
    /// CLIENT REPLY: which of its commands' replies the client gets.
    replies: Replies,
    /// The command being dispatched is one whose reply CLIENT REPLY leaves out.
    silent: bool,
    /// MULTI's queue and WATCH's connection.
    tx: Transaction,
    /// Its pub/sub subscriptions and the messages waiting for it.
    subs: pubsub::Subscriptions,
    /// CLIENT TRACKING, while on.
    tracking: Option<tracking::ClientTracking>,
    /// Requests decoded ahead for the plugin layer's pre-pass (`lookahead`).
    lookahead: lookahead::Lookahead,
    /// The plugin chain had plugins when the batch being dispatched was read: looked at once
    /// a batch (a chain installed meanwhile applies from the next batch). A flag, not the
    /// chain's `Arc`: holding that would count every batch of every worker on one shared
    /// reference count.
    plugins_on: bool,
    /// CLIENT MAINT_NOTIFICATIONS: asked for, and whether `MOVING` was sent.
    maint: maintenance::Maint,
}

// Every idle client holds one (inside its task's future): what it grows by is paid per
// connection (800 bytes once the lookahead's parked fields went, 904 before).
const _: () = assert!(std::mem::size_of::<Session>() <= 800);

/// `CLIENT REPLY`, as Redis has it: every reply (`ON`), none (`OFF`, its own included), or
/// none for itself and the next command (`SKIP`). Commands still run; only their replies are
/// left unwritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replies {
    On,
    Off,
    Skip,
}

/// Why a session ended (logged at debug level, or warn for limits).
#[derive(Debug)]
enum End {
    ClientClosed,
    Quit,
    Idle,
    AuthTimeout,
    Shutdown,
    /// The stream broke a rule (protocol error, or a limit of the request side).
    Refused(#[allow(dead_code)] DataError), // read by the log through `Debug`
    /// The user it authenticated as was removed or disabled.
    UserRevoked,
    Output(#[allow(dead_code)] Overflow),
    Io(#[allow(dead_code)] std::io::Error),
}

impl Session {
    pub fn new(worker: Rc<Worker>, stream: Stream, stop: watch::Receiver<bool>) -> Self {
        let _ = stream.tcp().set_nodelay(true);
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
        let local = stream
            .local_addr()
            .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
        let shared = &worker.shared;
        let reg = shared.clients.register(peer, local);
        let rights = shared.users.load().connect_as();
        let mut decoder = RequestDecoder::new(shared.config.limits());
        if rights.is_none() {
            // Redis's caps for unauthenticated clients (its fix for CVE-2021-32675).
            decoder.set_pre_auth_limits(Some(Limits::UNAUTHENTICATED));
        }
        let account = OutputAccount::new(shared.config.output_limits(), shared.replies.clone());
        let login = match &rights {
            Some(r) => worker.data_login(r),
            None => Login::none(),
        };
        let input = tessera_model::limits::Held::new(shared.requests.clone());
        Self {
            subs: pubsub::Subscriptions::new(worker.pubsub.clone()),
            login_version: worker.logins_version(),
            users_version: shared.users.load().version(),
            fenced: false,
            routes_on: false,
            worker,
            stream,
            stop,
            reg,
            decoder,
            proto: Proto::Resp2,
            rights,
            login,
            account,
            input,
            auth_failures: 0,
            pause_until: None,
            closing: false,
            sent_ahead: false,
            lanes: Default::default(),
            silent: false,
            replies: Replies::On,
            tx: Transaction::default(),
            tracking: None,
            lookahead: lookahead::Lookahead::default(),
            plugins_on: false,
            maint: maintenance::Maint::Off,
        }
    }

    pub async fn run(mut self) {
        let end = self.serve().await;
        let (client, addr) = (self.reg.info.id, self.reg.info.addr);
        match &end {
            End::Refused(e) if e.side() == Side::Limit => {
                warn!(client, %addr, error = %e, "closing a client over a limit")
            }
            End::Output(o) => warn!(
                client, %addr, held = self.account.held(), overflow = ?o,
                "closing a client over its output buffer limit"
            ),
            _ => debug!(client, %addr, ?end, "session closed"),
        }
    }

    async fn serve(&mut self) -> End {
        // Held only while busy (`buffers`).
        let mut rbuf = BytesMut::new();
        let mut wbuf = BytesMut::new();
        let mut queue: Vec<Queued> = Vec::new();
        let connected = tokio::time::Instant::now();
        // Complete requests left in the buffer by a batch that reached MAX_BATCH.
        let mut buffered = false;
        loop {
            if let Some(at) = self.pause_until.take() {
                tokio::select! {
                    biased;
                    _ = self.stop.changed() => return End::Shutdown,
                    _ = tokio::time::sleep_until(at) => {}
                }
            }
            if !buffered {
                if let Err(e) = self.make_room(&mut rbuf) {
                    return self.refuse(e, &mut wbuf).await;
                }
                match self.read(&mut rbuf, connected).await {
                    Ok(()) => {}
                    Err(end) => return end,
                }
            }
            if !self.refresh_rights() {
                return End::UserRevoked;
            }
            self.refresh_login();
            // Read once per batch, when its bytes are in: see `fence::Fence`.
            self.fenced = !self.worker.shared.router.fence.serving();
            self.plugins_on = !self.worker.shared.plugins.chain().is_empty();
            self.routes_on = self.worker.shared.router.load().has_routes();
            let started = Instant::now();
            let batch = Batch::enter(self.worker.clone());
            // The previous batch's replies are all in: no order left to keep.
            self.lanes.clear();
            self.sent_ahead = false;
            let mut refused = None;
            buffered = false;
            // Plugins timing a command see the batch's dispatch (the loop below never awaits).
            let clock = self.plugins_on.then(|| tessera_wasm::clock::pin(started));
            loop {
                if queue.len() >= MAX_BATCH {
                    buffered = true;
                    break;
                }
                match self.next_request(&mut rbuf, MAX_BATCH - queue.len()) {
                    Ok(Some(req)) => {
                        let q = self.dispatch(req);
                        let blocked = q.blocked();
                        queue.push(q);
                        if self.closing || self.pause_until.is_some() || blocked {
                            buffered = !rbuf.is_empty() || !self.lookahead.is_empty();
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let e = DataError::from(e);
                        queue.push(Queued::error(None, &e));
                        refused = Some(e);
                        break;
                    }
                }
            }
            drop(clock);
            if refused.is_none()
                && let Err(e) = self.check_query_buffer(&rbuf)
            {
                queue.push(Queued::error(None, &e));
                refused = Some(e);
            }
            if let Err(end) = self
                .write_replies(&mut queue, &mut wbuf, started, batch)
                .await
            {
                return end;
            }
            if let Some(e) = refused {
                return End::Refused(e);
            }
            if self.closing {
                return End::Quit;
            }
            if rbuf.is_empty() && !buffered {
                // Nothing unfinished: the buffer goes back to the worker until more comes.
                self.worker.buffers.give(&mut rbuf);
                self.release_input(0);
            }
        }
    }

    /// Reads more of the client's bytes, within the idle and pre-auth timeouts.
    async fn read(
        &mut self,
        rbuf: &mut BytesMut,
        connected: tokio::time::Instant,
    ) -> Result<(), End> {
        self.deliver_pubsub().await?;
        let config = &self.worker.shared.config;
        // A subscriber waits for messages, not commands: no idle timeout (as in Redis).
        let idle = config
            .idle_timeout()
            .filter(|_| !self.subs.subscribed())
            .map(|t| (tokio::time::Instant::now() + t, End::Idle));
        let auth = match self.rights {
            None => config
                .auth_timeout()
                .map(|t| (connected + t, End::AuthTimeout)),
            Some(_) => None,
        };
        // Told MOVING: served until the client goes, within the grace.
        let moving = self.maint.moving_until().map(|t| (t, End::Shutdown));
        let deadline = [idle, auth, moving]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at);
        let buffers = &self.worker.buffers;
        let read = async {
            let read = read_into(&mut self.stream, rbuf, buffers);
            match &deadline {
                Some((at, _)) => tokio::time::timeout_at(*at, read).await.ok(),
                None => Some(read.await),
            }
        };
        let draining = self.maint.moving_until().is_some();
        let r = tokio::select! {
            biased;
            _ = self.stop.changed(), if !draining => Err(End::Shutdown),
            r = read => match r {
                None => Err(deadline.map_or(End::Idle, |(_, end)| end)),
                Some(Ok(0)) => Err(End::ClientClosed),
                Some(Ok(_)) => Ok(()),
                Some(Err(e)) => Err(End::Io(e)),
            },
            _ = self.subs.ready() => Ok(()),
        };
        match r {
            // The proxy started to drain (not the grace's end: that comes as the deadline).
            Err(End::Shutdown) if !draining && self.maint != maintenance::Maint::Off => {
                self.stopping().await
            }
            r => r,
        }
    }

    /// Makes room in the read buffer for the next read. An unfinished request larger than the
    /// buffer grows it at most twofold per step (never to a length the client only announced),
    /// and what grows past `READ_CHUNK` is taken from the proxy's request memory first. No
    /// buffer held (nothing unfinished): the read takes one when there is something to read.
    fn make_room(&mut self, rbuf: &mut BytesMut) -> Result<(), DataError> {
        if rbuf.capacity() == 0 || rbuf.capacity() - rbuf.len() >= READ_CHUNK / 4 {
            return Ok(());
        }
        let want = self.decoder.wanted(rbuf);
        let grow = want.clamp(READ_CHUNK, rbuf.len().max(READ_CHUNK));
        let counted = (rbuf.len() + grow).saturating_sub(READ_CHUNK);
        if !self.input.try_grow_to(counted) {
            return Err(DataError::ProxyRequestMemory {
                limit: self.worker.shared.requests.limit(),
            });
        }
        rbuf.reserve(grow);
        Ok(())
    }

    /// Gives back the read buffer's share of the proxy's request memory, down to `keep`.
    fn release_input(&mut self, keep: usize) {
        self.input.shrink_to(keep);
    }

    /// An unfinished request over the client's query buffer limit, counting what its header
    /// announced as well as what arrived.
    fn check_query_buffer(&self, rbuf: &BytesMut) -> Result<(), DataError> {
        let limit = self.worker.shared.config.query_buffer_limit;
        if rbuf.len() + self.decoder.wanted_capped(rbuf, limit) > limit {
            return Err(DataError::QueryBufferLimit { limit });
        }
        Ok(())
    }

    /// Answers `e` and ends the session.
    async fn refuse(&mut self, e: DataError, wbuf: &mut BytesMut) -> End {
        wbuf.extend_from_slice(&e.reply());
        let _ = self.stream.send_all(wbuf).await;
        End::Refused(e)
    }

    /// A new users table applies to a session already authenticated, as Redis applies an ACL
    /// change to its clients at once: new rights from the next batch (and the backend login
    /// they make), or `false` when its user was removed or disabled and the session must end.
    fn refresh_rights(&mut self) -> bool {
        let users = self.worker.shared.users.load();
        if users.version() == self.users_version {
            return true;
        }
        self.users_version = users.version();
        let Some(rights) = &self.rights else {
            return true;
        };
        match users.current(&rights.name) {
            Some(now) if now == *rights => true,
            Some(now) => {
                self.login = self.data_login(&now);
                self.rights = Some(now);
                true
            }
            None => false,
        }
    }

    /// A new plugin chain or backend admin user changes the data login.
    fn refresh_login(&mut self) {
        let v = self.worker.logins_version();
        if v != self.login_version {
            self.login_version = v;
            if let Some(r) = &self.rights {
                self.login = self.data_login(r);
            }
        }
    }

    /// The client database it selected (`SELECT`), kept in its registration (which `CLIENT
    /// LIST` reads): no field of its own, so an idle session stays as small.
    fn db(&self) -> u32 {
        self.reg.info.db()
    }

    /// The backend login of `user` in the session's database (its backends' number for it:
    /// `tessera_model::databases`).
    fn data_login(&self, user: &User) -> Login {
        let db = tessera_model::databases::backend_db(self.db());
        self.worker.data_login(user).in_db(db)
    }
}

impl Drop for Session {
    /// Here, not at the end of `run`: a session task that panics or is cancelled never gets
    /// there. Everything else a session holds is a guard of its own and goes with it: the
    /// client list entry (`Registration`), the request memory (`input`), the output account,
    /// subscriptions and tracking (`Subscriptions`, `ClientTracking`), a transaction's queue,
    /// a blocked command's dedicated connection; the `max_clients` slot is the task's.
    fn drop(&mut self) {
        self.plugins_close();
    }
}

/// Reads what the client sent into `rbuf`. Holding no buffer (an idle client's case), it
/// waits for the socket to be readable first and takes one from the worker's spares then.
async fn read_into(
    stream: &mut Stream,
    rbuf: &mut BytesMut,
    buffers: &crate::buffers::Buffers,
) -> std::io::Result<usize> {
    if rbuf.capacity() == 0 {
        if let Stream::Plain(tcp) = stream {
            loop {
                tcp.readable().await?;
                *rbuf = buffers.take();
                match tcp.try_read_buf(rbuf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => buffers.give(rbuf),
                    r => return r,
                }
            }
        }
        // TLS keeps bytes of its own behind the socket's readiness: read as usual.
        *rbuf = buffers.take();
    }
    stream.read_buf(rbuf).await
}

/// A batch of commands counted as in flight (see `Shared::drain`) until dropped, even if the
/// session is cancelled half way.
struct Batch {
    worker: Rc<Worker>,
    phase: usize,
}

impl Batch {
    fn enter(worker: Rc<Worker>) -> Self {
        let phase = worker.shared.enter();
        Self { worker, phase }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.worker.shared.leave(self.phase);
    }
}
