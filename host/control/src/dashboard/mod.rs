//! The dashboard: the one writer of a cluster's topology. It holds the cluster lock (an
//! ephemeral node, so a crashed dashboard never blocks its successor), keeps groups and slots
//! in the store, health-checks every server and proxy, and pushes every routing change to
//! every online proxy, waiting for all acknowledgements (the barrier migrations build on).

pub mod admin_user;
pub mod audit;
mod backup;
mod backup_job;
pub mod cache;
pub mod commandlog;
pub mod events;
mod events_watch;
pub mod failover;
mod guard;
mod health;
pub mod history;
mod history_sample;
mod hotkeys;
pub mod metrics;
mod migration;
mod migration_jobs;
mod migration_run;
mod mirror;
mod ops;
pub mod plugin_canary;
pub mod plugins;
mod proxy_health;
mod push;
pub mod read_policy;
mod rebalance;
pub mod routes;
mod server_fence;
mod slot_keys;
mod slot_stats;
mod slot_traffic;
mod stats;
mod token_key;
pub mod tokens;
pub mod users;
pub(crate) mod views;

pub use health::ServerHealth;
pub use proxy_health::ProxyHealth;
pub use push::{ProxyFailed, ProxyFailure, PushError};
pub use rebalance::RebalancePlan;
pub use slot_stats::Measure;
pub use token_key::default_key_file;
pub use tokens::{Caller, TokenView};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use tracing::{info, warn};

use tessera_model::router::{GroupId, Topology};
use tessera_model::secret::random_token;
use tessera_store::model::{
    self, ClusterMeta, DashboardInfo, GroupModel, Paths, ProxyModel, SCHEMA_VERSION, SlotModel,
};
use tessera_store::{Ephemeral, Holder, Store};

/// How long a crashed dashboard's lock outlives it (a successor on the same host takes it
/// over at once when the holder's pid is gone).
pub const LOCK_TTL: Duration = Duration::from_secs(10);

/// Settings of `tessera dashboard`.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    pub cluster: String,
    pub store_url: String,
    pub listen: String,
    /// The token named `admin` (first start: stored as its HMAC; later: must match, or
    /// restores that token if it was revoked).
    pub admin_token: Option<String>,
    /// The token key's file; beside an fs store when absent (`default_key_file`).
    pub token_key_file: Option<PathBuf>,
    pub health_interval: Duration,
    /// Consecutive failed checks before a master is declared down.
    pub down_after: u32,
    pub push_timeout: Duration,
    /// Slots migrating at once per group (as source or target).
    pub max_slots_in_flight: usize,
    /// How often every online proxy's slot counters are read.
    pub slot_sample: Duration,
    /// The span per-slot rates are measured over.
    pub slot_window: Duration,
    /// How often each group's keys and memory per slot are estimated (`slot_keys`).
    pub slot_keys: Duration,
    /// Where backups may be written (`--backup-root`); `None` refuses them.
    pub backup_root: Option<PathBuf>,
}

impl DashboardOptions {
    pub fn new(cluster: &str, store_url: &str, listen: &str) -> Self {
        Self {
            cluster: cluster.into(),
            store_url: store_url.into(),
            listen: listen.into(),
            admin_token: None,
            token_key_file: None,
            health_interval: Duration::from_secs(1),
            down_after: 3,
            push_timeout: Duration::from_secs(5),
            max_slots_in_flight: 512,
            slot_sample: Duration::from_secs(5),
            slot_window: Duration::from_secs(60),
            slot_keys: Duration::from_secs(30),
            backup_root: None,
        }
    }
}

/// What the dashboard keeps in memory; the store is the truth, this is its copy.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) groups: BTreeMap<GroupId, GroupModel>,
    pub(crate) slots: Vec<SlotModel>,
    pub(crate) offline: HashSet<String>,
    pub(crate) down: HashSet<GroupId>,
    pub(crate) servers: HashMap<String, ServerHealth>,
    pub(crate) proxies: HashMap<String, ProxyHealth>,
    /// The proxies the last topology push went to (`push::departed_unfenced`); at start,
    /// every proxy a predecessor knew.
    pub(crate) pushed_to: HashMap<String, ProxyModel>,
    /// Proxies whose registration went away, and when this dashboard first saw it gone.
    pub(crate) departed: HashMap<String, (ProxyModel, std::time::Instant)>,
    /// Every proxy seen registered and not removed (`proxy_health`): a lost one stays listed.
    pub(crate) known: BTreeMap<String, ProxyModel>,
}

