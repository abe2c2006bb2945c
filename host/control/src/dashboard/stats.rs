//! `GET /api/stats`: every registered proxy's stats (`GET /api/proxy/stats`, 1 s each) and
//! their sums, fetched at most once a second and by one request at a time, the others
//! waiting for its answer (`cache`), so polling costs the proxies one call a second.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;

use super::Dashboard;
use crate::Error;
use tessera_wire::cluster::{ProxyStatsEntry, ProxyUnreachable, Stats};
use tessera_wire::telemetry::{CommandCount, ProxyStats};

/// How long one proxy may take to answer.
const PROXY_TIMEOUT: Duration = Duration::from_secs(1);

impl Dashboard {
    /// Stats of every proxy and their sums, at most a second old.
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub async fn stats(&self) -> Result<Stats, Error> {
        self.stats.get_or_fetch(|| self.collect_stats()).await
    }

    /// Stats of every proxy fetched now (and kept for `stats`' callers).
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub(crate) async fn fresh_stats(&self) -> Result<Stats, Error> {
        self.stats.refresh(|| self.collect_stats()).await
    }

    /// Stats of every proxy, fetched now, and their sums.
    async fn collect_stats(&self) -> Result<Stats, Error> {
        let proxies = self.registered_proxies().await?;
        let fetched = join_all(proxies.iter().map(|p| async move {
            let r = self
                .proxy_call(reqwest::Method::GET, &p.admin_addr, "/api/proxy/stats")
                .timeout(PROXY_TIMEOUT)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            r.json::<ProxyStats>().await.map_err(|e| e.to_string())
        }))
        .await;
        let mut out = Stats::default();
        let mut commands: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (p, r) in proxies.iter().zip(fetched) {
            match r {
                Ok(s) => {
                    out.ops_per_sec += s.ops_per_sec;
                    out.ops_total += s.ops_total;
                    out.errors_total += s.errors_total;
                    out.sessions += s.sessions;
                    for c in &s.commands {
                        let e = commands.entry(c.command.clone()).or_default();
                        e.0 += c.calls;
                        e.1 += c.errors;
                    }
                    out.proxies.push(ProxyStatsEntry::Answered(s));
                }
                Err(error) => out
                    .proxies
                    .push(ProxyStatsEntry::Unreachable(ProxyUnreachable {
                        token: p.token.clone(),
                        error,
                    })),
            }
        }
        out.commands = commands
            .into_iter()
            .map(|(command, (calls, errors))| CommandCount {
                command,
                calls,
                errors,
            })
            .collect();
        // Most called first; the sort is stable, so equal counts keep the command order.
        out.commands.sort_by_key(|c| std::cmp::Reverse(c.calls));
        Ok(out)
    }
}
