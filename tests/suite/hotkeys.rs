//! Hot keys with real processes: a random-key load from redis-benchmark plus planted keys
//! hammered through two proxies; each proxy ranks its own planted keys, the dashboard's merged
//! view ranks first a key whose traffic is split over both proxies, and the CLI shows it.
//! Many distinct and very long keys leave the reported memory within the configured bound.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use redis::Commands;
use tessera_wire::telemetry::{ClusterHotKey, ClusterHotKeys, HotKey, HotKeysView};

use crate::migration::{conn, wait_for};
use crate::support::{Cluster, ControlPlane, TOKEN, cli_stdout};

/// A redis-benchmark loop of GETs and SETs on random keys (`key:000000012345`); killed on drop.
struct Benchmark(Child);

impl Benchmark {
    fn start(proxy: SocketAddr) -> Self {
        let child = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &proxy.port().to_string()])
            .args([
                "-c", "4", "-P", "8", "-r", "100000", "-t", "get,set", "-l", "-q",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-benchmark not found");
        Self(child)
    }
}

impl Drop for Benchmark {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Pipelines of GETs, `per_round` of each key, until `stop`.
fn hammer(
    proxy: SocketAddr,
    keys: Vec<(&'static str, usize)>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut c = conn(proxy);
        while !stop.load(Ordering::Relaxed) {
            let mut p = redis::pipe();
            for &(k, n) in &keys {
                for _ in 0..n {
                    p.get(k);
                }
            }
            let _: Vec<Option<Vec<u8>>> = p.query(&mut c).expect("pipeline of GETs");
        }
    })
}

fn keys(list: &[HotKey]) -> Vec<String> {
    list.iter().map(|k| k.key.clone()).collect()
}

fn merged_keys(list: &[ClusterHotKey]) -> Vec<String> {
    list.iter().map(|k| k.key.clone()).collect()
}

#[test]
fn planted_keys_rank_per_proxy_and_a_key_split_over_both_ranks_first_cluster_wide() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let (a, b) = (cp.proxies[0].addr(), cp.proxies[1].addr());
    let _: () = conn(a).set("planted:big", "x".repeat(20_000)).unwrap();
    let _noise = [Benchmark::start(a), Benchmark::start(b)];
    let stop = Arc::new(AtomicBool::new(false));
    // Per proxy its own key leads the split one 10 to 8; summed, the split key leads 16 to 10.
    let hammers = [
        hammer(
            a,
            vec![("planted:a", 10), ("planted:split", 8)],
            stop.clone(),
        ),
        hammer(
            b,
            vec![("planted:b", 10), ("planted:split", 8)],
            stop.clone(),
        ),
        // Few operations, many bytes: first by bytes on proxy A only.
        hammer(a, vec![("planted:big", 1)], stop.clone()),
    ];

    let view = |p: usize| -> HotKeysView {
        cp.proxies[p]
            .admin()
            .get("/api/proxy/hotkeys?limit=10")
            .ok_as()
    };
    let mut seen = None;
    wait_for("the planted keys ranked", Duration::from_secs(30), || {
        let (va, vb, merged): (_, _, ClusterHotKeys) = (
            view(0),
            view(1),
            cp.api().get("/api/hotkeys?limit=5").ok_as(),
        );
        let ranked = keys(&va.by_ops).starts_with(&["planted:a".into(), "planted:split".into()])
            && keys(&vb.by_ops).starts_with(&["planted:b".into(), "planted:split".into()])
            && keys(&va.by_bytes).first().map(String::as_str) == Some("planted:big")
            && merged_keys(&merged.by_ops).first().map(String::as_str) == Some("planted:split")
            && merged_keys(&merged.by_bytes).first().map(String::as_str) == Some("planted:big");
        seen = Some((va, vb, merged));
        ranked
    });
    stop.store(true, Ordering::Relaxed);
    for h in hammers {
        h.join().unwrap();
    }
    let (va, _, merged) = seen.expect("read above");
    assert!(va.enabled && va.window_secs > 0.0, "{va:?}");
    let split = &merged.by_ops[0];
    // The merged count is the sum of what each proxy reported for it in this read (the
    // proxies' own views above were read at other moments of their sliding windows).
    let shares: Vec<u64> = split.seen_by.iter().map(|s| s.ops).collect();
    assert!(shares.iter().all(|&n| n > 0), "{merged:?}");
    assert_eq!(split.ops, shares.iter().sum::<u64>(), "{merged:?}");
    let mut by: Vec<&str> = split.seen_by.iter().map(|s| s.addr.as_str()).collect();
    by.sort();
    let mut want = vec![a.to_string(), b.to_string()];
    want.sort();
    assert_eq!(by, want, "{merged:?}");
    assert_eq!(merged.proxies, 2, "{merged:?}");
    let slot = crate::support::slot(b"planted:split");
    assert_eq!(split.slot, Some(slot as u16));
    assert_eq!(split.group, Some(if slot < 512 { 1 } else { 2 }));
    // Each proxy's own key is listed too, with only its proxy.
    for (own, addr) in [("planted:a", a), ("planted:b", b)] {
        let k = merged.by_ops.iter().find(|k| k.key == own);
        let k = k.unwrap_or_else(|| panic!("{own} not in {merged:?}"));
        assert_eq!(k.seen_by.len(), 1, "{merged:?}");
        assert_eq!(k.seen_by[0].addr, addr.to_string(), "{merged:?}");
    }

    let out = cli_stdout(
        &cp.admin_cli(TOKEN, &["hotkeys", "--by", "ops", "--limit", "3"]),
        "hotkeys",
    );
    let first = out
        .lines()
        .find(|l| l.starts_with("planted:"))
        .unwrap_or_default();
    assert!(first.starts_with("planted:split"), "{out}");
    assert!(!out.contains("by bytes"), "{out}");

    for bad in [
        "/api/hotkeys?limit=0",
        "/api/hotkeys?limit=100000",
        "/api/hotkeys?top=3",
    ] {
        assert_eq!(cp.api().get(bad).status, 400, "{bad}");
    }
    assert_eq!(
        cp.proxies[0]
            .admin()
            .get("/api/proxy/hotkeys?limit=x")
            .status,
        400
    );
}

