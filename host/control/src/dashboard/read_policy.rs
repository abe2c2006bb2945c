//! The cluster's read policy (docs/replica-reads.md): one document in the store, a copy in
//! the dashboard, pushed to every proxy with the topology (a change is a topology commit).
//! Which replica is fresh is each proxy's own finding; this only sets the policy and shows
//! the replicas as the health checks see them.

use tracing::{info, warn};

use super::Dashboard;
use crate::Error;
use tessera_model::router::{ReadMode, ReadPolicy};
use tessera_store::Store;
use tessera_store::model::{self, Paths};
pub use tessera_wire::read_policy::{ReadPolicyChange, ReadPolicyView, ReplicaView};

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
        Ok(self.read_policy_view())
    }

    pub fn read_policy_view(&self) -> ReadPolicyView {
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
                });
            }
        }
        ReadPolicyView {
            policy: self.read_policy(),
            replicas,
        }
    }
}
