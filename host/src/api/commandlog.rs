//! The command log's HTTP routes: a proxy's own log, and the dashboard's merge of every
//! proxy's (`dashboard::commandlog`). Both take the log's type and an optional count.
//!
//! ```text
//! GET /api/proxy/commandlog?type=slow|large-request|large-reply[&count=N]   (proxy admin API)
//! GET /api/commandlog?type=slow|large-request|large-reply[&count=N]         (dashboard)
//! ```

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::proxy::ProxyAdmin;
use crate::dashboard::Dashboard;
use crate::dashboard::commandlog::{ClusterLog, ProxyLog};
use crate::http_error::ApiError;
use crate::telemetry::LogType;

type LogQuery = Result<Query<Params>, axum::extract::rejection::QueryRejection>;

#[derive(Deserialize)]
struct Params {
    #[serde(rename = "type")]
    log_type: Option<String>,
    count: Option<usize>,
}

/// The type asked for (`slow` when absent), or a 400 naming the valid ones.
fn parse(q: LogQuery) -> Result<(LogType, Option<usize>), ApiError> {
    let Query(p) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let t = match p.log_type.as_deref() {
        None => LogType::Slow,
        Some(s) => LogType::parse(s.as_bytes()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown log type {s:?}: slow, large-request or large-reply"
            ))
        })?,
    };
    Ok((t, p.count))
}

pub(super) fn proxy_routes() -> Router<Arc<ProxyAdmin>> {
    Router::new().route("/api/proxy/commandlog", get(proxy_log))
}

pub(super) fn dashboard_routes() -> Router<Arc<Dashboard>> {
    Router::new().route("/api/commandlog", get(cluster_log))
}

async fn proxy_log(
    State(a): State<Arc<ProxyAdmin>>,
    q: LogQuery,
) -> Result<Json<ProxyLog>, ApiError> {
    let (log_type, count) = parse(q)?;
    let log = &a.shared.command_log;
    Ok(Json(ProxyLog {
        log_type,
        len: log.len(log_type),
        entries: log.get(log_type, count).iter().map(Into::into).collect(),
    }))
}

async fn cluster_log(
    State(d): State<Arc<Dashboard>>,
    q: LogQuery,
) -> Result<Json<ClusterLog>, ApiError> {
    let (log_type, count) = parse(q)?;
    Ok(Json(d.command_log(log_type, count).await?))
}
