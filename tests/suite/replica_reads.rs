//! Replica reads (docs/replica-reads.md): under `prefer-replica` a group's fresh replica
//! answers the reads and the master the writes; under `master` the replica gets none; a read
//! served by a replica is never older than the bound, during a write load and while the
//! replica is frozen (SIGSTOP) and after it wakes; a moving slot's reads go to its master.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_wire::cluster::{ActionState, SlotView};
use tessera_wire::migration::Queued;
use tessera_wire::read_policy::{ReadPolicyView, ReplicasSeen};
use tessera_wire::topology::GroupId;

use crate::support::{
    ControlPlane, Frame, RawClient, RedisServer, TOKEN, keys_on, slot, wait_until,
};

/// `GET` calls the server has executed (`INFO commandstats`, asked directly).
fn get_calls(server: &RedisServer) -> u64 {
    let info = server.raw().cmd(&["INFO", "commandstats"]);
    let text = info.text().expect("INFO is a bulk string");
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("calls is a number"))
}

/// Group 1: master `servers[0]`, replica `servers[1]`, slots 0-511; group 2: master
/// `servers[2]`, replica `servers[3]` (when started with four), slots 512-1023.
fn two_groups(servers: usize) -> ControlPlane {
    let cp = ControlPlane::builder().servers(servers).proxies(1).start();
    cp.group(1, &[0, 1]);
    if servers == 4 {
        cp.group(2, &[2, 3]);
    } else {
        cp.group(2, &[2]);
    }
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2);
    cp
}

fn set_policy(cp: &ControlPlane, mode: &str, max_lag_ms: u64) {
    let v = cp
        .api()
        .put(
            "/api/read-policy",
            &json!({"mode": mode, "max_lag_ms": max_lag_ms}),
        )
        .ok_as::<ReadPolicyView>();
    assert_eq!(v.policy.mode.as_str(), mode, "{v:?}");
}

/// Reads `key` through `c` until `replica` has served one (its probes prove it fresh first).
fn until_replica_serves(c: &mut RawClient, key: &str, replica: &RedisServer) {
    let before = get_calls(replica);
    let served = wait_until(Duration::from_secs(15), || {
        c.cmd(&["GET", key]);
        get_calls(replica) > before
    });
    assert!(
        served,
        "the replica {} served no read of {key} within 15 s",
        replica.addr()
    );
}