/// A running dashboard.
pub struct Dashboard {
    pub cluster: String,
    pub(crate) paths: Paths,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) opts: DashboardOptions,
    pub(crate) info: DashboardInfo,
    /// The API tokens and the key they are checked with.
    pub(crate) tokens: tokens::Tokens,
    pub(crate) proxy_secret: String,
    /// The Redis user every connection to a server authenticates as (`admin_user`).
    pub(crate) backend_admin: tessera_model::redis_client::Credential,
    /// Version of the users document in the store, as last read or written: proxies
    /// reporting an older one are brought up to date.
    pub(crate) users_version: std::sync::atomic::AtomicU64,
    pub(crate) state: Mutex<State>,
    /// Serializes topology changes: one at a time, persisted then pushed.
    pub(crate) ops: tokio::sync::Mutex<u64>,
    pub(crate) http: reqwest::Client,
    /// The proxies' stats, fetched at most once a second for the overview and stats routes.
    pub(crate) stats: cache::Cached<tessera_wire::cluster::Stats>,
    /// Fires when a write found the cluster lock held by someone else.
    lost: tokio::sync::watch::Receiver<bool>,
    pub(crate) migrations: migration::Migrations,
    /// Per-slot traffic read from the proxies, and keys and memory per slot.
    pub(crate) slot_traffic: slot_traffic::SlotTraffic,
    pub(crate) slot_keys: slot_keys::SlotKeys,
    /// Automatic failover's settings and state (`failover`).
    pub(crate) failover: failover::Failover,
    /// Where read-only commands go (`read_policy`), pushed with the topology.
    pub(crate) read_policy: Mutex<tessera_model::router::ReadPolicy>,
    /// Key prefixes routed to other clusters (`routes`), pushed with the topology.
    pub(crate) prefix_routes: Mutex<Vec<tessera_model::router::prefix::PrefixRoute>>,
    /// Whole-cluster backups (`backup`).
    pub(crate) backups: backup::Backups,
    /// The audit log, one for the API layer and failover alike (its sequence numbers and
    /// trimming assume a single writer per dashboard).
    audit: std::sync::OnceLock<Arc<audit::AuditLog>>,
    /// The cluster's events (`events`), and what their watchers saw last.
    pub events: events::EventLog,
    pub(crate) event_watch: events_watch::Watch,
    /// The metrics history (`history`), and the per-proxy counters it follows.
    pub history: history::MetricsHistory,
    pub(crate) history_counters: history_sample::Counters,
    /// The cluster lock, held for the dashboard's life (in a Mutex only to be `Sync`).
    _lock: Mutex<Ephemeral>,
}

/// How long the proxies' stats are served from the cache.
const STATS_FOR: Duration = Duration::from_secs(1);

/// Result of starting: the dashboard, and the admin token if it was generated now.
pub struct Started {
    pub dashboard: Arc<Dashboard>,
    pub new_token: Option<String>,
    pub listener: tokio::net::TcpListener,
}

