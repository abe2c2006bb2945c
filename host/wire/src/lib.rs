//! The shapes of Tessera's HTTP APIs and stored documents, as the dashboard, the proxies'
//! admin API, the console, the CLI and the tests exchange them. Types only (serde, and
//! `utoipa::ToSchema` so the OpenAPI documents are derived from them: docs/api.md, "The
//! schema"), so that everything that speaks the API can depend on them without the servers.
//! A method here concerns the shape alone (a default, a bound check, a view without secrets).
//!
//! Layout, by API resource:
//! - [`error`] — the error envelope every API answers a failure with.
//! - [`group`] — the id of a replica group, which the others name groups by.
//! - [`topology`], [`credential`] — what a dashboard pushes to its proxies.
//! - [`cluster`] — the dashboard's overview, groups, servers, slots, proxies, stats.
//! - [`migration`] — migrations, their throttle, aborts, rebalances, per-slot statistics.
//! - [`backup`] — whole-cluster backups: jobs, their progress, a backup's manifest.
//! - [`failover`], [`read_policy`], [`routes`], [`mirror`], [`users`], [`tokens`],
//!   [`plugins`] (with [`plugin_hooks`], its hooks' latency, and [`plugin_canary`], a version tried on some proxies first), [`pubsub`], [`telemetry`], [`audit`], [`access`], [`history`], [`events`] — one
//!   resource each.
//! - [`console`] — the federation console's own routes.

pub mod access;
pub mod audit;
pub mod backup;
pub mod cluster;
pub mod console;
pub mod credential;
pub mod error;
pub mod events;
pub mod failover;
pub mod group;
pub mod history;
pub mod migration;
pub mod mirror;
pub mod plugin_canary;
pub mod plugin_hooks;
pub mod plugins;
pub mod pubsub;
pub mod read_policy;
pub mod routes;
pub mod telemetry;
pub mod tokens;
pub mod topology;
pub mod users;

/// `{}`: the answer of a change that has nothing more to say (a deletion).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
)]
pub struct Empty {}

/// `{"version": N}`: a proxy's acknowledgement of a pushed document (users, mirror).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct VersionAck {
    /// The version now in force.
    pub version: u64,
}

/// `?limit=N` of the logs (`GET /api/audit`, the console's `/api/logins`): the newest N
/// entries, 100 when absent, at most 1000.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LimitQuery {
    pub limit: Option<usize>,
}
