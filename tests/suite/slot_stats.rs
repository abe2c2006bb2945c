//! Per-slot statistics with real processes: skewed traffic through a proxy shows on its hot
//! slots in `GET /api/slots/stats`, keys and memory per slot match the servers, and a
//! rebalance by load moves hot slots until the groups' loads even out (a dry run moves none).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use redis::Commands;
use serde_json::json;
use tessera_wire::migration::{GroupTotals, RebalanceAnswer, SlotStatsView};
use tessera_wire::telemetry::SlotCounts;
use tessera_wire::topology::GroupId;

use crate::migration::{conn, idle, owners, wait_for};
use crate::support::{ControlPlane, slot};

/// Fast sampling so a test sees rates within seconds.
const FAST: [&str; 6] = [
    "--slot-sample-secs",
    "0.3",
    "--slot-window-secs",
    "3",
    "--slot-keys-secs",
    "1",
];

/// Two groups, slots 0-511 on group 1 and 512-1023 on group 2, one proxy.
fn two_groups() -> ControlPlane {
    let cp = ControlPlane::builder()
        .servers(2)
        .proxies(1)
        .dashboard_args(&FAST)
        .start();
    cp.split_over_two_groups();
    cp
}

/// `n` keys whose slots are distinct and below 512 (group 1's).
fn hot_keys(n: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut slots = Vec::new();
    for i in 0.. {
        let k = format!("hot:{i}");
        let s = slot(k.as_bytes());
        if s < 512 && !slots.contains(&s) {
            slots.push(s);
            out.push(k);
            if out.len() == n {
                break;
            }
        }
    }
    out
}

/// GETs of `keys` in pipelines of 50, round robin, until `stop`.
fn traffic(proxy: SocketAddr, keys: Vec<String>, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut c = conn(proxy);
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let mut p = redis::pipe();
            for i in 0..50 {
                p.get(&keys[i % keys.len()]);
            }
            // A command held or refused during a slot's handoff is fine here.
            let _: Result<Vec<Option<String>>, _> = p.query(&mut c);
            sent += 50;
        }
        sent
    })
}

fn stats(cp: &ControlPlane) -> SlotStatsView {
    cp.api().get("/api/slots/stats").ok_as()
}

fn group_total(v: &SlotStatsView, g: u32, field: fn(&GroupTotals) -> f64) -> f64 {
    v.groups
        .iter()
        .find(|t| t.group == GroupId(g))
        .map_or(0.0, field)
}