impl Dashboard {
    /// Takes the cluster lock, creates the cluster's settings on first start, loads the layout.
    ///
    /// # Errors
    /// The lock is held by a live dashboard (the message names it), the store is unreachable,
    /// the port is taken, the token key is missing or wrong, or `--admin-token` does not
    /// match the cluster's.
    pub async fn start(opts: DashboardOptions) -> anyhow::Result<Started> {
        // Before anything records: a counter bumped before the recorder exists is lost.
        self::metrics::describe();
        let (store, paths) = tessera_store::open_cluster(&opts.cluster, &opts.store_url).await?;
        let listener = tokio::net::TcpListener::bind(&opts.listen)
            .await
            .with_context(|| format!("binding {}", opts.listen))?;
        let info = DashboardInfo {
            schema: SCHEMA_VERSION,
            admin_addr: listener.local_addr()?.to_string(),
            start_unix: model::now_unix(),
            version: env!("CARGO_PKG_VERSION").into(),
        };
        let holder = Holder {
            pid: std::process::id(),
            host: tessera_store::hostname(),
            payload: serde_json::to_value(&info)?,
        };
        let lock = store
            .create_ephemeral(&paths.lock(), &holder, LOCK_TTL)
            .await
            .map_err(|e| match e {
                tessera_store::StoreError::Held { holder, .. } => {
                    anyhow::anyhow!(
                        "cluster {} already has a live dashboard ({holder}); stop it first",
                        opts.cluster
                    )
                }
                e => anyhow::Error::new(e).context("taking the cluster lock"),
            })?;
        if let Some(old) = &lock.took_over_from {
            warn!(cluster = %opts.cluster, old_pid = old.pid, old_host = %old.host, "took over the lock of a dead dashboard");
        }
        let took_over = lock.took_over_from.as_ref().map(|o| {
            format!(
                ", taking it over from a dead dashboard (pid {} on {})",
                o.pid, o.host
            )
        });
        // From here on every write checks that the lock is still ours.
        let guarded = guard::Guarded::new(store, paths.lock(), holder);
        let lost = guarded.lost();
        let store: Arc<dyn Store> = Arc::new(guarded);
        let meta = init_meta(&*store, &paths, &opts).await?;
        let (tokens, new_token) = tokens::init(&*store, &paths, &opts).await?;
        let (groups, slots) = model::load_layout(&*store, &paths)
            .await
            .context("loading the cluster layout")?;
        for g in &groups {
            g.mark_tls();
        }
        let mut offline = HashSet::new();
        for (key, _) in store
            .list(&format!("{}proxy-offline/", paths.cluster_prefix()))
            .await?
        {
            if let Some(token) = key.rsplit('/').next() {
                offline.insert(token.to_string());
            }
        }
        let known = proxy_health::load_known(&*store, &paths).await?;
        let events = events::EventLog::load(&*store, &paths, &opts.cluster).await;
        events.record(
            tessera_wire::events::Severity::Info,
            tessera_wire::events::EventKind::LockAcquired,
            format!(
                "a dashboard at {} (pid {}) took the lock of cluster {}{}",
                info.admin_addr,
                std::process::id(),
                opts.cluster,
                took_over.unwrap_or_default()
            ),
        );
        let state = State {
            groups: groups.into_iter().map(|g| (g.id, g)).collect(),
            slots,
            offline,
            // Every proxy a predecessor knew may have had its pushes: one whose registration
            // is gone is waited for and fenced at the servers like one this dashboard saw go
            // (`push::departed_unfenced`), since when it went is not known here.
            pushed_to: known.clone().into_iter().collect(),
            known,
            ..State::default()
        };
        let users_version = match model::read::<tessera_model::users::UsersDoc>(
            &*store,
            &paths.users(),
        )
        .await
        {
            Ok(doc) => doc.map_or(0, |(d, _)| d.version),
            Err(e) => {
                warn!(error = %e, "the users document is unreadable: user changes are refused until it is repaired");
                0
            }
        };
        let failover = failover::Failover::load(&*store, &paths)
            .await
            .unwrap_or_else(|e| {
                warn!(error = %e, "the failover document is unreadable: automatic failover is off until it is set again");
                failover::Failover::default()
            });
        let read_policy = read_policy::load(&*store, &paths).await;
        let prefix_routes = routes::load(&*store, &paths).await;
        info!(cluster = %opts.cluster, store = %store.describe(), epoch = meta.epoch, "dashboard started");
        let backups = backup::Backups::new(opts.backup_root.as_deref())?;
        let http = reqwest::Client::builder()
            .timeout(opts.push_timeout)
            .build()?;
        let dashboard = Arc::new(Dashboard {
            cluster: opts.cluster.clone(),
            paths,
            store,
            lost,
            info,
            tokens,
            proxy_secret: meta.proxy_secret.clone(),
            backend_admin: meta
                .backend_admin
                .clone()
                .expect("init_meta gives every cluster a backend admin"),
            users_version: users_version.into(),
            state: Mutex::new(state),
            ops: tokio::sync::Mutex::new(meta.epoch),
            http,
            stats: cache::Cached::new(STATS_FOR),
            migrations: Default::default(),
            slot_traffic: Default::default(),
            slot_keys: Default::default(),
            failover,
            read_policy: Mutex::new(read_policy),
            prefix_routes: Mutex::new(prefix_routes),
            backups,
            audit: std::sync::OnceLock::new(),
            events,
            event_watch: Default::default(),
            history: Default::default(),
            history_counters: Default::default(),
            opts,
            _lock: Mutex::new(lock),
        });
        dashboard.load_last_backup().await;
        // Before the API serves: a history, abort or throttle asked for at once is the one
        // saved, not empty, and a migration started at once runs under the saved throttle.
        dashboard.load_jobs().await;
        if let Err(e) = dashboard.load_abort().await {
            warn!(error = %e, "could not read a pending migration abort");
        }
        if let Err(e) = dashboard.load_throttle().await {
            warn!(error = %e, "could not read the migration throttle");
        }
        // From 0, so that `increase()` counts the first removal.
        ::metrics::counter!("tessera_dashboard_stale_proxies_removed_total", "cluster" => dashboard.cluster.clone())
            .absolute(0);
        Ok(Started {
            dashboard,
            new_token,
            listener,
        })
    }

