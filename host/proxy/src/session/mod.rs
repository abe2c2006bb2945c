//! One client connection, driving each command through the data path's stages in one
//! direction:
//!
//! ```text
//! read → decode (resp) → classify (stages::classify) → plugin layer (plugins)
//!      → plan (stages::plan) → send (send) → resolve + merge (reply, stages::merge)
//!      → observers (plugins) → output buffer → write
//! ```
//!
//! A pipeline read in one go is dispatched as a whole (up to `MAX_BATCH` commands) before any
//! reply is awaited, so its commands run concurrently on every backend they touch; replies
//! still leave in order. What the session holds for its client is bounded: the bytes of an
//! unfinished request (`query_buffer_limit`, and the proxy-wide `query_buffer_total`), the
//! replies it has not read (`output_buffer_*`, see `limits`), and the commands in flight.

mod blocking;
mod commandlog;
mod hold;
mod hot_cache;
mod local;
mod lookahead;
mod plugins;
mod pubsub;
mod reply;
mod scripts;
mod send;
#[cfg(test)]
mod tests;
mod tracking;
mod transaction;

use std::rc::Rc;
use std::task::Poll;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::clients::Registration;
use crate::stages::classify::classify;
use crate::stages::merge::Merge;
use crate::stages::plan::{Plan, plan};
use crate::telemetry::Measured;
use crate::worker::Worker;
use plugins::{Decision, Observers, PluginMerge, RewriteMerge};
use reply::{Gather, Pending};
use send::Sender;
use tessera_model::command::{CommandId, Kind, Local, Options};
use tessera_model::error::{DataError, Side};
use tessera_model::limits::{OutputAccount, Overflow};
use tessera_model::login::Login;
use tessera_model::router::{SlotId, SlotTable};
use tessera_model::tls::Stream;
use tessera_model::users::User;
use tessera_resp::{Limits, Proto, Request, RequestDecoder};
use transaction::Transaction;

/// Read buffer size; a pipeline larger than this is handled over several rounds.
const READ_CHUNK: usize = 16 * 1024;
/// Commands of one client dispatched before their replies are awaited; more wait in the read
/// buffer (bounds the replies and bookkeeping one client has in flight).
const MAX_BATCH: usize = 1024;
/// Replies accumulated past this are written out (without waiting) while later ones are
/// still being resolved.
const FLUSH_AT: usize = 64 * 1024;

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
    /// The backend login for its commands, and the logins version it was made for.
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

/// Polls `fut` once: its output if it is ready now.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

/// One command's place in the reply order.
///
/// Every command's record is built, moved into the batch's queue and moved out again: it is
/// kept within 128 bytes, past which those moves become `memmove` calls (issue 14's record
/// had grown to 176 bytes and `memmove` to 3 % of the proxy's CPU, docs/bench.md). What only
/// some commands carry is boxed.
struct Queued {
    reply: QueuedReply,
    observers: Observers,
    /// The request as read (its bytes, not a copy), for the command log, the per-slot
    /// counters and the hot-key count once the reply is in.
    req: bytes::Bytes,
    /// A mirror copy or a hot-key cache fill to make once the reply is in.
    extra: Option<Box<Extra>>,
    id: Option<CommandId>,
    /// The first key (where it lies in `req`), when the hot-key count samples this command.
    hot_key: Option<KeyAt>,
    /// The slot of the command's first key (`NO_SLOT`: keyless), for the per-slot counters.
    slot: u16,
    /// Whether the slow log times it (not a command that waits by design).
    timed: bool,
}

const _: () = assert!(std::mem::size_of::<Queued>() <= 128);

/// What few commands carry to their reply.
#[derive(Default)]
struct Extra {
    /// To be mirrored (docs/mirroring.md).
    mirror: Option<Box<crate::mirror::Ticket>>,
    /// A GET whose reply fills the hot-key cache.
    hot_fill: Option<hot_cache::HotFill>,
    /// What the command may have written that a hot-key cache could hold: counted again once
    /// its reply is in (see `session::hot_cache`).
    hot_write: crate::hotcache::Written,
}

/// Where a key lies in its request's bytes (a request's arguments never start at 0).
#[derive(Clone, Copy)]
struct KeyAt {
    start: std::num::NonZeroU32,
    len: u32,
}

/// `Queued::slot` of a command without keys.
const NO_SLOT: u16 = u16::MAX;

enum QueuedReply {
    One(Pending),
    /// A rewrite whose replies the plugin merges (boxed: rare, and large).
    PluginMerged(Box<(Vec<Pending>, PluginMerge)>),
}

