//! Migration v3's copy rounds with real processes: a slot written all the time while it
//! moves (its rounds converge and it is handed off, or the status says why not, and no
//! acknowledged write is lost either way), a slot moved away and straight back, and the
//! keyspace commands through a proxy while a slot's keys exist on both sides.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::json;
use tessera_wire::migration::MigrationPhase;

use crate::migration::{conn, idle, owners, status, wait_for};
use crate::support::{ClusterProxy, ControlPlane, slot};

/// Keys of one slot: `{tag}:0 .. {tag}:n-1`.
fn slot_keys(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{{{tag}}}:{i}")).collect()
}

/// Writes every key of `keys` again and again (one pipelined `SET` of each, then the next
/// round), each with a higher version, until `stop`. Returns the last acknowledged version per
/// key and the errors it got.
fn storm(
    addr: std::net::SocketAddr,
    keys: Vec<String>,
    stop: Arc<AtomicBool>,
) -> (HashMap<String, u64>, Vec<String>) {
    writer(addr, keys, stop, usize::MAX, Duration::ZERO)
}

/// Like [`storm`], but `per_batch` keys at a time (taking turns) with `pause` between
/// batches: a steady load whose written keys per copy round stay few, so that the slot
/// converges however slow the machine.
fn writer(
    addr: std::net::SocketAddr,
    keys: Vec<String>,
    stop: Arc<AtomicBool>,
    per_batch: usize,
    pause: Duration,
) -> (HashMap<String, u64>, Vec<String>) {
    let mut c = conn(addr);
    let mut acked = HashMap::new();
    let mut errors = Vec::new();
    let mut version = 0u64;
    // Bounded: at most 10 minutes of rounds even if nobody says stop.
    let until = Instant::now() + Duration::from_secs(600);
    let mut next = 0;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        version += 1;
        let batch: Vec<&String> = if per_batch >= keys.len() {
            keys.iter().collect()
        } else {
            let b = (0..per_batch)
                .map(|i| &keys[(next + i) % keys.len()])
                .collect();
            next = (next + per_batch) % keys.len();
            b
        };
        let mut p = redis::pipe();
        for k in &batch {
            p.set(*k, version).ignore();
        }
        match p.query::<()>(&mut c) {
            Ok(()) => {
                for k in batch {
                    acked.insert(k.clone(), version);
                }
                if !pause.is_zero() {
                    thread::sleep(pause);
                }
            }
            Err(e) => {
                errors.push(e.to_string());
                if errors.len() > 20 {
                    break;
                }
                c = conn(addr);
            }
        }
    }
    (acked, errors)
}

/// Every key holds its last acknowledged version (a write whose answer was lost could only
/// have left a newer one, and the storm's errors are asserted to be none).
fn check_versions(c: &mut redis::Connection, acked: &HashMap<String, u64>) {
    let keys: Vec<&String> = acked.keys().collect();
    let got: Vec<Option<u64>> = c.mget(&keys).expect("MGET after the move");
    let wrong: Vec<String> = keys
        .iter()
        .zip(&got)
        .filter(|(k, v)| **v != acked.get(**k).copied())
        .take(5)
        .map(|(k, v)| format!("{k}: acknowledged {:?}, read {v:?}", acked[*k]))
        .collect();
    assert!(wrong.is_empty(), "acknowledged writes lost: {wrong:?}");
}

#[test]
fn a_write_storm_on_one_moving_slot_converges_or_says_why_and_loses_nothing() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let s = slot(b"{storm}");
    // 2000 keys written whole about every few milliseconds: every copy round sees most of
    // them changed, far more than a handoff takes (256).
    let keys = slot_keys("storm", 2000);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let (addr, stop) = (cp.proxies[i].addr(), stop.clone());
            // Each proxy's writer takes half the keys, so no key has two writers.
            let mine: Vec<String> = keys.iter().skip(i).step_by(2).cloned().collect();
            thread::spawn(move || storm(addr, mine, stop))
        })
        .collect();
    wait_for(
        "the storm to write every key",
        Duration::from_secs(30),
        || cp.servers[0].dbsize() == 2000,
    );
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    // While the storm lasts: either the slot converges and is handed off, or it keeps
    // copying and the status names it and why.
    let until = Instant::now() + Duration::from_secs(8);
    let (mut moved, mut reason, mut max_round) = (false, None, 0);
    while Instant::now() < until && !moved {
        let st = status(&cp);
        if let Some(sl) = st.slots.first() {
            max_round = max_round.max(sl.round);
        }
        if let Some(b) = &st.blocked {
            // Either the rounds do not converge, or one did and its final copy could not
            // finish inside the handoff's budget (the slot was released and copies on).
            assert!(
                b.contains(&format!("slot {s} is written faster than it is copied"))
                    || b.starts_with("a handoff was given up"),
                "the storm's move is held for another reason: {st:?}"
            );
            reason = Some(b.clone());
        }
        moved = owners(&cp)[s as usize] == Some(2);
        thread::sleep(Duration::from_millis(100));
    }
    assert!(
        moved || reason.is_some(),
        "after 8 s of the storm the slot neither moved nor said why (round {max_round}): {:?}",
        status(&cp)
    );
    eprintln!("during the storm: moved {moved}, rounds {max_round}, reason {reason:?}");
    stop.store(true, Ordering::Relaxed);
    let mut acked = HashMap::new();
    for w in writers {
        let (a, errors) = w.join().expect("storm writer");
        assert!(errors.is_empty(), "clients got errors: {errors:?}");
        acked.extend(a);
    }
    // Once the writes stop the next round leaves nothing: the slot is handed off.
    wait_for("the migration to end", Duration::from_secs(60), || {
        idle(&cp)
    });
    assert_eq!(owners(&cp)[s as usize], Some(2));
    assert_eq!(cp.servers[0].dbsize(), 0, "the source was not cleaned");
    assert_eq!(cp.servers[1].dbsize(), 2000);
    check_versions(&mut conn(cp.proxies[1].addr()), &acked);
}

