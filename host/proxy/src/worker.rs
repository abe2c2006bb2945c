//! What a proxy's worker threads share (`Shared`: config, routing table, clients, counters,
//! plugins, the in-flight accounting behind a table swap's acknowledgement) and what each
//! worker owns (`Worker`: its backend connections, its warm plugin instances). Sessions run
//! on a worker; the listener in `proxy` and the admin API in `api` sit above this module.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::acl::{self, PolicyInputs};
use crate::backend::{BackendStats, DedicatedLimit, DedicatedPool, Pool};
use crate::clients::ClientRegistry;
use crate::config::ProxyConfig;
use crate::plugins::PluginHost;
use crate::pubsub::Hub;
use crate::stages::classify::Policy;
use crate::telemetry::{CommandStats, HotKeyRecorder, HotKeys, SlotStats};
use tessera_model::limits::MemoryPool;
use tessera_model::login::Login;
use tessera_model::redis_client::Credential;
use tessera_model::router::Router;
use tessera_model::users::User;

/// State every worker shares.
pub struct Shared {
    pub config: ProxyConfig,
    pub router: Arc<Router>,
    pub clients: Arc<ClientRegistry>,
    pub stats: Stats,
    pub command_stats: CommandStats,
    /// Operations and bytes per slot (`GET /api/proxy/slots`).
    pub slot_stats: SlotStats,
    /// The slow, large-request and large-reply logs (SLOWLOG, COMMANDLOG).
    pub command_log: crate::telemetry::CommandLog,
    /// The hot keys the workers publish (`GET /api/proxy/hotkeys`).
    pub hotkeys: Arc<HotKeys>,
    /// What the workers' hot-key caches share: their figures and the proxy's write counters.
    pub hot_cache: Arc<crate::hotcache::HotCacheShared>,
    pub backend_stats: Arc<BackendStats>,
    pub plugins: PluginHost,
    /// Mirroring to a shadow target (settings and counters; docs/mirroring.md).
    pub mirror: crate::mirror::Mirror,
    /// The users clients may AUTH as: proxy.toml's, or the cluster's once loaded or pushed.
    pub users: arc_swap::ArcSwap<tessera_model::users::Users>,
    pub started: Instant,
    /// Shutting down: the listener is closed, in-flight commands finish (`/api/proxy/info`).
    pub draining: std::sync::atomic::AtomicBool,
    pub listen_addr: SocketAddr,
    /// The proxy fleet as Redis Cluster clients see it (`CLUSTER SLOTS` …).
    pub peers: crate::peers::Peers,
    /// The TLS listener's address and certificate, when it has one.
    pub tls: Option<(SocketAddr, Arc<tessera_model::tls::ServerTls>)>,
    /// Memory held for unfinished requests, all clients together.
    pub requests: Arc<MemoryPool>,
    /// Memory held for replies clients have not read yet.
    pub replies: Arc<MemoryPool>,
    /// Dedicated backend connections (blocking commands, WATCH) per backend, all workers.
    pub dedicated: Arc<DedicatedLimit>,
    /// Clients that receive other clients' invalidations (CLIENT TRACKING … REDIRECT).
    pub redirects: Arc<crate::pubsub::Redirects>,
    /// This proxy's subscribers per channel, pattern and shard channel, every worker's.
    pub sub_counts: Arc<crate::pubsub::counts::Counts>,
    /// The cluster's other proxies, asked for theirs (`PUBLISH`, `PUBSUB NUMSUB`).
    pub fleet: crate::pubsub::fleet::Fleet,
    /// Where each client blocked in a command is blocked: its proxy client id → the backend
    /// and that backend's id of the dedicated connection (for CLIENT UNBLOCK).
    pub blocked_on: std::sync::Mutex<FxHashMap<u64, (Arc<str>, i64)>>,
    /// The backend user with full rights (cluster mode: the cluster's; static mode: the
    /// config's); `None`: Redis's `default` user.
    backend_admin: RwLock<Option<Credential>>,
    /// Cluster mode: the name every backend connection takes (`CLIENT SETNAME`), after this
    /// proxy's registration, so the dashboard can close them should it lapse.
    backend_name: std::sync::OnceLock<String>,
    /// Bumped when what the backend logins derive from changes (admin user, plugin chain).
    logins_version: AtomicU64,
    /// Sessions open (admitted against `max_clients`).
    active: AtomicUsize,
    /// Command batches in flight, counted in two alternating phases so a table swap can wait
    /// for every batch routed under the old table (see `drain`).
    inflight: [AtomicUsize; 2],
    phase: AtomicUsize,
    /// Bumped when a table swap starts draining: commands blocked on a backend (which count
    /// as in flight) look at the new table and, if their slot moved, are unblocked there and
    /// sent again to the new owner.
    swaps: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    pub fn new(config: ProxyConfig, router: Arc<Router>, listen_addr: SocketAddr) -> Self {
        let clients = Arc::new(ClientRegistry::default());
        let plugins = PluginHost::new(clients.clone(), config.threads(), config.plugin_hook_sample);
        let requests = Arc::new(MemoryPool::new(config.query_buffer_total));
        let replies = Arc::new(MemoryPool::new(config.output_buffer_total));
        let backend_admin = RwLock::new(config.backend_admin());
        let dedicated = DedicatedLimit::new(config.dedicated_connections);
        let slot_stats = SlotStats::new(config.threads());
        let command_log = crate::telemetry::CommandLog::new(&config.commandlog());
        let hotkeys = Arc::new(HotKeys::new(config.hotkeys.clone(), config.threads()));
        // Start-up checks the table first (`tessera proxy` fails with the reason); should an
        // invalid one get here anyway, no one logs in rather than everyone.
        let users = config.users_table().unwrap_or_else(|e| {
            tracing::error!(error = %e, "invalid users table: every AUTH will fail");
            tessera_model::users::Users::refuse_all(0)
        });
        Self {
            mirror: crate::mirror::Mirror::new(config.mirror.clone()),
            users: arc_swap::ArcSwap::from_pointee(users),
            requests,
            replies,
            dedicated,
            redirects: Arc::default(),
            sub_counts: Arc::default(),
            fleet: Default::default(),
            blocked_on: std::sync::Mutex::default(),
            backend_admin,
            backend_name: std::sync::OnceLock::new(),
            logins_version: AtomicU64::new(1),
            config,
            router,
            clients,
            plugins,
            stats: Stats::default(),
            command_stats: CommandStats::default(),
            slot_stats,
            command_log,
            hotkeys,
            hot_cache: Arc::default(),
            backend_stats: Arc::default(),
            started: Instant::now(),
            draining: std::sync::atomic::AtomicBool::new(false),
            listen_addr,
            peers: crate::peers::Peers::new(
                crate::peers::Peer::new(
                    &format!("static:{listen_addr}:{}", std::process::id()),
                    &listen_addr.to_string(),
                )
                .expect("a socket address is host:port"),
            ),
            tls: None,
            active: AtomicUsize::new(0),
            inflight: Default::default(),
            phase: AtomicUsize::new(0),
            swaps: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Admits one more session if fewer than `max_clients` are open. The slot is the guard's
    /// until it is dropped, however its session ends (a panicking session task included).
    pub fn admit(self: &Arc<Self>) -> Option<Admission> {
        let max = self.config.max_clients;
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Admission(self.clone()))
    }

    /// Sessions open now.
    pub fn sessions(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// The rules every command is classified by.
    #[inline]
    pub fn policy(&self) -> Policy {
        Policy {
            admin_commands: self.config.admin_commands,
            scripts_confined: self.config.backend_acl,
            databases: self.config.databases(),
        }
    }

    /// Sets the backend admin user (cluster mode: read from the cluster's meta).
    pub fn set_backend_admin(&self, c: Option<Credential>) {
        *self
            .backend_admin
            .write()
            .expect("backend admin lock poisoned") = c;
        self.logins_version.fetch_add(1, Ordering::Relaxed);
    }

    /// Names every backend connection made from now on after this proxy's registration
    /// `token` (cluster mode; set once, before any client is served).
    pub fn name_backend_connections(&self, token: &str) {
        if self
            .backend_name
            .set(tessera_model::fence::backend_connection_name(token))
            .is_ok()
        {
            self.logins_version.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A session starts a batch of commands (it will route them with the table in force now).
    #[inline]
    pub(crate) fn enter(&self) -> usize {
        let p = self.phase.load(Ordering::SeqCst);
        self.inflight[p].fetch_add(1, Ordering::SeqCst);
        p
    }

    /// Tells of each table swap as it starts draining (see `swaps`).
    pub(crate) fn swaps(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swaps.subscribe()
    }

    /// The batch started in phase `p` has all its replies.
    #[inline]
    pub(crate) fn leave(&self, p: usize) {
        self.inflight[p].fetch_sub(1, Ordering::SeqCst);
    }

    /// After a table swap: waits until no batch that may have routed with an older table
    /// is still waiting for a backend, so the swap's acknowledgement means no command routed
    /// the old way is still in flight (a write pipelined to a slot's old owner cannot land
    /// after its handoff's final copy). Swaps must not run concurrently.
    ///
    /// # Errors
    /// Batches still in flight after `limit` (a backend not answering).
    pub async fn drain(&self, limit: Duration) -> Result<(), usize> {
        let old = self.phase.load(Ordering::SeqCst);
        self.phase.store(1 - old, Ordering::SeqCst);
        self.swaps.send_modify(|n| *n += 1);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = self.inflight[old].load(Ordering::SeqCst);
            if left == 0 {
                self.hubs_caught_up(deadline).await;
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(left);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Shared {
    /// Waits (up to `HUB_CATCH_UP`, within `deadline`) until every worker's pub/sub hub has
    /// moved its subscriptions to where the table in force wants them, so a push is
    /// acknowledged only once this proxy's subscribers are subscribed at the new owners (see
    /// docs/pubsub.md). A hub whose backend does not answer delays it no longer than that.
    async fn hubs_caught_up(&self, deadline: tokio::time::Instant) {
        let epoch = self.router.load().epoch;
        let until = deadline.min(tokio::time::Instant::now() + HUB_CATCH_UP);
        while !self.router.followers_at(epoch) && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// How long a table swap's acknowledgement waits for the pub/sub hubs at most.
const HUB_CATCH_UP: Duration = Duration::from_secs(2);

/// One admitted session's `max_clients` slot, released on drop.
pub struct Admission(Arc<Shared>);

impl Drop for Admission {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Process-wide connection counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Clients waiting in a blocking command or WAIT now (INFO's `blocked_clients`).
    pub blocked: AtomicU64,
    /// Clients with CLIENT TRACKING on now (INFO's `tracking_clients`).
    pub tracking: AtomicU64,
    /// Sockets on the TLS listener closed without a finished handshake: refused, not TLS,
    /// or timed out (INFO's `proxy_tls_handshake_failures`).
    pub tls_handshake_failures: AtomicU64,
    /// Clients sent a `MOVING` push as the proxy drained (`session::maintenance`).
    pub moving_sent: AtomicU64,
}

/// Counts one client in a gauge of `Stats` while it lives.
pub struct Counted(Arc<Shared>, fn(&Stats) -> &AtomicU64);

impl Counted {
    pub fn new(shared: &Arc<Shared>, gauge: fn(&Stats) -> &AtomicU64) -> Self {
        gauge(&shared.stats).fetch_add(1, Ordering::Relaxed);
        Self(shared.clone(), gauge)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        (self.1)(&self.0.stats).fetch_sub(1, Ordering::Relaxed);
    }
}

/// One worker thread's context: shared state plus its own backend connections.
pub struct Worker {
    pub shared: Arc<Shared>,
    pub pool: Pool,
    /// This thread's idle dedicated connections (blocking commands, WATCH).
    pub dedicated: Rc<DedicatedPool>,
    /// This thread's warm plugin instances (created with the first plugin).
    pub plugins: RefCell<Option<tessera_wasm::WorkerChain>>,
    /// This thread's pub/sub subscriptions and subscriber connections.
    pub pubsub: Hub,
    /// This thread's link to the mirror's shadow.
    pub mirror: crate::mirror::WorkerMirror,
    /// This thread's hot-key counting.
    pub hotkeys: Rc<HotKeyRecorder>,
    /// This thread's cache of hot keys (shared with its hub, which invalidates it).
    pub hot_cache: Rc<crate::hotcache::HotCache>,
    /// This thread's spare read and write buffers, lent to its sessions while they are busy.
    pub buffers: crate::buffers::Buffers,
    logins: RefCell<Logins>,
}

/// The backend logins in use on a worker, for one `Shared::logins_version`.
#[derive(Default)]
struct Logins {
    version: u64,
    control: Option<Login>,
    /// The data login of sessions with every right.
    base: Option<Login>,
    /// Data logins of users with confined rights, by user name, with the rights each was
    /// derived from: a user whose rights changed (a new users table) gets a new login, never
    /// the backend user of its old rights.
    confined: FxHashMap<String, (User, Login)>,
}

/// Confined users with their own data logins, per worker, at most; beyond it the cache starts
/// again (it only saves recomputing a login).
const CONFINED_LOGINS: usize = 1024;

impl Worker {
    pub fn new(shared: Arc<Shared>, pool: Pool) -> Self {
        let dedicated = DedicatedPool::new(pool.options().clone(), shared.dedicated.clone());
        let hot_cache = Rc::new(crate::hotcache::HotCache::new(
            shared.config.hot_cache.clone(),
            shared.hot_cache.clone(),
        ));
        let pubsub = Hub::new(
            shared.router.clone(),
            shared.redirects.clone(),
            shared.sub_counts.clone(),
            shared.clients.clone(),
        );
        if hot_cache.on() {
            pubsub.set_cache(hot_cache.clone());
        }
        Self {
            pubsub,
            hot_cache,
            hotkeys: Rc::new(HotKeyRecorder::new(shared.hotkeys.clone())),
            shared,
            pool,
            dedicated,
            mirror: Default::default(),
            plugins: RefCell::new(None),
            buffers: Default::default(),
            logins: RefCell::new(Logins::default()),
        }
    }

    /// Which logins are current (both counters only grow); a session re-reads its login when
    /// this changes.
    #[inline]
    pub fn logins_version(&self) -> u64 {
        self.shared.logins_version.load(Ordering::Relaxed) + self.shared.plugins.chain().version
    }

    fn logins(&self) -> std::cell::RefMut<'_, Logins> {
        let mut l = self.logins.borrow_mut();
        let v = self.logins_version();
        if l.version != v {
            *l = Logins {
                version: v,
                ..Logins::default()
            };
            drop(l);
            // Connections of logins no longer derived are let go once they are idle.
            self.pool.retain_logins(|_| false);
            self.dedicated.clear_idle();
            l = self.logins.borrow_mut();
        }
        l
    }

    /// The proxy's own login (INFO, moving keys, SCRIPT KILL).
    pub fn control_login(&self) -> Login {
        let mut l = self.logins();
        if let Some(c) = &l.control {
            return c.clone();
        }
        let name = self.shared.backend_name.get().map(String::as_str);
        let c = acl::control_login(self.backend_admin().as_ref(), name);
        l.control = Some(c.clone());
        c
    }

    /// The login for the commands of a session authenticated as `user`.
    pub fn data_login(&self, user: &User) -> Login {
        let confined = user.allowed_classes.is_some() || user.key_prefix.is_some();
        if !self.shared.config.backend_acl {
            return self.control_login();
        }
        {
            let l = self.logins();
            let cached = if confined {
                l.confined
                    .get(&user.name)
                    .filter(|(rights, _)| rights == user)
                    .map(|(_, login)| login)
            } else {
                l.base.as_ref()
            };
            if let Some(c) = cached {
                return c.clone();
            }
        }
        let admin = self.backend_admin();
        let denied = self.shared.plugins.denied_to_all();
        let inputs = PolicyInputs {
            admin_commands: self.shared.config.admin_commands,
            denied: &denied,
            rights: confined.then_some(user),
        };
        let name = self.shared.backend_name.get().map(String::as_str);
        let data_user = acl::data_user(&inputs, admin.as_ref());
        let login = acl::data_login(&data_user, admin.as_ref(), name);
        let mut l = self.logins();
        if confined {
            if l.confined.len() >= CONFINED_LOGINS {
                l.confined.clear();
            }
            l.confined
                .insert(user.name.clone(), (user.clone(), login.clone()));
        } else {
            l.base = Some(login.clone());
        }
        login
    }

    /// The control plane's backend user (cluster mode), as which the proxy's own requests log in.
    pub(crate) fn backend_admin(&self) -> Option<Credential> {
        self.shared
            .backend_admin
            .read()
            .expect("backend admin lock poisoned")
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::router::SlotTable;

    #[test]
    fn a_panicking_session_gives_its_max_clients_slot_back() {
        let config = ProxyConfig {
            max_clients: 1,
            ..ProxyConfig::default()
        };
        let router = Arc::new(Router::new(SlotTable::split_evenly(&[])));
        let shared = Arc::new(Shared::new(config, router, "127.0.0.1:0".parse().unwrap()));
        let admitted = shared.admit().expect("the first session is admitted");
        assert!(shared.admit().is_none(), "max_clients = 1");
        let task = std::thread::spawn(move || {
            let _held = admitted;
            panic!("a session task panics");
        });
        assert!(task.join().is_err());
        assert_eq!(shared.sessions(), 0);
        assert!(shared.admit().is_some(), "the slot came back");
    }
}