impl Queued {
    fn new(reply: QueuedReply, observers: Observers, id: Option<CommandId>) -> Self {
        Self {
            reply,
            observers,
            req: bytes::Bytes::new(),
            extra: None,
            id,
            hot_key: None,
            slot: NO_SLOT,
            timed: false,
        }
    }

    /// A command that may hold its connection: the batch ends with it.
    fn blocked(&self) -> bool {
        matches!(self.reply, QueuedReply::One(Pending::Blocked(_)))
    }

    fn error(id: Option<CommandId>, e: &DataError) -> Self {
        Self::new(
            QueuedReply::One(Pending::error(e)),
            Observers::default(),
            id,
        )
    }
}

impl KeyAt {
    /// The key's bytes in `req`.
    fn of(self, req: &[u8]) -> Option<&[u8]> {
        let start = self.start.get() as usize;
        req.get(start..start + self.len as usize)
    }
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
            tx: Transaction::default(),
            tracking: None,
            lookahead: lookahead::Lookahead::default(),
            plugins_on: false,
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
        let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
        let mut wbuf = BytesMut::with_capacity(READ_CHUNK);
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
            if rbuf.is_empty() && rbuf.capacity() > 4 * READ_CHUNK {
                rbuf = BytesMut::with_capacity(READ_CHUNK);
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
        let deadline = match (idle, auth) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let read = async {
            match &deadline {
                Some((at, _)) => tokio::time::timeout_at(*at, self.stream.read_buf(rbuf))
                    .await
                    .ok(),
                None => Some(self.stream.read_buf(rbuf).await),
            }
        };
        tokio::select! {
            biased;
            _ = self.stop.changed() => Err(End::Shutdown),
            r = read => match r {
                None => Err(deadline.map_or(End::Idle, |(_, end)| end)),
                Some(Ok(0)) => Err(End::ClientClosed),
                Some(Ok(_)) => Ok(()),
                Some(Err(e)) => Err(End::Io(e)),
            },
            _ = self.subs.ready() => Ok(()),
        }
    }

