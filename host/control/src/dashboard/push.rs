//! Push with a barrier: persist the new epoch, send the whole topology to every online proxy,
//! and succeed only when every one has acknowledged it. The topology is serialized once per
//! push, and at most [`PUSH_PARALLELISM`] proxies are sent it at a time.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;
use tracing::{info, warn};

use super::Dashboard;
use crate::Error;
use tessera_model::fence::FENCE_MARGIN;
use tessera_model::router::{PushAck, Topology};
use tessera_store::model::{self, ClusterMeta, ProxyModel};

/// How many proxies a push is being sent to at once. Each proxy parses the topology and
/// builds its table when it arrives, on the same few cores as the dashboard when many run on
/// one machine; more at once only queues them longer (`docs/bench.md`, issue 28).
const PUSH_PARALLELISM: usize = 32;
/// How long a proxy may take to answer the probe before a blocking push.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A registration the store has seen no renewal of for this long is stale: a live proxy
/// renews every `PROXY_NODE_TTL / 10` (1 s). A stale registration whose admin address
/// refuses connections is a proxy that is gone (`docs/operations.md`, "Stopping proxies").
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(3);

/// Proxies that did not acknowledge a pushed epoch.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} {epoch} is persisted but not acknowledged by {}", describe(.failed))]
pub struct PushError {
    /// What was pushed: "topology epoch" or "plugin catalog version".
    pub what: &'static str,
    pub epoch: u64,
    pub failed: Vec<ProxyFailed>,
}

/// One proxy that did not take a push, and why.
#[derive(Debug, Clone)]
pub struct ProxyFailed {
    pub token: String,
    /// Its admin address.
    pub addr: String,
    pub failure: ProxyFailure,
}

/// Why one proxy did not take what the dashboard sent it (or could not be asked).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProxyFailure {
    /// No connection, or no answer in time.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// Its admin address refused the connection (nothing listens there) while its
    /// registration is still being renewed, or was renewed too recently to tell.
    #[error("its admin address refused the connection: {0}")]
    ConnectionRefused(String),
    /// It runs something newer (pushed by a successor dashboard): not ours to undo.
    #[error("refused: {0}")]
    Stale(String),
    /// It answered with an error status; its own message when it gave one.
    #[error("HTTP {status}: {message}")]
    Refused {
        status: reqwest::StatusCode,
        message: String,
    },
    /// Its acknowledgement is not one.
    #[error("bad acknowledgement: {0}")]
    BadAcknowledgement(String),
    #[error("acknowledged epoch {acked} instead of {pushed}")]
    WrongEpoch { acked: u64, pushed: u64 },
    /// Its `/health` did not answer 200 (asked before a push that blocks slots).
    #[error("health: HTTP {0}")]
    Unhealthy(reqwest::StatusCode),
    /// Its registration is gone, but it may still route with its old table until its fence
    /// closes.
    #[error(
        "its registration is gone but it may still be running, cut off from the store; waiting {left_secs:.1} s more until it has surely fenced itself"
    )]
    MayBeUnfenced { left_secs: f64 },
    /// The proxies could not be listed: which must take the push is unknown.
    #[error("{0}")]
    Unlisted(String),
}

