//! The read policy's routes (docs/replica-reads.md): HTTP to `dashboard::read_policy`.
//!
//! ```text
//! GET /api/read-policy   {"policy": {"mode", "max_lag_ms"}, "replicas": [...]}
//! PUT /api/read-policy   {"mode"?, "max_lag_ms"?} → the same            (admin)
//! ```

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};

use crate::dashboard::Dashboard;
use crate::dashboard::read_policy::{ReadPolicyChange, ReadPolicyView};
use tessera_http::error::ApiError;

pub(super) fn routes() -> Router<Arc<Dashboard>> {
    Router::new().route("/api/read-policy", get(view).put(set))
}

async fn view(State(d): State<Arc<Dashboard>>) -> Json<ReadPolicyView> {
    Json(d.read_policy_view())
}

async fn set(
    State(d): State<Arc<Dashboard>>,
    body: Result<Json<ReadPolicyChange>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<ReadPolicyView>, ApiError> {
    let Json(change) = body?;
    d.set_read_policy(change).await.map(Json)
}
