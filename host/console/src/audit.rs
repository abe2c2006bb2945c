//! `GET /api/audit`: every cluster's dashboard log of changes, merged, newest first. Changes
//! are recorded by the dashboards; the console's login events are a separate log
//! ([`super::logins`]), so failed logins never push a change out of this view.

use std::sync::Arc;
use std::time::Duration;

use super::Console;
use axum::Json;
use axum::extract::{Query, State};
use futures_util::future::join_all;
use tessera_http::error::ApiError;
use tessera_wire::LimitQuery;
use tessera_wire::audit::AuditEntry;
use tessera_wire::error::ErrorBody;

pub use tessera_wire::console::MergedEntry;

/// Entries answered at most.
const KEEP: usize = 1000;
/// How long one dashboard may take to answer its audit log.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// Every cluster's audit log, merged
///
/// Every reachable cluster's dashboard log of changes, merged newest first, each entry naming
/// its cluster (`limit` default 100, at most 1000). A cluster that does not answer is left
/// out (its state shows in `/api/clusters`).
#[utoipa::path(
    get,
    path = "/api/audit",
    tag = "console",
    operation_id = "mergedAudit",
    params(LimitQuery),
    responses(
        (status = 200, description = "Entries, newest first.", body = Vec<MergedEntry>),
        (status = 400, description = "A limit that is not a number.", body = ErrorBody),
    )
)]
pub async fn merged(
    State(c): State<Arc<Console>>,
    query: Result<Query<LimitQuery>, axum::extract::rejection::QueryRejection>,
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
            if let Some(t) = c.config.token(&cl.name, &cl.store) {
                req = req.bearer_auth(t);
            }
            let resp = req.send().await.ok()?.error_for_status().ok()?;
            let entries: Vec<AuditEntry> = super::fetch::json(resp, super::fetch::MAX_PAGE)
                .await
                .ok()?;
            Some((cl.name.clone(), entries))
        }
    }))
    .await;
    let mut all: Vec<MergedEntry> = Vec::new();
    for (name, entries) in fetched.into_iter().flatten() {
        all.extend(entries.into_iter().map(|entry| MergedEntry {
            cluster: name.clone(),
            entry,
        }));
    }
    all.sort_by_key(|e| std::cmp::Reverse(e.entry.time_ms));
    all.truncate(limit);
    Ok(Json(all))
}
