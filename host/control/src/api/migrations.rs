//! The migration routes (docs/migration.md): moving slots online, the running migration's
//! speed cap, aborts, rebalances and the per-slot statistics a rebalance by load or memory
//! evens out. HTTP to `dashboard::migration` and `dashboard::rebalance`.
//!
//! ```text
//! GET  /api/migrations            progress                     GET /api/slots/stats
//! GET  /api/migrations/history    the last jobs, newest first
//! POST /api/migrations            {"from", "to", "group", "max_keys_per_sec"?, "max_mb_per_sec"?}
//! PUT  /api/migrations/throttle   {"max_keys_per_sec"?, "max_mb_per_sec"?}
//! POST /api/migrations/abort      {"slots"?}
//! POST /api/rebalance             {"dry_run"?, "by"?, "weights"?, "tolerance"?} | {"moves"}
//! ```

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Body;
use super::audit::named;
use crate::dashboard::{Caller, Dashboard};
use crate::migrate::throttle::Limits;
use tessera_http::error::{ApiError, optional_json};
use tessera_model::router::GroupId;
use tessera_wire::error::ErrorBody;
use tessera_wire::migration::{
    AbortMigrations, Aborted, MigrateSlots, MigrationHistory, MigrationStatus, Queued, Rebalance,
    RebalanceAnswer, RebalanceBy, SlotStatsView, ThrottleAnswer, ThrottleChange,
};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(migrations, migrate))
        .routes(routes!(history))
        .routes(routes!(set_throttle))
        .routes(routes!(abort))
        .routes(routes!(rebalance))
        .routes(routes!(slot_stats))
}

/// A speed cap as asked for, checked: keys per second at least 1, MiB per second above 0 and
/// at most a million; an absent field is no cap.
fn limits(max_keys_per_sec: Option<u64>, max_mb_per_sec: Option<f64>) -> Result<Limits, ApiError> {
    if max_keys_per_sec == Some(0) {
        return Err(ApiError::bad_request(
            "max_keys_per_sec must be at least 1 (leave it out for no cap)",
        ));
    }
    let bytes = match max_mb_per_sec {
        None => None,
        Some(mb) if mb.is_finite() && mb > 0.0 && mb <= 1_000_000.0 => {
            Some((mb * 1024.0 * 1024.0) as u64)
        }
        Some(mb) => {
            return Err(ApiError::bad_request(format!(
                "max_mb_per_sec must be above 0 and at most 1000000, not {mb}"
            )));
        }
    };
    Ok(Limits {
        max_keys_per_sec,
        max_bytes_per_sec: bytes,
    })
}

/// Migration progress
///
/// Slots in flight and queued, each with its copy round and whether it converged, keys and
/// bytes copied, keys/s, keys left and ETA, the speed cap, the slowest command the copy sent,
/// why the driver waits (`blocked`), and the write pause of the slot handoffs (docs/migration.md).
/// A slot's `state` is what the store holds (`pending`, `copying`, `handoff`, `cleanup`; a
/// dashboard before migration v3 may have left `preparing`, `prepared`, `migrating` or
/// `finished`), its `phase` where the driver has it.
#[utoipa::path(
    get,
    path = "/api/migrations",
    tag = "migrations",
    operation_id = "migrations",
    responses((status = 200, description = "Slots in flight and queued, keys/s, ETA.", body = MigrationStatus))
)]
async fn migrations(State(d): State<Arc<Dashboard>>) -> Json<MigrationStatus> {
    Json(d.migration_status())
}

/// Migration history
///
/// The last 200 migrations and rebalances as jobs, newest first: slots (as ranges), from and
/// to groups, start, end, duration, slots, keys and bytes moved, the longest write pause, who
/// started it, how it ended (finished, aborted and by whom, failed and why), and why its steps
/// were held. Kept in the cluster's store: a successor dashboard has it, and records the end
/// of a job its predecessor left running (docs/migration.md, "History").
#[utoipa::path(
    get,
    path = "/api/migrations/history",
    tag = "migrations",
    operation_id = "migrationHistory",
    responses((status = 200, description = "The jobs, newest first.", body = MigrationHistory))
)]
async fn history(State(d): State<Arc<Dashboard>>) -> Json<MigrationHistory> {
    Json(d.migration_history())
}

