//! The proxies presented as a Redis Cluster (`proxy::peers`): every proxy answers `CLUSTER
//! SLOTS`, `SHARDS`, `NODES`, `MYID` and `INFO` with the same map of the registered proxies;
//! redis-py's `RedisCluster` and ioredis' `Cluster`, given one proxy, find all three, spread
//! their commands over them and read back what they wrote; a proxy that drains leaves the map
//! at once; the redis crate's cluster client rides through a migration, a drain and a kill.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use crate::support::{ControlPlane, Frame, metric, run_with_timeout, wait_until};

/// `(start, end, "host:port", id)` of each range in a `CLUSTER SLOTS` reply.
fn slots(reply: &Frame) -> Vec<(i64, i64, String, String)> {
    let Frame::Array(ranges) = reply else {
        panic!("CLUSTER SLOTS: {reply:?}")
    };
    ranges
        .iter()
        .map(|r| match r {
            Frame::Array(parts) => match (&parts[0], &parts[1], &parts[2]) {
                (Frame::Integer(s), Frame::Integer(e), Frame::Array(node)) => {
                    let Frame::Integer(port) = node[1] else {
                        panic!("a node's port: {node:?}")
                    };
                    let host = node[0].text().unwrap();
                    (*s, *e, format!("{host}:{port}"), node[2].text().unwrap())
                }
                other => panic!("a slot range: {other:?}"),
            },
            other => panic!("a slot range: {other:?}"),
        })
        .collect()
}

fn proxies_listed(cp: &ControlPlane, i: usize) -> usize {
    slots(&cp.proxies[i].raw().cmd(&["CLUSTER", "SLOTS"])).len()
}

