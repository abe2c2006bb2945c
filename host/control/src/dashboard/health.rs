//! Health: every interval, each server gets PING, ROLE and INFO (replication, memory,
//! keyspace) over a connection authenticated as the control plane's user (`admin_user`),
//! each proxy a GET /health. A master that fails `down_after` checks in a row
//! marks its group down, which is pushed to the proxies so its slots answer a clear error
//! at once; when it answers again (or a replica is promoted) the group is up again.
//! A proxy that registered since the last push is brought up to date here.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde::Serialize;
use tracing::{info, warn};

use super::proxy_health::ProxyHealth;
use super::{Dashboard, admin_user};
use tessera_model::redis_client::{Credential, Value, info_fields};
use tessera_model::router::GroupId;

/// What the last check of a server found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerHealth {
    pub up: bool,
    /// Consecutive failed checks.
    #[serde(skip)]
    pub failures: u32,
    pub role_reported: Option<String>,
    pub master_link: Option<String>,
    pub repl_offset: Option<i64>,
    pub memory_bytes: Option<u64>,
    pub keys: Option<u64>,
    pub error: Option<String>,
    /// The replication offset of the last check that answered (kept while it fails: a dead
    /// master's last known offset is what automatic failover measures a replica's lag by).
    #[serde(skip)]
    pub last_offset: Option<i64>,
    /// When the first of the current run of failed checks ended; `None` while it answers.
    #[serde(skip)]
    pub failing_since: Option<std::time::Instant>,
}

