//! Finding clusters: every child of `/tessera/` with a `meta` node in each store is a
//! cluster, and its lock node (`topom`) names the dashboard that runs it. Results are cached
//! for [`CACHE_FOR`], so a page that polls several routes costs one scan. A store that fails
//! keeps its clusters from the last scan that worked, marked with the store's error.
//!
//! When no dashboard holds a cluster's lock, the error says why as far as the console can
//! tell: it remembers the dashboard it last saw holding each lock and probes it, so that a
//! dashboard that is alive but frozen is not mistaken for none (docs/console.md, "When a
//! dashboard is down").

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Serialize;
use tracing::warn;

use tessera_model::clock::{now_ms, utc_text};
use tessera_store::model::{self, DashboardInfo, Paths};
use tessera_store::{Holder, Store};
use tessera_wire::console::LastDashboard;

/// How long a scan's result is used before the stores are read again.
pub const CACHE_FOR: Duration = Duration::from_secs(2);
/// How long opening (connecting to) a store may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the last lock holder of a cluster has to answer the probe of its API.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

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
    /// When no dashboard holds the lock: the one last seen holding it, if any.
    pub last_dashboard: Option<LastDashboard>,
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
    /// The dashboard last seen holding each cluster's lock, by (store, cluster): one entry
    /// per cluster found, dropped when its store's next good scan no longer has it.
    holders: std::sync::Mutex<HashMap<(String, String), Seen>>,
    /// The console's client, for probing a last holder.
    http: reqwest::Client,
    /// This machine's host name: a last holder that ran here can be checked by its pid.
    this_host: String,
}

/// A dashboard seen holding a cluster's lock, and when (unix milliseconds).
#[derive(Clone)]
struct Seen {
    dashboard: DashboardView,
    at_ms: u64,
}

/// What became of a lock's last holder, as far as the console can tell.
enum Fate {
    Answers,
    Silent,
    /// It ran on this host and its pid is gone.
    Exited,
}

