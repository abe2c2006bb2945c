//! The dashboard's view of its cluster: the overview, groups and their servers, slots,
//! proxies, traffic stats, and the bodies that change groups, servers and slot ownership.
//! Slot actions and proxy states are also what the store keeps (`tessera-store` re-exports
//! them).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::failover::{FailoverEvent, GroupStatus};
use crate::group::GroupId;
use crate::routes::RouteRef;
use crate::telemetry::{CommandCount, ProxyStats};

// === overview ===

/// `GET /api/overview`: the cluster at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Overview {
    pub cluster: String,
    /// The topology epoch last committed.
    pub epoch: u64,
    pub dashboard: DashboardSummary,
    pub groups: usize,
    pub groups_down: usize,
    pub failover: OverviewFailover,
    pub servers: usize,
    pub servers_down: usize,
    pub proxies: usize,
    /// Proxies online (in pushes) whose last health check answered.
    pub proxies_online: usize,
    /// Proxies lost (registration gone, or not answering), fenced and draining.
    pub proxies_lost: usize,
    pub proxies_fenced: usize,
    pub proxies_draining: usize,
    pub slots_assigned: usize,
    pub slots_unassigned: usize,
    /// Commands per second over every proxy (up to a second old: `GET /api/stats`).
    pub ops_per_sec: u64,
    /// Key prefixes routed to other clusters.
    pub routes: Vec<RouteRef>,
    /// The masters' memory and keys, as their last health checks reported them.
    pub memory_bytes: u64,
    pub keys: u64,
}

/// The dashboard serving a cluster: where, which process, since when (the overview's
/// `dashboard`, and the console's view of each cluster's dashboard).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DashboardSummary {
    /// HTTP address of its API.
    pub admin_addr: String,
    pub pid: u32,
    pub host: String,
    pub version: String,
    pub start_unix: u64,
}

/// Automatic failover at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OverviewFailover {
    pub enabled: bool,
    pub max_lag_bytes: u64,
    /// Down groups that are not failing over, and why.
    pub not_failing_over: Vec<GroupStatus>,
    /// The newest failover, if any.
    #[schema(required = true)]
    pub last: Option<FailoverEvent>,
}

// === groups and servers ===

/// A replica group and its servers (`GET /api/groups`, and the answer of every change to
/// a group).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupView {
    pub id: GroupId,
    /// Slots the group owns.
    pub slots: usize,
    /// Its master failed `down_after` checks in a row; its slots answer an error.
    pub down: bool,
    /// Its servers speak TLS only (docs/tls.md).
    pub tls: bool,
    /// The master first, then the replicas.
    pub servers: Vec<ServerView>,
    /// While down: why automatic failover is not (yet) replacing the master.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<GroupStatus>,
}

/// A server's place in its group, as the topology has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServerRole {
    Master,
    Replica,
}

/// A server and what its last health check found.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ServerView {
    pub addr: String,
    pub role: ServerRole,
    /// Its last check answered.
    pub up: bool,
    /// The role it reports itself (`ROLE`): `master`, or `replica` (Redis says `slave`).
    #[schema(required = true)]
    pub role_reported: Option<String>,
    /// `master_link_status`, for a replica.
    #[schema(required = true)]
    pub master_link: Option<String>,
    #[schema(required = true)]
    pub repl_offset: Option<i64>,
    #[schema(required = true)]
    pub memory_bytes: Option<u64>,
    #[schema(required = true)]
    pub keys: Option<u64>,
    /// Why its last check failed.
    #[schema(required = true)]
    pub error: Option<String>,
    /// A replica: the master's last known offset minus its own, never below 0 (read by
    /// separate checks, a replica can be seen ahead of its master's offset: no lag).
    #[schema(required = true)]
    pub lag_bytes: Option<i64>,
}

/// `POST /api/groups`: every field optional.
///
/// ```text
/// {"id": 3, "tls": true}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct CreateGroup {
    /// The group's id; absent: the next free one.
    pub id: Option<u32>,
    /// The group's servers speak TLS only (docs/tls.md).
    #[serde(default)]
    pub tls: bool,
}

/// `POST /api/groups/{id}/servers`.
///
/// ```text
/// {"addr": "127.0.0.1:7003"}     {"addr": "10.0.0.7:6379", "user": "default", "password": "…"}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AddServer {
    /// The server, `host:port`.
    pub addr: String,
    /// For a server with a password: a login of it that may create users (`user` defaults
    /// to `default`), used once to create the control plane's user, never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// `POST /api/groups/{id}/promote`: the replica to make the master.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Promote {
    pub addr: String,
}

