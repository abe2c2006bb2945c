//! Keys and memory per slot, estimated per group with bounded work. Stock redis-server (not
//! in cluster mode) counts neither per slot, so every `slot_keys` interval the dashboard
//! SCANs each group's master, every client database in turn (`COUNT 1000` a call, at most
//! `KEY_BUDGET` keys a round in all), and
//! asks `MEMORY USAGE` of at most `MEMORY_SAMPLES` of the keys it saw (every n-th).
//!
//! A scan that completes counts every key: the counts are exact as of the scan. One cut at
//! the budget is a sample (SCAN walks the hash table, whose order is unrelated to the slot
//! hash): per-slot counts are scaled by the client databases' keys / scanned. Memory per slot is its estimated
//! keys times the mean `MEMORY USAGE` of its sampled keys (the group's mean where a slot has
//! no sampled key). `docs/migration.md` gives the error bounds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::debug;

use super::{Dashboard, admin_user, ops};
use crate::Error;
use tessera_model::databases::info_keyspace;
use tessera_model::migration::INTERNAL_DB;
use tessera_model::redis_client::{Credential, Value};
use tessera_model::router::{GroupId, SLOTS, SlotId};

/// Keys a round reads per group, at most.
pub(crate) const KEY_BUDGET: u64 = 100_000;
/// Keys a round asks `MEMORY USAGE` of per group, at most.
pub(crate) const MEMORY_SAMPLES: u64 = 4096;
/// Keys of the proxies' and the mover's own bookkeeping: not counted.
const INTERNAL_PREFIX: &[u8] = b"__tessera:";

/// One group's last estimate.
#[derive(Debug, Clone)]
pub(crate) struct GroupKeys {
    pub(crate) keys: Vec<f64>,
    pub(crate) memory: Vec<f64>,
    /// The scan saw every key (the counts are not scaled).
    pub(crate) exact: bool,
    pub(crate) scanned: u64,
    pub(crate) dbsize: u64,
    pub(crate) at_unix: u64,
}

/// The last estimate of every group.
#[derive(Default)]
pub(crate) struct SlotKeys {
    groups: Mutex<BTreeMap<GroupId, GroupKeys>>,
}

impl SlotKeys {
    pub(crate) fn snapshot(&self) -> BTreeMap<GroupId, GroupKeys> {
        self.groups.lock().expect("slot keys lock poisoned").clone()
    }

    /// A fresh estimate of `group` (a scan made for another reason).
    pub(crate) fn put(&self, group: GroupId, keys: GroupKeys) {
        self.groups
            .lock()
            .expect("slot keys lock poisoned")
            .insert(group, keys);
    }
}

/// Per-slot tallies of one scan.
struct Tally {
    keys: Vec<u64>,
    mem_sum: Vec<u64>,
    mem_n: Vec<u64>,
}

/// Scans one master: its estimate.
pub(super) async fn scan_group(addr: &str, cred: &Credential) -> Result<GroupKeys, Error> {
    let lost = |source| Error::ServerUnreachable {
        addr: addr.into(),
        source,
    };
    let mut c = admin_user::connect(addr, cred, ops::REDIS_TIMEOUT)
        .await
        .map_err(|e| Error::server(addr, e))?;
    // Every client database (Tessera's internal one holds no client key), one after another
    // within the budget.
    let info = c.cmd(&["INFO", "keyspace"]).await.map_err(lost)?;
    let dbs: Vec<(u32, u64)> = info_keyspace(&info.as_text().unwrap_or_default())
        .into_iter()
        .filter(|&(db, _)| db != INTERNAL_DB)
        .collect();
    let dbsize: u64 = dbs.iter().map(|&(_, keys)| keys).sum();
    let stride = (dbsize.min(KEY_BUDGET) / MEMORY_SAMPLES).max(1);
    let mut t = Tally {
        keys: vec![0; SLOTS],
        mem_sum: vec![0; SLOTS],
        mem_n: vec![0; SLOTS],
    };
    let mut scanned = 0u64;
    let mut exact = true;
    // (database, slot, key)
    let mut sampled: Vec<(u32, u16, bytes::Bytes)> = Vec::new();
    for &(db, _) in &dbs {
        if scanned >= KEY_BUDGET {
            exact = false;
            break;
        }
        select(&mut c, addr, db).await?;
        let mut cursor = b"0".to_vec();
        loop {
            let reply = c
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", b"1000"])
                .await
                .map_err(lost)?;
            let odd = |reply: String| Error::ServerRefused {
                addr: addr.into(),
                command: "SCAN".into(),
                reply,
            };
            let Value::Array(mut parts) = reply else {
                return Err(odd(format!("{reply:?}")));
            };
            let (Some(Value::Array(keys)), Some(next)) = (parts.pop(), parts.pop()) else {
                return Err(odd("an answer of an unexpected shape".into()));
            };
            for k in keys {
                let Value::Bulk(k) = k else { continue };
                scanned += 1;
                if k.starts_with(INTERNAL_PREFIX) {
                    continue;
                }
                let slot = SlotId::of_key(&k).0;
                t.keys[slot as usize] += 1;
                if scanned.is_multiple_of(stride) && (sampled.len() as u64) < MEMORY_SAMPLES {
                    sampled.push((db, slot, k));
                }
            }
            cursor = next.as_bytes().unwrap_or(b"0").to_vec();
            if cursor == b"0" {
                break;
            }
            if scanned >= KEY_BUDGET {
                exact = false;
                break;
            }
        }
    }
    // Sampled in database order: each database's keys asked in it.
    for db_chunk in sampled.chunk_by(|a, b| a.0 == b.0) {
        select(&mut c, addr, db_chunk[0].0).await?;
        for chunk in db_chunk.chunks(200) {
            let cmds: Vec<Vec<&[u8]>> = chunk
                .iter()
                .map(|(_, _, k)| vec![&b"MEMORY"[..], b"USAGE", k])
                .collect();
            let replies = c.pipeline(&cmds).await.map_err(lost)?;
            for ((_, slot, _), r) in chunk.iter().zip(replies) {
                if let Some(bytes) = r.as_int() {
                    t.mem_sum[*slot as usize] += bytes.max(0) as u64;
                    t.mem_n[*slot as usize] += 1;
                }
            }
        }
    }
    Ok(estimate(&t, exact, scanned, dbsize))
}

