//! The cluster's events (`dashboard::events`), oldest first, with a long poll for new ones.
//!
//! ```text
//! GET /api/events?after=<id>&limit=N&wait=<secs>
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::dashboard::events::{MAX_PAGE, MAX_WAIT, MAX_WAITS_PER_CALLER};
use crate::dashboard::{Caller, Dashboard};
use tessera_http::error::ApiError;
use tessera_wire::error::ErrorBody;
use tessera_wire::events::{EventsPage, EventsQuery};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new().routes(routes!(events))
}

/// The cluster's events
///
/// Events after `after` (the newest `limit` when absent), oldest first: proxies lost, fenced,
/// draining and back, a slow store, failovers done or refused, migrations held or finished,
/// the dashboard's lock. With `wait` and `after`, answers when one comes or the wait ends;
/// one token may hold 8 such waits at once. See docs/api.md, "Events".
#[utoipa::path(
    get,
    path = "/api/events",
    tag = "cluster",
    operation_id = "events",
    params(EventsQuery),
    responses(
        (status = 200, description = "The events.", body = EventsPage),
        (status = 400, description = "A limit outside 1-1000, a wait over 30 s, or an unknown parameter.", body = ErrorBody),
        (status = 429, description = "The caller's token holds 8 waiting requests already.", body = ErrorBody),
    )
)]
async fn events(
    State(d): State<Arc<Dashboard>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<EventsPage>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = match q.limit.unwrap_or(100) {
        n @ 1..=MAX_PAGE => n,
        n => {
            return Err(ApiError::bad_request(format!(
                "limit must be in 1..={MAX_PAGE}, got {n}"
            )));
        }
    };
    let wait = Duration::from_secs(q.wait.unwrap_or(0));
    if wait > MAX_WAIT {
        return Err(ApiError::bad_request(format!(
            "wait must be at most {} s, got {} s",
            MAX_WAIT.as_secs(),
            wait.as_secs()
        )));
    }
    if let Some(after) = q.after
        && !wait.is_zero()
    {
        let Some(_slot) = d.events.enter_wait(&caller.name) else {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_requests",
                format!(
                    "{} holds {MAX_WAITS_PER_CALLER} waiting event requests already: \
                     wait for one to answer, or ask without wait",
                    caller.name
                ),
            ));
        };
        d.events.wait_after(after, wait).await;
    }
    Ok(Json(d.events.page(q.after, limit)))
}