#[test]
fn prefer_replica_sends_reads_to_the_replica_and_writes_to_the_master() {
    let cp = two_groups(3);
    let keys = keys_on(0, "rr:", 5);
    let mut c = cp.proxies[0].raw();
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v1"]), Frame::Simple("OK".into()));
    }
    let replicated = wait_until(Duration::from_secs(10), || {
        keys.iter().all(|k| cp.servers[1].has(k))
    });
    assert!(replicated, "the replica got group 1's keys");

    let out = cp.admin_cli(
        TOKEN,
        &["read-policy", "prefer-replica", "--max-lag-ms", "500"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("reads: prefer-replica"), "{stdout}");
    assert!(
        stdout.contains(&cp.server_addr(1)),
        "the replica is listed: {stdout}"
    );
    let stored = cp.store_json(&format!("/tessera/{}/read-policy", cp.options().cluster));
    assert_eq!(stored, json!({"mode": "prefer-replica", "max_lag_ms": 500}));

    until_replica_serves(&mut c, &keys[0], &cp.servers[1]);
    // The proxy says so too.
    let seen: ReplicasSeen = cp.proxies[0].admin().get("/api/proxy/replicas").ok_as();
    assert_eq!(seen.policy.mode.as_str(), "prefer-replica", "{seen:?}");
    assert_eq!(seen.replicas[0].addr, cp.server_addr(1), "{seen:?}");
    assert_eq!(seen.replicas[0].group, GroupId(1), "{seen:?}");
    assert!(seen.replicas[0].proven_ms_ago.is_some(), "{seen:?}");
    // And the dashboard's view, which asks every proxy: fresh on 1 of 1, proven within the
    // bound, in ms like the bound (the bytes behind are the health checks' own figure).
    let mut v: Option<ReadPolicyView> = None;
    let fresh = wait_until(Duration::from_secs(10), || {
        let got: ReadPolicyView = cp.api().get("/api/read-policy").ok_as();
        let ok = got.proxies == 1
            && got.unreachable.is_empty()
            && got.replicas.len() == 1
            && got.replicas[0].fresh_on == 1
            && got.replicas[0].proven_ms_ago.is_some_and(|ms| ms <= 500);
        v = Some(got);
        ok
    });
    assert!(fresh, "{v:?}");
    let replica_before = get_calls(&cp.servers[1]);
    for round in 0..20 {
        for k in &keys {
            assert_eq!(
                c.cmd(&["GET", k]),
                Frame::bulk("v1"),
                "GET {k} (round {round})"
            );
        }
    }
    let served = get_calls(&cp.servers[1]) - replica_before;
    assert!(served >= 50, "the replica served {served} of 100 reads");
    // A write sent to a replica would answer -READONLY: every write reaches the master.
    for k in &keys {
        assert_eq!(
            c.cmd(&["SET", k, "v2"]),
            Frame::Simple("OK".into()),
            "SET {k}"
        );
        assert_eq!(c.cmd(&["INCR", &format!("{{{k}}}:n")]), Frame::Integer(1));
    }
    // Neither MULTI/EXEC nor scripts run on a replica (a write inside would fail there).
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", &keys[0]]);
    c.cmd(&["SET", &keys[0], "v3"]);
    let exec = c.cmd(&["EXEC"]);
    assert!(
        matches!(&exec, Frame::Array(r) if r.len() == 2 && r[1] == Frame::Simple("OK".into())),
        "{exec:?}"
    );
    let script = c.cmd(&["EVAL", "return redis.call('GET', KEYS[1])", "1", &keys[0]]);
    assert_eq!(script, Frame::bulk("v3"));
    // Group 2 has no replica: its reads stay on its master.
    let g2 = keys_on(1, "rr2:", 1).remove(0);
    assert_eq!(c.cmd(&["SET", &g2, "x"]), Frame::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", &g2]), Frame::bulk("x"));

    // `replica-only`: a group with no fresh replica refuses reads with a clear TRYAGAIN,
    // while group 1's replica goes on serving.
    set_policy(&cp, "replica-only", 500);
    let refused = c.cmd(&["GET", &g2]);
    assert_eq!(
        refused.error(),
        Some(
            "TRYAGAIN no replica of group 2 is known to be within 500 ms of its master (read policy replica-only)"
        ),
        "{refused:?}"
    );
    assert_eq!(
        c.cmd(&["SET", &g2, "y"]),
        Frame::Simple("OK".into()),
        "writes are not reads"
    );
    until_replica_serves(&mut c, &keys[0], &cp.servers[1]);
    let mut last = Frame::Null;
    let read = wait_until(Duration::from_secs(10), || {
        last = c.cmd(&["GET", &keys[0]]);
        last == Frame::bulk("v3")
    });
    assert!(read, "GET {} under replica-only: {last:?}", keys[0]);

    // Back to `master`: the push is acknowledged before the call returns, so from now on the
    // replica gets no read at all.
    set_policy(&cp, "master", 500);
    let replica_before = get_calls(&cp.servers[1]);
    let master_before = get_calls(&cp.servers[0]);
    for k in &keys {
        for _ in 0..10 {
            c.cmd(&["GET", k]);
        }
    }
    assert_eq!(
        get_calls(&cp.servers[1]),
        replica_before,
        "no read on the replica"
    );
    assert_eq!(
        get_calls(&cp.servers[0]) - master_before,
        50,
        "every read on the master"
    );
}

#[test]
fn a_read_policy_out_of_range_is_refused_with_the_reason() {
    let cp = two_groups(3);
    let r = cp.api().put(
        "/api/read-policy",
        &json!({"mode": "replica-only", "max_lag_ms": 10}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("between 200"), "{}", r.body);
    let r = cp
        .api()
        .put("/api/read-policy", &json!({"mode": "nearest"}));
    assert_eq!(r.status, 400, "{}", r.body);
    let v: ReadPolicyView = cp.api().get("/api/read-policy").ok_as();
    assert_eq!(v.policy.mode.as_str(), "master", "unchanged: {v:?}");
}

/// One acknowledged INCR: when the writer had the reply, and the value.
type Acked = (Instant, i64);

/// One read: when it was sent, when answered, the value.
type Read = (Instant, Instant, i64);

/// The highest value acknowledged at or before `t`, if any.
fn acked_by(acks: &[Acked], t: Instant) -> Option<i64> {
    let n = acks.partition_point(|(at, _)| *at <= t);
    n.checked_sub(1).map(|i| acks[i].1)
}

#[test]
fn replica_reads_are_never_older_than_the_bound_under_writes_and_a_frozen_replica() {
    const MAX_LAG: Duration = Duration::from_millis(500);
    let cp = two_groups(3);
    let key = keys_on(0, "lag:", 1).remove(0);
    let mut c = cp.proxies[0].raw();
    assert_eq!(c.cmd(&["SET", &key, "0"]), Frame::Simple("OK".into()));
    set_policy(&cp, "prefer-replica", MAX_LAG.as_millis() as u64);
    until_replica_serves(&mut c, &key, &cp.servers[1]);

    let stop = Arc::new(AtomicBool::new(false));
    let proxy = cp.proxies[0].addr();
    let writer = {
        let (stop, key) = (stop.clone(), key.clone());
        thread::spawn(move || {
            let mut c = RawClient::connect(proxy);
            let mut acks: Vec<Acked> = Vec::new();
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                match c.cmd(&["INCR", &key]) {
                    Frame::Integer(v) => acks.push((Instant::now(), v)),
                    other => panic!("INCR answered {other:?}"),
                }
            }
            acks
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, key) = (stop.clone(), key.clone());
            thread::spawn(move || {
                let mut c = RawClient::connect(proxy);
                let mut reads: Vec<Read> = Vec::new();
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                    let sent = Instant::now();
                    let reply = c.cmd(&["GET", &key]);
                    let v = reply
                        .text()
                        .and_then(|t| t.parse().ok())
                        .unwrap_or_else(|| panic!("GET answered {reply:?}"));
                    reads.push((sent, Instant::now(), v));
                }
                reads
            })
        })
        .collect();

    let replica_before = get_calls(&cp.servers[1]);
    thread::sleep(Duration::from_secs(2));
    let served_before_stop = get_calls(&cp.servers[1]) - replica_before;
    cp.servers[1].signal("-STOP");
    // Reads already sent to the frozen replica wait for it (they were fresh when routed);
    // reads routed once the bound has run out go to the master. A fresh connection shows
    // it: were one of its reads sent to the replica, it would wait for the SIGCONT that
    // this very thread has yet to send, and time out.
    thread::sleep(Duration::from_secs(1));
    let mut late = RawClient::connect(proxy);
    let mut late_reads = Vec::new();
    let frozen = Instant::now();
    while frozen.elapsed() < Duration::from_millis(1500) {
        let sent = Instant::now();
        let reply = late.cmd(&["GET", &key]);
        let v: i64 = reply
            .text()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("GET while the replica is frozen answered {reply:?}"));
        late_reads.push((sent, Instant::now(), v));
    }
    // The dashboard's view says it as the proxy found it: no proxy would read from the frozen
    // replica, whose proof was revoked when a probe failed (or, if none has failed yet, is
    // older than the bound).
    let v: ReadPolicyView = cp.api().get("/api/read-policy").ok_as();
    let r = v
        .replicas
        .iter()
        .find(|r| r.addr == cp.server_addr(1))
        .unwrap_or_else(|| panic!("the replica in {v:?}"));
    assert_eq!((v.proxies, r.fresh_on), (1, 0), "{v:?}");
    assert!(
        r.proven_ms_ago
            .is_none_or(|ms| u128::from(ms) > MAX_LAG.as_millis()),
        "{v:?}"
    );
    thread::sleep(Duration::from_millis(500));
    cp.servers[1].signal("-CONT");
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let acks = writer.join().expect("writer");
    let answered_while_frozen = late_reads.len();
    let reads: Vec<Read> = readers
        .into_iter()
        .flat_map(|r| r.join().expect("reader"))
        .chain(late_reads)
        .collect();
    let served_after = get_calls(&cp.servers[1]) - replica_before;

    assert!(acks.len() > 100, "the writer made {} writes", acks.len());
    assert!(
        served_before_stop > 20,
        "the replica served {served_before_stop} reads before it was frozen: the bound was not put to the test"
    );
    assert!(
        served_after > served_before_stop,
        "the replica served reads again after SIGCONT ({served_after} in all)"
    );
    let mut checked = 0;
    for &(sent, _, v) in &reads {
        let Some(floor) = sent.checked_sub(MAX_LAG).and_then(|t| acked_by(&acks, t)) else {
            continue;
        };
        checked += 1;
        assert!(
            v >= floor,
            "a read sent {:?} after the start returned {v}, older than {floor}, acknowledged {MAX_LAG:?} before it was sent",
            sent.duration_since(acks[0].0)
        );
    }
    assert!(checked > 100, "only {checked} reads could be checked");
    // While the replica was frozen, reads went on (to the master) once the bound ran out.
    assert!(
        answered_while_frozen > 10,
        "only {answered_while_frozen} reads were answered while the replica was frozen"
    );
}