const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Checks one server as the admin user (creating the user again on a server that lost it).
async fn check_server(addr: String, cred: &Credential) -> ServerHealth {
    let probe = async {
        let mut c = admin_user::connect(&addr, cred, CHECK_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let replies = c
            .pipeline(&[
                vec![&b"PING"[..]],
                vec![b"ROLE"],
                vec![b"INFO", b"replication"],
                vec![b"INFO", b"memory"],
                vec![b"INFO", b"keyspace"],
            ])
            .await
            .map_err(|e| e.to_string())?;
        if let Some(Value::Error(e)) = replies.first() {
            return Err(e.clone());
        }
        let role = match &replies[1] {
            Value::Array(items) => items.first().and_then(Value::as_text),
            _ => None,
        };
        let mut h = ServerHealth {
            up: true,
            role_reported: role,
            ..ServerHealth::default()
        };
        for v in &replies[2..] {
            for (k, val) in v.as_text().map(|t| info_fields(&t)).unwrap_or_default() {
                match k.as_str() {
                    "master_link_status" => h.master_link = Some(val),
                    "master_repl_offset" => h.repl_offset = val.parse().ok(),
                    "used_memory" => h.memory_bytes = val.parse().ok(),
                    k if k.starts_with("db") => {
                        let keys = val
                            .split(',')
                            .find_map(|f| f.strip_prefix("keys="))
                            .and_then(|n| n.parse::<u64>().ok());
                        h.keys = Some(h.keys.unwrap_or(0) + keys.unwrap_or(0));
                    }
                    _ => {}
                }
            }
        }
        h.keys.get_or_insert(0);
        Ok::<_, String>(h)
    };
    probe.await.unwrap_or_else(|e| ServerHealth {
        up: false,
        error: Some(e),
        ..ServerHealth::default()
    })
}

impl Dashboard {
    /// One round of checks; returns whether the set of down groups changed.
    async fn check_once(&self) -> bool {
        let (servers, masters): (Vec<String>, Vec<(GroupId, String)>) = {
            let st = self.state.lock().expect("state lock poisoned");
            let servers = st
                .groups
                .values()
                .flat_map(|g| g.servers.iter().map(|s| s.addr.clone()))
                .collect();
            let masters = st
                .groups
                .values()
                .filter_map(|g| g.master().map(|m| (g.id, m.to_string())))
                .collect();
            (servers, masters)
        };
        let results = join_all(
            servers
                .iter()
                .map(|a| check_server(a.clone(), &self.backend_admin)),
        )
        .await;
        let proxies = self.registered_proxies().await.unwrap_or_default();
        self.remember_proxies(&proxies).await;
        let proxy_results = join_all(proxies.iter().map(|p| self.check_proxy(&p.admin_addr))).await;

        let mut st = self.state.lock().expect("state lock poisoned");
        let now = std::time::Instant::now();
        for (addr, mut h) in servers.into_iter().zip(results) {
            let old = st.servers.get(&addr);
            if h.up {
                h.last_offset = h.repl_offset;
            } else {
                h.failures = old.map_or(0, |o| o.failures) + 1;
                h.last_offset = old.and_then(|o| o.last_offset);
                h.failing_since = Some(old.and_then(|o| o.failing_since).unwrap_or(now));
            }
            st.servers.insert(addr, h);
        }
        let known: HashSet<String> = st
            .groups
            .values()
            .flat_map(|g| g.servers.iter().map(|s| s.addr.clone()))
            .collect();
        st.servers.retain(|a, _| known.contains(a));
        st.proxies = proxies
            .iter()
            .map(|p| p.token.clone())
            .zip(proxy_results)
            .collect();
        // Every proxy known or registered, as the proxies view shows it, for the events.
        let mut seen: Vec<(String, String, tessera_wire::cluster::ProxyHealthState)> = proxies
            .iter()
            .map(|p| {
                let h = super::proxy_health::health_of(true, st.proxies.get(&p.token));
                (p.token.clone(), p.addr.clone(), h)
            })
            .collect();
        for k in st.known.values() {
            if !proxies.iter().any(|p| p.token == k.token) {
                let h = super::proxy_health::health_of(false, None);
                seen.push((k.token.clone(), k.addr.clone(), h));
            }
        }
        self.proxies_observed(seen);
        let down_after = self.opts.down_after;
        let down: HashSet<GroupId> = masters
            .iter()
            .filter(|(_, m)| st.servers.get(m).is_some_and(|h| h.failures >= down_after))
            .map(|(g, _)| *g)
            .collect();
        if down != st.down {
            for g in down.difference(&st.down) {
                warn!(group = %g, "group master is down: its slots now answer an error");
            }
            for g in st.down.difference(&down) {
                info!(group = %g, "group master is back");
            }
            st.down = down;
            return true;
        }
        false
    }

    async fn check_proxy(&self, admin_addr: &str) -> ProxyHealth {
        let call = self.proxy_call(reqwest::Method::GET, admin_addr, "/api/proxy/info");
        match call.timeout(CHECK_TIMEOUT).send().await {
            Ok(r) if r.status().is_success() => {
                let info = r.json::<serde_json::Value>().await.unwrap_or_default();
                ProxyHealth {
                    up: true,
                    fenced: info["fenced"].as_bool().unwrap_or(false),
                    draining: info["draining"].as_bool().unwrap_or(false),
                    epoch: info["epoch"].as_u64(),
                    users_version: info["users_version"].as_u64(),
                    error: None,
                }
            }
            Ok(r) => ProxyHealth {
                error: Some(format!("HTTP {}", r.status())),
                ..ProxyHealth::default()
            },
            Err(e) => ProxyHealth {
                error: Some(unanswered(admin_addr, &e)),
                ..ProxyHealth::default()
            },
        }
    }
}

/// Why a proxy's admin API gave no answer, for an operator: refused (the process is gone or
/// not listening), silent (frozen, or too busy), or unreachable with the transport's words.
fn unanswered(admin_addr: &str, e: &reqwest::Error) -> String {
    if super::push::connection_refused(e) {
        format!(
            "its admin API at {admin_addr} refused the connection: the process is gone or not listening"
        )
    } else if e.is_timeout() {
        format!(
            "its admin API at {admin_addr} did not answer within {} s: the process may be frozen or overloaded",
            CHECK_TIMEOUT.as_secs()
        )
    } else {
        format!("its admin API at {admin_addr} could not be reached: {e}")
    }
}

/// The background loop.
pub(super) async fn run(d: Arc<Dashboard>) {
    let mut tick = tokio::time::interval(d.opts.health_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let changed = d.check_once().await;
        catch_up_users(&d).await;
        sync_proxies(&d, changed).await;
        // After the push: a dead master's slots already answer a clear error meanwhile.
        super::failover::tick(&d).await;
    }
}

/// Pushes a change of the down groups, or brings proxies that run an older epoch up to date.
async fn sync_proxies(d: &Dashboard, changed: bool) {
    let mut epoch = d.ops.lock().await;
    if changed {
        if let Err(e) = d.commit(&mut epoch).await {
            warn!(error = %e, "pushing the health change failed");
        }
        return;
    }
    // Proxies that run an older epoch (registered after the last push, or restarted)
    // get the current topology.
    let behind: Vec<String> = {
        let st = d.state.lock().expect("state lock poisoned");
        st.proxies
            .iter()
            .filter(|(t, h)| {
                h.up && h.epoch.is_some_and(|e| e < *epoch) && !st.offline.contains(*t)
            })
            .map(|(t, _)| t.clone())
            .collect()
    };
    if behind.is_empty() {
        return;
    }
    let Ok(topo) = d.committed_topology(*epoch).await else {
        return;
    };
    for p in d
        .registered_proxies()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|p| behind.contains(&p.token))
    {
        match d.push_one(&p, &topo).await {
            Ok(()) => info!(token = %p.token, epoch = *epoch, "proxy brought up to date"),
            Err(e) => warn!(token = %p.token, error = %e, "could not bring a proxy up to date"),
        }
    }
}

/// Proxies whose users table is older than the store's (unreachable during a push, or
/// started with an unusable document) get the current one.
async fn catch_up_users(d: &Dashboard) {
    let version = d.users_version.load(std::sync::atomic::Ordering::Relaxed);
    let behind: Vec<String> = {
        let st = d.state.lock().expect("state lock poisoned");
        st.proxies
            .iter()
            .filter(|(t, h)| {
                h.up && h.users_version.is_some_and(|v| v < version) && !st.offline.contains(*t)
            })
            .map(|(t, _)| t.clone())
            .collect()
    };
    if !behind.is_empty() {
        // Under `ops`: no change of the table is pushed meanwhile.
        let _ops = d.ops.lock().await;
        d.catch_up_users(&behind).await;
    }
}