    /// Background work: the admin user on servers that lack it, then health checks and
    /// catching up new proxies. Runs until dropped.
    pub async fn run_background(self: Arc<Self>) {
        self.provision_servers().await;
        tokio::join!(
            health::run(self.clone()),
            slot_traffic::run(self.clone()),
            slot_keys::run(self.clone()),
            history_sample::run(self.clone()),
            events::run(self.clone()),
            migration::run(self)
        );
    }

    /// Every server of every group, masters and replicas.
    pub(crate) fn all_servers(&self) -> Vec<String> {
        let st = self.state.lock().expect("state lock poisoned");
        st.groups
            .values()
            .flat_map(|g| g.servers.iter().map(|s| s.addr.clone()))
            .collect()
    }

    /// Creates the admin user on every server in the store that lacks it (servers added
    /// before it existed, or restarted without an ACL file). A failure is logged and shows
    /// in the server's health, which keeps trying.
    async fn provision_servers(&self) {
        let servers = self.all_servers();
        let results = futures_util::future::join_all(servers.iter().map(|addr| {
            admin_user::provision(addr, &self.backend_admin, None, ops::REDIS_TIMEOUT)
        }))
        .await;
        for (addr, r) in servers.iter().zip(results) {
            if let Err(e) = r {
                warn!(server = %addr, error = %e, "could not provision the control plane's user");
            }
        }
    }

    /// The cluster's audit log (created on first use).
    pub fn audit_log(&self) -> Arc<audit::AuditLog> {
        self.audit
            .get_or_init(|| audit::AuditLog::new(self))
            .clone()
    }

    /// Completes when this dashboard has lost its cluster lock: it must stop.
    pub async fn lock_lost(&self) {
        let mut lost = self.lost.clone();
        let _ = lost.wait_for(|l| *l).await;
    }

    pub fn options(&self) -> &DashboardOptions {
        &self.opts
    }

    pub fn info(&self) -> &DashboardInfo {
        &self.info
    }

    /// The topology as it stands, at `epoch`.
    pub(crate) fn topology(&self, epoch: u64) -> Topology {
        let st = self.state.lock().expect("state lock poisoned");
        let groups: Vec<GroupModel> = st.groups.values().cloned().collect();
        let mut topo = model::topology(epoch, &groups, &st.slots, &st.down);
        topo.read = self.read_policy();
        topo.routes = self.prefix_routes();
        topo
    }

