//! Rebalance by a measure (load in ops/s, or memory): which slots move where so that every
//! group's share of the measure is within a tolerance of the mean, moving few slots. Pure and
//! deterministic; the dashboard supplies the per-slot measure and executes the plan.

use std::collections::BTreeMap;

use serde::Serialize;

use super::plan::Move;
use tessera_model::router::{GroupId, SLOTS};

/// At most this many slots move in one plan (the greedy loop's bound).
pub const MAX_MOVES: usize = 512;

/// A plan and what it does to each group's total of the measure.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MeasurePlan {
    pub moves: Vec<Move>,
    /// Each group's total before and after the moves.
    pub before: BTreeMap<GroupId, f64>,
    pub after: BTreeMap<GroupId, f64>,
    /// Why the plan stops short of the tolerance, when it does.
    pub notes: Vec<String>,
}

/// Plans moves that bring every group in `groups` within `tolerance` (0.1 = ±10 %) of the
/// mean of `measure` (per slot, 1024 entries) over the groups.
///
/// Greedy: the group furthest above the mean gives the coldest group the slot whose measure
/// is nearest half their gap (strictly less than the gap, so the pair ends closer); ties go
/// to the lower group id and the lower slot. A group whose every slot is too big to close
/// its gap without overshooting (a single hot slot cannot be split) is left as it is, with a
/// note. Slots of groups not in `groups`, unassigned slots and slots measuring 0 never move.
pub fn rebalance_by_measure(
    owners: &[Option<GroupId>],
    measure: &[f64],
    groups: &[GroupId],
    tolerance: f64,
) -> MeasurePlan {
    debug_assert_eq!(owners.len(), SLOTS);
    let mut load: BTreeMap<GroupId, f64> = groups.iter().map(|&g| (g, 0.0)).collect();
    let mut held: BTreeMap<GroupId, Vec<u16>> = BTreeMap::new();
    for (slot, owner) in owners.iter().enumerate() {
        let Some(g) = owner else { continue };
        if let Some(l) = load.get_mut(g) {
            let m = measure.get(slot).copied().unwrap_or(0.0).max(0.0);
            *l += m;
            held.entry(*g).or_default().push(slot as u16);
        }
    }
    let mut plan = MeasurePlan {
        before: load.clone(),
        ..MeasurePlan::default()
    };
    let total: f64 = load.values().sum();
    if load.len() < 2 || total <= 0.0 {
        plan.after = load;
        return plan;
    }
    let mean = total / load.len() as f64;
    let (high, low) = (mean * (1.0 + tolerance), mean * (1.0 - tolerance));
    let mut stuck: Vec<GroupId> = Vec::new();
    while plan.moves.len() < MAX_MOVES {
        let Some(hot) = extreme(&load, &stuck, true) else {
            break;
        };
        let cold = extreme(&load, &[], false).expect("at least two groups");
        let (lh, lc) = (load[&hot], load[&cold]);
        if (lh <= high && lc >= low) || hot == cold {
            break;
        }
        let gap = lh - lc;
        let slots = held.get_mut(&hot).expect("a loaded group holds slots");
        let best = slots
            .iter()
            .enumerate()
            .map(|(i, &s)| (i, s, measure[s as usize]))
            .filter(|&(_, _, m)| m > 0.0 && m < gap)
            .min_by(|a, b| {
                let (da, db) = ((a.2 - gap / 2.0).abs(), (b.2 - gap / 2.0).abs());
                da.total_cmp(&db).then(a.1.cmp(&b.1))
            });
        let Some((i, slot, m)) = best else {
            if let Some(&big) = slots
                .iter()
                .max_by(|a, b| measure[**a as usize].total_cmp(&measure[**b as usize]))
            {
                plan.notes.push(format!(
                    "group {hot} stays at {:.0} % of the mean: its slot {big} alone carries {:.0} % \
                     of the total, and a slot cannot be split",
                    100.0 * lh / mean,
                    100.0 * measure[big as usize] / total
                ));
            }
            stuck.push(hot);
            continue;
        };
        slots.remove(i);
        held.entry(cold).or_default().push(slot);
        *load.get_mut(&hot).expect("hot is a group") -= m;
        *load.get_mut(&cold).expect("cold is a group") += m;
        plan.moves.push(Move {
            slot,
            from: hot,
            to: cold,
        });
    }
    if plan.moves.len() >= MAX_MOVES {
        plan.notes.push(format!(
            "stopped at {MAX_MOVES} moves: run the rebalance again once they are done"
        ));
    }
    plan.moves.sort_by_key(|m| m.slot);
    plan.after = load;
    plan
}

