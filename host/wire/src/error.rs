//! The error envelope of every Tessera HTTP API (dashboard, proxy admin, console): a status
//! code and `{"error": {"code", "message"}}`. `tessera_http::error::ApiError` renders it; the
//! CLI and the console read it back.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of every failed call.
///
/// ```text
/// {"error": {"code": "conflict", "message": "group 2 is not empty (512 slots, 1 servers): …"}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable word: `bad_request`, `unauthorized`, `forbidden`,
    /// `not_found`, `conflict`, `too_large`, `too_many_requests`, `push_incomplete`,
    /// `unavailable`, `internal`; the console adds `cluster_token`, `bad_gateway`, `csrf`,
    /// `locked_out`, `too_many_attempts`, `busy` and `method_not_allowed`. A string, not an
    /// enumeration: a client keeps working when a server of another version adds one.
    pub code: String,
    /// What happened and, where it helps, what to do.
    pub message: String,
}
