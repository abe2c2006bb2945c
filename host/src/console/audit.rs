//! The console's own audit events (logins, failed logins, lockouts, logouts), in memory and
//! bounded, and `GET /api/audit`: those merged with every cluster's dashboard log, newest
//! first. Changes to clusters are recorded by their dashboards, not here.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::Console;
use crate::dashboard::audit::AuditEntry;
use crate::http_error::ApiError;

/// Console events kept.
const KEEP: usize = 1000;
/// How long one dashboard may take to answer its audit log.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// An entry of the merged log: a dashboard's entry with its cluster, or a console event
/// (`cluster: null`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergedEntry {
    pub cluster: Option<String>,
    #[serde(flatten)]
    pub entry: AuditEntry,
}

/// The console's events, newest last.
#[derive(Default)]
pub struct Events {
    entries: Mutex<VecDeque<AuditEntry>>,
}

impl Events {
    /// Records one event (also logged, so it outlives a restart in the console's log).
    pub fn record(&self, actor: &str, method: &str, path: &str, detail: &str, status: u16) {
        tracing::info!(%actor, %path, %detail, status, "console event");
        let mut entries = self.entries.lock().expect("events lock poisoned");
        if entries.len() >= KEEP {
            entries.pop_front();
        }
        entries.push_back(AuditEntry {
            time_ms: now_ms(),
            actor: actor.to_owned(),
            token: None,
            role: None,
            method: method.to_owned(),
            path: path.to_owned(),
            detail: detail.to_owned(),
            status,
        });
    }

    fn newest(&self, limit: usize) -> Vec<AuditEntry> {
        let entries = self.entries.lock().expect("events lock poisoned");
        entries.iter().rev().take(limit).cloned().collect()
    }
}

#[derive(Deserialize)]
pub struct AuditQuery {
    limit: Option<usize>,
}

/// `GET /api/audit?limit=N` (default 100, at most 1000): console events and every reachable
/// cluster's log, newest first. A cluster that does not answer is left out (its state shows
/// in `/api/clusters`).
pub async fn merged(
    State(c): State<Arc<Console>>,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<MergedEntry>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = q.limit.unwrap_or(100).min(KEEP);
    let clusters = c.discovery.clusters().await;
    let fetched = join_all(clusters.iter().filter(|cl| cl.relayable()).map(|cl| {
        let c = c.clone();
        async move {
            let addr = cl.dashboard.as_ref().map(|d| d.admin_addr.clone())?;
            let url = format!("http://{addr}/api/audit?limit={limit}");
            let mut req = c.http.get(url).timeout(FETCH_TIMEOUT);
            if let Some(t) = c.config.tokens.get(&cl.name) {
                req = req.bearer_auth(t);
            }
            let resp = req.send().await.ok()?.error_for_status().ok()?;
            let entries: Vec<AuditEntry> = resp.json().await.ok()?;
            Some((cl.name.clone(), entries))
        }
    }))
    .await;
    let mut all: Vec<MergedEntry> = c
        .events
        .newest(limit)
        .into_iter()
        .map(|entry| MergedEntry {
            cluster: None,
            entry,
        })
        .collect();
    for (name, entries) in fetched.into_iter().flatten() {
        all.extend(entries.into_iter().map(|entry| MergedEntry {
            cluster: Some(name.clone()),
            entry,
        }));
    }
    all.sort_by_key(|e| std::cmp::Reverse(e.entry.time_ms));
    all.truncate(limit);
    Ok(Json(all))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