    /// A call to a proxy's admin API (`path` from `/api/proxy/…`), carrying the proxy secret
    /// that every such route of a cluster-mode proxy requires.
    pub(crate) fn proxy_call(
        &self,
        method: reqwest::Method,
        admin_addr: &str,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("http://{admin_addr}{path}"))
            .bearer_auth(&self.proxy_secret)
    }

    /// GETs `path` of each proxy's admin API as JSON, all at once, each within `timeout`: one
    /// answer per proxy, in their order, `Err` saying why a proxy gave none.
    pub(crate) async fn get_from_proxies<T: serde::de::DeserializeOwned>(
        &self,
        proxies: &[ProxyModel],
        path: &str,
        timeout: Duration,
    ) -> Vec<Result<T, String>> {
        futures_util::future::join_all(proxies.iter().map(|p| async move {
            let r = self
                .proxy_call(reqwest::Method::GET, &p.admin_addr, path)
                .timeout(timeout)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !r.status().is_success() {
                return Err(format!("HTTP {}", r.status()));
            }
            r.json::<T>().await.map_err(|e| e.to_string())
        }))
        .await
    }

    /// PUTs `body` to one proxy's admin API at `path` (a push of settings every proxy must
    /// take), within `timeout` (`None`: the push timeout every proxy call has): `Err` says
    /// why it did not, with the proxy's own error message when it gave one.
    pub(crate) async fn put_to_proxy<T: serde::Serialize + ?Sized>(
        &self,
        proxy: &ProxyModel,
        path: &str,
        body: &T,
        timeout: Option<std::time::Duration>,
    ) -> Result<(), ProxyFailure> {
        let mut call = self
            .proxy_call(reqwest::Method::PUT, &proxy.admin_addr, path)
            .json(body);
        if let Some(t) = timeout {
            call = call.timeout(t);
        }
        let resp = call.send().await.map_err(|e| push::unreachable(&e))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body = resp.text().await.unwrap_or_default();
        let message = serde_json::from_str::<tessera_wire::error::ErrorBody>(&body)
            .map_or(body, |e| e.error.message);
        Err(ProxyFailure::Refused { status, message })
    }

    /// Proxies registered in the store.
    ///
    /// # Errors
    /// The store fails.
    pub async fn registered_proxies(&self) -> Result<Vec<ProxyModel>, tessera_store::StoreError> {
        model::registered_proxies(&*self.store, &self.paths).await
    }
}

/// Reads the cluster's settings, creating them on first start (its tokens are `tokens::init`'s).
async fn init_meta(
    store: &dyn Store,
    paths: &Paths,
    opts: &DashboardOptions,
) -> anyhow::Result<ClusterMeta> {
    if let Some((mut meta, version)) = model::read::<ClusterMeta>(store, &paths.meta()).await? {
        if meta.backend_admin.is_none() {
            // A cluster created before the control plane had its own Redis user.
            meta.backend_admin = Some(admin_user::new_credential());
            let bytes = serde_json::to_vec(&meta)?;
            match store
                .compare_and_swap(&paths.meta(), Some(version), bytes.into())
                .await?
            {
                tessera_store::Cas::Written(_) => {
                    info!(cluster = %opts.cluster, "gave the cluster its control-plane Redis user")
                }
                tessera_store::Cas::Conflict(_) => bail!(
                    "the meta of cluster {} changed while this dashboard started; start again",
                    opts.cluster
                ),
            }
        }
        return Ok(meta);
    }
    let meta = ClusterMeta {
        schema: SCHEMA_VERSION,
        name: opts.cluster.clone(),
        admin_token_sha256: String::new(),
        proxy_secret: random_token(),
        epoch: 1,
        created_unix: model::now_unix(),
        backend_admin: Some(admin_user::new_credential()),
    };
    let bytes = serde_json::to_vec(&meta)?;
    match store
        .compare_and_swap(&paths.meta(), None, bytes.into())
        .await?
    {
        tessera_store::Cas::Written(_) => Ok(meta),
        tessera_store::Cas::Conflict(_) => bail!(
            "cluster {} was created concurrently; start again",
            opts.cluster
        ),
    }
}
