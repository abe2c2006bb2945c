//! `GET /api/slots/stats`: the traffic rates of `slot_traffic` and the key and memory
//! estimates of `slot_keys`, joined per slot and per group, and the per-slot measure a
//! rebalance by load or memory evens out.

use std::collections::BTreeMap;

use super::Dashboard;
use crate::Error;
use tessera_model::router::{GroupId, SLOTS};
use tessera_wire::migration::{GroupTotals, SlotArrays, SlotStatsView};

/// What a rebalance by measure evens out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Load,
    Memory,
}

impl Dashboard {
    /// The per-slot statistics as they stand.
    pub fn slot_stats(&self) -> SlotStatsView {
        let rates = self.slot_traffic.rates();
        let keys = self.slot_keys.snapshot();
        // Every group, those without slots too, with its master's memory as its health
        // check read it (INFO used_memory: what the Groups view shows).
        let (owners, all_groups): (Vec<u32>, Vec<(u32, Option<u64>)>) = {
            let st = self.state.lock().expect("state lock poisoned");
            let owners = st
                .slots
                .iter()
                .map(|s| s.group.map_or(0, |g| g.0))
                .collect();
            let all = st
                .groups
                .values()
                .map(|g| {
                    let used = g
                        .master()
                        .and_then(|m| st.servers.get(m))
                        .and_then(|h| h.memory_bytes);
                    (g.id.0, used)
                })
                .collect();
            (owners, all)
        };
        let mut arrays = SlotArrays {
            group: owners,
            ops_per_sec: rates.ops_per_sec,
            bytes_per_sec: rates.bytes_per_sec,
            keys: vec![0.0; SLOTS],
            memory: vec![0.0; SLOTS],
        };
        // Keys of a slot found on any group count: mid-migration they are on both.
        for g in keys.values() {
            for s in 0..SLOTS {
                arrays.keys[s] += g.keys[s];
                arrays.memory[s] += g.memory[s];
            }
        }
        let totals = |g: u32, used_memory: Option<u64>| {
            let k = keys.get(&GroupId(g));
            GroupTotals {
                group: GroupId(g),
                slots: 0,
                ops_per_sec: 0.0,
                bytes_per_sec: 0.0,
                keys: 0.0,
                memory: 0.0,
                used_memory,
                keys_exact: k.map(|k| k.exact),
                keys_scanned: k.map(|k| k.scanned),
                dbsize: k.map(|k| k.dbsize),
                keys_at_unix: k.map(|k| k.at_unix),
            }
        };
        let mut groups: BTreeMap<u32, GroupTotals> = all_groups
            .iter()
            .map(|&(g, used)| (g, totals(g, used)))
            .collect();
        for s in 0..SLOTS {
            let g = arrays.group[s];
            if g == 0 {
                continue;
            }
            let t = groups.entry(g).or_insert_with(|| totals(g, None));
            t.slots += 1;
            t.ops_per_sec += arrays.ops_per_sec[s];
            t.bytes_per_sec += arrays.bytes_per_sec[s];
            t.keys += arrays.keys[s];
            t.memory += arrays.memory[s];
        }
        SlotStatsView {
            window_secs: rates.window.as_secs_f64(),
            sample_secs: self.opts.slot_sample.as_secs_f64(),
            keys_every_secs: self.opts.slot_keys.as_secs_f64(),
            proxies: rates.proxies,
            slots: arrays,
            groups: groups.into_values().collect(),
        }
    }

    /// The measure per slot (1024 entries), or why there is none yet.
    pub(crate) fn slot_measure(&self, m: Measure) -> Result<Vec<f64>, Error> {
        let v = self.slot_stats();
        match m {
            Measure::Load if v.window_secs <= 0.0 => Err(Error::Conflict(format!(
                "no load measured yet: the dashboard reads the proxies' slot counters every {} s \
                 and needs two reads",
                v.sample_secs
            ))),
            Measure::Load => Ok(v.slots.ops_per_sec),
            Measure::Memory if v.groups.iter().all(|g| g.keys_exact.is_none()) => {
                Err(Error::Conflict(format!(
                    "no memory measured yet: the dashboard scans each group every {} s",
                    v.keys_every_secs
                )))
            }
            Measure::Memory => Ok(v.slots.memory),
        }
    }
}