/// Move slots online
///
/// Queues slots `from`..=`to` to move to `group` while clients keep working; they move in the
/// background, under the speed cap if one is given.
#[utoipa::path(
    post,
    path = "/api/migrations",
    tag = "migrations",
    operation_id = "migrate",
    request_body = MigrateSlots,
    responses(
        (status = 200, description = "Queued.", body = Queued),
        (status = 400, description = "A malformed body, a range outside 0-1023, or a cap out of range.", body = ErrorBody),
        (status = 404, description = "The group does not exist or has no server.", body = ErrorBody),
        (status = 409, description = "A slot of the range is unassigned, or migrating already.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn migrate(
    State(d): State<Arc<Dashboard>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body<MigrateSlots>,
) -> Result<Json<Queued>, ApiError> {
    let Json(b) = body?;
    let throttle = limits(b.max_keys_per_sec, b.max_mb_per_sec)?;
    let by = named(&caller, &headers);
    let queued = d.migrate_slots(b.from, b.to, GroupId(b.group), &by).await?;
    if !throttle.is_none() {
        d.set_migration_throttle(throttle).await?;
    }
    Ok(Json(Queued { queued, throttle }))
}

/// Change the running migration's speed cap
///
/// Sets (or with `{}` lifts) the cap of the running migration, at once; it is persisted for a
/// successor dashboard and ends with the migration. With no migration running it is refused
/// (409): a cap is given with the migration it limits.
#[utoipa::path(
    put,
    path = "/api/migrations/throttle",
    tag = "migrations",
    operation_id = "setMigrationThrottle",
    request_body = ThrottleChange,
    responses(
        (status = 200, description = "The cap now.", body = ThrottleAnswer),
        (status = 400, description = "An unknown field, or a cap out of range.", body = ErrorBody),
        (status = 409, description = "No migration is running (give the cap with the migration).", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn set_throttle(
    State(d): State<Arc<Dashboard>>,
    body: Body<ThrottleChange>,
) -> Result<Json<ThrottleAnswer>, ApiError> {
    let Json(b) = body?;
    let throttle = limits(b.max_keys_per_sec, b.max_mb_per_sec)?;
    d.change_migration_throttle(throttle).await?;
    Ok(Json(ThrottleAnswer { throttle }))
}

/// Abort migrations
///
/// The given slots (all when absent) go back to their source; keys already moved are moved
/// back. Answers at once: the request is persisted, and the driver turns the slots around at
/// its next step (`abort_pending` meanwhile).
#[utoipa::path(
    post,
    path = "/api/migrations/abort",
    tag = "migrations",
    operation_id = "abortMigrations",
    request_body = Option<AbortMigrations>,
    responses(
        (status = 200, description = "Slot migrations asked to turn around.", body = Aborted),
        (status = 400, description = "A malformed body.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn abort(
    State(d): State<Arc<Dashboard>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Aborted>, ApiError> {
    let b: AbortMigrations = optional_json(&body)?.unwrap_or_default();
    let by = named(&caller, &headers);
    let aborted = d
        .abort_migrations(b.slots.map(|s| s.into_iter().collect()), &by)
        .await?;
    Ok(Json(Aborted { aborted }))
}

/// Rebalance slots over the groups
///
/// Plans moves that even out slot counts (by weight), or measured load (ops/s) or memory
/// within `tolerance` percent of the mean; with `dry_run` the plan is returned and nothing
/// moves. Given `moves` (a dry run's), queues them exactly as planned.
#[utoipa::path(
    post,
    path = "/api/rebalance",
    tag = "migrations",
    operation_id = "rebalance",
    request_body = Option<Rebalance>,
    responses(
        (status = 200, description = "The plan (queued unless dry_run).", body = RebalanceAnswer),
        (status = 400, description = "A malformed body, `weight` without weights, a tolerance outside 0-100, or planned moves with `dry_run`.", body = ErrorBody),
        (status = 404, description = "A weight or move names a group that does not exist or has no server.", body = ErrorBody),
        (status = 409, description = "Slots are moving, a planned slot is no longer its move's `from` group's (plan again), or load or memory is not measured yet.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn rebalance(
    State(d): State<Arc<Dashboard>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<RebalanceAnswer>, ApiError> {
    let b: Rebalance = optional_json(&body)?.unwrap_or_default();
    let by_who = named(&caller, &headers);
    if let Some(moves) = b.moves {
        if b.dry_run {
            return Err(ApiError::bad_request(
                "planned moves are queued, not planned",
            ));
        }
        d.queue_planned(&moves, &by_who).await?;
        return Ok(Json(RebalanceAnswer {
            dry_run: false,
            by: b.by,
            slots: moves.len(),
            moves,
            tolerance: None,
            before: None,
            after: None,
            notes: None,
        }));
    }
    let by = b.by.unwrap_or(if b.weights.is_some() {
        RebalanceBy::Weight
    } else {
        RebalanceBy::Slots
    });
    let tolerance = b.tolerance.unwrap_or(10.0);
    if !(0.0..=100.0).contains(&tolerance) {
        return Err(ApiError::bad_request(
            "tolerance is a percent of the mean, 0 to 100",
        ));
    }
    let weights = b
        .weights
        .map(|w| w.into_iter().map(|(g, w)| (GroupId(g), w)).collect());
    let plan = d
        .rebalance(by, weights, tolerance / 100.0, b.dry_run, &by_who)
        .await?;
    Ok(Json(plan.answer(b.dry_run)))
}

/// Per-slot load, keys and memory
///
/// Ops/s and bytes/s per slot over the sampling window (read from every online proxy), keys
/// and memory per slot estimated by a bounded SCAN of each group (docs/migration.md,
/// "Rebalance by measure"), and per-group totals. Arrays have 1024 entries, index = slot.
#[utoipa::path(
    get,
    path = "/api/slots/stats",
    tag = "slots",
    operation_id = "slotStats",
    responses((status = 200, description = "The statistics.", body = SlotStatsView))
)]
async fn slot_stats(State(d): State<Arc<Dashboard>>) -> Json<SlotStatsView> {
    Json(d.slot_stats())
}
