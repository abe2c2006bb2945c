//! The route keeper of a cluster-mode proxy (docs/prefix-routes.md): for each key prefix the
//! topology routes to another cluster, it picks one of that cluster's registered proxies
//! that answers (logged in as the route's user, `PING` → `PONG`), and keeps it while it
//! does. When a target changes, the table in force is built afresh with it
//! (`ProxyAdmin::reroute`); commands on the prefix then go there.
//!
//! Each proxy ranks the other cluster's proxies by a hash of its own token and theirs
//! (rendezvous hashing), so the proxies of one cluster spread over the other's, and a
//! proxy that comes or goes moves only the routes that chose it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use tracing::{info, warn};

use crate::admin::ProxyAdmin;
use tessera_model::redis_client::{RedisClient, Value};
use tessera_model::router::prefix::{PrefixRoute, RouteStatus, Target};
use tessera_store::Store;
use tessera_store::model::{self, Paths, ProxyModel, ProxyState};

/// How often each route's target is checked (and, without one, looked for).
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long a candidate has to answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// At most this many of the other cluster's proxies are tried per route per round.
const MAX_TRIES: usize = 4;

/// A proxy's route keeper: what it checks with, and the connections its checks keep open
/// (one per target and user, so a healthy target costs a `PING` a second, not a connection).
pub struct Keeper {
    admin: Arc<ProxyAdmin>,
    store: Arc<dyn Store>,
    probes: Probes,
}

/// Open check connections, by target address and user.
#[derive(Default)]
struct Probes(Mutex<HashMap<(String, Option<String>), RedisClient>>);

impl Keeper {
    pub fn new(admin: Arc<ProxyAdmin>, store: Arc<dyn Store>) -> Self {
        Self {
            admin,
            store,
            probes: Probes::default(),
        }
    }

    /// Keeps every route's target current until the process ends.
    pub async fn run(self) {
        let mut swapped = self.admin.shared.router.swapped();
        loop {
            self.check().await;
            // A new topology may bring a new route: look at once, not a second later.
            let _ = tokio::time::timeout(CHECK_EVERY, swapped.changed()).await;
        }
    }

    /// One round (see [`check`]), then the check connections of targets no longer in use
    /// are closed.
    pub async fn check(&self) {
        check(&self.admin, &*self.store, &self.probes).await;
        let routes = self.admin.prefix_routes();
        let targets = &self.admin.shared.router.targets;
        let live: Vec<(String, Option<String>)> = routes
            .iter()
            .filter_map(|r| Some((targets.get(&r.prefix)?.addr.to_string(), user_of(r))))
            .collect();
        let mut open = self.probes.0.lock().expect("probes lock poisoned");
        open.retain(|k, _| live.contains(k));
    }
}

fn user_of(route: &PrefixRoute) -> Option<String> {
    route.credential.as_ref().map(|c| c.user.clone())
}

/// One round: every route's target checked or found, and the table rebuilt if one changed.
/// Also run once before the proxy serves, so that its routes have targets from the start.
/// Each cluster's proxies are read once, and the routes are looked at side by side: one
/// whose cluster does not answer holds up no other.
async fn check(admin: &ProxyAdmin, store: &dyn Store, probes: &Probes) {
    let routes = admin.prefix_routes();
    let targets = &admin.shared.router.targets;
    targets.retain(|p| routes.iter().any(|r| r.prefix == p));
    let mut clusters: Vec<&str> = routes.iter().map(|r| r.cluster.as_str()).collect();
    clusters.sort_unstable();
    clusters.dedup();
    let listed = join_all(clusters.iter().map(|c| proxies_of(store, c))).await;
    let found = join_all(routes.iter().map(|r| {
        let i = clusters
            .binary_search(&r.cluster.as_str())
            .expect("listed above");
        find_target(admin, r, &listed[i], probes)
    }))
    .await;
    let mut changed = false;
    for (status, target) in found {
        changed |= targets.set(status, target);
    }
    if changed && let Err(e) = admin.reroute().await {
        warn!(error = %e, "prefix routes: building the table with new targets failed");
    }
}

/// The proxies registered in `cluster` and not draining, or why they cannot be read.
async fn proxies_of(store: &dyn Store, cluster: &str) -> Result<Vec<ProxyModel>, String> {
    if !model::valid_cluster_name(cluster) {
        return Err(format!("{cluster:?} is not a valid cluster name"));
    }
    model::serving_proxies(store, &Paths::new(cluster))
        .await
        .map_err(|e| format!("reading cluster {cluster}'s proxies: {e}"))
}

