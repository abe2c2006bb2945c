//! Finding clusters: every child of `/tessera/` with a `meta` node in each store is a
//! cluster, and its lock node (`topom`) names the dashboard that runs it. Results are cached
//! for [`CACHE_FOR`], so a page that polls several routes costs one scan. A store that fails
//! keeps its clusters from the last scan that worked, marked with the store's error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Serialize;
use tracing::warn;

use tessera_store::model::{self, DashboardInfo, Paths};
use tessera_store::{Holder, Store};

/// How long a scan's result is used before the stores are read again.
pub const CACHE_FOR: Duration = Duration::from_secs(2);
/// How long opening (connecting to) a store may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(3);

/// The dashboard running a cluster, as its lock node says.
pub use tessera_wire::cluster::DashboardSummary as DashboardView;

/// One cluster found in a store.
#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    pub name: String,
    /// The store's URL.
    pub store: String,
    pub dashboard: Option<DashboardView>,
    /// Why the console cannot use this cluster now (no dashboard, store down, duplicate name).
    pub error: Option<String>,
    #[serde(skip)]
    duplicate: bool,
}

impl Cluster {
    /// Whether calls can be relayed to it: a dashboard and no shadowing duplicate.
    pub fn relayable(&self) -> bool {
        self.dashboard.is_some() && !self.duplicate
    }
}

/// What the last scan of one store found.
pub use tessera_wire::console::StoreView;

#[derive(Default)]
struct Scan {
    at: Option<Instant>,
    clusters: Arc<Vec<Cluster>>,
    stores: Arc<Vec<StoreView>>,
}

/// The stores and the last scan.
pub struct Discovery {
    urls: Vec<String>,
    opened: tokio::sync::Mutex<HashMap<String, Arc<dyn Store>>>,
    /// Last good clusters per store, shown (with the error) while that store fails.
    last_good: std::sync::Mutex<HashMap<String, Vec<Cluster>>>,
    /// Held during a scan so concurrent requests wait for one scan instead of starting many.
    scan: tokio::sync::Mutex<Scan>,
}

impl Discovery {
    pub fn new(urls: Vec<String>) -> Self {
        Self {
            urls,
            opened: Default::default(),
            last_good: Default::default(),
            scan: Default::default(),
        }
    }

    /// Every cluster of every store, first store first, by name within a store.
    pub async fn clusters(&self) -> Arc<Vec<Cluster>> {
        self.scan(false).await.0
    }

    /// What each store held at the last scan.
    pub async fn stores(&self) -> Arc<Vec<StoreView>> {
        self.scan(false).await.1
    }

    /// The cluster named `name`, scanning again first if `fresh`.
    pub async fn find(&self, name: &str, fresh: bool) -> Option<Cluster> {
        let (clusters, _) = self.scan(fresh).await;
        clusters.iter().find(|c| c.name == name).cloned()
    }

    async fn scan(&self, fresh: bool) -> (Arc<Vec<Cluster>>, Arc<Vec<StoreView>>) {
        let mut scan = self.scan.lock().await;
        if !fresh && scan.at.is_some_and(|t| t.elapsed() < CACHE_FOR) {
            return (scan.clusters.clone(), scan.stores.clone());
        }
        let results = join_all(self.urls.iter().map(|url| self.scan_store(url))).await;
        let mut clusters: Vec<Cluster> = Vec::new();
        let mut stores = Vec::new();
        for (url, result) in self.urls.iter().zip(results) {
            let found = match result {
                Ok(found) => {
                    self.last_good
                        .lock()
                        .expect("last_good lock poisoned")
                        .insert(url.clone(), found.clone());
                    stores.push(StoreView {
                        url: url.clone(),
                        ok: true,
                        error: None,
                        clusters: found.iter().map(|c| c.name.clone()).collect(),
                    });
                    found
                }
                Err(e) => {
                    warn!(store = %url, error = %e, "could not scan a store for clusters");
                    let mut stale = self
                        .last_good
                        .lock()
                        .expect("last_good lock poisoned")
                        .get(url)
                        .cloned()
                        .unwrap_or_default();
                    for c in &mut stale {
                        c.error = Some(format!("store {url} failed: {e} (cluster as last seen)"));
                    }
                    stores.push(StoreView {
                        url: url.clone(),
                        ok: false,
                        error: Some(e),
                        clusters: stale.iter().map(|c| c.name.clone()).collect(),
                    });
                    stale
                }
            };
            for mut c in found {
                if let Some(first) = clusters.iter().find(|o| o.name == c.name) {
                    c.error = Some(format!(
                        "a cluster of the same name is in {}: the console serves that one",
                        first.store
                    ));
                    c.duplicate = true;
                }
                clusters.push(c);
            }
        }
        scan.at = Some(Instant::now());
        scan.clusters = Arc::new(clusters);
        scan.stores = Arc::new(stores);
        (scan.clusters.clone(), scan.stores.clone())
    }

    async fn open(&self, url: &str) -> Result<Arc<dyn Store>, String> {
        let mut opened = self.opened.lock().await;
        if let Some(s) = opened.get(url) {
            return Ok(s.clone());
        }
        let store = tokio::time::timeout(OPEN_TIMEOUT, tessera_store::open(url))
            .await
            .map_err(|_| format!("no answer within {OPEN_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())?;
        opened.insert(url.to_owned(), store.clone());
        Ok(store)
    }

    async fn scan_store(&self, url: &str) -> Result<Vec<Cluster>, String> {
        let store = self.open(url).await?;
        let names = store
            .children(&format!("{}/", model::ROOT))
            .await
            .map_err(|e| e.to_string())?;
        let found = join_all(
            names
                .into_iter()
                .filter(|n| model::valid_cluster_name(n))
                .map(|name| read_cluster(&*store, url, name)),
        )
        .await;
        found.into_iter().filter_map(Result::transpose).collect()
    }
}

/// The cluster `name` in `store`: `None` if it has no `meta` (not a cluster).
async fn read_cluster(
    store: &dyn Store,
    url: &str,
    name: String,
) -> Result<Option<Cluster>, String> {
    let paths = Paths::new(&name);
    if store
        .get(&paths.meta())
        .await
        .map_err(|e| e.to_string())?
        .is_none()
    {
        return Ok(None);
    }
    let lock = store.get(&paths.lock()).await.map_err(|e| e.to_string())?;
    let dashboard = lock.and_then(|v| {
        let holder: Holder = serde_json::from_slice(&v.value).ok()?;
        let info: DashboardInfo = serde_json::from_value(holder.payload).ok()?;
        Some(DashboardView {
            admin_addr: info.admin_addr,
            pid: holder.pid,
            host: holder.host,
            version: info.version,
            start_unix: info.start_unix,
        })
    });
    let error = dashboard.is_none().then(|| {
        format!(
            "no dashboard holds the cluster lock: start `tessera dashboard --cluster {name} --store {url}`"
        )
    });
    Ok(Some(Cluster {
        name,
        store: url.to_owned(),
        dashboard,
        error,
        duplicate: false,
    }))
}