/// The group with the highest (or lowest) total, not in `skip`; ties to the lower id.
fn extreme(load: &BTreeMap<GroupId, f64>, skip: &[GroupId], highest: bool) -> Option<GroupId> {
    let mut best: Option<(GroupId, f64)> = None;
    for (&g, &l) in load {
        if skip.contains(&g) {
            continue;
        }
        let better = match best {
            None => true,
            Some((_, b)) if highest => l > b,
            Some((_, b)) => l < b,
        };
        if better {
            best = Some((g, l));
        }
    }
    best.map(|(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots 0..512 to group 1, the rest to group 2.
    fn halves() -> Vec<Option<GroupId>> {
        (0..SLOTS)
            .map(|s| Some(GroupId(if s < 512 { 1 } else { 2 })))
            .collect()
    }

    fn g(ids: &[u32]) -> Vec<GroupId> {
        ids.iter().map(|&i| GroupId(i)).collect()
    }

    fn within(plan: &MeasurePlan, tolerance: f64) -> bool {
        let mean = plan.after.values().sum::<f64>() / plan.after.len() as f64;
        plan.after
            .values()
            .all(|&l| (l - mean).abs() <= mean * tolerance + 1e-9)
    }

    #[test]
    fn skewed_load_moves_hot_slots_until_within_tolerance() {
        let mut m = vec![1.0; SLOTS];
        // 20 hot slots, all on group 1.
        m.iter_mut().take(20).for_each(|v| *v = 100.0);
        let plan = rebalance_by_measure(&halves(), &m, &g(&[1, 2]), 0.1);
        assert!(within(&plan, 0.1), "{:?}", plan.after);
        assert!(plan.moves.iter().all(|mv| mv.from == GroupId(1)));
        assert!(plan.moves.len() <= 12, "few moves: {}", plan.moves.len());
        assert_eq!(plan.before[&GroupId(1)], 2000.0 + 492.0);
        assert!(plan.notes.is_empty());
    }

    #[test]
    fn a_balanced_cluster_needs_no_moves() {
        let plan = rebalance_by_measure(&halves(), &vec![3.0; SLOTS], &g(&[1, 2]), 0.05);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.before, plan.after);
    }

    #[test]
    fn no_measure_means_no_moves() {
        let plan = rebalance_by_measure(&halves(), &vec![0.0; SLOTS], &g(&[1, 2]), 0.1);
        assert!(plan.moves.is_empty());
    }

    #[test]
    fn ties_go_to_the_lower_slot_and_the_lower_group() {
        // Group 1 holds everything, 30 slots at 1.0 each; groups 2 and 3 are empty and tied.
        let owners = vec![Some(GroupId(1)); SLOTS];
        let m: Vec<f64> = (0..SLOTS).map(|s| if s < 30 { 1.0 } else { 0.0 }).collect();
        let a = rebalance_by_measure(&owners, &m, &g(&[1, 2, 3]), 0.01);
        let b = rebalance_by_measure(&owners, &m, &g(&[1, 2, 3]), 0.01);
        assert_eq!(a, b, "deterministic");
        assert_eq!(a.moves[0].slot, 0);
        assert_eq!(
            a.moves[0].to,
            GroupId(2),
            "the lower id of two tied cold groups"
        );
        assert!(within(&a, 0.01));
        assert_eq!(a.moves.len(), 20, "exactly the share of the two others");
    }

    #[test]
    fn a_single_huge_slot_stays_with_a_note() {
        let mut m = vec![1.0; SLOTS];
        m[5] = 10_000.0;
        let plan = rebalance_by_measure(&halves(), &m, &g(&[1, 2]), 0.1);
        assert!(plan.moves.iter().all(|mv| mv.slot != 5));
        assert_eq!(plan.notes.len(), 1, "{:?}", plan.notes);
        assert!(plan.notes[0].contains("slot 5"), "{}", plan.notes[0]);
        // What can move does: group 1's other slots go to group 2.
        assert!(plan.after[&GroupId(1)] < plan.before[&GroupId(1)]);
    }

    #[test]
    fn memory_follows_the_same_rule_across_three_groups() {
        let owners: Vec<Option<GroupId>> = (0..SLOTS)
            .map(|s| Some(GroupId(1 + (s * 3 / SLOTS) as u32)))
            .collect();
        let m: Vec<f64> = (0..SLOTS)
            .map(|s| if s < 342 { 10.0 } else { 1.0 })
            .collect();
        let plan = rebalance_by_measure(&owners, &m, &g(&[1, 2, 3]), 0.1);
        assert!(within(&plan, 0.1), "{:?}", plan.after);
        let moved: f64 = plan.moves.iter().map(|mv| m[mv.slot as usize]).sum();
        assert!((plan.before[&GroupId(1)] - plan.after[&GroupId(1)] - moved).abs() < 1e-6);
    }
}
