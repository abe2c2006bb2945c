//! The cluster as the API shows it: the overview, every group with its servers' health,
//! the slots, the registered proxies with theirs. Read from the dashboard's state (and the
//! store's registrations); nothing here changes anything.

use tessera_model::router::GroupId;
use tessera_store::model::ProxyState;
use tessera_wire::cluster::{
    DashboardSummary, GroupView, Overview, OverviewFailover, ProxyHealthState, ProxyView,
    ServerRole, ServerView, SlotView,
};
use tessera_wire::routes::RouteRef;

use super::{Dashboard, ServerHealth};
use crate::Error;
use tessera_store::model::ProxyModel;

/// What the dashboard knows of a proxy beyond its registration.
pub(crate) struct Seen {
    pub(crate) state: ProxyState,
    pub(crate) health: ProxyHealthState,
    pub(crate) registered: bool,
    pub(crate) up: bool,
    pub(crate) epoch: Option<u64>,
    pub(crate) error: Option<String>,
}

impl Seen {
    /// A proxy just removed from the dashboard's list: lost, offline, registered no more.
    pub(crate) fn removed() -> Self {
        Self {
            state: ProxyState::Offline,
            health: ProxyHealthState::Lost,
            registered: false,
            up: false,
            epoch: None,
            error: None,
        }
    }
}

/// A proxy as the API shows it: its registration `p` and what the dashboard has `seen`.
pub(crate) fn proxy_view(p: ProxyModel, seen: Seen) -> ProxyView {
    ProxyView {
        token: p.token,
        addr: p.addr,
        admin_addr: p.admin_addr,
        pid: p.pid,
        host: p.host,
        start_unix: p.start_unix,
        version: p.version,
        state: seen.state,
        health: seen.health,
        registered: seen.registered,
        up: seen.up,
        epoch: seen.epoch,
        error: seen.error,
    }
}

