//! Rebalances: the plan (by slot count, by weight, by measured load or by memory) and its
//! queueing as slot migrations. Planning is `migrate::plan` and `migrate::measure`'s; this
//! gathers their inputs and checks that the cluster may move.

use std::collections::BTreeMap;

use tracing::info;

use super::Dashboard;
use super::slot_stats::Measure;
use crate::Error;
use crate::migrate::measure::rebalance_by_measure;
use crate::migrate::plan::{self, Move};
use tessera_model::router::GroupId;
use tessera_wire::migration::{JobKind, RebalanceAnswer, RebalanceBy};

/// A planned (or queued) rebalance and each group's measure before and after it.
#[derive(Debug, Clone)]
pub struct RebalancePlan {
    pub by: RebalanceBy,
    /// ±fraction of the mean the plan aims within (load and memory only).
    pub tolerance: Option<f64>,
    pub moves: Vec<Move>,
    pub before: BTreeMap<GroupId, f64>,
    pub after: BTreeMap<GroupId, f64>,
    pub notes: Vec<String>,
}

impl RebalancePlan {
    /// The plan as the API answers it: tolerance in percent, the slots counted.
    pub fn answer(self, dry_run: bool) -> RebalanceAnswer {
        RebalanceAnswer {
            dry_run,
            by: Some(self.by),
            slots: self.moves.len(),
            moves: self.moves,
            tolerance: self.tolerance.map(|t| t * 100.0),
            before: Some(self.before),
            after: Some(self.after),
            notes: Some(self.notes),
        }
    }
}

impl Dashboard {
    /// Plans (and unless `dry_run`, queues) a rebalance.
    ///
    /// # Errors
    /// 409 while a migration is in progress, or before the measure has been sampled; 404 a
    /// weight for an unknown group; 400 `weight` without weights.
    pub async fn rebalance(
        &self,
        by: RebalanceBy,
        weights: Option<BTreeMap<GroupId, u32>>,
        tolerance: f64,
        dry_run: bool,
        by_who: &str,
    ) -> Result<RebalancePlan, Error> {
        let _ops = self.ops.lock().await;
        let (groups, slots) = {
            let st = self.state.lock().expect("state lock poisoned");
            let groups: Vec<GroupId> = st
                .groups
                .values()
                .filter(|g| g.master().is_some())
                .map(|g| g.id)
                .collect();
            (groups, st.slots.clone())
        };
        if !dry_run && slots.iter().any(|s| s.action.is_some()) {
            return Err(Error::conflict(
                "a migration is in progress: wait for it or abort it first",
            ));
        }
        let owners: Vec<Option<GroupId>> = slots.iter().map(|s| s.group).collect();
        let plan = match by {
            RebalanceBy::Slots | RebalanceBy::Weight => {
                let weights = match weights {
                    Some(w) => {
                        if let Some(g) = w.keys().find(|g| !groups.contains(g)) {
                            return Err(Error::not_found(format!(
                                "group {g} does not exist or has no server"
                            )));
                        }
                        w
                    }
                    None if by == RebalanceBy::Weight => {
                        return Err(Error::invalid(
                            "a rebalance by weight needs weights (GROUP=WEIGHT)",
                        ));
                    }
                    None => groups.iter().map(|&g| (g, 1)).collect(),
                };
                let moves = plan::rebalance(&owners, &weights);
                let before = slot_counts(&owners, &groups);
                let mut after = owners.clone();
                for m in &moves {
                    after[m.slot as usize] = Some(m.to);
                }
                RebalancePlan {
                    by,
                    tolerance: None,
                    before,
                    after: slot_counts(&after, &groups),
                    moves,
                    notes: Vec::new(),
                }
            }
            RebalanceBy::Load | RebalanceBy::Memory => {
                let m = if by == RebalanceBy::Load {
                    Measure::Load
                } else {
                    Measure::Memory
                };
                let measure = self.slot_measure(m)?;
                let p = rebalance_by_measure(&owners, &measure, &groups, tolerance);
                RebalancePlan {
                    by,
                    tolerance: Some(tolerance),
                    moves: p.moves,
                    before: p.before,
                    after: p.after,
                    notes: p.notes,
                }
            }
        };
        if !dry_run {
            self.queue(&plan.moves, JobKind::Rebalance, by_who).await?;
            info!(slots = plan.moves.len(), by = ?by, "rebalance queued");
        }
        Ok(plan)
    }
}

impl Dashboard {
    /// Queues moves planned earlier (a plan shown to an operator, then confirmed), as they
    /// are: each slot must still be owned by its move's `from` group and not be moving.
    ///
    /// # Errors
    /// 409 when the cluster changed since the plan, or a migration is in progress; 404 a
    /// target group that does not exist or has no server.
    pub async fn queue_planned(&self, moves: &[Move], by: &str) -> Result<(), Error> {
        let _ops = self.ops.lock().await;
        {
            let st = self.state.lock().expect("state lock poisoned");
            if st.slots.iter().any(|s| s.action.is_some()) {
                return Err(Error::conflict(
                    "a migration is in progress: wait for it or abort it first",
                ));
            }
            for m in moves {
                let owner = st.slots.get(m.slot as usize).and_then(|s| s.group);
                if owner != Some(m.from) {
                    return Err(Error::conflict(format!(
                        "the cluster changed since the plan: slot {} is no longer group {}'s; plan again",
                        m.slot, m.from
                    )));
                }
                if st.groups.get(&m.to).and_then(|g| g.master()).is_none() {
                    return Err(Error::not_found(format!(
                        "group {} does not exist or has no server",
                        m.to
                    )));
                }
            }
        }
        self.queue(moves, JobKind::Rebalance, by).await?;
        info!(slots = moves.len(), "planned rebalance queued");
        Ok(())
    }
}

/// Slots held per group (every group listed, 0 included).
fn slot_counts(owners: &[Option<GroupId>], groups: &[GroupId]) -> BTreeMap<GroupId, f64> {
    let mut out: BTreeMap<GroupId, f64> = groups.iter().map(|&g| (g, 0.0)).collect();
    for g in owners.iter().flatten() {
        *out.entry(*g).or_default() += 1.0;
    }
    out
}
