//! The cluster's command log: every registered proxy's log of one type
//! (`GET /api/proxy/commandlog`), merged newest first, each entry naming its proxy. Read on
//! demand (nothing is kept here); a proxy that does not answer within the timeout is listed
//! as unreachable rather than failing the whole read.

use std::time::Duration;

use super::Dashboard;
use crate::Error;
use tessera_wire::telemetry::LogType;
use tessera_wire::telemetry::{ClusterEntry, ClusterLog, LogSettings, ProxyLog};

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
        let reads = self
            .get_from_proxies::<ProxyLog>(&proxies, &path, PROXY_TIMEOUT)
            .await;
        let mut out = ClusterLog {
            log_type,
            proxies: 0,
            settings: Vec::new(),
            unreachable: Vec::new(),
            entries: Vec::new(),
        };
        for (p, read) in proxies.iter().zip(reads) {
            let Ok(log) = read else {
                out.unreachable.push(p.token.clone());
                continue;
            };
            out.proxies += 1;
            add_settings(&mut out.settings, &log, &p.addr);
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
        out.settings
            .sort_by_key(|s| std::cmp::Reverse(s.proxies.len()));
        Ok(out)
    }
}

/// Counts `proxy` under its log's settings, adding them if no proxy had them yet.
fn add_settings(settings: &mut Vec<LogSettings>, log: &ProxyLog, proxy: &str) {
    let same = |s: &&mut LogSettings| s.threshold == log.threshold && s.max_len == log.max_len;
    match settings.iter_mut().find(same) {
        Some(s) => s.proxies.push(proxy.to_owned()),
        None => settings.push(LogSettings {
            threshold: log.threshold,
            max_len: log.max_len,
            proxies: vec![proxy.to_owned()],
        }),
    }
}
