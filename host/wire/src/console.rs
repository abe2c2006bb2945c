//! The federation console's own routes (docs/console.md): login and the session, the
//! clusters it finds and the stores it searches, its merge of the clusters' audit logs, and
//! its login log. Calls relayed to a dashboard have the dashboard's shapes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Role;
use crate::audit::AuditEntry;
use crate::cluster::{DashboardSummary, Overview};

/// `POST /auth/login`.
#[derive(Clone, Serialize, Deserialize, ToSchema)]
pub struct LoginRequest {
    pub user: String,
    pub password: String,
}

/// The answer of `POST /auth/login` and `GET /auth/me`: the session's user, and the token
/// every change must carry in `X-CSRF-Token`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Session {
    pub user: String,
    pub csrf: String,
}

/// An entry of `GET /api/clusters`: a cluster found in a store, its overview, and what the
/// user may do there.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterView {
    pub name: String,
    /// The store's URL.
    pub store: String,
    /// The dashboard its lock node names.
    #[schema(required = true)]
    pub dashboard: Option<DashboardSummary>,
    /// Its dashboard answered the overview.
    pub reachable: bool,
    #[schema(required = true)]
    pub overview: Option<Overview>,
    /// Why the console cannot use it now (no dashboard, store down, duplicate name, no
    /// answer).
    #[schema(required = true)]
    pub error: Option<String>,
    /// Whether the console has a token for it (reads and changes need one).
    pub has_token: bool,
    /// The role of that token, as the dashboard told (null: no token, or no answer).
    #[schema(required = true)]
    pub token_role: Option<Role>,
    /// What the user may do there through the console: the lower of its own role and the
    /// token's (null when the token's is unknown).
    #[schema(required = true)]
    pub role: Option<Role>,
    /// When no dashboard holds the lock: the one the console last saw holding it, and
    /// whether it still answers (null: one holds it, or none did since the console started).
    #[serde(default)]
    #[schema(required = true)]
    pub last_dashboard: Option<LastDashboard>,
}

/// The dashboard that last held a cluster's lock, as the console saw it, when none holds it
/// now (docs/console.md, "When a dashboard is down").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LastDashboard {
    /// HTTP address of its API.
    pub admin_addr: String,
    pub pid: u32,
    pub host: String,
    pub version: String,
    /// When the console last saw it holding the lock (unix milliseconds).
    pub last_seen_unix_ms: u64,
    /// Whether its API answered the console's probe (1 s) at the last scan.
    pub answers: bool,
}

/// What the last scan of one store found (`GET /api/stores`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoreView {
    pub url: String,
    pub ok: bool,
    #[schema(required = true)]
    pub error: Option<String>,
    /// The clusters found there.
    pub clusters: Vec<String>,
}

/// An entry of the console's `GET /api/audit`: a dashboard's entry with its cluster.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MergedEntry {
    pub cluster: String,
    #[serde(flatten)]
    pub entry: AuditEntry,
}

/// What happened at a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoginOutcome {
    Login,
    /// Wrong name or password.
    Failed,
    /// The failure that started a lockout, or an attempt refused because of one.
    LockedOut,
    /// Refused unchecked: attempts of the same address (or name and address) were still
    /// being checked.
    TooManyAttempts,
    /// Refused unchecked: every password check was busy.
    Busy,
    Logout,
}

/// One entry of `GET /api/logins`.
///
/// ```text
/// LoginEvent { time_ms, user, addr, outcome, status, detail, count }
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LoginEvent {
    /// The last time it happened (ms since the epoch).
    pub time_ms: u64,
    /// The user name given (at most 64 characters; it need not exist).
    pub user: String,
    /// The client's address (IPv6 as its /64).
    pub addr: String,
    pub outcome: LoginOutcome,
    /// The HTTP status answered.
    pub status: u16,
    pub detail: String,
    /// How many times in a row it happened.
    pub count: u64,
}
