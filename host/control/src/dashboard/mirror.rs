//! The cluster's mirror: its settings persisted in the store and pushed to every online proxy
//! (acknowledged by all, like a plugin catalog), and the cluster-wide view: each proxy's
//! counters summed, its samples merged newest first.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};
use tracing::info;

use super::Dashboard;
use super::push::settle;
use tessera_http::error::ApiError;
use tessera_store::mirror::{read_doc, store_key};
use tessera_store::model::{self, ProxyModel};
use tessera_wire::mirror::{CommandFigures, Figures, MirrorConfig, MirrorDoc, Sample};

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
    pub async fn set_mirror(&self, config: Option<MirrorConfig>) -> Result<MirrorDoc, ApiError> {
        let _ops = self.ops.lock().await;
        let mut doc = read_doc(&*self.store, &self.paths).await?;
        doc.version += 1;
        doc.config = config;
        model::write(&*self.store, &store_key(&self.paths), &doc).await?;
        info!(version = doc.version, config = ?doc.config, "mirror settings changed");
        const WHAT: &str = "mirror version";
        let online = self.online_proxies(WHAT, doc.version).await?;
        let results = join_all(online.iter().map(|p| self.push_mirror_one(p, &doc))).await;
        settle(WHAT, doc.version, &online, results)?;
        Ok(doc)
    }

    async fn push_mirror_one(&self, proxy: &ProxyModel, doc: &MirrorDoc) -> Result<(), String> {
        self.put_to_proxy(proxy, "/api/proxy/mirror", doc, Some(PROXY_TIMEOUT))
            .await
    }

    /// The cluster's settings, every registered proxy's figures summed (and per proxy: the
    /// version it runs, or why it was not reached), and the newest samples of all.
    ///
    /// # Errors
    /// The store fails.
    pub async fn mirror_view(&self) -> Result<Value, ApiError> {
        let doc = read_doc(&*self.store, &self.paths).await?;
        let proxies = self.registered_proxies().await?;
        let reads = proxies.iter().map(|p| async move {
            let call = self.proxy_call(reqwest::Method::GET, &p.admin_addr, "/api/proxy/mirror");
            let r = call
                .timeout(PROXY_TIMEOUT)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !r.status().is_success() {
                return Err(format!("HTTP {}", r.status()));
            }
            r.json::<Value>().await.map_err(|e| e.to_string())
        });
        let mut total = Figures::default();
        let mut by_command: BTreeMap<String, CommandFigures> = BTreeMap::new();
        let mut samples: Vec<(String, Sample)> = Vec::new();
        let mut per_proxy = Vec::new();
        for (p, r) in proxies.iter().zip(join_all(reads).await) {
            let v = match r {
                Ok(v) => v,
                Err(e) => {
                    per_proxy.push(json!({"token": p.token, "addr": p.addr, "error": e}));
                    continue;
                }
            };
            let f: Figures = serde_json::from_value(v["figures"].clone()).unwrap_or_default();
            add(&mut total, &mut by_command, &f);
            if let Ok(s) = serde_json::from_value::<Vec<Sample>>(v["samples"].clone()) {
                samples.extend(s.into_iter().map(|s| (p.token.clone(), s)));
            }
            per_proxy.push(json!({
                "token": p.token,
                "addr": p.addr,
                "version": v["version"],
                "on": !v["config"].is_null(),
                "queue_entries": f.queue_entries,
                "queue_bytes": f.queue_bytes,
            }));
        }
        total.commands = by_command.into_values().collect();
        samples.sort_by_key(|s| std::cmp::Reverse(s.1.unix_ms));
        samples.truncate(SAMPLES);
        let samples: Vec<Value> = samples
            .into_iter()
            .map(|(token, s)| {
                let mut v = serde_json::to_value(s).unwrap_or_default();
                v["proxy"] = json!(token);
                v
            })
            .collect();
        Ok(json!({
            "version": doc.version,
            "config": doc.config.as_ref().map(MirrorConfig::view),
            "figures": total,
            "proxies": per_proxy,
            "samples": samples,
        }))
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
