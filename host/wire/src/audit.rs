//! The audit log's entries, as the dashboard stores and serves them and the console merges
//! them, and the headers the API's callers and the console exchange about who is calling.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Role;

/// The header naming who makes a call: `console:<user>` from the console, `cli:<user>` from
/// `tessera admin` (`cli` alone when it does not know the user: the dashboard records
/// `cli:<token name>` then). It is taken as given (any token holder can write any name); the entry's
/// `token`, the name of the token the call carried, is what the caller cannot choose.
pub const ACTOR_HEADER: &str = "x-tessera-actor";

/// On every answer to a call made with a token: the token's role, so a client (the console)
/// learns what it may do without asking.
pub const ROLE_HEADER: &str = "x-tessera-role";

/// On every answer to a call made with a token: the token's name.
pub const TOKEN_HEADER: &str = "x-tessera-token";

/// One recorded call.
///
/// ```text
/// {"time_ms": 1767225600000, "actor": "console:admin", "token": "console", "role": "admin",
///  "method": "POST", "path": "/api/groups", "detail": "{\"id\":3}", "status": 201}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub time_ms: u64,
    /// `console:<user>`, `cli:<unix user>`, or `api` when the caller did not say.
    pub actor: String,
    /// The name of the token the call carried (null in the console's own events and in
    /// entries from before tokens had names).
    #[serde(default)]
    #[schema(required = true)]
    pub token: Option<String>,
    /// That token's role.
    #[serde(default)]
    #[schema(required = true)]
    pub role: Option<Role>,
    pub method: String,
    /// The path and query as called.
    pub path: String,
    /// The request body (JSON text, truncated), `<N bytes>` for a binary one, or empty.
    pub detail: String,
    /// The HTTP status the call answered.
    pub status: u16,
    /// The call as a sentence with who made it ("ops-token moved slots 400-511 to group 2";
    /// a refusal says so with its reason). Empty in entries from before sentences.
    #[serde(default)]
    #[schema(required = true)]
    pub summary: String,
    /// A refused call's reason (the API's error message).
    #[serde(default)]
    #[schema(required = true)]
    pub reason: Option<String>,
}
