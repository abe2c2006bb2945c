//! What a cluster looks like in the store: JSON documents with a schema version, under
//! `/tessera/<cluster>/`:
//!
//! ```text
//! topom                the dashboard lock (ephemeral): who runs this cluster's dashboard
//! meta                 cluster settings: proxy secret, topology epoch, the control plane's
//!                      own Redis user (backend_admin)
//! tokens               API tokens: name, role, HMAC (`dashboard::tokens::TokensDoc`)
//! users                the users clients AUTH as (`users::UsersDoc`)
//! topology             the topology last committed (and pushed) with its epoch
//! failover             automatic failover: settings, a promotion decided and not yet done,
//!                      old masters to turn into replicas, recent events
//!                      (`dashboard::failover::FailoverDoc`)
//! slots/slot-NNNN      1024 slots: owning group and migration action
//! group/group-NNNN     groups: servers, the first being the master
//! proxy/<token>        proxies (ephemeral): addresses, pid, host, start time, state
//! plugin/<name>        plugin catalog entries (the plugin platform fills these)
//! blob/<sha256>/NNNN   content-addressed chunks (plugin modules)
//! ```

use serde::{Deserialize, Serialize};

use tessera_model::router::{GroupId, SLOTS};

/// Bumped when a document's shape changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

/// Root of every cluster.
pub const ROOT: &str = "/tessera";

/// Key paths of one cluster.
#[derive(Debug, Clone)]
pub struct Paths {
    base: String,
}

impl Paths {
    pub fn new(cluster: &str) -> Self {
        Self {
            base: format!("{ROOT}/{cluster}"),
        }
    }

    pub fn cluster_prefix(&self) -> String {
        format!("{}/", self.base)
    }

    pub fn lock(&self) -> String {
        format!("{}/topom", self.base)
    }

    pub fn meta(&self) -> String {
        format!("{}/meta", self.base)
    }

    /// The topology last committed (what every proxy acknowledged or will): one epoch, one
    /// content. Starting proxies load this, not the models, which may be ahead of it.
    pub fn topology(&self) -> String {
        format!("{}/topology", self.base)
    }

    /// The history of migrations and rebalances (`dashboard::migration_jobs`).
    pub fn migration_jobs(&self) -> String {
        format!("{}/migration-jobs", self.base)
    }

    /// An abort asked for and not yet applied by the migration driver
    /// (`dashboard::migration::AbortRequest`).
    pub fn migration_abort(&self) -> String {
        format!("{}/migration-abort", self.base)
    }

    /// The running migration's speed cap (`migrate::throttle::Limits`).
    pub fn migration_throttle(&self) -> String {
        format!("{}/migration-throttle", self.base)
    }

    /// The key prefix routes (`dashboard::routes::RoutesDoc`, docs/prefix-routes.md).
    pub fn prefix_routes(&self) -> String {
        format!("{}/routes", self.base)
    }

    /// The read policy (`router::ReadPolicy`, docs/replica-reads.md).
    pub fn read_policy(&self) -> String {
        format!("{}/read-policy", self.base)
    }

    /// Automatic failover's settings and state (`dashboard::failover::FailoverDoc`).
    pub fn failover(&self) -> String {
        format!("{}/failover", self.base)
    }

    pub fn slots_prefix(&self) -> String {
        format!("{}/slots/", self.base)
    }

    pub fn slot(&self, id: u16) -> String {
        format!("{}/slots/slot-{id:04}", self.base)
    }

    pub fn groups_prefix(&self) -> String {
        format!("{}/group/", self.base)
    }

    pub fn group(&self, id: GroupId) -> String {
        format!("{}/group/group-{:04}", self.base, id.0)
    }

    pub fn proxies_prefix(&self) -> String {
        format!("{}/proxy/", self.base)
    }

    pub fn proxy(&self, token: &str) -> String {
        format!("{}/proxy/{token}", self.base)
    }

    /// Proxies that are draining (`proxy_draining`), by token.
    pub fn proxies_draining_prefix(&self) -> String {
        format!("{}/proxy-draining/", self.base)
    }

    /// Written by a proxy when it starts to drain, deleted when it leaves the store: its
    /// peers then leave it out of the cluster they present, while it still finishes its
    /// sessions and acknowledges pushes. A proxy gone mid-drain leaves it behind, naming a
    /// token no process has again (tokens are drawn per process); removing the lost proxy
    /// deletes it.
    pub fn proxy_draining(&self, token: &str) -> String {
        format!("{}/proxy-draining/{token}", self.base)
    }

    /// Written when an operator takes a proxy out of pushes (`tessera admin proxy offline`):
    /// the proxy, registering again after the dashboard revoked its registration, reads it
    /// and stays fenced until it is deleted.
    pub fn proxy_offline(&self, token: &str) -> String {
        format!("{}proxy-offline/{token}", self.cluster_prefix())
    }