fn describe(failed: &[ProxyFailed]) -> String {
    failed
        .iter()
        .map(|f| format!("proxy {} at {} ({})", f.token, f.addr, f.failure))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Dashboard {
    /// Increments and persists the epoch, then pushes the current topology to every online
    /// proxy. The caller holds `ops` (passed as `epoch`) so changes never interleave.
    ///
    /// # Errors
    /// The store cannot be written (nothing pushed), or some proxies did not acknowledge.
    pub(crate) async fn commit(&self, epoch: &mut u64) -> Result<u64, Error> {
        let topo = self.persist_next(epoch).await?;
        self.push_all(&topo).await?;
        Ok(topo.epoch)
    }

    /// The first half of [`Dashboard::commit`]: the next epoch and its topology, persisted.
    ///
    /// # Errors
    /// The store cannot be written.
    pub(crate) async fn persist_next(&self, epoch: &mut u64) -> Result<Topology, Error> {
        let next = *epoch + 1;
        let key = self.paths.meta();
        let (mut meta, _) = model::read::<ClusterMeta>(&*self.store, &key)
            .await?
            .ok_or_else(|| {
                Error::Internal("the cluster's meta document disappeared from the store".into())
            })?;
        meta.epoch = next;
        model::write(&*self.store, &key, &meta).await?;
        *epoch = next;
        // The epoch's content is fixed here: catch-up pushes and starting proxies use this
        // document, never a topology re-derived from models that may have moved on since.
        let topo = self.topology(next);
        model::write(&*self.store, &self.paths.topology(), &topo).await?;
        Ok(topo)
    }

    /// Pushes the topology at `epoch` to every online proxy and waits for all.
    pub(crate) async fn push_all(&self, topo: &Topology) -> Result<usize, PushError> {
        self.push_all_within(topo, None).await
    }

    /// [`Dashboard::push_all`], each proxy given `within` (else the push timeout) to
    /// acknowledge.
    pub(crate) async fn push_all_within(
        &self,
        topo: &Topology,
        within: Option<Duration>,
    ) -> Result<usize, PushError> {
        const WHAT: &str = "topology epoch";
        let online = self.online_proxies(WHAT, topo.epoch).await?;
        self.departed_unfenced(WHAT, topo.epoch, &online).await?;
        let body = serialize(topo);
        // A proxy that is slow to answer holds one place, not the ones queued behind it.
        let gate = tokio::sync::Semaphore::new(PUSH_PARALLELISM);
        let results = join_all(online.iter().map(|p| {
            let (body, gate) = (body.clone(), &gate);
            async move {
                let _place = gate.acquire().await.expect("the gate is never closed");
                self.push_body(p, topo.epoch, body, within).await
            }
        }))
        .await;
        let results = self.excuse_gone(&online, results).await;
        settle(WHAT, topo.epoch, &online, results)
    }

    /// Forgives the failures of proxies that are gone: their admin address refused the
    /// connection and their registration is gone too (it stopped after the proxies were
    /// listed) or stale ([`STALE_AFTER`]; it was killed and its lease still runs). A stale
    /// one's registration is ended here, so that the next listing does not name it again
    /// and, should the proxy be alive after all, its next renewal finds it gone and it
    /// fences itself until it has registered again and reloaded its table.
    pub(crate) async fn excuse_gone(
        &self,
        online: &[ProxyModel],
        results: Vec<Result<(), ProxyFailure>>,
    ) -> Vec<Result<(), ProxyFailure>> {
        let checks = online.iter().zip(results).map(|(p, r)| async move {
            let Err(ProxyFailure::ConnectionRefused(why)) = r else {
                return r;
            };
            let key = self.paths.proxy(&p.token);
            match self.store.ephemeral_silence(&key).await {
                Ok(None) => {
                    info!(proxy = %p.token, addr = %p.admin_addr, "proxy deregistered during the push; its admin address refuses connections: not waited for");
                    Ok(())
                }
                Ok(Some(silent)) if silent >= STALE_AFTER => match self.store.expire_ephemeral(&key).await {
                    Ok(_) => {
                        warn!(proxy = %p.token, addr = %p.admin_addr, silent_secs = silent.as_secs(), "proxy gone without deregistering (its registration is stale and its admin address refuses connections): registration removed");
                        metrics::counter!("tessera_dashboard_stale_proxies_removed_total", "cluster" => self.cluster.clone()).increment(1);
                        Ok(())
                    }
                    Err(e) => Err(ProxyFailure::ConnectionRefused(format!(
                        "{why}; its stale registration could not be removed: {e}"
                    ))),
                },
                Ok(Some(silent)) => Err(ProxyFailure::ConnectionRefused(format!(
                    "{why}; its registration was renewed {} s ago, so it is not known to be gone yet",
                    silent.as_secs()
                ))),
                Err(e) => Err(ProxyFailure::ConnectionRefused(format!(
                    "{why}; its registration could not be read: {e}"
                ))),
            }
        });
        join_all(checks).await
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
            failed: vec![ProxyFailed {
                token: "*".into(),
                addr: "store".into(),
                failure: ProxyFailure::Unlisted(e.to_string()),
            }],
        })?;
        let st = self.state.lock().expect("state lock poisoned");
        Ok(proxies
            .into_iter()
            .filter(|p| !st.offline.contains(&p.token))
            .collect())
    }

    /// A proxy whose registration vanished since the last push may be alive and cut off from
    /// the store, still routing with its old table until its fence closes
    /// (`fence::Fence`, `FENCE_MARGIN` before its registration could expire). A topology
    /// goes out without it only once it is surely fenced: `FENCE_MARGIN` after this dashboard
    /// first saw it gone, or at once when nothing listens on its admin port any more (it
    /// stopped or crashed). Until then the push fails, naming the proxy and why. Once its
    /// margin has passed, its backend connections are killed on every server before the
    /// topology goes out (`server_fence`): a proxy frozen between its fence check and its
    /// write cannot write with its old table when it wakes.
    async fn departed_unfenced(
        &self,
        what: &'static str,
        epoch: u64,
        online: &[ProxyModel],
    ) -> Result<(), PushError> {
        let now = Instant::now();
        let mut lapsed = HashSet::new();
        let waiting: Vec<(ProxyModel, Duration)> = {
            let mut st = self.state.lock().expect("state lock poisoned");
            let current: HashSet<&str> = online.iter().map(|p| p.token.as_str()).collect();
            let st = &mut *st;
            for (token, p) in st.pushed_to.drain() {
                if !current.contains(token.as_str()) && !st.offline.contains(&token) {
                    st.departed.entry(token).or_insert((p, now));
                }
            }
            st.pushed_to = online
                .iter()
                .map(|p| (p.token.clone(), p.clone()))
                .collect();
            st.departed.retain(|token, (_, at)| {
                let gone = !current.contains(token.as_str()) && !st.offline.contains(token);
                if gone && now.duration_since(*at) >= FENCE_MARGIN {
                    lapsed.insert(token.clone());
                }
                gone && now.duration_since(*at) < FENCE_MARGIN
            });
            st.departed
                .values()
                .map(|(p, at)| (p.clone(), FENCE_MARGIN - now.duration_since(*at)))
                .collect()
        };
        if !lapsed.is_empty() {
            // Surely fenced by its clock, unless it froze between a check and a write: what
            // it wrote then must not reach a server after this topology goes out.
            self.close_connections_of(&lapsed).await;
        }
        if waiting.is_empty() {
            return Ok(());
        }
        let probes = join_all(waiting.iter().map(|(p, _)| self.listens(&p.admin_addr))).await;
        let mut failed = Vec::new();
        for ((p, left), listens) in waiting.into_iter().zip(probes) {
            if listens {
                failed.push(ProxyFailed {
                    token: p.token.clone(),
                    addr: p.admin_addr.clone(),
                    failure: ProxyFailure::MayBeUnfenced {
                        left_secs: left.as_secs_f64(),
                    },
                });
            } else {
                let mut st = self.state.lock().expect("state lock poisoned");
                st.departed.remove(&p.token);
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        Err(PushError {
            what,
            epoch,
            failed,
        })
    }

    /// Whether a barrier push could reach every proxy it must: no departed proxy is still
    /// inside its fencing margin, and every online proxy answers `/health` within
    /// [`PROBE_TIMEOUT`]. Asked before a push that blocks slots, so that one frozen or
    /// unreachable proxy does not leave the slots blocked on all the others (their clients
    /// held) for a push timeout.
    ///
    /// # Errors
    /// The proxies that would hold the push, and why.
    pub(crate) async fn barrier_reachable(&self, epoch: u64) -> Result<(), PushError> {
        const WHAT: &str = "topology epoch";
        let online = self.online_proxies(WHAT, epoch).await?;
        self.departed_unfenced(WHAT, epoch, &online).await?;
        let probes = join_all(online.iter().map(|p| async move {
            let call = self.http.get(format!("http://{}/health", p.admin_addr));
            match call.timeout(PROBE_TIMEOUT).send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) => Err(ProxyFailure::Unhealthy(r.status())),
                Err(e) => Err(unreachable(&e)),
            }
        }))
        .await;
        let probes = self.excuse_gone(&online, probes).await;
        settle(WHAT, epoch, &online, probes).map(|_| ())
    }

    /// Whether a departed proxy may still route: anything but a refused connection on its
    /// admin port, or its own word that it stopped (`/health` answers 503 `stopped` once a
    /// stopping proxy has closed its fence for good). A frozen or cut-off proxy times out;
    /// an exited one refuses.
    async fn listens(&self, admin_addr: &str) -> bool {
        let call = self.http.get(format!("http://{admin_addr}/health"));
        match call.timeout(Duration::from_millis(500)).send().await {
            Ok(r) if r.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                r.text().await.map_or(true, |body| body.trim() != "stopped")
            }
            Ok(_) => true,
            Err(e) => !connection_refused(&e),
        }
    }

    /// The topology last committed (for catch-up pushes), or, before the first commit, the
    /// one the models describe at `epoch` (no proxy has acknowledged anything else yet).
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn committed_topology(&self, epoch: u64) -> Result<Topology, Error> {
        match model::read::<Topology>(&*self.store, &self.paths.topology()).await? {
            Some((t, _)) if t.epoch == epoch => Ok(t),
            _ => Ok(self.topology(epoch)),
        }
    }

    /// Sends a topology to one proxy.
    ///
    /// # Errors
    /// Unreachable, refused, or the acknowledgement names another epoch.
    pub(crate) async fn push_one(
        &self,
        proxy: &ProxyModel,
        topo: &Topology,
    ) -> Result<(), ProxyFailure> {
        self.push_one_within(proxy, topo, None).await
    }

    async fn push_one_within(
        &self,
        proxy: &ProxyModel,
        topo: &Topology,
        within: Option<Duration>,
    ) -> Result<(), ProxyFailure> {
        self.push_body(proxy, topo.epoch, serialize(topo), within)
            .await
    }

    /// Sends a topology at `epoch`, already serialized as `body`, to one proxy.
    async fn push_body(
        &self,
        proxy: &ProxyModel,
        epoch: u64,
        body: Bytes,
        within: Option<Duration>,
    ) -> Result<(), ProxyFailure> {
        let mut call = self
            .proxy_call(
                reqwest::Method::PUT,
                &proxy.admin_addr,
                "/api/proxy/topology",
            )
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(t) = within {
            call = call.timeout(t);
        }
        let resp = call.send().await.map_err(|e| unreachable(&e))?;
        let status = resp.status();
        if status == reqwest::StatusCode::CONFLICT {
            // It already runs a newer epoch (pushed by a successor dashboard): not ours to undo.
            return Err(ProxyFailure::Stale(resp.text().await.unwrap_or_default()));
        }
        if !status.is_success() {
            return Err(ProxyFailure::Refused {
                status,
                message: resp.text().await.unwrap_or_default(),
            });
        }
        let ack: PushAck = resp
            .json()
            .await
            .map_err(|e| ProxyFailure::BadAcknowledgement(e.to_string()))?;
        if ack.epoch != epoch {
            return Err(ProxyFailure::WrongEpoch {
                acked: ack.epoch,
                pushed: epoch,
            });
        }
        Ok(())
    }
}