/// The target for `route`: the current one while it answers, else the first of the other
/// cluster's proxies, in this proxy's order, that does.
async fn find_target(
    admin: &ProxyAdmin,
    route: &PrefixRoute,
    proxies: &Result<Vec<ProxyModel>, String>,
    probes: &Probes,
) -> (RouteStatus, Option<Target>) {
    let mut status = RouteStatus {
        prefix: route.prefix.clone(),
        cluster: route.cluster.clone(),
        target: None,
        error: None,
    };
    let current = admin.shared.router.targets.get(&route.prefix);
    let proxies = match proxies {
        Ok(p) => p,
        Err(e) => {
            // The store is out of reach: keep the target while it answers.
            status.error = Some(e.clone());
            if let Some(t) = current
                && probes.probe(&t.addr, route).await.is_ok()
            {
                status.target = Some(t.addr.to_string());
                return (status, Some(t));
            }
            return (status, None);
        }
    };
    let mut candidates = ranked(&admin.token, proxies);
    if let Some(t) = &current
        && let Some(i) = candidates.iter().position(|a| **a == *t.addr)
    {
        let a = candidates.remove(i);
        candidates.insert(0, a);
    }
    if candidates.is_empty() {
        status.error = Some(format!("cluster {} has no proxy online", route.cluster));
        return (status, None);
    }
    let mut last_error = String::new();
    for addr in candidates.into_iter().take(MAX_TRIES) {
        match probes.probe(&addr, route).await {
            Ok(()) => {
                if current.as_ref().is_none_or(|t| *t.addr != *addr) {
                    info!(prefix = %route.prefix, cluster = %route.cluster, target = %addr, "prefix route: forwarding to this proxy");
                }
                status.target = Some(addr.clone());
                let login = crate::acl::control_login(route.credential.as_ref(), None);
                return (
                    status,
                    Some(Target {
                        addr: addr.into(),
                        login,
                    }),
                );
            }
            Err(e) => last_error = format!("{addr}: {e}"),
        }
    }
    warn!(prefix = %route.prefix, cluster = %route.cluster, error = %last_error, "prefix route: no proxy of the cluster answers");
    status.error = Some(format!(
        "no proxy of cluster {} answers (last: {last_error})",
        route.cluster
    ));
    (status, None)
}

/// The other cluster's online proxies, in this proxy's rendezvous order.
fn ranked(own_token: &str, proxies: &[ProxyModel]) -> Vec<String> {
    let mut v: Vec<(u32, String)> = proxies
        .iter()
        .filter(|p| p.state == ProxyState::Online)
        .map(|p| {
            let mut h = crc32fast::Hasher::new();
            h.update(own_token.as_bytes());
            h.update(b"\0");
            h.update(p.token.as_bytes());
            (h.finalize(), p.addr.clone())
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, a)| a).collect()
}

impl Probes {
    /// `PING` → `PONG` from `addr` as the route's user: on the connection kept from the last
    /// check when there is one, else on a new one (kept for the next).
    async fn probe(&self, addr: &str, route: &PrefixRoute) -> Result<(), String> {
        let key = (addr.to_string(), user_of(route));
        let kept = self.0.lock().expect("probes lock poisoned").remove(&key);
        if let Some(mut c) = kept
            && ping(&mut c).await.is_ok()
        {
            self.0.lock().expect("probes lock poisoned").insert(key, c);
            return Ok(());
        }
        let mut c = RedisClient::connect_as(addr, PROBE_TIMEOUT, route.credential.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        ping(&mut c).await?;
        self.0.lock().expect("probes lock poisoned").insert(key, c);
        Ok(())
    }
}

async fn ping(c: &mut RedisClient) -> Result<(), String> {
    match c.cmd(&[b"PING"]).await.map_err(|e| e.to_string())? {
        Value::Ok(s) if s == "PONG" => Ok(()),
        Value::Error(e) => Err(e),
        other => Err(format!("unexpected reply to PING: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(token: &str, addr: &str, state: ProxyState) -> ProxyModel {
        ProxyModel {
            schema: model::SCHEMA_VERSION,
            token: token.into(),
            addr: addr.into(),
            admin_addr: String::new(),
            pid: 1,
            host: "h".into(),
            start_unix: 0,
            state,
            version: String::new(),
        }
    }

    #[test]
    fn proxies_rank_the_other_clusters_proxies_apart_and_skip_offline_ones() {
        let others = || {
            (0..8)
                .map(|i| proxy(&format!("t{i}"), &format!("b:{i}"), ProxyState::Online))
                .chain([proxy("off", "b:off", ProxyState::Offline)])
                .collect::<Vec<_>>()
        };
        let a = ranked("a-1", &others());
        assert_eq!(a.len(), 8, "the offline proxy is not a candidate");
        assert_eq!(
            a,
            ranked("a-1", &others()),
            "the same proxy ranks the same way"
        );
        let firsts: std::collections::HashSet<String> = (0..16)
            .map(|i| ranked(&format!("a-{i}"), &others())[0].clone())
            .collect();
        assert!(firsts.len() > 2, "16 proxies all chose among {firsts:?}");
    }
}