/// While a slot is copied (migration v3) its source group owns it: its reads go where the
/// source's reads go (a fresh replica of the source allowed), never to the target, and
/// never miss. Once it is switched, the target's replicas serve it only with proofs made
/// after the switch: every key reads right at once, none missing.
#[test]
fn a_moving_slots_reads_stay_with_its_source_until_the_switch_and_never_miss_after() {
    let cp = two_groups(4);
    let mut c = cp.proxies[0].raw();
    // 400 keys in one slot of group 1, to move to group 2 at 20 keys/s: it stays copying
    // for far longer than the reads below take.
    let tag = keys_on(0, "mv", 1).remove(0);
    let moving = slot(tag.as_bytes());
    for i in 0..400 {
        let k = format!("{{{tag}}}:{i}");
        assert_eq!(c.cmd(&["SET", &k, "m"]), Frame::Simple("OK".into()));
    }
    let g2_key = keys_on(1, "settled:", 1).remove(0);
    assert_eq!(c.cmd(&["SET", &g2_key, "s"]), Frame::Simple("OK".into()));
    set_policy(&cp, "prefer-replica", 1000);
    // Group 2's replica is proven fresh and serving before the move starts.
    until_replica_serves(&mut c, &g2_key, &cp.servers[3]);

    let queued = cp
        .api()
        .post(
            "/api/migrations",
            &json!({"from": moving, "to": moving, "group": 2, "max_keys_per_sec": 20}),
        )
        .ok_as::<Queued>();
    assert_eq!(queued.queued, 1, "{queued:?}");
    let slots = || cp.api().get("/api/slots").ok_as::<Vec<SlotView>>();
    let copying = wait_until(Duration::from_secs(15), || {
        slots()[moving as usize]
            .action
            .as_ref()
            .is_some_and(|a| a.state == ActionState::Copying)
    });
    assert!(copying, "slot {moving} started copying");
    let target_before = (get_calls(&cp.servers[2]), get_calls(&cp.servers[3]));
    let source_before = get_calls(&cp.servers[0]) + get_calls(&cp.servers[1]);
    for i in (0..400).step_by(20) {
        let k = format!("{{{tag}}}:{i}");
        assert_eq!(
            c.cmd(&["GET", &k]),
            Frame::bulk("m"),
            "GET {k} while its slot is copied"
        );
    }
    let still = slots()[moving as usize].action.clone();
    assert!(
        still.is_some(),
        "the slot was still moving during the reads"
    );
    assert_eq!(
        (get_calls(&cp.servers[2]), get_calls(&cp.servers[3])),
        target_before,
        "the target served a read of a slot it does not own yet"
    );
    assert!(
        get_calls(&cp.servers[0]) + get_calls(&cp.servers[1]) >= source_before + 20,
        "the source group served the reads"
    );

    // At full speed the move ends; right after it, every key reads from group 2.
    cp.api().put("/api/migrations/throttle", &json!({})).ok();
    let moved = wait_until(Duration::from_secs(60), || {
        slots()[moving as usize].group == Some(GroupId(2))
    });
    assert!(moved, "slot {moving} moved to group 2");
    let source_after = get_calls(&cp.servers[0]) + get_calls(&cp.servers[1]);
    for i in 0..400 {
        let k = format!("{{{tag}}}:{i}");
        assert_eq!(
            c.cmd(&["GET", &k]),
            Frame::bulk("m"),
            "GET {k} right after the switch"
        );
    }
    assert_eq!(
        get_calls(&cp.servers[0]) + get_calls(&cp.servers[1]),
        source_after,
        "the source served a read after the switch"
    );
}
