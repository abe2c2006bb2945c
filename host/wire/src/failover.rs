//! Automatic failover's shapes (docs/failover.md): its settings (stored, and changed with
//! `PUT /api/failover`), a promotion decided and pending, servers to rejoin, completed
//! failovers, why a down group is not failing over, and `GET /api/failover`'s view.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::group::GroupId;

/// Settings of automatic failover, per cluster.
///
/// ```text
/// {"enabled": false, "max_lag_bytes": 1048576, "quorum": 0, "down_after_checks": 3,
///  "cooldown_secs": 60}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailoverSettings {
    /// Off unless an admin turns it on.
    #[serde(default)]
    #[schema(required = true)]
    pub enabled: bool,
    /// The most replication stream (bytes) the promoted replica may lack of what the old
    /// master had at its last check: the bound on acknowledged writes lost.
    #[serde(default = "default_max_lag")]
    #[schema(required = true)]
    pub max_lag_bytes: u64,
    /// Online proxies that must see the master down; 0: a majority of them.
    #[serde(default)]
    #[schema(required = true)]
    pub quorum: u32,
    /// Consecutive failed checks of the master before failover is considered.
    #[serde(default = "default_down_after")]
    #[schema(required = true)]
    pub down_after_checks: u32,
    /// Seconds after a failover of a group before another one of it.
    #[serde(default = "default_cooldown")]
    #[schema(required = true)]
    pub cooldown_secs: u64,
}

fn default_max_lag() -> u64 {
    1 << 20
}
fn default_down_after() -> u32 {
    3
}
fn default_cooldown() -> u64 {
    60
}

impl Default for FailoverSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            max_lag_bytes: default_max_lag(),
            quorum: 0,
            down_after_checks: default_down_after(),
            cooldown_secs: default_cooldown(),
        }
    }
}

impl FailoverSettings {
    /// The ranges [`FailoverChange`] documents.
    ///
    /// # Errors
    /// The first field out of its range, worded for the operator.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.down_after_checks) {
            return Err(format!(
                "down_after_checks must be 1-100, not {}",
                self.down_after_checks
            ));
        }
        if self.quorum > 1000 {
            return Err(format!(
                "quorum must be 0 (a majority of the online proxies) to 1000, not {}",
                self.quorum
            ));
        }
        if self.cooldown_secs > 86_400 {
            return Err(format!(
                "cooldown_secs must be at most 86400 (a day), not {}",
                self.cooldown_secs
            ));
        }
        if self.max_lag_bytes > 1 << 40 {
            return Err(format!(
                "max_lag_bytes must be at most 2^40, not {}",
                self.max_lag_bytes
            ));
        }
        Ok(())
    }
}

/// A change of the settings (`PUT /api/failover`): the fields given are set. Ranges:
/// `down_after_checks` 1-100, `quorum` 0-1000, `cooldown_secs` at most 86400,
/// `max_lag_bytes` at most 2^40.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailoverChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_after_checks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_secs: Option<u64>,
}

/// A promotion decided and persisted before acting: a dashboard that dies midway leaves it
/// in the store, and its successor completes it (never picks another replica meanwhile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Pending {
    pub group: GroupId,
    pub from: String,
    pub to: String,
    pub offset: i64,
    pub lag_bytes: i64,
    pub votes: usize,
    pub proxies: usize,
    pub decided_ms: u64,
    /// From the master's first failed check to the decision (this dashboard's clock).
    #[serde(default)]
    #[schema(required = true)]
    pub detect_ms: Option<u64>,
}

/// A server to make a replica of its group's master once it answers again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Rejoin {
    pub group: GroupId,
    pub addr: String,
}

/// A completed failover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailoverEvent {
    pub time_ms: u64,
    pub group: GroupId,
    pub old_master: String,
    pub new_master: String,
    /// The new master's offset and how far it was behind the old master's last known one.
    pub offset: i64,
    pub lag_bytes: i64,
    /// Proxies that saw the old master down, of those online.
    pub votes: usize,
    pub proxies: usize,
    /// From the master's first failed check to the new topology acknowledged by every proxy
    /// (`None` when a successor dashboard completed it).
    #[serde(default)]
    #[schema(required = true)]
    pub failover_ms: Option<u64>,
    #[serde(default)]
    #[schema(required = true)]
    pub detect_ms: Option<u64>,
    /// Completed by a dashboard other than the one that decided it.
    #[serde(default)]
    #[schema(required = true)]
    pub resumed: bool,
}

/// Whether a down group may still fail over by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FailoverState {
    /// Automatic failover is off.
    Off,
    /// It may still happen by itself (confirming, a cooldown, a quorum not reached yet).
    Waiting,
    /// It will not without a change: an operator's decision, a replica catching up, the
    /// master returning.
    Refused,
}

/// Why a down group is not failing over (yet), as `GET /api/failover` and the group show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupStatus {
    pub group: GroupId,
    pub master: String,
    pub state: FailoverState,
    /// Stable word for the cause: `off`, `confirming`, `cooldown`, `migration`,
    /// `unknown_offset`, `no_replica`, `lag`, `quorum`, `promote_failed`.
    pub kind: String,
    pub reason: String,
    pub since_ms: u64,
}

/// `GET /api/failover` (and the answer of `PUT`): settings, why down groups are not failing
/// over, a pending promotion, servers to rejoin, recent failovers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FailoverView {
    pub settings: FailoverSettings,
    /// Down groups that are not failing over, and why.
    pub groups: Vec<GroupStatus>,
    #[schema(required = true)]
    pub pending: Option<Pending>,
    pub rejoin: Vec<Rejoin>,
    /// Newest first, the last 20.
    pub events: Vec<FailoverEvent>,
}
