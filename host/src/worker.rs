//! What a proxy's worker threads share (`Shared`: config, routing table, clients, counters,
//! plugins, the in-flight accounting behind a table swap's acknowledgement) and what each
//! worker owns (`Worker`: its backend connections, its warm plugin instances). Sessions run
//! on a worker; the listener in `proxy` and the admin API in `api` sit above this module.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::backend::{BackendStats, Pool};
use crate::clients::ClientRegistry;
use crate::config::ProxyConfig;
use crate::plugins::PluginHost;
use crate::router::Router;
use crate::telemetry::CommandStats;

/// State every worker shares.
pub struct Shared {
    pub config: ProxyConfig,
    pub router: Arc<Router>,
    pub clients: Arc<ClientRegistry>,
    pub stats: Stats,
    pub command_stats: CommandStats,
    pub backend_stats: Arc<BackendStats>,
    pub plugins: PluginHost,
    /// The users clients may AUTH as: proxy.toml's, or the cluster's once loaded or pushed.
    pub users: arc_swap::ArcSwap<crate::users::Users>,
    pub started: Instant,
    pub listen_addr: SocketAddr,
    /// Sessions open (admitted against `max_clients`).
    pub(crate) active: AtomicUsize,
    /// Command batches in flight, counted in two alternating phases so a table swap can wait
    /// for every batch routed under the old table (see `drain`).
    inflight: [AtomicUsize; 2],
    phase: AtomicUsize,
}

impl Shared {
    pub fn new(config: ProxyConfig, router: Arc<Router>, listen_addr: SocketAddr) -> Self {
        let clients = Arc::new(ClientRegistry::default());
        let plugins = PluginHost::new(clients.clone(), config.threads());
        // Start-up checks the table first (`tessera proxy` fails with the reason); should an
        // invalid one get here anyway, no one logs in rather than everyone.
        let users = crate::users::Users::from_config(&config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "invalid users table: every AUTH will fail");
            crate::users::Users::refuse_all(0)
        });
        Self {
            users: arc_swap::ArcSwap::from_pointee(users),
            config,
            router,
            clients,
            plugins,
            stats: Stats::default(),
            command_stats: CommandStats::default(),
            backend_stats: Arc::default(),
            started: Instant::now(),
            listen_addr,
            active: AtomicUsize::new(0),
            inflight: Default::default(),
            phase: AtomicUsize::new(0),
        }
    }

    /// A session starts a batch of commands (it will route them with the table in force now).
    #[inline]
    pub(crate) fn enter(&self) -> usize {
        let p = self.phase.load(Ordering::SeqCst);
        self.inflight[p].fetch_add(1, Ordering::SeqCst);
        p
    }

    /// The batch started in phase `p` has all its replies.
    #[inline]
    pub(crate) fn leave(&self, p: usize) {
        self.inflight[p].fetch_sub(1, Ordering::SeqCst);
    }

    /// After a table swap: waits until no batch that may have routed with an older table
    /// is still waiting for a backend, so the swap's acknowledgement means no command routed
    /// the old way is still in flight (a write pipelined to a slot's old owner cannot land
    /// after the mover moved its key). Swaps must not run concurrently.
    ///
    /// # Errors
    /// Batches still in flight after `limit` (a backend not answering).
    pub async fn drain(&self, limit: Duration) -> Result<(), usize> {
        let old = self.phase.load(Ordering::SeqCst);
        self.phase.store(1 - old, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = self.inflight[old].load(Ordering::SeqCst);
            if left == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(left);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Process-wide connection counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub rejected_connections: AtomicU64,
}

/// One worker thread's context: shared state plus its own backend connections.
pub struct Worker {
    pub shared: Arc<Shared>,
    pub pool: Pool,
    /// Keys found gone from their migrating slot's source under the table in force.
    pub moved: MovedKeys,
    /// This thread's warm plugin instances (created with the first plugin).
    pub plugins: std::cell::RefCell<Option<tessera_wasm::WorkerChain>>,
}

/// Keys of migrating slots this worker has seen moved off their source (or never there),
/// valid for one table epoch. Within an epoch nothing writes to a migrating slot's source,
/// so a key gone from it stays gone: its next commands go straight to the target instead of
/// running the move script on the source again. A new table (another step, an abort)
/// starts afresh.
#[derive(Default)]
pub struct MovedKeys {
    epoch: std::cell::Cell<u64>,
    keys: std::cell::RefCell<rustc_hash::FxHashSet<bytes::Bytes>>,
}

/// Beyond this many keys the set starts again (memory bound; it only saves work).
const MOVED_KEYS_LIMIT: usize = 200_000;

impl MovedKeys {
    /// Whether every key is known moved under table `epoch`.
    pub fn contains_all<'k>(&self, epoch: u64, mut keys: impl Iterator<Item = &'k [u8]>) -> bool {
        if self.epoch.get() != epoch {
            self.keys.borrow_mut().clear();
            self.epoch.set(epoch);
            return false;
        }
        let set = self.keys.borrow();
        keys.all(|k| set.contains(k))
    }

    /// Records keys found moved by a move made under table `epoch`.
    pub fn insert(&self, epoch: u64, keys: &[bytes::Bytes]) {
        if self.epoch.get() != epoch {
            return;
        }
        let mut set = self.keys.borrow_mut();
        if set.len() + keys.len() > MOVED_KEYS_LIMIT {
            set.clear();
        }
        set.extend(keys.iter().map(|k| bytes::Bytes::copy_from_slice(k)));
    }
}