impl Discovery {
    pub fn new(urls: Vec<String>, http: reqwest::Client) -> Self {
        Self {
            urls,
            opened: Default::default(),
            last_good: Default::default(),
            scan: Default::default(),
            holders: Default::default(),
            http,
            this_host: tessera_store::hostname(),
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
                Ok(mut found) => {
                    self.explain_lockless(url, &mut found).await;
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

    /// Notes who holds each lock in `found` (all of store `url`), and gives each cluster whose
    /// lock nobody holds its error: what became of its last holder, probed now.
    async fn explain_lockless(&self, url: &str, found: &mut [Cluster]) {
        let now = now_ms();
        let lockless: Vec<(usize, Option<Seen>)> = {
            let mut holders = self.holders.lock().expect("holders lock poisoned");
            holders.retain(|(u, n), _| u != url || found.iter().any(|c| &c.name == n));
            found
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let key = (url.to_owned(), c.name.clone());
                    match &c.dashboard {
                        Some(d) => {
                            let seen = Seen {
                                dashboard: d.clone(),
                                at_ms: now,
                            };
                            holders.insert(key, seen);
                            None
                        }
                        None => Some((i, holders.get(&key).cloned())),
                    }
                })
                .collect()
        };
        let fates = join_all(lockless.iter().map(|(_, seen)| async move {
            match seen {
                Some(s) => Some(self.fate(&s.dashboard).await),
                None => None,
            }
        }))
        .await;
        for ((i, seen), fate) in lockless.into_iter().zip(fates) {
            let c = &mut found[i];
            let (Some(seen), Some(fate)) = (seen, fate) else {
                c.error = Some(format!(
                    "no dashboard has held the cluster lock since the console started: start {}",
                    start_command(&c.name, url)
                ));
                continue;
            };
            c.error = Some(lockless_error(&c.name, url, &seen, &fate, now));
            let d = seen.dashboard;
            c.last_dashboard = Some(LastDashboard {
                admin_addr: d.admin_addr,
                pid: d.pid,
                host: d.host,
                version: d.version,
                last_seen_unix_ms: seen.at_ms,
                answers: matches!(fate, Fate::Answers),
            });
        }
    }

    /// Whether `d` still answers on its API (any HTTP answer counts), or is known to be gone.
    async fn fate(&self, d: &DashboardView) -> Fate {
        if d.host == self.this_host && !tessera_store::pid_alive(d.pid) {
            return Fate::Exited;
        }
        let probe = self
            .http
            .get(format!("http://{}/health", d.admin_addr))
            .timeout(PROBE_TIMEOUT)
            .send()
            .await;
        if probe.is_ok() {
            Fate::Answers
        } else {
            Fate::Silent
        }
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
    Ok(Some(Cluster {
        name,
        store: url.to_owned(),
        dashboard,
        // Said by `explain_lockless` when `dashboard` is none.
        error: None,
        last_dashboard: None,
        duplicate: false,
    }))
}

/// The command that starts a dashboard for cluster `name` of store `url`.
fn start_command(name: &str, url: &str) -> String {
    format!("`tessera dashboard --cluster {name} --store {url}`")
}

/// Why nobody holds the lock of cluster `name`, whose last holder was `seen` and is `fate`.
/// What a holder does when it finds its lock lapsed (tessera-control's `guard`): its next
/// store write checks the lock, finds it gone or taken, and the dashboard exits. On an fs
/// store its heartbeat may renew the node first, if no other dashboard has replaced it; an
/// etcd lease that expired is gone for good.
fn lockless_error(name: &str, url: &str, seen: &Seen, fate: &Fate, now_ms: u64) -> String {
    let d = &seen.dashboard;
    let who = format!(
        "the dashboard at {} (pid {} on {})",
        d.admin_addr, d.pid, d.host
    );
    let until = format!(
        "which held the cluster lock until {} ({} s ago)",
        utc_text(seen.at_ms),
        now_ms.saturating_sub(seen.at_ms) / 1000
    );
    let on_wake = if url.starts_with("etcd://") {
        "its lease has expired, so at its next store write it finds the lock gone and exits"
    } else {
        "at its next store write it finds the lock gone and exits, unless its heartbeat renews \
         the lock first (only while no other dashboard has taken it)"
    };
    match fate {
        Fate::Answers => format!(
            "{who} answers but no longer holds the cluster lock (its lease lapsed: the store \
             did not hear from it in time): {on_wake}. Do not start another while it answers"
        ),
        Fate::Silent => format!(
            "{who}, {until}, does not answer: it may be frozen, stopped or unreachable. Check \
             that process before starting another: if it resumes, {on_wake}; a dashboard \
             started now takes the lock, and the old one then exits at its next store write"
        ),
        Fate::Exited => format!(
            "{who}, {until}, has exited: start {}",
            start_command(name, url)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen() -> Seen {
        Seen {
            dashboard: DashboardView {
                admin_addr: "10.0.0.1:18080".into(),
                pid: 42,
                host: "db1".into(),
                version: "0.1.0".into(),
                start_unix: 0,
            },
            at_ms: 1_733_356_800_000,
        }
    }

    #[test]
    fn a_silent_last_holder_is_named_and_no_second_dashboard_is_advised() {
        let now = 1_733_356_830_000;
        for url in ["fs:///var/lib/tessera", "etcd://127.0.0.1:2379"] {
            let e = lockless_error("c1", url, &seen(), &Fate::Silent, now);
            assert!(
                e.starts_with(
                    "the dashboard at 10.0.0.1:18080 (pid 42 on db1), which held the cluster \
                     lock until 2024-12-05 00:00:00Z (30 s ago), does not answer"
                ),
                "{e}"
            );
            assert!(!e.contains("tessera dashboard"), "{e}");
            let e = lockless_error("c1", url, &seen(), &Fate::Answers, now);
            assert!(e.contains("answers but no longer holds"), "{e}");
            assert!(!e.contains("tessera dashboard"), "{e}");
            let e = lockless_error("c1", url, &seen(), &Fate::Exited, now);
            assert!(
                e.ends_with(&format!(
                    "has exited: start `tessera dashboard --cluster c1 --store {url}`"
                )),
                "{e}"
            );
        }
        let fs = lockless_error("c1", "fs:///s", &seen(), &Fate::Silent, now);
        assert!(fs.contains("unless its heartbeat renews"), "{fs}");
        let etcd = lockless_error("c1", "etcd://h:2379", &seen(), &Fate::Silent, now);
        assert!(etcd.contains("its lease has expired"), "{etcd}");
    }
}
