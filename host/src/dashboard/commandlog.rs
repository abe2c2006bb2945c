//! The cluster's command log: every registered proxy's log of one type
//! (`GET /api/proxy/commandlog`), merged newest first, each entry naming its proxy. Read on
//! demand (nothing is kept here); a proxy that does not answer within the timeout is listed
//! as unreachable rather than failing the whole read.

use std::time::Duration;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::Dashboard;
use crate::http_error::ApiError;
use crate::telemetry::{EntryView, LogType};

/// How long one proxy may take to answer.
const PROXY_TIMEOUT: Duration = Duration::from_secs(2);

/// One proxy's log of one type: the body of `GET /api/proxy/commandlog`.
///
/// ```text
/// {"type": "slow", "len": 2, "entries": [{"id": 1, …}, {"id": 0, …}]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProxyLog {
    #[serde(rename = "type")]
    pub log_type: LogType,
    /// Entries in the proxy's log (`entries` may hold fewer when a count was asked).
    pub len: usize,
    /// Newest first.
    pub entries: Vec<EntryView>,
}

/// An entry of the cluster's log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterEntry {
    /// The proxy's token and its RESP address.
    pub proxy: String,
    pub proxy_addr: String,
    #[serde(flatten)]
    pub entry: EntryView,
}

/// The body of `GET /api/commandlog`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterLog {
    #[serde(rename = "type")]
    pub log_type: LogType,
    /// Proxies whose log is included.
    pub proxies: usize,
    /// Tokens of registered proxies that did not answer.
    pub unreachable: Vec<String>,
    /// Newest first (by time, then by each proxy's id).
    pub entries: Vec<ClusterEntry>,
}

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
    ) -> Result<ClusterLog, ApiError> {
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