impl Dashboard {
    /// Every group, its servers and what their last health checks found.
    pub fn group_views(&self) -> Vec<GroupView> {
        let st = self.state.lock().expect("state lock poisoned");
        st.groups
            .values()
            .map(|g| {
                // The last known offset: a dead master's lag figures stay (failover uses them).
                let master_offset = g
                    .master()
                    .and_then(|m| st.servers.get(m))
                    .and_then(|h| h.last_offset);
                GroupView {
                    id: g.id,
                    slots: st.slots.iter().filter(|s| s.group == Some(g.id)).count(),
                    down: st.down.contains(&g.id),
                    failover: self.failover.group_status(g.id),
                    tls: g.tls,
                    servers: g
                        .servers
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let health = st.servers.get(&s.addr).cloned().unwrap_or_default();
                            let lag = (i > 0)
                                .then(|| master_offset.zip(health.repl_offset).map(lag_of))
                                .flatten();
                            let role = if i == 0 {
                                ServerRole::Master
                            } else {
                                ServerRole::Replica
                            };
                            server_view(&s.addr, role, health, lag)
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// One group as [`Dashboard::group_views`] shows it.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a group that does not exist.
    pub fn group_view(&self, id: GroupId) -> Result<GroupView, Error> {
        self.group_views()
            .into_iter()
            .find(|g| g.id == id)
            .ok_or_else(|| Error::not_found(format!("group {id} does not exist")))
    }

    /// The 1024 slots, their owners and migrations.
    pub fn slot_views(&self) -> Vec<SlotView> {
        let st = self.state.lock().expect("state lock poisoned");
        st.slots
            .iter()
            .map(|s| SlotView {
                id: s.id,
                group: s.group,
                action: s.action.clone(),
            })
            .collect()
    }

    /// Every registered proxy and what its last health check found.
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub async fn proxy_views(&self) -> Result<Vec<ProxyView>, Error> {
        let registered = self.registered_proxies().await?;
        let st = self.state.lock().expect("state lock poisoned");
        // Registered ones first, then those lost whose registration is gone.
        let lost = st
            .known
            .values()
            .filter(|k| !registered.iter().any(|p| p.token == k.token))
            .cloned()
            .map(|p| (p, false))
            .collect::<Vec<_>>();
        let all: Vec<(ProxyModel, bool)> = registered
            .into_iter()
            .map(|p| (p, true))
            .chain(lost)
            .collect();
        Ok(all
            .into_iter()
            .map(|(p, registered)| {
                let checked = st.proxies.get(&p.token).filter(|_| registered);
                let health = super::proxy_health::health_of(registered, checked);
                let mut h = checked
                    .cloned()
                    .unwrap_or_else(|| super::proxy_health::ProxyHealth {
                        up: registered,
                        ..Default::default()
                    });
                if !registered {
                    h.error = Some(
                        "its registration in the store is gone (not renewed within its lease: \
                         stopped, frozen or cut off); listed until it comes back or is removed"
                            .into(),
                    );
                }
                let state = if st.offline.contains(&p.token) {
                    ProxyState::Offline
                } else {
                    ProxyState::Online
                };
                proxy_view(
                    p,
                    Seen {
                        state,
                        health,
                        registered,
                        up: h.up && health != ProxyHealthState::Lost,
                        epoch: h.epoch,
                        error: h.error,
                    },
                )
            })
            .collect())
    }

    /// One registered proxy as [`Dashboard::proxy_views`] shows it.
    ///
    /// # Errors
    /// The store fails, or no proxy has that token (any more).
    pub async fn proxy_view(&self, token: &str) -> Result<ProxyView, Error> {
        self.proxy_views()
            .await?
            .into_iter()
            .find(|p| p.token == token)
            .ok_or_else(|| Error::not_found(format!("proxy {token} went away")))
    }

    /// The cluster at a glance.
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub async fn overview(&self) -> Result<Overview, Error> {
        let stats = self.stats().await?;
        let proxies = self.proxy_views().await?;
        let epoch = *self.ops.lock().await;
        let failover = self.failover_view();
        let routes = self
            .prefix_routes()
            .into_iter()
            .map(|r| RouteRef {
                prefix: r.prefix,
                cluster: r.cluster,
            })
            .collect();
        let st = self.state.lock().expect("state lock poisoned");
        let masters: Vec<&ServerHealth> = st
            .groups
            .values()
            .filter_map(|g| g.master().and_then(|m| st.servers.get(m)))
            .collect();
        let info = self.info();
        let count = |s: ProxyHealthState| proxies.iter().filter(|p| p.health == s).count();
        Ok(Overview {
            cluster: self.cluster.clone(),
            epoch,
            dashboard: DashboardSummary {
                admin_addr: info.admin_addr.clone(),
                pid: std::process::id(),
                host: tessera_store::hostname(),
                version: info.version.clone(),
                start_unix: info.start_unix,
            },
            groups: st.groups.len(),
            groups_down: st.down.len(),
            failover: OverviewFailover {
                enabled: failover.settings.enabled,
                max_lag_bytes: failover.settings.max_lag_bytes,
                not_failing_over: failover.groups,
                last: failover.events.into_iter().next(),
            },
            servers: st.groups.values().map(|g| g.servers.len()).sum(),
            servers_down: st.servers.values().filter(|h| !h.up).count(),
            proxies: proxies.len(),
            proxies_online: proxies
                .iter()
                .filter(|p| p.state == ProxyState::Online && p.health == ProxyHealthState::Up)
                .count(),
            proxies_lost: count(ProxyHealthState::Lost),
            proxies_fenced: count(ProxyHealthState::Fenced),
            proxies_draining: count(ProxyHealthState::Draining),
            slots_assigned: st.slots.iter().filter(|s| s.group.is_some()).count(),
            slots_unassigned: st.slots.iter().filter(|s| s.group.is_none()).count(),
            ops_per_sec: stats.ops_per_sec,
            routes,
            memory_bytes: masters.iter().filter_map(|h| h.memory_bytes).sum(),
            keys: masters.iter().filter_map(|h| h.keys).sum(),
        })
    }
}

/// A replica's lag behind its master's offset, never negative: the two offsets are read by
/// separate checks, and a replica read after its master can be ahead of the offset read (it
/// showed as "-45 B"); that is no lag. Saturating: the offsets are what servers report.
pub(crate) fn lag_of((master, replica): (i64, i64)) -> i64 {
    master.saturating_sub(replica).max(0)
}

/// A server as the API shows it: its place in the group and its last health check.
fn server_view(
    addr: &str,
    role: ServerRole,
    h: ServerHealth,
    lag_bytes: Option<i64>,
) -> ServerView {
    ServerView {
        addr: addr.to_owned(),
        role,
        up: h.up,
        // Redis's ROLE still says `slave`; Tessera says replica throughout.
        role_reported: h
            .role_reported
            .map(|r| if r == "slave" { "replica".into() } else { r }),
        master_link: h.master_link,
        repl_offset: h.repl_offset,
        memory_bytes: h.memory_bytes,
        keys: h.keys,
        error: h.error,
        lag_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::lag_of;

    #[test]
    fn a_replica_read_ahead_of_its_master_has_no_lag_not_a_negative_one() {
        assert_eq!(lag_of((1000, 955)), 45);
        assert_eq!(lag_of((1000, 1045)), 0);
    }
}
