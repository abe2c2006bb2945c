//! Operations on the topology: groups, servers, promotion, slot assignment, proxy state.
//! Each one validates against the current state, persists, and (when routing changes)
//! commits a new epoch with a barrier push. They run one at a time under `ops`.

use std::time::Duration;

use tracing::info;

use super::Dashboard;
use super::admin_user;
use crate::Error;
use tessera_model::redis_client::{Credential, Value};
use tessera_model::router::{GroupId, SLOTS};
use tessera_store::model::{self, GroupModel, ProxyModel, SCHEMA_VERSION, ServerModel, SlotModel};

pub(super) const REDIS_TIMEOUT: Duration = Duration::from_secs(3);
/// How long after revoking a proxy's registration it has surely stopped routing: its lease
/// (`proxy::server::cluster::PROXY_NODE_TTL`), whose last renewal lets it serve until
/// `FENCE_MARGIN` before its end, plus that margin again for the two clocks.
const OFFLINE_FENCED: Duration = Duration::from_secs(10);

/// Splits `host:port` for REPLICAOF.
fn host_port(addr: &str) -> Result<(&str, &str), Error> {
    addr.rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        .ok_or_else(|| Error::invalid(format!("server address {addr:?} is not host:port")))
}

impl Dashboard {
    /// Runs one command on a server as the admin user; a Redis error reply is the server's
    /// refusal, naming it.
    async fn redis_cmd(&self, addr: &str, args: &[&str]) -> Result<Value, Error> {
        let mut c = admin_user::connect(addr, &self.backend_admin, REDIS_TIMEOUT)
            .await
            .map_err(|e| Error::server(addr, e))?;
        match c
            .cmd(args)
            .await
            .map_err(|source| Error::ServerUnreachable {
                addr: addr.into(),
                source,
            })? {
            Value::Error(reply) => Err(Error::ServerRefused {
                addr: addr.into(),
                command: args.join(" "),
                reply,
            }),
            v => Ok(v),
        }
    }

    /// Makes `addr` replicate from `master` (authenticating to it as the admin user).
    pub(super) async fn replicate(&self, addr: &str, master: &str) -> Result<(), Error> {
        let master = host_port(master)?;
        admin_user::replicate(addr, master, &self.backend_admin, REDIS_TIMEOUT).await
    }

    /// Before pushes skip a proxy marked offline, it must have stopped routing, for it may
    /// still be serving. Its registration is revoked: it fences itself (at its next renewal,
    /// or by its clock `FENCE_MARGIN` before the lease it last renewed would end) and,
    /// registering again, finds its offline mark and stays fenced. After `OFFLINE_FENCED`
    /// (that lease and the margin the dashboard adds for a departed proxy), its connections
    /// are killed on every server, as for a proxy whose registration lapsed.
    ///
    /// # Errors
    /// The store fails to revoke the registration (the mark stays; the proxy is not skipped).
    async fn fence_for_offline(&self, token: &str) -> Result<(), Error> {
        self.store
            .expire_ephemeral(&self.paths.proxy(token))
            .await?;
        info!(%token, wait_secs = OFFLINE_FENCED.as_secs(), "proxy marked offline: its registration is revoked; waiting until it has surely fenced itself");
        tokio::time::sleep(OFFLINE_FENCED).await;
        self.close_connections_of(&std::collections::HashSet::from([token.to_string()]))
            .await;
        Ok(())
    }

