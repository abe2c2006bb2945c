//! The command log's HTTP routes: the dashboard's merge of every proxy's log
//! (`dashboard::commandlog`), and the query both it and a proxy's own route (`proxy`) take:
//! the log's type and an optional count.
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

use crate::dashboard::Dashboard;
use crate::dashboard::commandlog::ClusterLog;
use crate::http_error::ApiError;
use crate::telemetry::LogType;

pub(super) type LogQuery = Result<Query<Params>, axum::extract::rejection::QueryRejection>;

#[derive(Deserialize)]
pub(super) struct Params {
    #[serde(rename = "type")]
    log_type: Option<String>,
    count: Option<usize>,
}

/// The type asked for (`slow` when absent), or a 400 naming the valid ones.
pub(super) fn parse(q: LogQuery) -> Result<(LogType, Option<usize>), ApiError> {
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

pub(super) fn dashboard_routes() -> Router<Arc<Dashboard>> {
    Router::new().route("/api/commandlog", get(cluster_log))
}

async fn cluster_log(
    State(d): State<Arc<Dashboard>>,
    q: LogQuery,
) -> Result<Json<ClusterLog>, ApiError> {
    let (log_type, count) = parse(q)?;
    Ok(Json(d.command_log(log_type, count).await?))
}