    /// A proxy the dashboard remembers from its first registration, until it stops cleanly
    /// (it deletes this itself), comes back at its address, or an operator removes it.
    pub fn proxy_known(&self, token: &str) -> String {
        format!("{}/proxy-known/{token}", self.base)
    }

    /// The API tokens (`dashboard::tokens::TokensDoc`).
    pub fn tokens(&self) -> String {
        format!("{}/tokens", self.base)
    }

    /// The users document (`users::UsersDoc`): who may AUTH to the cluster's proxies.
    pub fn users(&self) -> String {
        format!("{}/users", self.base)
    }

    pub fn plugins_prefix(&self) -> String {
        format!("{}/plugin/", self.base)
    }

    pub fn blob_prefix(&self) -> String {
        format!("{}/blob/", self.base)
    }
}

/// Cluster names: what a path segment and a URL segment can hold safely.
pub fn valid_cluster_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The cluster's settings, written when the first dashboard starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterMeta {
    pub schema: u32,
    pub name: String,
    /// Empty. Stores written before API tokens had the admin token's sha256 (hex) here; the
    /// dashboard moves it to the tokens document at its first start and empties this (kept,
    /// so proxies of that version still parse the meta).
    #[serde(default)]
    pub admin_token_sha256: String,
    /// Secret the dashboard presents to proxies' admin APIs.
    pub proxy_secret: String,
    /// Last topology epoch pushed; every change increments it.
    pub epoch: u64,
    pub created_unix: u64,
    /// The Redis ACL user the dashboard (health checks, REPLICAOF, the mover) and anything
    /// else of the control plane use on every server: `tessera-admin` with a random
    /// password, full rights, provisioned by the dashboard on each server it adds. Proxies
    /// read it from here. Absent in stores written before it existed: the dashboard adds
    /// one at its next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_admin: Option<tessera_model::redis_client::Credential>,
}

/// What the dashboard lock's holder payload carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DashboardInfo {
    pub schema: u32,
    /// HTTP address of the dashboard's API.
    pub admin_addr: String,
    pub start_unix: u64,
    pub version: String,
}

pub use tessera_wire::cluster::{ActionState, ProxyState, SlotAction};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotModel {
    pub schema: u32,
    pub id: u16,
    /// `None`: not assigned to any group yet.
    pub group: Option<GroupId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<SlotAction>,
}

