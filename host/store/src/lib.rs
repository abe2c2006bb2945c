//! The store: where a cluster's topology and documents live. A `Store` is a small key-value
//! interface (get, put, compare-and-swap, delete, list, watch, ephemeral nodes) with two
//! implementations: `fs` (a directory; the embedded default, nothing to install) and `etcd`
//! (production). One contract test suite (tests/suite/store.rs) runs against both.
//!
//! Store URLs: `fs:///path/to/dir` and `etcd://127.0.0.1:2379[,host:port…]`.

pub mod catalog;
mod etcd;
mod fs;
pub mod mirror;
pub mod model;

pub use etcd::EtcdStore;
pub use fs::FsStore;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;

/// A value and the version it was read at. Versions increase with every write of a key, so
/// `compare_and_swap` can tell whether someone wrote in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub value: Bytes,
    pub version: u64,
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Put { key: String, value: Bytes },
    Delete { key: String },
}

/// Changes under a prefix, in the order they happened (for `fs`, as seen by polling).
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, StoreError>> + Send>>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A dashboard's write after its cluster lock went to another holder.
    #[error("lost the cluster lock: {0}")]
    LockLost(String),
    #[error("{key} is held by a live owner: {holder}")]
    Held { key: String, holder: String },
    #[error("invalid store url {url}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("store i/o error on {key}: {reason}")]
    Io { key: String, reason: String },
}

/// Outcome of a compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    /// Written; the new version.
    Written(u64),
    /// Not written: the key's current value (None: it does not exist).
    Conflict(Option<Versioned>),
}

/// Who holds an ephemeral node: written into it, so a successor can tell a dead holder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    /// What the holder wants others to know (e.g. the dashboard's address), opaque here.
    pub payload: serde_json::Value,
}

/// Until when an ephemeral node is sure to exist, as its holder knows it: each renewal the
/// store confirms extends it to the renewal's *sending* time plus the TTL (the store started
/// counting after that). `lapsed` is set for good once the node may have been gone for a
/// while: the store said so (lease expired, node deleted or taken over), or a renewal was
/// confirmed only after the previous one's time had run out (others may have seen it gone
/// meanwhile).
#[derive(Debug)]
pub struct LeaseClock {
    state: std::sync::Mutex<(std::time::Instant, bool)>,
    /// Wakes whoever follows the clock (a proxy's fence) as soon as a renewal is confirmed.
    renewals: tokio::sync::Notify,
}

/// How often an ephemeral node is renewed: ten times per TTL. A holder that fences itself
/// some seconds before its lease can expire (a proxy, `fence::FENCE_MARGIN` = 3 s of a
/// 10 s TTL) then rides out a store that stalls for up to 6 s: the disk under an fs store
/// was measured stalling 4.5 s on a loaded test machine, which at four renewals per TTL
/// (up to 2.5 s since the last one) fenced a healthy proxy.
pub(crate) fn renew_period(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(10))
}

impl LeaseClock {
    /// A node created by a call sent at `sent_at`, for `ttl`.
    pub fn new(sent_at: std::time::Instant, ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            state: std::sync::Mutex::new((sent_at + ttl, false)),
            renewals: tokio::sync::Notify::new(),
        })
    }

    /// The store confirmed a renewal sent at `sent_at`, for `ttl`.
    pub fn renewed(&self, sent_at: std::time::Instant, ttl: Duration) {
        let mut st = self.state.lock().expect("lease clock poisoned");
        if std::time::Instant::now() > st.0 {
            st.1 = true;
        }
        st.0 = st.0.max(sent_at + ttl);
        drop(st);
        self.renewals.notify_waiters();
    }

    /// Completes at the next confirmed renewal after this call (register before reading the
    /// clock, so that none is missed).
    pub fn next_renewal(&self) -> tokio::sync::futures::Notified<'_> {
        self.renewals.notified()
    }

    /// The store says the node is gone.
    pub fn lost(&self) {
        self.state.lock().expect("lease clock poisoned").1 = true;
    }

    /// Until when the node is sure to exist (unless [`LeaseClock::lapsed`]).
    pub fn valid_until(&self) -> std::time::Instant {
        self.state.lock().expect("lease clock poisoned").0
    }

    /// Whether the node may have been gone at some point since it was created.
    pub fn lapsed(&self) -> bool {
        self.state.lock().expect("lease clock poisoned").1
    }
}

/// A live ephemeral node. Kept alive (etcd lease keep-alive, fs heartbeat) until dropped or
/// `release`d; after a crash it disappears by itself once its TTL passes.
pub struct Ephemeral {
    release: Option<Box<dyn FnOnce() + Send>>,
    /// Completes once a release has reached the store (etcd's revoke is sent by the
    /// keep-alive task); `None` where `release` itself is synchronous (fs).
    released: Option<tokio::sync::oneshot::Receiver<Result<(), StoreError>>>,
    pub key: String,
    /// Set when a dead holder's node was replaced: who it was.
    pub took_over_from: Option<Holder>,
    clock: Arc<LeaseClock>,
}

impl Ephemeral {
    pub fn new(
        key: String,
        took_over_from: Option<Holder>,
        clock: Arc<LeaseClock>,
        release: Box<dyn FnOnce() + Send>,
    ) -> Self {
        Self {
            release: Some(release),
            released: None,
            key,
            took_over_from,
            clock,
        }
    }