/// A topology as the body of a push: serialized once, shared by every proxy's request.
fn serialize(topo: &Topology) -> Bytes {
    Bytes::from(serde_json::to_vec(topo).expect("a topology serializes to JSON"))
}

/// Why a call to a proxy got no answer: [`ProxyFailure::ConnectionRefused`] when its admin
/// address refused the connection, else [`ProxyFailure::Unreachable`].
pub(crate) fn unreachable(e: &reqwest::Error) -> ProxyFailure {
    if connection_refused(e) {
        ProxyFailure::ConnectionRefused(e.to_string())
    } else {
        ProxyFailure::Unreachable(e.to_string())
    }
}

/// Whether the connection was refused (`ECONNREFUSED`: a TCP reset, or an ICMP
/// port-unreachable, in answer to the connection's SYN). Not a timeout, and not a host or
/// network that cannot be reached: those say nothing about whether the proxy still runs.
pub(crate) fn connection_refused(e: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = err.source();
    }
    false
}

/// The outcome of a push to `online`: how many acknowledged, or which did not and why.
pub(crate) fn settle(
    what: &'static str,
    epoch: u64,
    online: &[ProxyModel],
    results: Vec<Result<(), ProxyFailure>>,
) -> Result<usize, PushError> {
    let failed: Vec<_> = online
        .iter()
        .zip(results)
        .filter_map(|(p, r)| {
            r.err().map(|failure| ProxyFailed {
                token: p.token.clone(),
                addr: p.admin_addr.clone(),
                failure,
            })
        })
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