/// `SELECT db` on the scan's connection.
async fn select(
    c: &mut tessera_model::redis_client::RedisClient,
    addr: &str,
    db: u32,
) -> Result<(), Error> {
    let text = db.to_string();
    match c.cmd(&["SELECT", &text]).await {
        Ok(Value::Error(reply)) => Err(Error::ServerRefused {
            addr: addr.into(),
            command: "SELECT".into(),
            reply,
        }),
        Ok(_) => Ok(()),
        Err(source) => Err(Error::ServerUnreachable {
            addr: addr.into(),
            source,
        }),
    }
}

/// Scales a scan's tallies into per-slot estimates.
fn estimate(t: &Tally, exact: bool, scanned: u64, dbsize: u64) -> GroupKeys {
    let scale = if exact || scanned == 0 {
        1.0
    } else {
        dbsize as f64 / scanned as f64
    };
    let (sum, n) = (t.mem_sum.iter().sum::<u64>(), t.mem_n.iter().sum::<u64>());
    let group_mean = if n == 0 { 0.0 } else { sum as f64 / n as f64 };
    let keys: Vec<f64> = t.keys.iter().map(|&k| k as f64 * scale).collect();
    let memory = keys
        .iter()
        .enumerate()
        .map(|(s, &k)| {
            let mean = if t.mem_n[s] > 0 {
                t.mem_sum[s] as f64 / t.mem_n[s] as f64
            } else {
                group_mean
            };
            k * mean
        })
        .collect();
    GroupKeys {
        keys,
        memory,
        exact,
        scanned,
        dbsize,
        at_unix: tessera_store::model::now_unix(),
    }
}

/// The estimating loop: one group after the other, every `slot_keys` interval.
pub(super) async fn run(d: Arc<Dashboard>) {
    let mut tick = tokio::time::interval(d.opts.slot_keys);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let masters: Vec<(GroupId, String)> = {
            let st = d.state.lock().expect("state lock poisoned");
            st.groups
                .values()
                .filter_map(|g| Some((g.id, g.master()?.to_string())))
                .collect()
        };
        let mut fresh = BTreeMap::new();
        for (g, addr) in masters {
            match scan_group(&addr, &d.backend_admin).await {
                Ok(k) => {
                    fresh.insert(g, k);
                }
                Err(e) => debug!(group = g.0, error = %e, "slot keys: group not scanned"),
            }
        }
        // A group that failed keeps its last estimate; a removed group goes.
        let known: Vec<GroupId> = d
            .state
            .lock()
            .expect("state lock poisoned")
            .groups
            .keys()
            .copied()
            .collect();
        let mut groups = d.slot_keys.groups.lock().expect("slot keys lock poisoned");
        groups.retain(|g, _| known.contains(g));
        groups.extend(fresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_scan_is_scaled_and_memory_falls_back_to_the_group_mean() {
        let mut t = Tally {
            keys: vec![0; SLOTS],
            mem_sum: vec![0; SLOTS],
            mem_n: vec![0; SLOTS],
        };
        t.keys[1] = 30;
        t.keys[2] = 10;
        t.mem_sum[1] = 300;
        t.mem_n[1] = 3;
        let e = estimate(&t, false, 40, 400);
        assert_eq!((e.keys[1], e.keys[2]), (300.0, 100.0));
        assert_eq!(e.memory[1], 300.0 * 100.0);
        assert_eq!(e.memory[2], 100.0 * 100.0, "no sample: the group's mean");
        let exact = estimate(&t, true, 40, 400);
        assert_eq!(exact.keys[1], 30.0);
    }
}