#[test]
fn every_proxy_presents_the_same_cluster_of_proxies() {
    let mut cp = ControlPlane::builder().servers(2).proxies(3).start();
    cp.split_over_two_groups();
    assert!(
        wait_until(Duration::from_secs(20), || (0..3)
            .all(|i| proxies_listed(&cp, i) == 3)),
        "each proxy lists the three: {:?}",
        cp.proxies[0].raw().cmd(&["CLUSTER", "SLOTS"])
    );
    let addrs: BTreeSet<String> = cp.proxies.iter().map(|p| p.addr().to_string()).collect();
    let first = slots(&cp.proxies[0].raw().cmd(&["CLUSTER", "SLOTS"]));
    for i in 1..3 {
        assert_eq!(
            slots(&cp.proxies[i].raw().cmd(&["CLUSTER", "SLOTS"])),
            first,
            "proxy {i} agrees"
        );
    }
    assert_eq!((first[0].0, first[2].1), (0, 16383), "{first:?}");
    for w in first.windows(2) {
        assert_eq!(w[0].1 + 1, w[1].0, "no gap, no overlap: {first:?}");
    }
    let listed: BTreeSet<String> = first.iter().map(|r| r.2.clone()).collect();
    assert_eq!(listed, addrs);
    for (i, p) in cp.proxies.iter().enumerate() {
        let mut c = p.raw();
        let id = c.cmd(&["CLUSTER", "MYID"]).text().unwrap();
        let mine = first.iter().find(|r| r.2 == p.addr().to_string()).unwrap();
        assert_eq!(id, mine.3, "proxy {i}'s id");
        let nodes = c.cmd(&["CLUSTER", "NODES"]).text().unwrap();
        assert_eq!(nodes.lines().count(), 3, "{nodes}");
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap();
        assert!(me.starts_with(&format!("{id} {}@", p.addr())), "{me}");
        let info = c.cmd(&["CLUSTER", "INFO"]).text().unwrap();
        assert!(info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3"));
        assert_eq!(c.cmd(&["READONLY"]), Frame::Simple("OK".into()));
        assert_eq!(c.cmd(&["READWRITE"]), Frame::Simple("OK".into()));
        let shards = c.cmd(&["CLUSTER", "SHARDS"]);
        assert!(
            matches!(&shards, Frame::Array(s) if s.len() == 3),
            "{shards:?}"
        );
        // What a cluster client must not be able to do through a proxy.
        let refused = c.cmd(&["CLUSTER", "ADDSLOTS", "1"]);
        assert!(refused.error().is_some(), "{refused:?}");
    }

    // Cluster clients given one proxy use all three.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/clients");
    let runs = [
        ("redis-py", "/usr/bin/python3", "redis_py_cluster.py", 5),
        ("ioredis", "node", "ioredis_cluster.js", 2),
    ];
    for (name, program, script, checks) in runs {
        let out = run_with_timeout(
            Command::new(program)
                .current_dir(dir)
                .arg(script)
                .arg(cp.proxies[1].addr().to_string()),
            Duration::from_secs(120),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name} as a cluster client:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.matches("ok   ").count(), checks + 1, "{stdout}");
        let nodes: BTreeSet<String> = stdout
            .lines()
            .find_map(|l| l.strip_prefix("nodes "))
            .unwrap_or_else(|| panic!("{stdout}"))
            .split(' ')
            .map(str::to_owned)
            .collect();
        assert_eq!(nodes, addrs, "{name} knows every proxy");
    }
    for (i, p) in cp.proxies.iter().enumerate() {
        let sets = metric(&p.metrics(), "tessera_commands_total{command=\"set\"}").unwrap_or(0.0);
        assert!(sets >= 50.0, "proxy {i} served its share of SETs: {sets}");
    }

    // A proxy that drains leaves the map at once, its own and its peers', while it still
    // serves the clients it told MOVING (maintenance notifications), for up to 10 s.
    let draining = cp.proxies[2].addr().to_string();
    let mut told = cp.proxies[2].raw();
    assert!(matches!(told.cmd(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(
        told.cmd(&["CLIENT", "MAINT_NOTIFICATIONS", "ON"]),
        Frame::Simple("OK".into())
    );
    cp.proxies[2].signal("-TERM");
    assert!(matches!(told.read_frame(), Frame::Push(_)), "told MOVING");
    let own: Vec<String> = slots(&told.cmd(&["CLUSTER", "SLOTS"]))
        .into_iter()
        .map(|r| r.2)
        .collect();
    assert_eq!(
        own.len(),
        2,
        "the draining proxy presents the two others: {own:?}"
    );
    assert!(!own.contains(&draining), "{own:?} without {draining}");
    assert_eq!(
        told.cmd(&["SET", "drain:still", "served"]),
        Frame::Simple("OK".into()),
        "the draining proxy still serves the client it told"
    );
    assert!(
        wait_until(Duration::from_secs(8), || (0..2)
            .all(|i| proxies_listed(&cp, i) == 2)),
        "the draining proxy left its peers' map: {:?}",
        cp.proxies[0].raw().cmd(&["CLUSTER", "SLOTS"])
    );
    let left: BTreeSet<String> = slots(&cp.proxies[0].raw().cmd(&["CLUSTER", "SLOTS"]))
        .into_iter()
        .map(|r| r.2)
        .collect();
    assert!(!left.contains(&draining), "{left:?} without {draining}");
    assert!(
        cp.proxies[2].wait_exit(Duration::ZERO).is_none(),
        "the proxy is still draining while it is left out"
    );
    drop(told);
    assert!(
        cp.proxies[2].wait_exit(Duration::from_secs(20)).is_some(),
        "the drained proxy exits once its last client leaves"
    );
}

/// The redis crate's own Redis Cluster client (async), given one proxy, with its default
/// retries: through a Tessera migration and through a proxy that drains no command fails;
/// through a proxy killed, commands fail at most until the map it refreshes leaves the proxy
/// out, and then every key is served by the proxies left. No acknowledged INCR is lost.
#[test]
fn the_redis_crates_cluster_client_rides_through_a_migration_a_drain_and_a_kill() {
    use crate::migration::{idle, owners, wait_for};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    const KEYS: usize = 48;
    let mut cp = ControlPlane::builder().servers(2).proxies(3).start();
    cp.split_over_two_groups();
    assert!(
        wait_until(Duration::from_secs(20), || (0..3)
            .all(|i| proxies_listed(&cp, i) == 3)),
        "each proxy lists the three"
    );
    let seed = format!("redis://{}", cp.proxies[0].addr());
    let client = redis::cluster::ClusterClientBuilder::new(vec![seed])
        .connection_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(5))
        .build()
        .expect("a cluster client");

    // One writer: INCR over the keys in turn; per key, the INCRs answered and those failed;
    // every failure with when it happened.
    #[derive(Default)]
    struct Tally {
        answered: Vec<u64>,
        failed: Vec<u64>,
        errors: Vec<(Instant, String)>,
        last_ok: Vec<Option<Instant>>,
    }
    let tally = Arc::new(Mutex::new(Tally {
        answered: vec![0; KEYS],
        failed: vec![0; KEYS],
        last_ok: vec![None; KEYS],
        ..Tally::default()
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (tally, stop) = (tally.clone(), stop.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let mut conn = client
                    .get_async_connection()
                    .await
                    .expect("a cluster connection");
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let k = i % KEYS;
                    let r: redis::RedisResult<i64> = redis::cmd("INCR")
                        .arg(format!("cc:{k}"))
                        .query_async(&mut conn)
                        .await;
                    let failed = {
                        let mut t = tally.lock().unwrap();
                        match r {
                            Ok(_) => {
                                t.answered[k] += 1;
                                t.last_ok[k] = Some(Instant::now());
                                false
                            }
                            Err(e) => {
                                t.failed[k] += 1;
                                if t.errors.len() < 10_000 {
                                    t.errors.push((Instant::now(), e.to_string()));
                                }
                                true
                            }
                        }
                    };
                    if failed {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    i += 1;
                }
            })
        })
    };
    let errors_since = |t0: Instant| -> Vec<String> {
        let t = tally.lock().unwrap();
        t.errors
            .iter()
            .filter(|e| e.0 >= t0)
            .map(|e| e.1.clone())
            .collect()
    };
    // Every key answered after `t0`.
    let all_served_since = |t0: Instant| {
        let t = tally.lock().unwrap();
        t.last_ok.iter().all(|s| s.is_some_and(|s| s > t0))
    };
    let t0 = Instant::now();
    wait_for("every key to be written", Duration::from_secs(30), || {
        all_served_since(t0)
    });
    assert_eq!(errors_since(t0), Vec::<String>::new(), "before any change");

    // A Tessera migration is invisible to a cluster client: no MOVED, no error.
    let moving = Instant::now();
    cp.api()
        .post(
            "/api/migrations",
            &serde_json::json!({"from": 0, "to": 511, "group": 2}),
        )
        .ok();
    wait_for("the migration to finish", Duration::from_secs(120), || {
        idle(&cp) && owners(&cp).iter().all(|o| *o == Some(2))
    });
    let moved = Instant::now();
    wait_for(
        "every key written after the migration",
        Duration::from_secs(30),
        || all_served_since(moved),
    );
    assert_eq!(
        errors_since(moving),
        Vec::<String>::new(),
        "through the migration"
    );

    // A proxy that drains, then one killed: failures only until the map leaves it out.
    for (what, i) in [("drained", 2), ("killed", 1)] {
        let at = Instant::now();
        if what == "drained" {
            cp.proxies[i].signal("-TERM");
        } else {
            cp.proxies[i].kill();
        }
        let gone = cp.proxies[i].addr().to_string();
        wait_for(
            "the proxy to leave the map",
            Duration::from_secs(40),
            || {
                !slots(&cp.proxies[0].raw().cmd(&["CLUSTER", "SLOTS"]))
                    .iter()
                    .any(|r| r.2 == gone)
            },
        );
        let left = Instant::now();
        assert!(
            wait_until(Duration::from_secs(60), || all_served_since(left)),
            "{what}: every key served by the proxies left; the last failures: {:?}",
            errors_since(at).iter().rev().take(5).collect::<Vec<_>>()
        );
        let failed = errors_since(at);
        let later: Vec<String> = errors_since(left + Duration::from_secs(5));
        assert!(
            later.is_empty(),
            "{what}: failures 5 s after the map left the proxy out: {later:?}"
        );
        // A drain tells the store before it closes a connection: the client's retries find
        // the proxies left without one command failing.
        if what == "drained" {
            assert_eq!(failed, Vec::<String>::new(), "through the drain");
        }
        println!(
            "{what}: {} failed INCRs, the map left the proxy out {:?} after, every key served {:?} after",
            failed.len(),
            left - at,
            Instant::now() - at
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("the writer");

    // No acknowledged INCR lost, none applied twice by the proxies: a failed one may or may
    // not have run. The one exception is the client's own: the crate re-sends a command whose
    // connection broke (the kill) on another proxy, so the one INCR in flight when the proxy
    // died (the writer has one at a time) may have run on the server and again, answered
    // once.
    let t = tally.lock().unwrap();
    let mut check = cp.proxies[0].raw();
    let mut replayed = Vec::new();
    for k in 0..KEYS {
        let v: u64 = check
            .cmd(&["GET", &format!("cc:{k}")])
            .text()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(
            v >= t.answered[k] && v <= t.answered[k] + t.failed[k] + 1,
            "cc:{k} is {v}: {} INCRs answered, {} failed",
            t.answered[k],
            t.failed[k]
        );
        if v > t.answered[k] + t.failed[k] {
            replayed.push(k);
        }
    }
    assert!(
        replayed.len() <= 1,
        "INCRs applied more often than sent on keys {replayed:?}: at most the one in flight at the kill may be"
    );
}