impl SlotModel {
    pub fn unassigned(id: u16) -> Self {
        Self {
            schema: SCHEMA_VERSION,
            id,
            group: None,
            action: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerModel {
    pub addr: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupModel {
    pub schema: u32,
    pub id: GroupId,
    /// `servers[0]` is the master; the rest replicate from it.
    pub servers: Vec<ServerModel>,
    /// Its servers speak TLS only: every connection to them (proxies', health checks, the
    /// mover) uses TLS (docs/tls.md). Set when the group is created; absent in older
    /// documents, which are plain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
}

impl GroupModel {
    /// Tells this process's backend connector whether the group's servers speak TLS.
    pub fn mark_tls(&self) {
        tessera_model::tls::backend::backends()
            .mark(self.servers.iter().map(|s| (s.addr.as_str(), self.tls)));
    }

    pub fn master(&self) -> Option<&str> {
        self.servers.first().map(|s| s.addr.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyModel {
    pub schema: u32,
    pub token: String,
    /// RESP address clients connect to.
    pub addr: String,
    /// Admin HTTP address the dashboard pushes to.
    pub admin_addr: String,
    pub pid: u32,
    pub host: String,
    pub start_unix: u64,
    pub state: ProxyState,
    pub version: String,
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// All slot ids.
pub fn all_slots() -> impl Iterator<Item = u16> {
    0..SLOTS as u16
}

/// The routing topology these models describe (what the dashboard pushes and a starting
/// proxy loads). `down` lists groups whose master the dashboard found dead.
pub fn topology(
    epoch: u64,
    groups: &[GroupModel],
    slots: &[SlotModel],
    down: &std::collections::HashSet<GroupId>,
) -> tessera_model::router::Topology {
    use tessera_model::router::{GroupRoute, SlotRoute, Topology};
    let mut routes = vec![SlotRoute::default(); SLOTS];
    for s in slots {
        if let Some(r) = routes.get_mut(s.id as usize) {
            r.group = s.group;
            match &s.action {
                // A migration of a dashboard before v3, half-way: routed as it left it.
                Some(a) if a.is_legacy_mid_move() || a.state == ActionState::Finished => {
                    r.group = Some(a.target);
                }
                Some(a) if a.blocks() => r.blocked = true,
                _ => {}
            }
        }
    }
    Topology {
        epoch,
        groups: groups
            .iter()
            .map(|g| GroupRoute {
                id: g.id,
                master: g.master().map(str::to_string),
                down: down.contains(&g.id),
                tls: g.tls,
                replicas: g.servers.iter().skip(1).map(|s| s.addr.clone()).collect(),
            })
            .collect(),
        slots: routes,
        read: Default::default(),
        routes: Vec::new(),
    }
}

/// The proxies registered in a cluster (unreadable nodes are skipped, with a warning).
///
/// # Errors
/// The store fails.
pub async fn registered_proxies(
    store: &dyn super::Store,
    paths: &Paths,
) -> Result<Vec<ProxyModel>, super::StoreError> {
    let mut out = Vec::new();
    for (key, v) in store.list(&paths.proxies_prefix()).await? {
        match serde_json::from_slice::<super::Holder>(&v.value)
            .and_then(|h| serde_json::from_value::<ProxyModel>(h.payload))
        {
            Ok(p) => out.push(p),
            Err(e) => tracing::warn!(%key, error = %e, "ignoring an unreadable proxy node"),
        }
    }
    Ok(out)
}

/// The tokens of the proxies that marked themselves draining (`Paths::proxy_draining`).
///
/// # Errors
/// The store fails.
pub async fn draining_tokens(
    store: &dyn super::Store,
    paths: &Paths,
) -> Result<std::collections::HashSet<String>, super::StoreError> {
    Ok(store
        .children(&paths.proxies_draining_prefix())
        .await?
        .into_iter()
        .collect())
}

/// The proxies registered in a cluster that are not draining: those clients should be sent
/// to.
///
/// # Errors
/// The store fails.
pub async fn serving_proxies(
    store: &dyn super::Store,
    paths: &Paths,
) -> Result<Vec<ProxyModel>, super::StoreError> {
    let draining = draining_tokens(store, paths).await?;
    let mut proxies = registered_proxies(store, paths).await?;
    proxies.retain(|p| !draining.contains(&p.token));
    Ok(proxies)
}

/// Reads a JSON document.
///
/// # Errors
/// The store fails, or the document is not valid for `T`.
pub async fn read<T: serde::de::DeserializeOwned>(
    store: &dyn super::Store,
    key: &str,
) -> Result<Option<(T, u64)>, super::StoreError> {
    match store.get(key).await? {
        None => Ok(None),
        Some(v) => serde_json::from_slice(&v.value)
            .map(|t| Some((t, v.version)))
            .map_err(|e| super::StoreError::Io {
                key: key.into(),
                reason: format!("bad document: {e}"),
            }),
    }
}

/// Writes a JSON document.
///
/// # Errors
/// The store fails.
pub async fn write<T: Serialize>(
    store: &dyn super::Store,
    key: &str,
    doc: &T,
) -> Result<u64, super::StoreError> {
    let bytes = serde_json::to_vec(doc).expect("models serialize");
    store.put(key, bytes.into()).await
}

/// Writes several documents with one [`super::Store::put_many`].
///
/// # Errors
/// The store fails (some of the documents may be written).
pub async fn write_many<'a, T: Serialize + 'a>(
    store: &dyn super::Store,
    docs: impl IntoIterator<Item = (String, &'a T)>,
) -> Result<(), super::StoreError> {
    let entries = docs
        .into_iter()
        .map(|(k, d)| (k, serde_json::to_vec(d).expect("models serialize").into()))
        .collect();
    store.put_many(entries).await
}

/// Loads every group and slot of a cluster (slots missing from the store are unassigned).
///
/// # Errors
/// The store fails or holds an invalid document.
pub async fn load_layout(
    store: &dyn super::Store,
    paths: &Paths,
) -> Result<(Vec<GroupModel>, Vec<SlotModel>), super::StoreError> {
    let mut groups = Vec::new();
    for (key, v) in store.list(&paths.groups_prefix()).await? {
        let g: GroupModel =
            serde_json::from_slice(&v.value).map_err(|e| super::StoreError::Io {
                key,
                reason: format!("bad group document: {e}"),
            })?;
        groups.push(g);
    }
    groups.sort_by_key(|g| g.id);
    let mut slots: Vec<SlotModel> = all_slots().map(SlotModel::unassigned).collect();
    for (key, v) in store.list(&paths.slots_prefix()).await? {
        let s: SlotModel = serde_json::from_slice(&v.value).map_err(|e| super::StoreError::Io {
            key,
            reason: format!("bad slot document: {e}"),
        })?;
        if let Some(slot) = slots.get_mut(s.id as usize) {
            *slot = s;
        }
    }
    Ok((groups, slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_documents_without_tls_still_load_as_plain() {
        let old = r#"{"schema":1,"id":3,"servers":[{"addr":"10.0.0.1:6379"}]}"#;
        let g: GroupModel = serde_json::from_str(old).unwrap();
        assert!(!g.tls);
        assert_eq!(
            serde_json::to_string(&g).unwrap(),
            old,
            "plain groups are written as before"
        );
        let tls = GroupModel { tls: true, ..g };
        assert!(
            serde_json::to_string(&tls)
                .unwrap()
                .contains(r#""tls":true"#)
        );
    }
}