#[test]
fn many_distinct_and_very_long_keys_stay_within_the_memory_bound() {
    let cluster = Cluster::start_with(|b| {
        b.admin()
            .config("[hotkeys]\ntop = 8\nmax_key_bytes = 32\nwindow_secs = 2\nsub_windows = 2\n")
    });
    let admin = cluster.proxy.admin();
    let view = || {
        let url = format!("http://{admin}/api/proxy/hotkeys?limit=50");
        let body = ureq::get(&url)
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        serde_json::from_str::<HotKeysView>(&body).unwrap()
    };
    let limit = view().memory_limit_bytes;
    assert!(
        limit > 0 && limit < 512 << 10,
        "a small, fixed bound: {limit}"
    );

    let mut c = conn(cluster.proxy.addr());
    let long = "L".repeat(4 << 20);
    let mut last = None;
    wait_for("the long key listed", Duration::from_secs(30), || {
        // 20 000 distinct keys and a few 4 MiB ones per round.
        for round in 0..4 {
            let mut p = redis::pipe();
            for i in 0..5_000 {
                p.get(format!("distinct:{round}:{i}:{}", "d".repeat(i % 200)));
            }
            let _: Vec<Option<String>> = p.query(&mut c).unwrap();
            for i in 0..3 {
                let _: Option<String> = c.get(format!("{long}{i}")).unwrap();
            }
        }
        let v = view();
        let found = v.by_bytes.iter().any(|k| k.key_len == (4u64 << 20) + 1);
        last = Some(v);
        found
    });
    let last = last.expect("read above");
    assert_eq!(last.memory_limit_bytes, limit, "the bound does not move");
    assert!(
        last.memory_bytes <= limit,
        "held {} of {limit}",
        last.memory_bytes
    );
    let listed: Vec<&HotKey> = last.by_ops.iter().chain(&last.by_bytes).collect();
    assert!(!listed.is_empty());
    for k in listed {
        assert!(k.key.len() <= 32, "{k:?}");
        assert_eq!(k.truncated, k.key_len > 32, "{k:?}");
    }
}

#[test]
fn a_hotkeys_setting_out_of_range_refuses_to_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("proxy.toml");
    std::fs::write(&file, "[hotkeys]\ntop = 0\n").unwrap();
    let out = Command::new(crate::support::tessera_bin())
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--backends",
            "127.0.0.1:1",
        ])
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hotkeys.top must be in 1..=1024"), "{err}");
}
