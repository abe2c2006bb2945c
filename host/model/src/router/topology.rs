//! The topology a dashboard pushes to its proxies: every slot's group, every group's master
//! and health, stamped with an epoch. A proxy turns it into a `SlotTable` and swaps it in.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::prefix::{PrefixRoute, RouteTargets, check_bounds};
use super::replicas::{ReadPolicy, ReplicaRegistry};
use super::{GroupId, SLOTS, SlotId, SlotTable, SlotTableBuilder};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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

/// A proxy's acknowledgement of a pushed topology: its registration token and the epoch it
/// now routes with (and for which no command routed the old way is still in flight).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MastersSeen {
    pub token: String,
    pub epoch: u64,
    pub masters: Vec<MasterSeen>,
}

/// One master, probed from this proxy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MasterSeen {
    pub group: u32,
    pub addr: String,
    /// It answered a PING (any reply, `-NOAUTH` included: the process is alive) in time.
    pub reachable: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub rtt_us: Option<u64>,
}

/// A whole routing state. `slots[i]` is slot `i`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("expected {SLOTS} slots, got {0}")]
    SlotCount(usize),
    #[error("slot {slot} names group {group}, which is not in the topology")]
    UnknownGroup { slot: u16, group: GroupId },
    #[error("prefix routes: {0}")]
    Routes(String),
    #[error(
        "slot {0} is mid-move under a dashboard older than migration v3; finish or abort that \
         migration with it before upgrading"
    )]
    PreV3Move(u16),
}

impl Topology {
    /// Builds the routing table.
    ///
    /// # Errors
    /// A topology that does not describe every slot, or names a group it does not list.
    pub fn to_table(&self) -> Result<SlotTable, TopologyError> {
        self.to_table_with(&ReplicaRegistry::default(), &RouteTargets::default())
    }

    /// Builds the routing table, its replicas' freshness kept in `registry` (a proxy's
    /// router's, which its probes update; [`Topology::to_table`]'s own is never proven, so
    /// every read goes to the master), and its prefix routes to the targets in `targets`.
    ///
    /// # Errors
    /// As [`Topology::to_table`], and prefix routes out of bounds.
    pub fn to_table_with(
        &self,
        registry: &ReplicaRegistry,
        targets: &RouteTargets,
    ) -> Result<SlotTable, TopologyError> {
        if self.slots.len() != SLOTS {
            return Err(TopologyError::SlotCount(self.slots.len()));
        }
        check_bounds(&self.routes).map_err(TopologyError::Routes)?;
        let groups: HashMap<GroupId, &GroupRoute> = self.groups.iter().map(|g| (g.id, g)).collect();
        let mut b = SlotTableBuilder::default();
        for g in self.groups.iter().filter(|g| g.down) {
            b.group_down(g.id);
        }
        b.read_policy(self.read);
        for r in &self.routes {
            let index = targets.slot_index(&r.prefix).ok_or_else(|| {
                TopologyError::Routes(format!(
                    "this proxy has routed {} distinct prefixes since it started, the most it \
                     keeps apart; restart it to route {:?}",
                    super::prefix::MAX_PREFIX_SLOTS,
                    r.prefix
                ))
            })?;
            b.prefix_route(&r.prefix, index, &r.cluster, targets.get(&r.prefix));
        }
        // Every group gets a set, empty or not: under `replica-only` a group without a
        // replica refuses reads like one whose replicas are all stale.
        for g in &self.groups {
            b.replicas(g.id, &g.replicas, registry);
        }
        for (i, s) in self.slots.iter().enumerate() {
            let Some(gid) = s.group else { continue };
            let g = groups.get(&gid).ok_or(TopologyError::UnknownGroup {
                slot: i as u16,
                group: gid,
            })?;
            if s.from.is_some() {
                return Err(TopologyError::PreV3Move(i as u16));
            }
            if let Some(master) = &g.master {
                b.assign(SlotId(i as u16), gid, master);
                if s.blocked {
                    b.blocked(SlotId(i as u16));
                }
            }
        }
        Ok(b.build(self.epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_tls_is_optional_on_the_wire_both_ways() {
        // A topology from before TLS existed parses as plain …
        let old: GroupRoute = serde_json::from_str(r#"{"id":1,"master":"a:1"}"#).unwrap();
        assert!(!old.tls);
        // … a plain group is written as before (older proxies parse it unchanged) …
        let plain = serde_json::to_string(&old).unwrap();
        assert!(!plain.contains("tls"), "{plain}");
        // … and a TLS group says so.
        let tls = GroupRoute { tls: true, ..old };
        let back: GroupRoute = serde_json::from_str(&serde_json::to_string(&tls).unwrap()).unwrap();
        assert!(back.tls);
    }

    #[test]
    fn topology_becomes_a_table_with_down_groups_marked() {
        let mut slots = vec![SlotRoute::default(); SLOTS];
        slots[0].group = Some(GroupId(1));
        slots[1].group = Some(GroupId(2));
        let t = Topology {
            epoch: 7,
            groups: vec![
                GroupRoute {
                    id: GroupId(1),
                    master: Some("a:1".into()),
                    down: false,
                    tls: false,
                    replicas: vec![],
                },
                GroupRoute {
                    id: GroupId(2),
                    master: Some("b:2".into()),
                    down: true,
                    tls: false,
                    replicas: vec![],
                },
            ],
            slots,
            read: Default::default(),
            routes: vec![],
        };
        let table = t.to_table().unwrap();
        assert_eq!(table.epoch, 7);
        assert!(!table.slot(SlotId(0)).down);
        assert!(table.slot(SlotId(1)).down);
        assert_eq!(table.slot(SlotId(2)).master, None);
        let bad = Topology {
            slots: vec![
                SlotRoute {
                    group: Some(GroupId(9)),
                    from: None,
                    blocked: false,
                };
                SLOTS
            ],
            ..t
        };
        assert!(matches!(
            bad.to_table(),
            Err(TopologyError::UnknownGroup { .. })
        ));
        // A slot mid-move under a dashboard before v3 (proxies moved keys as they touched
        // them): routing it to either side would miss keys, so the topology is refused.
        let mut old = bad.clone();
        old.slots = vec![
            SlotRoute {
                group: Some(GroupId(1)),
                ..Default::default()
            };
            SLOTS
        ];
        old.slots[3].from = Some(GroupId(2));
        assert!(matches!(old.to_table(), Err(TopologyError::PreV3Move(3))));
    }
}
