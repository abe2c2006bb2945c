//! Push with a barrier: persist the new epoch, send the whole topology to every online proxy
//! at once, and succeed only when every one has acknowledged it.

use futures_util::future::join_all;
use tracing::{info, warn};

use super::Dashboard;
use crate::coordinator::model::{self, ClusterMeta, ProxyModel};
use crate::http_error::ApiError;
use crate::router::{PushAck, Topology};

/// Proxies that did not acknowledge a pushed epoch.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} {epoch} is persisted but not acknowledged by {}", describe(.failed))]
pub struct PushError {
    /// What was pushed: "topology epoch" or "plugin catalog version".
    pub what: &'static str,
    pub epoch: u64,
    /// (token, admin address, reason)
    pub failed: Vec<(String, String, String)>,
}

fn describe(failed: &[(String, String, String)]) -> String {
    failed
        .iter()
        .map(|(t, a, r)| format!("proxy {t} at {a} ({r})"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<PushError> for ApiError {
    fn from(e: PushError) -> Self {
        ApiError::new(
            axum::http::StatusCode::BAD_GATEWAY,
            "push_incomplete",
            e.to_string(),
        )
    }
}

impl Dashboard {
    /// Increments and persists the epoch, then pushes the current topology to every online
    /// proxy. The caller holds `ops` (passed as `epoch`) so changes never interleave.
    ///
    /// # Errors
    /// The store cannot be written (nothing pushed), or some proxies did not acknowledge.
    pub(crate) async fn commit(&self, epoch: &mut u64) -> Result<u64, ApiError> {
        let next = *epoch + 1;
        let key = self.paths.meta();
        let (mut meta, _) = model::read::<ClusterMeta>(&*self.store, &key)
            .await?
            .ok_or_else(|| {
                ApiError::internal("the cluster's meta document disappeared from the store")
            })?;
        meta.epoch = next;
        model::write(&*self.store, &key, &meta).await?;
        *epoch = next;
        // The epoch's content is fixed here: catch-up pushes and starting proxies use this
        // document, never a topology re-derived from models that may have moved on since.
        let topo = self.topology(next);
        model::write(&*self.store, &self.paths.topology(), &topo).await?;
        self.push_all(&topo).await?;
        Ok(next)
    }

    /// Pushes the topology at `epoch` to every online proxy and waits for all.
    pub(crate) async fn push_all(&self, topo: &Topology) -> Result<usize, PushError> {
        const WHAT: &str = "topology epoch";
        let online = self.online_proxies(WHAT, topo.epoch).await?;
        let results = join_all(online.iter().map(|p| self.push_one(p, topo))).await;
        settle(WHAT, topo.epoch, &online, results)
    }

    /// The registered proxies not set offline: the ones every push must reach.
    pub(crate) async fn online_proxies(
        &self,
        what: &'static str,
        epoch: u64,
    ) -> Result<Vec<ProxyModel>, PushError> {
        let proxies = self.registered_proxies().await.map_err(|e| PushError {
            what,
            epoch,
            failed: vec![("*".into(), "store".into(), e.to_string())],
        })?;
        let st = self.state.lock().expect("state lock poisoned");
        Ok(proxies
            .into_iter()
            .filter(|p| !st.offline.contains(&p.token))
            .collect())
    }

    /// The topology last committed (for catch-up pushes), or, before the first commit, the
    /// one the models describe at `epoch` (no proxy has acknowledged anything else yet).
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn committed_topology(&self, epoch: u64) -> Result<Topology, ApiError> {
        match model::read::<Topology>(&*self.store, &self.paths.topology()).await? {
            Some((t, _)) if t.epoch == epoch => Ok(t),
            _ => Ok(self.topology(epoch)),
        }
    }

    /// Sends a topology to one proxy.
    ///
    /// # Errors
    /// Unreachable, refused, or the acknowledgement names another epoch.
    pub(crate) async fn push_one(&self, proxy: &ProxyModel, topo: &Topology) -> Result<(), String> {
        let resp = self
            .proxy_call(
                reqwest::Method::PUT,
                &proxy.admin_addr,
                "/api/proxy/topology",
            )
            .json(topo)
            .send()
            .await
            .map_err(|e| format!("unreachable: {e}"))?;
        let status = resp.status();
        if status == reqwest::StatusCode::CONFLICT {
            // It already runs a newer epoch (pushed by a successor dashboard): not ours to undo.
            return Err(format!(
                "refused: {}",
                resp.text().await.unwrap_or_default()
            ));
        }
        if !status.is_success() {
            return Err(format!(
                "HTTP {status}: {}",
                resp.text().await.unwrap_or_default()
            ));
        }
        let ack: PushAck = resp
            .json()
            .await
            .map_err(|e| format!("bad acknowledgement: {e}"))?;
        if ack.epoch != topo.epoch {
            return Err(format!(
                "acknowledged epoch {} instead of {}",
                ack.epoch, topo.epoch
            ));
        }
        Ok(())
    }
}

/// The outcome of a push to `online`: how many acknowledged, or which did not and why.
pub(crate) fn settle(
    what: &'static str,
    epoch: u64,
    online: &[ProxyModel],
    results: Vec<Result<(), String>>,
) -> Result<usize, PushError> {
    let failed: Vec<_> = online
        .iter()
        .zip(results)
        .filter_map(|(p, r)| r.err().map(|e| (p.token.clone(), p.admin_addr.clone(), e)))
        .collect();
    if failed.is_empty() {
        info!(
            what,
            epoch,
            proxies = online.len(),
            "pushed to every online proxy"
        );
        Ok(online.len())
    } else {
        let e = PushError {
            what,
            epoch,
            failed,
        };
        warn!(error = %e, "push incomplete");
        Err(e)
    }
}