#[test]
fn a_slot_moved_away_and_straight_back_keeps_every_write() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let s = slot(b"{back}");
    let keys = slot_keys("back", 3000);
    let mut c = conn(cp.proxies[0].addr());
    for chunk in keys.chunks(1000) {
        let pairs: Vec<(&String, u64)> = chunk.iter().map(|k| (k, 0)).collect();
        let _: () = c.mset(&pairs).expect("MSET");
    }
    // Writes all along (50 keys every 20 ms): few enough per copy round to converge.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (addr, keys, stop) = (cp.proxies[0].addr(), keys.clone(), stop.clone());
        thread::spawn(move || writer(addr, keys, stop, 50, Duration::from_millis(20)))
    };
    let api = cp.api();
    api.post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    wait_for("the move away", Duration::from_secs(60), || {
        owners(&cp)[s as usize] == Some(2)
    });
    // Straight back, while the first move may still be deleting the source's copies.
    let back = api.post("/api/migrations", &json!({"from": s, "to": s, "group": 1}));
    if back.status == 409 {
        // Refused while the slot is still listed: retried as an operator would.
        wait_for(
            "the move back to be accepted",
            Duration::from_secs(60),
            || {
                api.post("/api/migrations", &json!({"from": s, "to": s, "group": 1}))
                    .status
                    == 200
            },
        );
    } else {
        back.ok();
    }
    wait_for("the move back", Duration::from_secs(60), || {
        owners(&cp)[s as usize] == Some(1) && idle(&cp)
    });
    stop.store(true, Ordering::Relaxed);
    let (acked, errors) = load.join().expect("writer");
    assert!(errors.is_empty(), "clients got errors: {errors:?}");
    assert_eq!(cp.servers[0].dbsize(), 3000);
    assert_eq!(cp.servers[1].dbsize(), 0, "the way-back target kept copies");
    check_versions(&mut conn(cp.proxies[1].addr()), &acked);
}

#[test]
fn keys_scan_and_randomkey_through_a_proxy_show_each_key_once_while_it_is_copied() {
    let cp = ControlPlane::builder().servers(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    // KEYS, SCAN and RANDOMKEY span the cluster: an operator's proxy allows them.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("proxy.toml");
    std::fs::write(&config, "admin_commands = true\n").expect("writing the proxy config");
    let proxy = ClusterProxy::start_with_args(
        &cp.options().cluster,
        &cp.options().store,
        &["--config", config.to_str().expect("utf-8 path")],
    );
    let s = slot(b"{once}");
    let mut c = conn(proxy.addr());
    let moving = slot_keys("once", 4000);
    let others: Vec<String> = (0..1000).map(|i| format!("other:{i}")).collect();
    for chunk in moving.chunks(1000).chain(others.chunks(1000)) {
        let pairs: Vec<(&String, u8)> = chunk.iter().map(|k| (k, 1)).collect();
        let _: () = c.mset(&pairs).expect("MSET");
    }
    let all: HashSet<String> = moving.iter().chain(&others).cloned().collect();
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": s, "to": s, "group": 2, "max_keys_per_sec": 1000}),
        )
        .ok();
    // Half copied: the slot's keys are on the source and, many of them, on the target too.
    wait_for("copies on the target", Duration::from_secs(60), || {
        cp.servers[1].dbsize() >= 1000
    });
    assert_eq!(owners(&cp)[s as usize], Some(1), "the copy outran the test");
    let listed: Vec<String> = c.keys("*").expect("KEYS");
    assert_eq!(
        listed.len(),
        all.len(),
        "KEYS listed a copy twice or missed a key"
    );
    assert_eq!(listed.into_iter().collect::<HashSet<_>>(), all);
    let mut scanned = HashSet::new();
    let mut cursor = 0u64;
    for _ in 0..10_000 {
        let (next, page): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(500)
            .query(&mut c)
            .expect("SCAN");
        scanned.extend(page);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(cursor, 0, "SCAN did not end");
    assert_eq!(
        scanned, all,
        "SCAN missed a key or listed one no client wrote"
    );
    for _ in 0..50 {
        let k: String = redis::cmd("RANDOMKEY").query(&mut c).expect("RANDOMKEY");
        assert!(all.contains(&k), "RANDOMKEY answered {k}");
    }
    assert!(
        status(&cp)
            .slots
            .iter()
            .any(|sl| sl.phase == MigrationPhase::Copying),
        "the slot was not copying any more while it was listed"
    );
}
