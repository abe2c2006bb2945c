//! The users routes (docs/users.md): the cluster's users table, changed one user at a time
//! (`dashboard::users`).
//!
//! ```text
//! GET    /api/users            [User], sorted by name
//! PUT    /api/users/{name}     {"password"? | "password_hash"?, "commands"?, "key_prefix"?, "enabled"?} → User
//! DELETE /api/users/{name}     {}
//! ```

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::dashboard::Dashboard;
use tessera_http::error::{ApiError, optional_json};
use tessera_wire::Empty;
use tessera_wire::error::ErrorBody;
use tessera_wire::users::{UserChange, UserView};

/// A user change is a few fields; anything bigger is not one.
const MAX_USER_BODY: usize = 16 * 1024;

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(list_users))
        .routes(routes!(set_user, delete_user))
}

/// List the users
///
/// The cluster's users table, sorted by name. Never a password or a hash: `password_set`
/// says whether the entry has one. The implicit `default` user appears only when the table
/// configures it.
#[utoipa::path(
    get,
    path = "/api/users",
    tag = "users",
    operation_id = "listUsers",
    responses(
        (status = 200, description = "The users.", body = Vec<UserView>),
        (status = 503, description = "The store is unreachable, or its users document is unreadable or invalid (the message names its key).", body = ErrorBody),
    )
)]
async fn list_users(State(d): State<Arc<Dashboard>>) -> Result<Json<Vec<UserView>>, ApiError> {
    Ok(Json(d.list_users().await?))
}

/// Create or change a user
///
/// Fields left out keep their value; a new user needs a password (except `default`). The
/// password is hashed by the dashboard (`sha256$<salt hex>$<digest hex>`) and never stored or
/// shown in clear; the audit log records it as `<redacted>`. Instead of `password`,
/// `password_hash` gives the hash itself, as the users document (and a backup's
/// `store.json`) holds it: the user keeps the password it had elsewhere (a restore, docs/backup.md);
/// it is checked as a hash, never shown, and recorded as `<redacted>` too. `commands` are class names
/// (`read`, `write`, `admin`, `pubsub`, `scripting`, `transaction`, `blocking`, `dangerous`,
/// `keyspace`; `null`: every command); `key_prefix: null` or `""` lifts the prefix. The table
/// is persisted with the next version, then pushed to every online proxy with a barrier.
#[utoipa::path(
    put,
    path = "/api/users/{name}",
    tag = "users",
    operation_id = "setUser",
    params(("name" = String, Path, description = "User name: 1 to 128 printable ASCII characters, no spaces. `default` configures the default user.")),
    request_body = UserChange,
    responses(
        (status = 200, description = "The user after the change.", body = UserView),
        (status = 400, description = "A bad name, an empty or overlong password (at most 1024 bytes), a password_hash that is not `sha256$<salt hex, 1 to 64 bytes>$<digest hex, 32 bytes>`, both a password and a password_hash, an unknown class, a bad prefix, an unknown field, a body over 16 KiB, a new user without a password, or a full table (1000 users).", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the table.", body = ErrorBody),
        (status = 503, description = "The store is unreachable, or its users document is unusable.", body = ErrorBody),
    )
)]
async fn set_user(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<UserView>, ApiError> {
    let body = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if body.len() > MAX_USER_BODY {
        return Err(ApiError::bad_request(format!(
            "a body of {} bytes is not a user change (at most {MAX_USER_BODY})",
            body.len()
        )));
    }
    let change: UserChange = optional_json(&body)?.ok_or_else(|| {
        ApiError::bad_request(
            "body must be {\"password\"? or \"password_hash\"?, \"commands\"?: [classes], \"key_prefix\"?, \"enabled\"?}",
        )
    })?;
    Ok(Json(d.set_user(&name, change).await?))
}

/// Remove a user
///
/// Removes the user from the table and every online proxy (removing `default` makes it
/// implicit again).
#[utoipa::path(
    delete,
    path = "/api/users/{name}",
    tag = "users",
    operation_id = "deleteUser",
    params(("name" = String, Path, description = "User name: 1 to 128 printable ASCII characters, no spaces. `default` configures the default user.")),
    responses(
        (status = 200, description = "Removed.", body = Empty),
        (status = 404, description = "No such user.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not load the table.", body = ErrorBody),
        (status = 503, description = "The store is unreachable, or its users document is unusable.", body = ErrorBody),
    )
)]
async fn delete_user(
    State(d): State<Arc<Dashboard>>,
    Path(name): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    d.delete_user(&name).await?;
    Ok(Json(Empty {}))
}
