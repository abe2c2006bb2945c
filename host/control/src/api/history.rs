//! The metrics history (`dashboard::history`): the series kept and their points.
//!
//! ```text
//! GET /api/history/series
//! GET /api/history?range=5m|1h|6h|24h&series=ops,cmd:get,latency:p99
//! ```

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;
use tessera_wire::error::ErrorBody;
use tessera_wire::history::{History, HistoryQuery, SeriesList};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(series))
        .routes(routes!(history))
}

/// The series of the metrics history
///
/// Every series the dashboard keeps, with its unit, its kind (a counter's rate, or a level)
/// and its mean over the last minute; plugins' busiest first. Metrics only: no keys, no
/// commands' arguments.
#[utoipa::path(
    get,
    path = "/api/history/series",
    tag = "cluster",
    operation_id = "historySeries",
    responses((status = 200, description = "The series kept.", body = SeriesList))
)]
async fn series(State(d): State<Arc<Dashboard>>) -> Json<SeriesList> {
    Json(d.history.list())
}

/// The metrics history
///
/// Points of the series named (at most 32; the cluster's totals when absent) over the range:
/// 1 s points for 5m and 1h, 1 min points for 6h and 24h. Counters are rates per second.
/// See docs/api.md, "Metrics history".
#[utoipa::path(
    get,
    path = "/api/history",
    tag = "cluster",
    operation_id = "history",
    params(HistoryQuery),
    responses(
        (status = 200, description = "The points.", body = History),
        (status = 400, description = "An unknown range or series, too many series, or an unknown parameter.", body = ErrorBody),
    )
)]
async fn history(
    State(d): State<Arc<Dashboard>>,
    q: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<History>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let h = d
        .history
        .query(q.range.as_deref(), q.series.as_deref())
        .map_err(ApiError::bad_request)?;
    Ok(Json(h))
}