#[test]
fn skewed_traffic_shows_on_its_slots_and_keys_and_memory_match_the_servers() {
    let cp = two_groups();
    let proxy = cp.proxies[0].addr();
    let mut c = conn(proxy);
    // 3000 keys spread over every slot, 100-byte values.
    let value = "v".repeat(100);
    for start in (0..3000).step_by(500) {
        let pairs: Vec<(String, String)> = (start..start + 500)
            .map(|i| (format!("fill:{i}"), value.clone()))
            .collect();
        let _: () = c.mset(&pairs).unwrap();
    }
    let hot = hot_keys(3);
    let stop = Arc::new(AtomicBool::new(false));
    let t = traffic(proxy, hot.clone(), stop.clone());
    thread::sleep(Duration::from_secs(2));

    // The proxy's own cumulative counters.
    let counts: SlotCounts = cp.proxies[0].admin().get("/api/proxy/slots").ok_as();
    for k in &hot {
        let s = slot(k.as_bytes()) as u16;
        let i = counts
            .slots
            .iter()
            .position(|&x| x == s)
            .expect("hot slot listed");
        assert!(counts.ops[i] > 1000, "slot {s}: {counts:?}");
        assert!(counts.bytes_in[i] > counts.ops[i]);
    }

    // The dashboard's rates: the hot slots are the busiest, all on group 1.
    wait_for("rates of the hot slots", Duration::from_secs(20), || {
        let v = stats(&cp);
        hot.iter()
            .all(|k| v.slots.ops_per_sec[slot(k.as_bytes()) as usize] > 50.0)
    });
    let v = stats(&cp);
    let mut busiest: Vec<(f64, usize)> = v
        .slots
        .ops_per_sec
        .iter()
        .enumerate()
        .map(|(s, o)| (*o, s))
        .collect();
    busiest.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut top: Vec<u32> = busiest[..3].iter().map(|&(_, s)| s as u32).collect();
    top.sort();
    let mut want: Vec<u32> = hot.iter().map(|k| slot(k.as_bytes())).collect();
    want.sort();
    assert_eq!(top, want, "the three busiest slots are the hot keys'");
    // Group 2 saw only the fill's MSETs (each counted once, on its first key's slot).
    let (g1, g2) = (
        group_total(&v, 1, |t| t.ops_per_sec),
        group_total(&v, 2, |t| t.ops_per_sec),
    );
    assert!(g2 < g1 / 100.0, "the load is on group 1: {:?}", v.groups);
    assert!(v.slots.bytes_per_sec[want[0] as usize] > 0.0);
    stop.store(true, Ordering::Relaxed);
    let sent = t.join().unwrap();
    assert!(sent > 0);

    // Keys: 3000 keys (plus the 3 hot ones, never written), a complete scan, so exact.
    wait_for("a key scan of both groups", Duration::from_secs(20), || {
        let v = stats(&cp);
        v.groups.iter().all(|g| g.keys_exact == Some(true))
    });
    let v = stats(&cp);
    let mut truth = vec![0u64; 1024];
    for i in 0..3000 {
        truth[slot(format!("fill:{i}").as_bytes()) as usize] += 1;
    }
    for (s, want) in truth.iter().enumerate() {
        assert_eq!(v.slots.keys[s], *want as f64, "keys of slot {s}");
    }
    assert_eq!(
        group_total(&v, 1, |t| t.keys) + group_total(&v, 2, |t| t.keys),
        3000.0
    );
    // Memory: every key is sampled (< 4096 keys a group), so the estimate is the sum of
    // MEMORY USAGE over the group's keys, per slot. Against INFO's used_memory_dataset (which
    // also holds allocator pages and the key table's growth) it is within a factor of three.
    for (g, server) in [(1u32, 0usize), (2, 1)] {
        let mut direct = redis::Client::open(format!("redis://{}", cp.server_addr(server)))
            .unwrap()
            .get_connection()
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("fill:*").query(&mut direct).unwrap();
        let mut per_slot = vec![0f64; 1024];
        for k in &keys {
            let m: i64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(k)
                .query(&mut direct)
                .unwrap();
            per_slot[slot(k.as_bytes()) as usize] += m as f64;
        }
        for (s, want) in per_slot.iter().enumerate() {
            if v.slots.group[s] == g {
                let got = v.slots.memory[s];
                assert!(
                    (got - want).abs() <= 0.01 * want,
                    "slot {s}: {got} vs {want}"
                );
            }
        }
        let info: String = redis::cmd("INFO").arg("memory").query(&mut direct).unwrap();
        let dataset: f64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory_dataset:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let est = group_total(&v, g, |t| t.memory);
        assert!(
            est > dataset / 3.0 && est < dataset * 3.0,
            "group {g}: estimated {est} bytes, used_memory_dataset {dataset}"
        );
    }
}

