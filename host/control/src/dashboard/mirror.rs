//! The cluster's mirror: its settings persisted in the store and pushed to every online proxy
//! (acknowledged by all, like a plugin catalog), and the cluster-wide view: each proxy's
//! counters summed, its samples merged newest first.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use tracing::info;

use super::Dashboard;
use super::push::{ProxyFailure, settle};
use crate::Error;
use tessera_store::mirror::{read_doc, store_key};
use tessera_store::model::{self, ProxyModel};
use tessera_wire::mirror::{
    ClusterSample, CommandFigures, Figures, MirrorConfig, MirrorDoc, MirrorView, ProxyMirror,
    ProxyMirrorEntry, ProxyMirrorError, ProxyMirrorSummary,
};

/// How long a proxy may take to answer a mirror push or read.
const PROXY_TIMEOUT: Duration = Duration::from_secs(5);
/// Samples in the cluster-wide view.
const SAMPLES: usize = 50;

impl Dashboard {
    /// Persists the mirror settings (`None`: off) with the next version, then pushes them to
    /// every online proxy and waits for all.
    ///
    /// # Errors
    /// The store fails (nothing pushed), or some proxies did not acknowledge.
    pub async fn set_mirror(&self, config: Option<MirrorConfig>) -> Result<MirrorDoc, Error> {
        let _ops = self.ops.lock().await;
        let mut doc = read_doc(&*self.store, &self.paths).await?;
        doc.version += 1;
        doc.config = config;
        model::write(&*self.store, &store_key(&self.paths), &doc).await?;
        info!(version = doc.version, config = ?doc.config, "mirror settings changed");
        const WHAT: &str = "mirror version";
        let online = self.online_proxies(WHAT, doc.version).await?;
        let results = join_all(online.iter().map(|p| self.push_mirror_one(p, &doc))).await;
        let results = self.excuse_gone(&online, results).await;
        settle(WHAT, doc.version, &online, results)?;
        Ok(doc)
    }

    async fn push_mirror_one(
        &self,
        proxy: &ProxyModel,
        doc: &MirrorDoc,
    ) -> Result<(), ProxyFailure> {
        self.put_to_proxy(proxy, "/api/proxy/mirror", doc, Some(PROXY_TIMEOUT))
            .await
    }

    /// The cluster's settings, every registered proxy's figures summed (and per proxy: the
    /// version it runs, or why it was not reached), and the newest samples of all.
    ///
    /// # Errors
    /// The store fails.
    pub async fn mirror_view(&self) -> Result<MirrorView, Error> {
        let doc = read_doc(&*self.store, &self.paths).await?;
        let proxies = self.registered_proxies().await?;
        let reads = self
            .get_from_proxies::<ProxyMirror>(&proxies, "/api/proxy/mirror", PROXY_TIMEOUT)
            .await;
        let mut total = Figures::default();
        let mut by_command: BTreeMap<String, CommandFigures> = BTreeMap::new();
        let mut samples: Vec<ClusterSample> = Vec::new();
        let mut per_proxy = Vec::new();
        for (p, r) in proxies.iter().zip(reads) {
            let m = match r {
                Ok(m) => m,
                Err(error) => {
                    per_proxy.push(ProxyMirrorEntry::Unreachable(ProxyMirrorError {
                        token: p.token.clone(),
                        addr: p.addr.clone(),
                        error,
                    }));
                    continue;
                }
            };
            add(&mut total, &mut by_command, &m.figures);
            per_proxy.push(ProxyMirrorEntry::Answered(ProxyMirrorSummary {
                token: p.token.clone(),
                addr: p.addr.clone(),
                version: m.version,
                on: m.config.is_some(),
                queue_entries: m.figures.queue_entries,
                queue_bytes: m.figures.queue_bytes,
            }));
            samples.extend(m.samples.into_iter().map(|sample| ClusterSample {
                sample,
                proxy: p.token.clone(),
            }));
        }
        total.commands = by_command.into_values().collect();
        samples.sort_by_key(|s| std::cmp::Reverse(s.sample.unix_ms));
        samples.truncate(SAMPLES);
        Ok(MirrorView {
            version: doc.version,
            config: doc.config.as_ref().map(MirrorConfig::view),
            figures: total,
            proxies: per_proxy,
            samples,
        })
    }
}

/// Adds one proxy's figures to the cluster's.
fn add(total: &mut Figures, by_command: &mut BTreeMap<String, CommandFigures>, f: &Figures) {
    total.sent += f.sent;
    total.compared += f.compared;
    total.mismatched += f.mismatched;
    total.uncompared += f.uncompared;
    total.errors += f.errors;
    total.queue_entries += f.queue_entries;
    total.queue_bytes += f.queue_bytes;
    for (reason, n) in &f.dropped {
        *total.dropped.entry(reason.clone()).or_default() += n;
    }
    for c in &f.commands {
        let t = by_command
            .entry(c.command.clone())
            .or_insert_with(|| CommandFigures {
                command: c.command.clone(),
                ..CommandFigures::default()
            });
        t.sent += c.sent;
        t.compared += c.compared;
        t.mismatched += c.mismatched;
        t.uncompared += c.uncompared;
    }
}
