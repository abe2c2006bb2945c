//! The replica probes of a cluster-mode proxy: while the read policy sends reads to replicas,
//! every `PROBE_INTERVAL_MS` each group's master is asked its replication offset (the
//! instant each probe was sent is kept with it) and each replica its link state and the
//! offset it has processed. A replica whose offset reaches a master probe's is proven fresh
//! as of that probe's sending (`router::replicas::Freshness`); the data path reads the proof.
//! The argument that this bounds staleness is in docs/replica-reads.md.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::debug;

use tessera_model::redis_client::{Credential, RedisClient, Value, info_fields};
use tessera_model::router::replicas::{Freshness, PROBE_INTERVAL_MS, ReadMode, now_us};
use tessera_model::router::{GroupId, Router};

/// A probe that has not answered by then fails (and the replica is no longer used).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Master probes kept per group: ample for any bound up to the probes' reach, and bounded.
const HISTORY: usize = 256;

/// One answered master probe: when it was sent, the master's replication id and offset.
#[derive(Debug, Clone)]
struct MasterMark {
    sent_us: u64,
    replid: String,
    offset: u64,
}

/// A group's recent master probes, oldest first.
type History = Arc<Mutex<VecDeque<MasterMark>>>;

/// What `INFO replication` says that matters here.
#[derive(Debug, Default, PartialEq, Eq)]
struct Replication {
    role: String,
    link_up: bool,
    replid: String,
    /// The master's offset on a master; the offset processed on a replica.
    offset: u64,
}

fn parse(text: &str) -> Replication {
    let mut r = Replication::default();
    let mut master_offset = 0;
    let mut replica_offset = None;
    for (k, v) in info_fields(text) {
        match k.as_str() {
            "role" => r.role = v,
            "master_link_status" => r.link_up = v == "up",
            "master_replid" => r.replid = v,
            "master_repl_offset" => master_offset = v.parse().unwrap_or(0),
            "slave_repl_offset" => replica_offset = v.parse().ok(),
            _ => {}
        }
    }
    r.offset = replica_offset.unwrap_or(master_offset);
    r
}

/// The latest master probe a replica at (`replid`, `offset`) has reached.
fn reached(history: &VecDeque<MasterMark>, replid: &str, offset: u64) -> Option<u64> {
    history
        .iter()
        .rev()
        .find(|m| m.replid == replid && m.offset <= offset)
        .map(|m| m.sent_us)
}

/// Asks `INFO replication` on `conn` (connecting first if needed); a failure drops it.
async fn probe(
    addr: &str,
    cred: Option<&Credential>,
    conn: &mut Option<RedisClient>,
) -> Option<Replication> {
    let ask = async {
        if conn.is_none() {
            *conn = Some(
                RedisClient::connect_as(addr, PROBE_TIMEOUT, cred)
                    .await
                    .ok()?,
            );
        }
        let c = conn.as_mut()?;
        match c.cmd(&[&b"INFO"[..], b"replication"]).await.ok()? {
            Value::Bulk(b) => Some(parse(&String::from_utf8_lossy(&b))),
            v => v.as_text().map(|t| parse(&t)),
        }
    };
    let got = tokio::time::timeout(PROBE_TIMEOUT, ask)
        .await
        .ok()
        .flatten();
    if got.is_none() {
        *conn = None;
    }
    got
}