    /// Makes room in the read buffer for the next read. An unfinished request larger than the
    /// buffer grows it at most twofold per step (never to a length the client only announced),
    /// and what grows past `READ_CHUNK` is taken from the proxy's request memory first.
    fn make_room(&mut self, rbuf: &mut BytesMut) -> Result<(), DataError> {
        if rbuf.capacity() - rbuf.len() >= READ_CHUNK / 4 {
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
                self.login = self.worker.data_login(&now);
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
                self.login = self.worker.data_login(r);
            }
        }
    }

    /// One request through classify, the plugin layer, plan and send.
    fn dispatch(&mut self, req: Request) -> Queued {
        let c = match self.lookahead.take_classified(&req) {
            Some(c) => c,
            None => match classify(&req, &self.worker.shared.policy(), self.rights.as_deref()) {
                Ok(c) => c,
                Err(e) => {
                    self.tx.refused();
                    return Queued::error(None, &e);
                }
            },
        };
        let mut q = self.dispatch_classified(&c);
        // Forwarded to the backends, not answered or refused by the proxy or a plugin.
        if self.worker.shared.mirror.on()
            && !matches!(
                q.reply,
                QueuedReply::One(Pending::Ready(_) | Pending::After(..))
            )
            && let Some(t) = self.worker.shared.mirror.ticket(&c, self.proto)
        {
            q.extra.get_or_insert_default().mirror = Some(t);
        }
        // A command on several slots (MGET split, …) counts on its first key's slot: one
        // hash per command, where spreading it would cost one per key.
        if let Some(&k) = c.keys.first() {
            q.slot = if self.routes_on {
                // Another cluster's keys (a prefix route) are that cluster's to count.
                let slot = self
                    .worker
                    .shared
                    .router
                    .load()
                    .slot_of(req.arg(k as usize));
                if SlotTable::is_routed(slot) {
                    NO_SLOT
                } else {
                    slot.0
                }
            } else {
                SlotId::of_key(req.arg(k as usize)).0
            };
            if self.worker.hotkeys.wants() {
                let (start, len) = req.arg_range(k as usize);
                q.hot_key = std::num::NonZeroU32::new(start).map(|start| KeyAt { start, len });
            }
        }
        q.timed = !c.blocks() && c.cmd.kind != Kind::Wait;
        q.req = req.into_bytes();
        q
    }

    /// A classified request through the plugin layer, plan and send.
    fn dispatch_classified(&mut self, c: &crate::stages::classify::Classified<'_>) -> Queued {
        let id = Some(c.cmd.id);
        if let Some(e) = self.pubsub_refuses(c) {
            return Queued::error(id, &e);
        }
        let decision = self.run_plugins(c);
        if self.tx.queuing() && !transaction::runs_while_queuing(c.cmd.kind) {
            // Between MULTI and EXEC a plugin may let a command through or refuse it; what
            // it would answer or rewrite cannot be part of the block sent to the server.
            let e = match decision {
                Decision::Continue(obs) => {
                    return Queued::new(QueuedReply::One(self.queue(c)), obs, id);
                }
                Decision::Fail(e) => e,
                Decision::Reply(..) | Decision::Rewrite(_) => {
                    DataError::NotInTransaction(tessera_model::error::display_name(c.cmd.name))
                }
            };
            self.tx.refused();
            return Queued::error(id, &e);
        }
        let mut hot_fill = None;
        // Counted when sent, so a GET later in this batch is not answered from the cache
        // (nor a GET of another worker filled) with what this write is about to change.
        let mut hot_write = crate::hotcache::Written::Nothing;
        let (reply, observers) = match decision {
            Decision::Continue(obs) => {
                hot_write = self.hot_cache_written(c);
                self.worker.hot_cache.wrote(&hot_write);
                let reply = match self.hot_cache_lookup(c) {
                    hot_cache::Cached::Hit(b) => Pending::Ready(b),
                    hot_cache::Cached::Fill(t) => {
                        let reply = self.execute(c);
                        hot_fill = self.hot_cache_ask_ttl(t);
                        reply
                    }
                    hot_cache::Cached::Pass => self.execute(c),
                };
                self.tracked(c);
                (QueuedReply::One(reply), obs)
            }
            Decision::Reply(b, obs) => (QueuedReply::One(Pending::Ready(b)), obs),
            Decision::Fail(e) => return Queued::error(id, &e),
            Decision::Rewrite(rewrite) => {
                let plugins::Rewrite {
                    name,
                    commands,
                    merge,
                    observers,
                } = *rewrite;
                let parts = commands
                    .into_iter()
                    .map(|r| self.execute_rewritten(&name, r, &mut hot_write))
                    .collect();
                let reply = match merge {
                    RewriteMerge::Host(code) => {
                        QueuedReply::One(Pending::Gather(Box::new(Gather {
                            parts,
                            merge: Merge::Abi(code),
                            proto: self.proto,
                        })))
                    }
                    RewriteMerge::Plugin(pm) => QueuedReply::PluginMerged(Box::new((parts, pm))),
                };
                (reply, observers)
            }
        };
        let mut q = Queued::new(reply, observers, id);
        if hot_fill.is_some() || hot_write != crate::hotcache::Written::Nothing {
            q.extra = Some(Box::new(Extra {
                mirror: None,
                hot_fill,
                hot_write,
            }));
        }
        q
    }

    /// Plans and sends a classified command (or answers it, if it is the session's own).
    #[inline]
    fn execute(&mut self, c: &crate::stages::classify::Classified<'_>) -> Pending {
        if self.fenced && !matches!(c.cmd.kind, Kind::Local(_)) {
            return Pending::error(&DataError::Fenced);
        }
        match c.cmd.kind {
            Kind::Transaction(t) => return self.transaction(t, c),
            Kind::Wait => {
                let wait = blocking::wait(self.worker.clone(), c.req.as_bytes().clone());
                return Pending::Blocked(Box::pin(wait));
            }
            Kind::Library(_) if c.cmd.name == "SCRIPT|LOAD" => return self.script_load(c),
            Kind::PubSub(_) | Kind::Local(Local::Ping) => {
                if let Some(p) = self.pubsub_execute(c) {
                    return p;
                }
            }
            _ if c.blocks() => return self.blocking(c),
            _ => {}
        }
        let table = self.worker.shared.router.load();
        match plan(c, &table) {
            Ok(Plan::Local(l)) => self.local(l, c),
            Ok(p) if c.cmd.options == Options::ScriptCall => {
                scripts::send_call(&self.sender(&table), c, p)
            }
            Ok(p) => self.sender(&table).send(p, self.proto),
            Err(DataError::SlotBlocked(slot)) if !self.tx.queuing() => self.hold(c, slot),
            Err(e) => Pending::error(&e),
        }
    }

    /// A command on a slot being handed over: held until the handoff's next table.
    #[cold]
    fn hold(&mut self, c: &crate::stages::classify::Classified<'_>, slot: u16) -> Pending {
        if self.worker.shared.config.slot_hold_ms == 0 {
            return Pending::error(&DataError::SlotBlocked(slot));
        }
        let held = hold::Held {
            worker: self.worker.clone(),
            slot,
            req: c.req.clone(),
            rights: self.rights.clone(),
            proto: self.proto,
            login: self.login.clone(),
            account: self.account.clone(),
        };
        Pending::Blocked(Box::pin(held.run()))
    }

    /// A command that may block: on a dedicated connection, routed when it starts.
    fn blocking(&mut self, c: &crate::stages::classify::Classified<'_>) -> Pending {
        let slot = match c.slot(&self.worker.shared.router.load()) {
            Ok(s) => s,
            Err(e) => return Pending::error(&e),
        };
        let b = blocking::Blocking {
            worker: self.worker.clone(),
            proto: self.proto,
            login: self.login.clone(),
            account: self.account.clone(),
            slot,
            client: self.reg.info.id,
            req: c.req.as_bytes().clone(),
        };
        Pending::Blocked(Box::pin(b.run()))
    }

    /// One command of a plugin's rewrite: classified like any (so a rewrite gets no rights
    /// its client lacks), not shown to plugins again. What it may write is added to `written`
    /// (and counted now, as for any command sent).
    fn execute_rewritten(
        &mut self,
        plugin: &str,
        req: Request,
        written: &mut crate::hotcache::Written,
    ) -> Pending {
        let policy = self.worker.shared.policy();
        match classify(&req, &policy, self.rights.as_deref()) {
            Ok(c) => {
                let w = self.hot_cache_written(&c);
                self.worker.hot_cache.wrote(&w);
                written.add(w);
                self.execute(&c)
            }
            Err(e) if e.side() == Side::Client => Pending::error(&DataError::PluginBadRewrite {
                name: plugin.into(),
                reason: e.to_string().into(),
            }),
            Err(e) => Pending::error(&e),
        }
    }

    fn sender<'a>(&'a self, table: &'a SlotTable) -> Sender<'a> {
        Sender {
            worker: &self.worker,
            table,
            proto: self.proto,
            login: &self.login,
            account: &self.account,
        }
    }

    /// Resolves the queued replies in order into `wbuf` and writes them, closing the client if
    /// it goes over its output limits meanwhile.
    async fn write_replies(
        &mut self,
        queue: &mut Vec<Queued>,
        wbuf: &mut BytesMut,
        started: Instant,
        batch: Batch,
    ) -> Result<(), End> {
        let mut batch = Some(batch);
        if queue.is_empty() {
            return Ok(());
        }
        let stats = &self.worker.shared.command_stats;
        let slot_stats = &self.worker.shared.slot_stats;
        let conn = self.reg.info.id;
        let account = self.account.clone();
        for q in queue.drain(..) {
            let mut at = wbuf.len();
            match q.reply {
                // The common shapes first, without building a future per reply.
                QueuedReply::One(Pending::Ready(b)) => wbuf.extend_from_slice(&b),
                QueuedReply::One(Pending::One(mut rx)) => {
                    let r = match poll_once(&mut rx).await {
                        Poll::Ready(r) => r,
                        Poll::Pending => tokio::select! {
                            biased;
                            o = account.overflowed() => return Err(End::Output(o)),
                            r = &mut rx => r,
                        },
                    };
                    match reply::taken(r, &account) {
                        Ok(b) => wbuf.extend_from_slice(&b),
                        Err(e) => wbuf.extend_from_slice(&e.reply()),
                    }
                }
                QueuedReply::One(Pending::Blocked(f)) => {
                    // Last of its batch (see `Queued::blocked`): the replies before it leave
                    // now, and it no longer holds a table swap (it counts itself in flight
                    // while it is sent, see `blocking`).
                    drop(batch.take());
                    if !wbuf[..at].is_empty() {
                        let write = self.stream.send_all(&wbuf[..at]);
                        tokio::select! {
                            biased;
                            o = account.overflowed() => return Err(End::Output(o)),
                            r = write => r.map_err(End::Io)?,
                        }
                        account.release(at);
                        wbuf.clear();
                        at = 0;
                    }
                    let r = tokio::select! {
                        biased;
                        o = account.overflowed() => return Err(End::Output(o)),
                        _ = self.stop.changed() => return Err(End::Shutdown),
                        _ = client_gone(&self.stream) => return Err(End::ClientClosed),
                        r = f => r,
                    };
                    match reply::taken(r, &account) {
                        Ok(b) => wbuf.extend_from_slice(&b),
                        Err(e) => wbuf.extend_from_slice(&e.reply()),
                    }
                }
                reply => {
                    let resolve = std::pin::pin!(async {
                        match reply {
                            QueuedReply::One(p) => p.write_into(wbuf, &account).await,
                            QueuedReply::PluginMerged(merged) => {
                                let (parts, pm) = *merged;
                                match reply::resolve_all(parts, &account).await {
                                    Ok(replies) => pm.merge(&replies, wbuf),
                                    Err(e) => wbuf.extend_from_slice(&e.reply()),
                                }
                            }
                        }
                    });
                    tokio::select! {
                        biased;
                        o = account.overflowed() => return Err(End::Output(o)),
                        _ = resolve => {}
                    }
                }
            }
            if let Some(o) = account.overflow() {
                return Err(End::Output(o));
            }
            let mut extra = q.extra.map(|e| *e).unwrap_or_default();
            // Counted again now the write is done, before its client can see the reply: a GET
            // sent in between (by anyone on this proxy) filled nothing, and none hits after.
            self.worker.hot_cache.wrote(&extra.hot_write);
            if let Some(t) = extra.hot_fill.take() {
                self.hot_cache_fill(t, &wbuf[at..]);
            }
            // Read once the reply is in: the counters' time, and the clock observers see.
            let now = Instant::now();
            if !q.observers.is_empty() {
                let _clock = tessera_wasm::clock::pin(now);
                q.observers.apply(conn, wbuf, at);
            }
            account.charge(wbuf.len() - at);
            if let Some(id) = q.id {
                let error = matches!(wbuf.get(at), Some(b'-' | b'!'));
                stats.record(id, error, now - started);
                // Timed from the batch's dispatch: a clock read per command at dispatch cost
                // ~10 % of requests per CPU-second at P16 (docs/commandlog.md).
                let m = Measured {
                    duration: q.timed.then(|| now - started),
                    bytes_in: q.req.len(),
                    bytes_out: wbuf.len() - at,
                };
                if self.worker.shared.command_log.wants(&m) {
                    self.log_command(&m, &q.req);
                }
            }
            if let Some(t) = extra.mirror {
                self.worker.mirror.send(t, &wbuf[at..]);
            }
            if q.slot != NO_SLOT {
                slot_stats.record(q.slot, q.req.len(), wbuf.len() - at);
            }
            if let Some(key) = q.hot_key.and_then(|k| k.of(&q.req)) {
                self.worker
                    .hotkeys
                    .record(key, q.req.len(), wbuf.len() - at);
            }
            if wbuf.len() >= FLUSH_AT {
                // Without waiting: a slow reader must not hold the batch (and a table swap
                // waiting for it) while the later replies are still being resolved.
                match self.stream.try_write(wbuf) {
                    Ok(n) => {
                        wbuf.advance(n);
                        account.release(n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(End::Io(e)),
                }
            }
        }
        // Every reply is in: this batch no longer holds back a table swap.
        drop(batch);
        let write = self.stream.send_all(wbuf);
        tokio::select! {
            biased;
            o = account.overflowed() => return Err(End::Output(o)),
            r = write => r.map_err(End::Io)?,
        }
        account.release(wbuf.len());
        wbuf.clear();
        if wbuf.capacity() > 4 * 1024 * 1024 {
            *wbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        self.reg.info.touch();
        Ok(())
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

/// Resolves when the client has closed its side; never, once it has sent more (a pipeline
/// after a blocking command is read when the command is answered).
///
/// TLS: a client closing politely sends `close_notify` (bytes) before its FIN, so the peek
/// would see "more" and wait for ever; there the FIN itself is watched for (`EPOLLRDHUP`,
/// tokio's read-closed readiness), whatever bytes came before it. Bytes waiting are left
/// unread and so is their readiness (cleared, the session's next read would wait for an edge
/// that never comes); with bytes waiting the readiness is looked at again every 250 ms.
async fn client_gone(stream: &Stream) {
    match stream {
        Stream::Plain(tcp) => {
            let mut b = [0u8; 1];
            if let Ok(n) = tcp.peek(&mut b).await
                && n > 0
            {
                std::future::pending::<()>().await;
            }
        }
        Stream::Tls(_) => {
            let tcp = stream.tcp();
            loop {
                match tcp.ready(tokio::io::Interest::READABLE).await {
                    Ok(r) if r.is_read_closed() => return,
                    Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
                    Err(_) => return,
                }
            }
        }
    }
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