// === slots ===

/// Where a slot's migration stands. Persisted at every step, so a dashboard killed at any
/// point is replaced by one that resumes from here (`tessera_control::migrate::machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActionState {
    /// Waiting for room under the per-group cap.
    Pending,
    /// Its keys are being copied to the target while the source serves it.
    Copying,
    /// Held in every proxy for its handoff.
    Handoff,
    /// Its owner is settled (`SlotView::group`); the other group's copies are being deleted.
    Cleanup,
    // Written by dashboards before migration v3 (docs/migration.md, "Upgrading"):
    /// Blocked in every proxy; no key moved yet. Resumed as a handoff to release.
    Preparing,
    /// Routed to the target, keys split between the groups: only the dashboard that started
    /// it can finish it.
    Prepared,
    /// As `Prepared`, with its mover running.
    Migrating,
    /// Every key on the target, its owner push under way. Resumed as a cleanup.
    Finished,
}

/// A migration of one slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SlotAction {
    pub state: ActionState,
    pub source: GroupId,
    pub target: GroupId,
    /// An abort turned it back to its source.
    #[serde(default)]
    #[schema(required = true)]
    pub aborting: bool,
}

impl SlotAction {
    /// Proxies hold the slot's commands.
    pub fn blocks(&self) -> bool {
        matches!(self.state, ActionState::Handoff | ActionState::Preparing)
    }

    /// A migration a dashboard before v3 left half-way, which this one cannot finish.
    pub fn is_legacy_mid_move(&self) -> bool {
        matches!(self.state, ActionState::Prepared | ActionState::Migrating)
    }
}

/// One of the 1024 slots (`GET /api/slots`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlotView {
    pub id: u16,
    /// The owner; `null`: unassigned.
    #[schema(required = true)]
    pub group: Option<GroupId>,
    /// Its migration, while it moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<SlotAction>,
}

/// `POST /api/slots/assign`: unassigned slots `from..=to` to `group`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AssignSlots {
    pub from: u32,
    pub to: u32,
    pub group: u32,
}

/// The answer of `POST /api/slots/assign`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Assigned {
    /// The topology epoch every online proxy acknowledged.
    pub epoch: u64,
    /// Slots newly assigned (those the group owned already are not counted).
    pub assigned: usize,
}

// === proxies ===

/// Whether a registered proxy takes part in topology pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProxyState {
    /// Receives topology pushes and is counted in barriers.
    Online,
    /// Registered, but left out of pushes (an operator took it out).
    Offline,
}

/// How a proxy is, as the dashboard last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProxyHealthState {
    /// Registered, answering, serving.
    Up,
    /// Answering, but refusing commands: it could not renew its registration in time.
    Fenced,
    /// Its registration is gone, or it does not answer its health check (frozen, crashed,
    /// cut off). Listed until it comes back or an operator removes it.
    Lost,
    /// Shutting down: finishing its in-flight commands.
    Draining,
}

/// A proxy the dashboard knows, registered or lost, and what its last health check found
/// (`GET /api/proxies`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyView {
    /// Its registration token (names it in the API; not a secret).
    pub token: String,
    /// The RESP address clients connect to.
    pub addr: String,
    /// Its admin API (`--admin-listen`).
    pub admin_addr: String,
    pub pid: u32,
    pub host: String,
    pub start_unix: u64,
    pub state: ProxyState,
    /// Its last health check answered.
    pub up: bool,
    /// The topology epoch it routes with.
    #[schema(required = true)]
    pub epoch: Option<u64>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Up, fenced, lost or draining.
    pub health: ProxyHealthState,
    /// Its registration is in the store now.
    pub registered: bool,
}

// === stats ===

/// `GET /api/stats`: every registered proxy's stats and their sums (at most a second old).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    pub ops_per_sec: u64,
    pub ops_total: u64,
    pub errors_total: u64,
    pub sessions: usize,
    /// Per command, summed over the proxies, most called first.
    pub commands: Vec<CommandCount>,
    pub proxies: Vec<ProxyStatsEntry>,
}

/// One proxy's stats, or why they could not be read.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ProxyStatsEntry {
    Answered(ProxyStats),
    Unreachable(ProxyUnreachable),
}

/// A proxy that did not answer a call of the dashboard, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyUnreachable {
    pub token: String,
    pub error: String,
}
