//! Rebalance planning: which slots move where so every group ends with its share (even, or
//! by weight), moving as few slots as possible. Pure; the dashboard executes the plan.

use std::collections::BTreeMap;

use tessera_model::router::{GroupId, SLOTS};
pub use tessera_wire::migration::Move;

/// How many slots each group should hold: proportional to its weight (1 each for an even
/// split), largest remainders first, so the quotas sum to the assigned slot count.
pub fn quotas(weights: &BTreeMap<GroupId, u32>, total: usize) -> BTreeMap<GroupId, usize> {
    let sum: u64 = weights.values().map(|&w| w as u64).sum();
    if sum == 0 {
        return weights.keys().map(|&g| (g, 0)).collect();
    }
    let mut out: BTreeMap<GroupId, usize> = BTreeMap::new();
    let mut rema: Vec<(u64, GroupId)> = Vec::new();
    let mut given = 0;
    for (&g, &w) in weights {
        let exact = total as u64 * w as u64;
        let q = (exact / sum) as usize;
        out.insert(g, q);
        given += q;
        rema.push((exact % sum, g));
    }
    // Largest remainder first; ties to the lower group id, so the plan is deterministic.
    rema.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, g) in rema.into_iter().take(total - given) {
        *out.get_mut(&g).expect("every group has a quota") += 1;
    }
    out
}

/// The moves that bring `owners` (slot → group, `None` unassigned) to the quotas of
/// `weights`. Only assigned slots move; a group not in `weights` gives all its slots away.
/// Each over-quota group gives up its highest slots, to under-quota groups in id order.
pub fn rebalance(owners: &[Option<GroupId>], weights: &BTreeMap<GroupId, u32>) -> Vec<Move> {
    debug_assert_eq!(owners.len(), SLOTS);
    let assigned = owners.iter().filter(|o| o.is_some()).count();
    let quota = quotas(weights, assigned);
    let mut held: BTreeMap<GroupId, Vec<u16>> = BTreeMap::new();
    for (slot, owner) in owners.iter().enumerate() {
        if let Some(g) = owner {
            held.entry(*g).or_default().push(slot as u16);
        }
    }
    let mut surplus: Vec<(u16, GroupId)> = Vec::new();
    for (g, slots) in &held {
        let keep = quota.get(g).copied().unwrap_or(0);
        if slots.len() > keep {
            surplus.extend(slots[keep..].iter().map(|&s| (s, *g)));
        }
    }
    let mut moves = Vec::new();
    let mut give = surplus.into_iter();
    for (g, &want) in &quota {
        let have = held.get(g).map_or(0, Vec::len);
        for _ in have..want {
            let Some((slot, from)) = give.next() else {
                break;
            };
            moves.push(Move { slot, from, to: *g });
        }
    }
    moves.sort_by_key(|m| m.slot);
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(split: &[(u32, usize)]) -> Vec<Option<GroupId>> {
        let mut v = Vec::new();
        for &(g, n) in split {
            v.extend(std::iter::repeat_n(Some(GroupId(g)), n));
        }
        v.resize(SLOTS, None);
        v
    }

    fn even(groups: &[u32]) -> BTreeMap<GroupId, u32> {
        groups.iter().map(|&g| (GroupId(g), 1)).collect()
    }

    #[test]
    fn adding_a_group_moves_only_its_share() {
        let moves = rebalance(&owners(&[(1, 512), (2, 512)]), &even(&[1, 2, 3]));
        assert_eq!(moves.len(), 341, "a third of the slots, no more");
        assert!(moves.iter().all(|m| m.to == GroupId(3)));
        let from1 = moves.iter().filter(|m| m.from == GroupId(1)).count();
        assert!((170..=171).contains(&from1));
    }

    #[test]
    fn balanced_cluster_needs_no_moves() {
        assert!(rebalance(&owners(&[(1, 512), (2, 512)]), &even(&[1, 2])).is_empty());
    }

    #[test]
    fn weights_and_removed_groups() {
        let w: BTreeMap<GroupId, u32> = [(GroupId(1), 3), (GroupId(2), 1)].into();
        let q = quotas(&w, 1024);
        assert_eq!((q[&GroupId(1)], q[&GroupId(2)]), (768, 256));
        // Group 3 is not in the weights: everything it has goes.
        let moves = rebalance(&owners(&[(1, 500), (2, 500), (3, 24)]), &even(&[1, 2]));
        assert_eq!(moves.iter().filter(|m| m.from == GroupId(3)).count(), 24);
        assert_eq!(moves.len(), 24);
    }

    #[test]
    fn quotas_always_sum_to_the_total() {
        for n in 1..9u32 {
            let q = quotas(&(1..=n).map(|g| (GroupId(g), g)).collect(), 1024);
            assert_eq!(q.values().sum::<usize>(), 1024);
        }
    }
}
