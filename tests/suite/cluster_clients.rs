//! The proxies presented as a Redis Cluster (`proxy::peers`): every proxy answers `CLUSTER
//! SLOTS`, `SHARDS`, `NODES`, `MYID` and `INFO` with the same map of the registered proxies;
//! redis-py's `RedisCluster` and ioredis' `Cluster`, given one proxy, find all three, spread
//! their commands over them and read back what they wrote; a proxy that stops leaves the map.

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
    let cp = ControlPlane::builder().servers(2).proxies(3).start();
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

    // A proxy stopped with SIGTERM leaves the store, and so the map its peers present.
    cp.proxies[2].signal("-TERM");
    assert!(
        wait_until(Duration::from_secs(30), || (0..2)
            .all(|i| proxies_listed(&cp, i) == 2)),
        "the stopped proxy left the map: {:?}",
        cp.proxies[0].raw().cmd(&["CLUSTER", "SLOTS"])
    );
}
