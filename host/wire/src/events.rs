//! The cluster's events (`GET /api/events`): what happened to it, one sentence each, with a
//! severity (docs/api.md, "Events").

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// How much an event asks of an operator.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Nothing to do: a proxy came back, a migration finished.
    Info,
    /// Look soon: a proxy fenced or draining, a slow store, a held migration.
    Warning,
    /// Act now: a proxy lost, a failover refused, the dashboard's lock lost.
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 3] = [Severity::Info, Severity::Warning, Severity::Critical];

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// What an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    ProxyLost,
    ProxyBack,
    ProxyFenced,
    ProxyDraining,
    StoreSlow,
    StoreRecovered,
    FailoverDone,
    FailoverRefused,
    MigrationHeld,
    MigrationFinished,
    MigrationAborted,
    LockAcquired,
    LockLost,
    BackupTaken,
    BackupFailed,
    /// A kind this version does not know (read back from a newer dashboard's store).
    #[serde(other)]
    Other,
}

/// One event.
///
/// ```text
/// {"id": 42, "time_ms": 1733356800123, "severity": "critical", "kind": "proxy-lost",
///  "detail": "proxy 127.0.0.1:19000 stopped answering its health checks"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Event {
    /// Increases by one per event, across dashboard restarts.
    pub id: u64,
    /// Unix milliseconds.
    pub time_ms: u64,
    pub severity: Severity,
    pub kind: EventKind,
    /// What happened, naming the proxy by address, the group by id.
    pub detail: String,
}

/// The query of `GET /api/events`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events with a larger id (absent: the newest `limit`).
    pub after: Option<u64>,
    /// At most this many, 1 to 1000 (default 100).
    pub limit: Option<usize>,
    /// Seconds to wait, 0 to 30, for an event after `after` when there is none yet (a
    /// long poll; default 0).
    pub wait: Option<u64>,
}

/// `GET /api/events`: oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventsPage {
    pub events: Vec<Event>,
    /// The newest id there is (0: none yet); pass it as `after` to wait for the next.
    pub last_id: u64,
    /// The most events kept in memory; older ones are gone.
    pub capacity: usize,
}