    pub(super) fn group(&self, id: GroupId) -> Result<GroupModel, Error> {
        let st = self.state.lock().expect("state lock poisoned");
        st.groups
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::not_found(format!("group {id} does not exist")))
    }

    fn slots_of(&self, id: GroupId) -> usize {
        let st = self.state.lock().expect("state lock poisoned");
        st.slots.iter().filter(|s| s.group == Some(id)).count()
    }

    async fn save_group(&self, g: &GroupModel) -> Result<(), Error> {
        g.mark_tls();
        model::write(&*self.store, &self.paths.group(g.id), g).await?;
        self.state
            .lock()
            .expect("state lock poisoned")
            .groups
            .insert(g.id, g.clone());
        Ok(())
    }

    /// # Errors
    /// 409 when the id is taken.
    pub async fn create_group(&self, id: Option<u32>, tls: bool) -> Result<GroupModel, Error> {
        let _ops = self.ops.lock().await;
        let id = match id {
            Some(0) => return Err(Error::invalid("group ids start at 1")),
            Some(i) => GroupId(i),
            None => {
                let st = self.state.lock().expect("state lock poisoned");
                GroupId(st.groups.keys().map(|g| g.0).max().unwrap_or(0) + 1)
            }
        };
        if self
            .state
            .lock()
            .expect("state lock poisoned")
            .groups
            .contains_key(&id)
        {
            return Err(Error::conflict(format!("group {id} already exists")));
        }
        let g = GroupModel {
            schema: SCHEMA_VERSION,
            id,
            servers: vec![],
            tls,
        };
        self.save_group(&g).await?;
        info!(group = %id, tls, "group created");
        Ok(g)
    }

    /// # Errors
    /// 409 unless the group has no slots and no servers.
    pub async fn delete_group(&self, id: GroupId) -> Result<(), Error> {
        let _ops = self.ops.lock().await;
        let g = self.group(id)?;
        let slots = self.slots_of(id);
        if slots > 0 || !g.servers.is_empty() {
            return Err(Error::conflict(format!(
                "group {id} is not empty ({slots} slots, {} servers): move its slots and remove its servers first",
                g.servers.len()
            )));
        }
        self.store.delete(&self.paths.group(id)).await?;
        self.state
            .lock()
            .expect("state lock poisoned")
            .groups
            .remove(&id);
        info!(group = %id, "group deleted");
        Ok(())
    }

    /// Adds a server: the first of a group becomes its master, later ones replicate from it.
    /// `login`: a user of the server able to create the control plane's user on it (its
    /// `default` user's password, say), used once and not kept; without it the dashboard
    /// creates its user as `default` without a password, the stock setting.
    ///
    /// # Errors
    /// 404 unknown group, 409 a server already in a group or unreachable.
    pub async fn add_server(
        &self,
        id: GroupId,
        addr: &str,
        login: Option<&Credential>,
    ) -> Result<GroupModel, Error> {
        let mut epoch = self.ops.lock().await;
        host_port(addr)?;
        let mut g = self.group(id)?;
        if let Some(other) = self
            .state
            .lock()
            .expect("state lock poisoned")
            .groups
            .values()
            .find(|g| g.servers.iter().any(|s| s.addr == addr))
        {
            return Err(Error::conflict(format!(
                "server {addr} is already in group {}",
                other.id
            )));
        }
        // Its group's TLS setting is the connector's before the first connection to it.
        tessera_model::tls::backend::backends().mark([(addr, g.tls)]);
        // Before anything else: from here on the dashboard works on it as its own user.
        let created = admin_user::provision(addr, &self.backend_admin, login, REDIS_TIMEOUT)
            .await
            .map_err(|e| Error::server(addr, e))?;
        match g.master() {
            Some(master) => self.replicate(addr, master).await?,
            None => {
                self.redis_cmd(addr, &["REPLICAOF", "NO", "ONE"]).await?;
            }
        }
        let becomes_master = g.servers.is_empty();
        g.servers.push(ServerModel { addr: addr.into() });
        self.save_group(&g).await?;
        info!(group = %id, %addr, master = becomes_master, admin_user = ?created, "server added");
        // A new replica reaches the proxies only when they may read from it.
        if (becomes_master || self.reads_replicas()) && self.slots_of(id) > 0 {
            self.commit(&mut epoch).await?;
        }
        Ok(g)
    }

    /// # Errors
    /// 409 for the master of a group that still has slots and replicas (promote first).
    pub async fn remove_server(&self, id: GroupId, addr: &str) -> Result<GroupModel, Error> {
        let mut epoch = self.ops.lock().await;
        let mut g = self.group(id)?;
        let Some(pos) = g.servers.iter().position(|s| s.addr == addr) else {
            return Err(Error::not_found(format!(
                "server {addr} is not in group {id}"
            )));
        };
        let slots = self.slots_of(id);
        if pos == 0 && slots > 0 && g.servers.len() > 1 {
            return Err(Error::conflict(format!(
                "{addr} is the master of group {id}, which serves {slots} slots: promote a replica first"
            )));
        }
        g.servers.remove(pos);
        self.save_group(&g).await?;
        self.state
            .lock()
            .expect("state lock poisoned")
            .servers
            .remove(addr);
        info!(group = %id, %addr, "server removed");
        if (pos == 0 || self.reads_replicas()) && slots > 0 {
            self.commit(&mut epoch).await?;
        }
        Ok(g)
    }

    /// Makes a replica the master: `REPLICAOF NO ONE` on it, `REPLICAOF` it on the others
    /// (an unreachable old master is skipped: it is told when it comes back and is re-added).
    ///
    /// # Errors
    /// 404 unknown group or server, 409 the new master cannot be reached.
    pub async fn promote(&self, id: GroupId, addr: &str) -> Result<GroupModel, Error> {
        let mut epoch = self.ops.lock().await;
        self.promote_locked(&mut epoch, id, addr).await
    }

    /// [`Self::promote`] for a caller that holds `ops` already (automatic failover, which
    /// decides and promotes under one hold of it).
    pub(super) async fn promote_locked(
        &self,
        epoch: &mut u64,
        id: GroupId,
        addr: &str,
    ) -> Result<GroupModel, Error> {
        let mut g = self.group(id)?;
        let Some(pos) = g.servers.iter().position(|s| s.addr == addr) else {
            return Err(Error::not_found(format!(
                "server {addr} is not in group {id}"
            )));
        };
        if pos == 0 {
            return Err(Error::conflict(format!(
                "{addr} is already the master of group {id}"
            )));
        }
        self.redis_cmd(addr, &["REPLICAOF", "NO", "ONE"]).await?;
        host_port(addr)?;
        let server = g.servers.remove(pos);
        g.servers.insert(0, server);
        for s in g.servers.iter().skip(1) {
            if let Err(e) = self.replicate(&s.addr, addr).await {
                tracing::warn!(server = %s.addr, error = %e, "could not point a server at the new master");
            }
        }
        self.save_group(&g).await?;
        {
            let mut st = self.state.lock().expect("state lock poisoned");
            st.down.remove(&id);
            if let Some(h) = st.servers.get_mut(addr) {
                h.failures = 0;
            }
        }
        info!(group = %id, master = %addr, "replica promoted");
        self.commit(epoch).await?;
        Ok(g)
    }

    /// Assigns unassigned slots `from..=to` to a group.
    ///
    /// # Errors
    /// 400 bad range, 404 unknown group, 409 a slot owned by another group.
    pub async fn assign_slots(
        &self,
        from: u32,
        to: u32,
        id: GroupId,
    ) -> Result<(u64, usize), Error> {
        let mut epoch = self.ops.lock().await;
        if from > to || to as usize >= SLOTS {
            return Err(Error::invalid(format!(
                "slot range {from}-{to} is not within 0-{}",
                SLOTS - 1
            )));
        }
        self.group(id)?;
        let changed: Vec<SlotModel> = {
            let st = self.state.lock().expect("state lock poisoned");
            if let Some(s) = st.slots[from as usize..=to as usize]
                .iter()
                .find(|s| s.group.is_some_and(|g| g != id))
            {
                return Err(Error::conflict(format!(
                    "slot {} is owned by group {}: moving a slot with data is a migration",
                    s.id,
                    s.group.map_or(0, |g| g.0)
                )));
            }
            st.slots[from as usize..=to as usize]
                .iter()
                .filter(|s| s.group.is_none())
                .map(|s| SlotModel {
                    group: Some(id),
                    ..s.clone()
                })
                .collect()
        };
        model::write_many(
            &*self.store,
            changed.iter().map(|s| (self.paths.slot(s.id), s)),
        )
        .await?;
        {
            let mut st = self.state.lock().expect("state lock poisoned");
            for s in &changed {
                st.slots[s.id as usize] = s.clone();
            }
        }
        info!(group = %id, from, to, changed = changed.len(), "slots assigned");
        let e = self.commit(&mut epoch).await?;
        Ok((e, changed.len()))
    }

    /// Takes a proxy out of pushes, or puts it back (pushing the current topology to it,
    /// then lifting the mark, upon which the proxy reloads its table and serves again).
    ///
    /// # Errors
    /// 404 unknown proxy; 502 when the proxy put back online does not acknowledge.
    pub async fn set_proxy_online(&self, token: &str, online: bool) -> Result<ProxyModel, Error> {
        let epoch = self.ops.lock().await;
        let proxies = self.registered_proxies().await?;
        let Some(p) = proxies.into_iter().find(|p| p.token == token) else {
            return Err(Error::not_found(format!(
                "no registered proxy has token {token}"
            )));
        };
        let key = self.paths.proxy_offline(token);
        if online {
            let topo = self.committed_topology(*epoch).await?;
            self.push_one(&p, &topo)
                .await
                .map_err(|failure| Error::ProxyUnreachable {
                    token: token.into(),
                    failure,
                })?;
            self.store.delete(&key).await?;
            self.state
                .lock()
                .expect("state lock poisoned")
                .offline
                .remove(token);
        } else {
            self.store
                .put(&key, bytes::Bytes::from_static(b"{}"))
                .await?;
            self.fence_for_offline(token).await?;
            self.state
                .lock()
                .expect("state lock poisoned")
                .offline
                .insert(token.into());
        }
        info!(%token, online, "proxy state changed");
        Ok(p)
    }
}