/// The probes' ticker: a probe that took long (up to its deadline) is followed by one
/// interval of rest, not by a burst of the ticks it missed.
fn every_interval() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(Duration::from_millis(PROBE_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

async fn probe_master(addr: Arc<str>, cred: Option<Credential>, history: History) {
    let mut conn = None;
    let mut tick = every_interval();
    loop {
        tick.tick().await;
        let sent_us = now_us();
        let Some(r) = probe(&addr, cred.as_ref(), &mut conn).await else {
            continue;
        };
        if r.role != "master" {
            continue;
        }
        let mut h = history.lock().expect("history lock poisoned");
        if h.len() == HISTORY {
            h.pop_front();
        }
        h.push_back(MasterMark {
            sent_us,
            replid: r.replid,
            offset: r.offset,
        });
    }
}

async fn probe_replica(
    addr: Arc<str>,
    cred: Option<Credential>,
    history: History,
    fresh: Arc<Freshness>,
) {
    let mut conn = None;
    let mut tick = every_interval();
    loop {
        tick.tick().await;
        match probe(&addr, cred.as_ref(), &mut conn).await {
            Some(r) if r.role == "slave" && r.link_up => {
                let proof = reached(
                    &history.lock().expect("history lock poisoned"),
                    &r.replid,
                    r.offset,
                );
                if let Some(sent_us) = proof {
                    fresh.prove(sent_us);
                }
            }
            other => {
                debug!(replica = %addr, answered = other.is_some(), "replica not usable for reads");
                fresh.revoke();
            }
        }
    }
}

/// Runs the probes the tables of `router` call for, until dropped: started and stopped as
/// tables are swapped in (none while the policy sends every read to the master).
pub async fn run(router: Arc<Router>, cred: Option<Credential>) {
    let mut swaps = router.swapped();
    // Keyed by (group, master, replica or "" for the master's own probe).
    let mut tasks: HashMap<(GroupId, Arc<str>, Arc<str>), JoinHandle<()>> = HashMap::new();
    let mut histories: HashMap<(GroupId, Arc<str>), History> = HashMap::new();
    loop {
        let table = router.load_full();
        let mut wanted = Vec::new();
        if table.read.mode != ReadMode::Master {
            for set in table
                .replica_sets()
                .iter()
                .filter(|s| !s.members.is_empty())
            {
                let Some(master) = (0..tessera_model::router::SLOTS as u16)
                    .map(|s| table.slot(tessera_model::router::SlotId(s)))
                    .find(|e| e.group == set.group)
                    .and_then(|e| e.master)
                else {
                    continue;
                };
                let master = table.backend_addr(master).clone();
                wanted.push((set.group, master.clone(), Arc::from(""), None));
                for (idx, fresh) in set.members.iter() {
                    let replica = table.backend_addr(*idx).clone();
                    wanted.push((set.group, master.clone(), replica, Some(fresh.clone())));
                }
            }
        }
        tasks.retain(|k, t| {
            let keep = wanted
                .iter()
                .any(|(g, m, r, _)| (g, m, r) == (&k.0, &k.1, &k.2));
            if !keep {
                t.abort();
            }
            keep
        });
        histories.retain(|k, _| wanted.iter().any(|(g, m, _, _)| (g, m) == (&k.0, &k.1)));
        for (group, master, replica, fresh) in wanted {
            let key = (group, master.clone(), replica.clone());
            if tasks.contains_key(&key) {
                continue;
            }
            let history = histories
                .entry((group, master.clone()))
                .or_default()
                .clone();
            let task = match fresh {
                None => tokio::spawn(probe_master(master, cred.clone(), history)),
                Some(f) => tokio::spawn(probe_replica(replica, cred.clone(), history, f)),
            };
            tasks.insert(key, task);
        }
        if swaps.changed().await.is_err() {
            break;
        }
    }
    for t in tasks.values() {
        t.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_replication_of_a_master_and_of_a_replica() {
        let m = parse(
            "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_replid:abc\r\nmaster_repl_offset:1234\r\n",
        );
        assert_eq!(
            (m.role.as_str(), m.offset, m.replid.as_str()),
            ("master", 1234, "abc")
        );
        let r = parse(
            "role:slave\r\nmaster_link_status:up\r\nslave_read_repl_offset:1300\r\nslave_repl_offset:1200\r\nmaster_replid:abc\r\nmaster_repl_offset:1200\r\n",
        );
        assert!(r.link_up);
        assert_eq!(r.offset, 1200, "the offset processed, not the one read");
        let down = parse("role:slave\r\nmaster_link_status:down\r\n");
        assert!(!down.link_up);
    }

    #[test]
    fn a_replica_is_proven_by_the_latest_master_probe_it_reached() {
        let mark = |sent_us, offset| MasterMark {
            sent_us,
            replid: "abc".into(),
            offset,
        };
        let h: VecDeque<_> = [mark(10, 100), mark(20, 150), mark(30, 400)].into();
        assert_eq!(reached(&h, "abc", 399), Some(20));
        assert_eq!(reached(&h, "abc", 400), Some(30));
        assert_eq!(reached(&h, "abc", 99), None);
        assert_eq!(
            reached(&h, "other", 1000),
            None,
            "another history proves nothing"
        );
    }
}
