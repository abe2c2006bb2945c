//! The cluster's read policy (docs/replica-reads.md): one document in the store, a copy in
//! the dashboard, pushed to every proxy with the topology (a change is a topology commit).
//! Which replica is fresh is each proxy's own finding; this sets the policy and shows each
//! replica as the health checks see it (bytes behind) and as the proxies proved it (ms).

use std::time::Duration;

use tracing::{info, warn};

use super::Dashboard;
use crate::Error;
use tessera_model::router::{ReadMode, ReadPolicy};
use tessera_store::Store;
use tessera_store::model::{self, Paths};
use tessera_wire::read_policy::ReplicasSeen;
pub use tessera_wire::read_policy::{ReadPolicyChange, ReadPolicyView, ReplicaView};

/// How long one proxy may take to tell what its probes proved.
const PROXY_TIMEOUT: Duration = Duration::from_secs(2);

/// The stored policy; an absent or unreadable document is the default (reads from masters).
pub async fn load(store: &dyn Store, paths: &Paths) -> ReadPolicy {
    match model::read::<ReadPolicy>(store, &paths.read_policy()).await {
        Ok(doc) => doc.map(|(p, _)| p).unwrap_or_default(),
        Err(e) => {
            warn!(error = %e, "the read policy document is unreadable: reads go to the masters until it is set again");
            ReadPolicy::default()
        }
    }
}

impl Dashboard {
    pub fn read_policy(&self) -> ReadPolicy {
        *self.read_policy.lock().expect("read policy lock poisoned")
    }

    /// Whether proxies may read from replicas (then a replica added or removed is pushed).
    pub(crate) fn reads_replicas(&self) -> bool {
        self.read_policy().mode != ReadMode::Master
    }

    /// Changes the policy: persisted, then pushed to every proxy with the next epoch.
    ///
    /// # Errors
    /// 400 for a bound out of range; the store's errors; a push not acknowledged by all.
    pub async fn set_read_policy(&self, change: ReadPolicyChange) -> Result<ReadPolicyView, Error> {
        let mut epoch = self.ops.lock().await;
        let mut p = self.read_policy();
        if let Some(m) = change.mode {
            p.mode = m;
        }
        if let Some(ms) = change.max_lag_ms {
            p.max_lag_ms = ms;
        }
        p.validate().map_err(Error::Invalid)?;
        model::write(&*self.store, &self.paths.read_policy(), &p).await?;
        *self.read_policy.lock().expect("read policy lock poisoned") = p;
        info!(
            mode = p.mode.as_str(),
            max_lag_ms = p.max_lag_ms,
            "read policy changed"
        );
        self.commit(&mut epoch).await?;
        self.read_policy_view().await
    }

    /// The policy and each replica: its health as the dashboard's checks saw it, and its
    /// freshness as every registered proxy's own probes proved it (asked now, each within
    /// `PROXY_TIMEOUT`; one that does not answer is listed, not waited for).
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub async fn read_policy_view(&self) -> Result<ReadPolicyView, Error> {
        let proxies = self.registered_proxies().await?;
        let seen = self
            .get_from_proxies::<ReplicasSeen>(&proxies, "/api/proxy/replicas", PROXY_TIMEOUT)
            .await;
        let mut view = ReadPolicyView {
            policy: self.read_policy(),
            replicas: self.replicas_checked(),
            proxies: 0,
            unreachable: Vec::new(),
        };
        for (p, seen) in proxies.iter().zip(seen) {
            match seen {
                Ok(seen) => {
                    view.proxies += 1;
                    add_proofs(&mut view.replicas, &seen);
                }
                Err(_) => view.unreachable.push(p.addr.clone()),
            }
        }
        Ok(view)
    }

    /// Each replica of the topology as the health checks last saw it, no proxy's proof yet.
    fn replicas_checked(&self) -> Vec<ReplicaView> {
        let st = self.state.lock().expect("state lock poisoned");
        let mut replicas = Vec::new();
        for g in st.groups.values() {
            let master_offset = g
                .master()
                .and_then(|m| st.servers.get(m))
                .and_then(|h| h.last_offset);
            for s in g.servers.iter().skip(1) {
                let h = st.servers.get(&s.addr).cloned().unwrap_or_default();
                replicas.push(ReplicaView {
                    group: g.id,
                    addr: s.addr.clone(),
                    up: h.up,
                    link: h.master_link.clone(),
                    lag_bytes: master_offset.zip(h.repl_offset).map(super::views::lag_of),
                    fresh_on: 0,
                    proven_ms_ago: None,
                });
            }
        }
        replicas
    }
}

/// Adds one proxy's proofs to the replicas: its "fresh" counted, the oldest proof kept (a
/// proxy that has never proven a replica leaves it unproven by that proxy: the view keeps
/// the oldest proof of those that have one, and `fresh_on` says how many would read there).
fn add_proofs(replicas: &mut [ReplicaView], seen: &ReplicasSeen) {
    for r in replicas.iter_mut() {
        let Some(s) = seen
            .replicas
            .iter()
            .find(|s| s.group == r.group && s.addr == r.addr)
        else {
            continue;
        };
        r.fresh_on += usize::from(s.fresh);
        if let Some(ms) = s.proven_ms_ago {
            r.proven_ms_ago = Some(r.proven_ms_ago.map_or(ms, |o| o.max(ms)));
        }
    }
}