#[test]
fn a_rebalance_by_load_moves_hot_slots_until_the_groups_even_out() {
    let cp = two_groups();
    let proxy = cp.proxies[0].addr();
    let hot = hot_keys(8);
    {
        let mut c = conn(proxy);
        for k in &hot {
            let _: () = c.set(k, "x").unwrap();
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let t = traffic(proxy, hot.clone(), stop.clone());
    wait_for("load measured on group 1", Duration::from_secs(20), || {
        let v = stats(&cp);
        v.window_secs > 1.0 && group_total(&v, 1, |t| t.ops_per_sec) > 100.0
    });
    let before = owners(&cp);

    // A dry run, by the API and by the CLI: a plan, nothing moved.
    let plan = cp
        .api()
        .post(
            "/api/rebalance",
            &json!({"dry_run": true, "by": "load", "tolerance": 20}),
        )
        .ok_as::<RebalanceAnswer>();
    let moves = &plan.moves;
    assert!(
        (3..=5).contains(&moves.len()),
        "about half of 8 equally hot slots move: {plan:?}"
    );
    let hot_slots: Vec<u64> = hot.iter().map(|k| slot(k.as_bytes()) as u64).collect();
    for m in moves {
        assert_eq!((m.from, m.to), (GroupId(1), GroupId(2)));
        assert!(hot_slots.contains(&u64::from(m.slot)), "{m:?}");
    }
    let measure = |of: &Option<std::collections::BTreeMap<GroupId, f64>>, g: u32| {
        of.as_ref()
            .and_then(|m| m.get(&GroupId(g)).copied())
            .unwrap_or_else(|| panic!("group {g} is measured: {plan:?}"))
    };
    let (b1, a1, a2) = (
        measure(&plan.before, 1),
        measure(&plan.after, 1),
        measure(&plan.after, 2),
    );
    assert!(
        a1 < b1 && (a1 - a2).abs() <= 0.4 * (a1 + a2) / 2.0,
        "{plan:?}"
    );
    let cli = cp.admin_cli(
        crate::support::TOKEN,
        &[
            "rebalance",
            "--by",
            "load",
            "--tolerance",
            "20",
            "--dry-run",
        ],
    );
    let text = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert!(
        text.contains("rebalance by load (tolerance ±20 %): would move"),
        "{text}"
    );
    assert!(text.contains("group 1 → group 2"), "{text}");
    // Without --yes and without a terminal: the plan is shown, nothing is queued.
    let refused = cp.admin_cli(crate::support::TOKEN, &["rebalance", "--by", "load"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--yes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(idle(&cp), "nothing queued");
    assert_eq!(owners(&cp), before, "a dry run moves nothing");

    // Run it.
    let run = cp.admin_cli(
        crate::support::TOKEN,
        &[
            "rebalance",
            "--by",
            "load",
            "--tolerance",
            "20",
            "--yes",
            "--json",
        ],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let queued: RebalanceAnswer = serde_json::from_slice(&run.stdout).unwrap();
    let moved: Vec<u64> = queued.moves.iter().map(|m| u64::from(m.slot)).collect();
    assert!(!moved.is_empty() && moved.iter().all(|s| hot_slots.contains(s)));
    wait_for("the rebalance to finish", Duration::from_secs(120), || {
        idle(&cp)
    });
    let after = owners(&cp);
    for s in &moved {
        assert_eq!(after[*s as usize], Some(2), "slot {s} moved to group 2");
    }
    for (s, o) in after.iter().enumerate() {
        if !moved.contains(&(s as u64)) {
            assert_eq!(*o, before[s], "slot {s} stayed");
        }
    }
    // The load follows: after a fresh window both groups carry about half.
    thread::sleep(Duration::from_secs(4));
    wait_for("the load to even out", Duration::from_secs(20), || {
        let v = stats(&cp);
        let (l1, l2) = (
            group_total(&v, 1, |t| t.ops_per_sec),
            group_total(&v, 2, |t| t.ops_per_sec),
        );
        l1 > 0.0 && l2 > 0.0 && (l1 - l2).abs() <= 0.5 * (l1 + l2) / 2.0
    });
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    // A second plan finds nothing worth moving.
    let again = cp
        .api()
        .post(
            "/api/rebalance",
            &json!({"dry_run": true, "by": "load", "tolerance": 50}),
        )
        .ok_as::<RebalanceAnswer>();
    assert_eq!(again.slots, 0, "{again:?}");
}

/// Keys per slot count every client database, as the servers hold them, and nothing of
/// Tessera's internal database (the backends' database 1).
#[test]
fn keys_per_slot_count_every_client_database_as_the_servers_hold_them() {
    let cp = ControlPlane::builder()
        .servers(2)
        .proxies(1)
        .server_args(&["--databases", "17"])
        .dashboard_args(&FAST)
        .start();
    cp.split_over_two_groups();
    let proxy = cp.proxies[0].addr();
    // The same names in client databases 0 and 15, others in 2.
    for (db, prefix, n) in [(0u32, "a", 400usize), (2, "b", 300), (15, "a", 250)] {
        let mut c = conn(proxy);
        let _: () = redis::cmd("SELECT").arg(db).query(&mut c).expect("SELECT");
        let pairs: Vec<(String, u32)> = (0..n).map(|i| (format!("{prefix}:{i}"), db)).collect();
        let _: () = c.mset(&pairs).expect("MSET");
    }
    // A key in the internal database, as the mover's bookkeeping would leave one.
    for server in 0..2 {
        let mut direct = redis::Client::open(format!("redis://{}/1", cp.server_addr(server)))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = direct.set("internal:x", 1).unwrap();
    }
    // The truth: every key of every backend database but the internal one, per slot.
    let mut truth = vec![0u64; 1024];
    for server in 0..2 {
        let mut direct = redis::Client::open(format!("redis://{}", cp.server_addr(server)))
            .unwrap()
            .get_connection()
            .unwrap();
        for db in (0..17).filter(|&d| d != 1) {
            let _: () = redis::cmd("SELECT").arg(db).query(&mut direct).unwrap();
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut direct).unwrap();
            for k in keys {
                truth[slot(k.as_bytes()) as usize] += 1;
            }
        }
    }
    assert_eq!(
        truth.iter().sum::<u64>(),
        950,
        "what was written is on the servers"
    );
    // A scan that started before the writes is exact too, of fewer keys: wait for one
    // that counts as many as the servers hold (never, if it counted the internal database
    // or missed one), then compare slot by slot.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let v = loop {
        let v = stats(&cp);
        let total = group_total(&v, 1, |t| t.keys) + group_total(&v, 2, |t| t.keys);
        if v.groups.iter().all(|g| g.keys_exact == Some(true)) && total == 950.0 {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no complete scan counted the servers' 950 keys: {total} in {:?}",
            v.groups
        );
        thread::sleep(Duration::from_millis(200));
    };
    for (s, want) in truth.iter().enumerate() {
        assert_eq!(v.slots.keys[s], *want as f64, "keys of slot {s}");
    }
}