    /// Makes [`Ephemeral::release_confirmed`] wait for `released`, which the store completes
    /// once the release has reached it.
    pub fn confirmed_by(
        mut self,
        released: tokio::sync::oneshot::Receiver<Result<(), StoreError>>,
    ) -> Self {
        self.released = Some(released);
        self
    }

    /// How long the node is sure to live, kept up to date by its keep-alive.
    pub fn clock(&self) -> Arc<LeaseClock> {
        self.clock.clone()
    }

    /// Deletes the node now, without waiting for the store (etcd: the revoke is sent in the
    /// background, and lost if the process exits first).
    pub fn release(mut self) {
        if let Some(r) = self.release.take() {
            r();
        }
    }

    /// Deletes the node and waits until the store has done it: after `Ok`, nobody listing
    /// the store sees it any more.
    ///
    /// # Errors
    /// The store did not confirm (unreachable, or its answer was an error); the node then
    /// disappears by itself once its TTL passes.
    pub async fn release_confirmed(mut self) -> Result<(), StoreError> {
        if let Some(r) = self.release.take() {
            r();
        }
        match self.released.take() {
            Some(rx) => rx.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }
}

impl Drop for Ephemeral {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            r();
        }
    }
}

/// The coordinator's interface. All keys are absolute paths like `/tessera/c1/slots/slot-0001`.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    async fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError>;
    /// Writes unconditionally; returns the new version.
    async fn put(&self, key: &str, value: Bytes) -> Result<u64, StoreError>;
    /// Writes several keys unconditionally, in order; not atomic as a whole (a failure may
    /// leave the first ones written). Much cheaper than a `put` each where a store can batch
    /// its syncs: a rebalance queues hundreds of slots at once.
    async fn put_many(&self, entries: Vec<(String, Bytes)>) -> Result<(), StoreError> {
        for (key, value) in entries {
            self.put(&key, value).await?;
        }
        Ok(())
    }
    /// Writes only if the key is at `expected` version (`None`: only if it does not exist).
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<u64>,
        value: Bytes,
    ) -> Result<Cas, StoreError>;
    /// Returns whether the key existed.
    async fn delete(&self, key: &str) -> Result<bool, StoreError>;
    /// Every key under `prefix`, sorted by key.
    async fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>, StoreError>;
    /// The distinct names right below `prefix` (which ends with `/`), sorted: for
    /// `/tessera/`, the cluster names. Cheaper than `list` where a store can skip values.
    async fn children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut names: Vec<String> = self
            .list(prefix)
            .await?
            .into_iter()
            .filter_map(|(k, _)| {
                let rest = k.strip_prefix(prefix)?;
                let name = rest.split('/').next().filter(|n| !n.is_empty())?;
                Some(name.to_owned())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }
    /// Changes under `prefix` from now on.
    async fn watch(&self, prefix: &str) -> Result<WatchStream, StoreError>;
    /// Creates `key` as an ephemeral node holding `holder` (serialized as JSON).
    ///
    /// # Errors
    /// `StoreError::Held` if a live holder has it. A holder that is gone (its heartbeat or
    /// lease expired, or it ran on this host and its pid no longer exists) is replaced, and
    /// `took_over_from` says who it was.
    async fn create_ephemeral(
        &self,
        key: &str,
        holder: &Holder,
        ttl: Duration,
    ) -> Result<Ephemeral, StoreError>;
    /// How long ago the holder of the ephemeral node `key` last renewed it, as the store saw
    /// it (etcd: to the second); `None` when there is no such node.
    async fn ephemeral_silence(&self, key: &str) -> Result<Option<Duration>, StoreError>;
    /// Ends the ephemeral node `key` now, as its expiry would: etcd revokes its lease, so the
    /// holder's next renewal learns it is gone (deleting the key alone would leave the lease
    /// renewing nothing). Returns whether there was one.
    async fn expire_ephemeral(&self, key: &str) -> Result<bool, StoreError>;
    /// A short description for logs (`fs:///var/lib/tessera`).
    fn describe(&self) -> String;
}

/// Opens a store from its URL.
///
/// # Errors
/// An unknown scheme, or the store cannot be reached.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("fs://") {
        return Ok(Arc::new(FsStore::open(path)?));
    }
    if let Some(hosts) = url.strip_prefix("etcd://") {
        let endpoints: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| format!("http://{h}"))
            .collect();
        if endpoints.is_empty() {
            return Err(StoreError::BadUrl {
                url: url.into(),
                reason: "no endpoint".into(),
            });
        }
        return Ok(Arc::new(EtcdStore::connect(&endpoints).await?));
    }
    Err(StoreError::BadUrl {
        url: url.into(),
        reason: "expected fs:///path or etcd://host:port[,host:port]".into(),
    })
}

/// Opens the store at `url` for cluster `name`: the store and the cluster's key paths.
///
/// # Errors
/// An invalid cluster name, or the store cannot be opened.
pub async fn open_cluster(name: &str, url: &str) -> anyhow::Result<(Arc<dyn Store>, model::Paths)> {
    anyhow::ensure!(
        model::valid_cluster_name(name),
        "invalid cluster name {name:?}: use letters, digits, '-' and '_'"
    );
    let store = open(url)
        .await
        .map_err(anyhow::Error::new)
        .map_err(|e| e.context("opening the store"))?;
    Ok((store, model::Paths::new(name)))
}

/// This machine's host name, for `Holder`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Whether a process with this pid exists on this host.
pub fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}
