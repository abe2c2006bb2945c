//! The dashboard's backup routes (docs/backup.md): start a whole-cluster backup as a job, and
//! follow the recent jobs.
//!
//! ```text
//! GET  /api/backups   the recent jobs (newest first), per group bytes, keys, state, errors
//! POST /api/backups   {"dir", "one_instant"?, "max_pause_ms"?}: starts a backup under --backup-root
//! ```

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Body;
use crate::dashboard::Dashboard;
use tessera_http::error::ApiError;
use tessera_wire::backup::{BackupRequest, BackupView, BackupsView};
use tessera_wire::error::ErrorBody;

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new().routes(routes!(list, start))
}

/// Backups
///
/// The recent backup jobs of this dashboard, newest first (the last 20): each group's
/// source, state, bytes received and keys, the write pause of a one-instant backup, and
/// errors; whether backups are enabled, and when the last good one finished.
#[utoipa::path(
    get,
    path = "/api/backups",
    tag = "backups",
    operation_id = "listBackups",
    responses(
        (status = 200, description = "The recent backup jobs.", body = BackupsView),
    )
)]
async fn list(State(d): State<Arc<Dashboard>>) -> Json<BackupsView> {
    Json(d.backups_view())
}

/// Start a backup
///
/// Snapshots every group (from a replica in sync where there is one, else its master) over
/// the replication protocol, with the store's documents and a manifest, into a new
/// directory under the dashboard's `--backup-root`. Answers at once; follow the job with
/// `GET /api/backups`.
#[utoipa::path(
    post,
    path = "/api/backups",
    tag = "backups",
    operation_id = "startBackup",
    request_body = BackupRequest,
    responses(
        (status = 202, description = "The job, started.", body = BackupView),
        (status = 400, description = "A bad directory name or bound, or backups are not enabled (no --backup-root).", body = ErrorBody),
        (status = 409, description = "The directory exists, or the cluster has no group.", body = ErrorBody),
        (status = 503, description = "Another backup is running.", body = ErrorBody),
    )
)]
async fn start(
    State(d): State<Arc<Dashboard>>,
    body: Body<BackupRequest>,
) -> Result<(StatusCode, Json<BackupView>), ApiError> {
    let Json(req) = body?;
    Ok((StatusCode::ACCEPTED, Json(d.start_backup(req).await?)))
}
