//! The command log's HTTP route: the dashboard's merge of every proxy's log
//! (`dashboard::commandlog`). Its query (the log's type and an optional count) is the same as
//! a proxy's own route's (`tessera_wire::telemetry::CommandLogQuery`).
//!
//! ```text
//! GET /api/proxy/commandlog?type=slow|large-request|large-reply[&count=N]   (proxy admin API)
//! GET /api/commandlog?type=slow|large-request|large-reply[&count=N]         (dashboard)
//! ```

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};

use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;
use tessera_wire::telemetry::ClusterLog;
use tessera_wire::telemetry::{CommandLogQuery, LogType};

pub(crate) type LogQuery = Result<Query<CommandLogQuery>, axum::extract::rejection::QueryRejection>;

/// The type asked for (`slow` when absent), or a 400 naming the valid ones.
pub(crate) fn parse(q: LogQuery) -> Result<(LogType, Option<usize>), ApiError> {
    let Query(p) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    p.parse().map_err(ApiError::bad_request)
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
