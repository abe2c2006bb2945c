//! The topology a dashboard pushes to its proxies (`PUT /api/proxy/topology`): every slot's
//! group, every group's master and health, the read policy and prefix routes, stamped with an
//! epoch; the proxy's acknowledgement; and what a proxy sees of its masters. Turning a
//! topology into a routing table is `tessera_model::router`'s.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::group::GroupId;
use crate::read_policy::ReadPolicy;
use crate::routes::PrefixRoute;

/// One group as the proxies route to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupRoute {
    pub id: GroupId,
    /// `None` while the group has no server.
    pub master: Option<String>,
    #[serde(default)]
    pub down: bool,
    /// The group's servers speak TLS only (absent: plain, as before TLS existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// The group's replicas (its servers after the master), for reads under the read policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
}

/// One slot as the proxies route it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct SlotRoute {
    pub group: Option<GroupId>,
    /// Written only by dashboards before migration v3, for a slot whose keys proxies moved
    /// as they touched them. Such a topology is refused (`TopologyError::PreV3Move`): finish
    /// or abort those moves with the old dashboard before upgrading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<GroupId>,
    /// First phase of a migration's barrier: the slot is served by no proxy (-TRYAGAIN)
    /// until every proxy has it blocked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocked: bool,
}

/// A whole routing state. `slots[i]` is slot `i` (1024 of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Topology {
    pub epoch: u64,
    pub groups: Vec<GroupRoute>,
    pub slots: Vec<SlotRoute>,
    /// Where read-only commands go (absent: every read to the master).
    #[serde(default, skip_serializing_if = "ReadPolicy::is_default")]
    pub read: ReadPolicy,
    /// Key prefixes routed to other clusters (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<PrefixRoute>,
}

/// A proxy's acknowledgement of a pushed topology: its registration token and the epoch it
/// now routes with (and for which no command routed the old way is still in flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PushAck {
    pub token: String,
    pub epoch: u64,
}

/// What one proxy sees of the masters of its topology, at the moment it is asked (its
/// admin API's answer, read by the dashboard's automatic failover).
///
/// ```text
/// GET /api/proxy/masters?group=1
/// {"token": "p-1", "epoch": 12,
///  "masters": [{"group": 1, "addr": "10.0.0.5:6379", "reachable": false,
///               "error": "connection refused", "rtt_us": null}]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MastersSeen {
    pub token: String,
    pub epoch: u64,
    pub masters: Vec<MasterSeen>,
}

/// One master, probed from this proxy.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MasterSeen {
    pub group: u32,
    pub addr: String,
    /// It answered a PING (any reply, `-NOAUTH` included: the process is alive) in time.
    pub reachable: bool,
    #[serde(default)]
    #[schema(required = true)]
    pub error: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub rtt_us: Option<u64>,
}

/// The query of `GET /api/proxy/masters`: one group's master, or every master when absent.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MastersQuery {
    pub group: Option<u32>,
}
