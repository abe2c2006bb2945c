//! The cluster's command log: every registered proxy's log of one type
//! (`GET /api/proxy/commandlog`), merged newest first, each entry naming its proxy. Read on
//! demand (nothing is kept here); a proxy that does not answer within the timeout is listed
//! as unreachable rather than failing the whole read.

use std::time::Duration;

use futures_util::future::join_all;

use super::Dashboard;
use crate::Error;
use tessera_wire::telemetry::LogType;
use tessera_wire::telemetry::{ClusterEntry, ClusterLog, ProxyLog};

/// How long one proxy may take to answer.
const PROXY_TIMEOUT: Duration = Duration::from_secs(2);

impl Dashboard {
    /// Every registered proxy's log of `log_type`, merged; at most `count` entries (all of
    /// them for `None`).
    ///
    /// # Errors
    /// The store cannot list the proxies.
    pub async fn command_log(
        &self,
        log_type: LogType,
        count: Option<usize>,
    ) -> Result<ClusterLog, Error> {
        let proxies = self.registered_proxies().await?;
        let path = format!("/api/proxy/commandlog?type={}", log_type.as_str());
        let reads = join_all(proxies.iter().map(|p| {
            let call = self.proxy_call(reqwest::Method::GET, &p.admin_addr, &path);
            async move {
                let r = call.timeout(PROXY_TIMEOUT).send().await.ok()?;
                r.error_for_status().ok()?.json::<ProxyLog>().await.ok()
            }
        }))
        .await;
        let mut out = ClusterLog {
            log_type,
            proxies: 0,
            unreachable: Vec::new(),
            entries: Vec::new(),
        };
        for (p, read) in proxies.iter().zip(reads) {
            let Some(log) = read else {
                out.unreachable.push(p.token.clone());
                continue;
            };
            out.proxies += 1;
            out.entries
                .extend(log.entries.into_iter().map(|entry| ClusterEntry {
                    proxy: p.token.clone(),
                    proxy_addr: p.addr.clone(),
                    entry,
                }));
        }
        out.entries
            .sort_by_key(|e| std::cmp::Reverse((e.entry.time, e.entry.id)));
        if let Some(n) = count {
            out.entries.truncate(n);
        }
        Ok(out)
    }
}
