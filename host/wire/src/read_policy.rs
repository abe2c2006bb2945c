//! Replica reads' shapes (docs/replica-reads.md): the cluster's read policy (stored, pushed
//! with the topology, changed with `PUT /api/read-policy`), the dashboard's view of it with
//! every replica's health, and what one proxy's probes last proved of its replicas.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::group::GroupId;

/// Where read-only commands go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMode {
    /// Every command to the master (as without replica reads).
    #[default]
    Master,
    /// To a fresh replica when the group has one, else to the master.
    PreferReplica,
    /// To a fresh replica only; with none, the read fails with `-TRYAGAIN`.
    ReplicaOnly,
}

impl ReadMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadMode::Master => "master",
            ReadMode::PreferReplica => "prefer-replica",
            ReadMode::ReplicaOnly => "replica-only",
        }
    }
}

/// A cluster's read policy, stored with the cluster and pushed with its topology.
///
/// ```text
/// {"mode": "prefer-replica", "max_lag_ms": 500}
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReadPolicy {
    #[serde(default)]
    pub mode: ReadMode,
    /// A replica read never returns a value older than the one acknowledged this long
    /// before the read reached the proxy.
    #[serde(default = "default_max_lag_ms")]
    pub max_lag_ms: u64,
}

/// The bound when none is given.
pub const DEFAULT_MAX_LAG_MS: u64 = 1000;
/// How often a proxy probes every master and replica while replica reads are on. A bound
/// must exceed it (plus the replication delay) for a replica ever to be fresh.
pub const PROBE_INTERVAL_MS: u64 = 100;
/// The smallest bound accepted: two probe intervals.
pub const MIN_MAX_LAG_MS: u64 = 2 * PROBE_INTERVAL_MS;
/// The largest bound accepted (one hour).
pub const MAX_MAX_LAG_MS: u64 = 3_600_000;

fn default_max_lag_ms() -> u64 {
    DEFAULT_MAX_LAG_MS
}

impl Default for ReadPolicy {
    fn default() -> Self {
        Self {
            mode: ReadMode::Master,
            max_lag_ms: DEFAULT_MAX_LAG_MS,
        }
    }
}

impl ReadPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// # Errors
    /// A bound outside `MIN_MAX_LAG_MS..=MAX_MAX_LAG_MS`, worded for the operator.
    pub fn validate(&self) -> Result<(), String> {
        if !(MIN_MAX_LAG_MS..=MAX_MAX_LAG_MS).contains(&self.max_lag_ms) {
            return Err(format!(
                "max_lag_ms must be between {MIN_MAX_LAG_MS} (two probe intervals of \
                 {PROBE_INTERVAL_MS} ms) and {MAX_MAX_LAG_MS}, not {}",
                self.max_lag_ms
            ));
        }
        Ok(())
    }
}

/// A change of the policy (`PUT /api/read-policy`); fields not given stay as they are.
///
/// ```text
/// {"mode": "prefer-replica", "max_lag_ms": 500}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadPolicyChange {
    pub mode: Option<ReadMode>,
    pub max_lag_ms: Option<u64>,
}

/// The policy, and each replica as the dashboard's health checks and the proxies' own probes
/// last saw it (`GET /api/read-policy`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReadPolicyView {
    pub policy: ReadPolicy,
    pub replicas: Vec<ReplicaView>,
    /// Registered proxies that told what their probes proved (`GET /api/proxy/replicas`).
    #[serde(default)]
    #[schema(required = true)]
    pub proxies: usize,
    /// The RESP addresses of registered proxies that did not answer.
    #[serde(default)]
    #[schema(required = true)]
    pub unreachable: Vec<String>,
}

/// One replica as the dashboard's health checks and the proxies' probes last saw it.
///
/// ```text
/// {"group": 1, "addr": "10.0.0.6:6379", "up": true, "link": "up", "lag_bytes": 120,
///  "fresh_on": 2, "proven_ms_ago": 180}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReplicaView {
    pub group: GroupId,
    pub addr: String,
    /// Its last health check answered.
    pub up: bool,
    /// `master_link_status` (`up`, `down`), as it reported it.
    #[schema(required = true)]
    pub link: Option<String>,
    /// The master's last known offset minus the replica's.
    #[schema(required = true)]
    pub lag_bytes: Option<i64>,
    /// Answering proxies that would send a read to it now: their probes proved it within
    /// the policy's `max_lag_ms` (0 while reads go to masters: nothing is probed).
    #[serde(default)]
    #[schema(required = true)]
    pub fresh_on: usize,
    /// The oldest of the answering proxies' proofs, in ms: the replica was at least as
    /// fresh as its master that long ago, in the sense `max_lag_ms` bounds
    /// (docs/replica-reads.md); `null` when no proxy holds a proof: never proven, or
    /// revoked (a probe failed, its master changed).
    #[serde(default)]
    #[schema(required = true)]
    pub proven_ms_ago: Option<u64>,
}

/// What one proxy knows of its replicas now (`GET /api/proxy/replicas`).
///
/// ```text
/// {"policy": {"mode": "prefer-replica", "max_lag_ms": 500},
///  "replicas": [{"group": 1, "addr": "10.0.0.6:6379", "fresh": true, "proven_ms_ago": 130}]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReplicasSeen {
    pub policy: ReadPolicy,
    pub replicas: Vec<ReplicaSeen>,
}

/// One replica, as this proxy's probes last proved it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReplicaSeen {
    pub group: GroupId,
    pub addr: String,
    /// A read routed now may go to it.
    pub fresh: bool,
    /// How long ago the master probe it was last proven against was sent; `None`: never,
    /// or revoked.
    #[schema(required = true)]
    pub proven_ms_ago: Option<u64>,
}
