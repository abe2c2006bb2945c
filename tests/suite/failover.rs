//! A group's master dies: once the dashboard's health checks declare it down, the proxies
//! answer that group's slots with a clear error (and keep serving every other slot); after
//! the replica is promoted, the group serves again, with the data it had by replication.
//! With automatic failover on (docs/failover.md), the dashboard promotes it itself, within
//! the lag bound, and says why when it will not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_wire::audit::AuditEntry;
use tessera_wire::cluster::{GroupView, Overview, ServerRole};
use tessera_wire::console::MergedEntry;
use tessera_wire::failover::{FailoverState, FailoverView, GroupStatus};
use tessera_wire::tokens::CreatedToken;
use tessera_wire::topology::{GroupId, MastersSeen};

use crate::support::{
    Console, ConsoleSetup, ControlPlane, Frame, RawClient, TOKEN, keys_on, wait_until,
};

#[test]
fn killed_master_fails_its_slots_with_a_clear_error_and_recovers_after_promote() {
    // Group 1: master server 0, replica server 1. Group 2: master server 2.
    let mut cp = ControlPlane::builder().servers(3).proxies(1).start();
    cp.group(1, &[0, 1]);
    cp.group(2, &[2]);
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2);
    let group1_keys = keys_on(0, "failover:", 5);
    let group2_keys = keys_on(1, "failover:", 2);
    let mut session = cp.proxies[0].raw();
    for key in group1_keys.iter().chain(&group2_keys) {
        assert_eq!(
            session.cmd(&["SET", key, "before"]),
            Frame::Simple("OK".into()),
            "SET {key}"
        );
    }
    let replicated = wait_until(Duration::from_secs(10), || {
        group1_keys.iter().all(|k| cp.servers[1].has(k))
    });
    assert!(replicated, "the replica got group 1's keys within 10 s");

    let dead = cp.server_addr(0);
    let replica = cp.server_addr(1);
    cp.servers[0].kill();

    // Health checks run every 200 ms and declare a master down after 2 failures.
    let expected = format!("ERR group 1 master {dead} is down");
    let mut last = Frame::Null;
    let declared = wait_until(Duration::from_secs(10), || {
        last = session.cmd(&["GET", &group1_keys[0]]);
        last.error() == Some(expected.as_str())
    });
    assert!(
        declared,
        "within 10 s, group 1's slots answer {expected:?}; last reply: {last:?}"
    );
    for key in &group1_keys {
        assert_eq!(
            session.cmd(&["SET", key, "x"]),
            Frame::Error(expected.clone()),
            "SET {key} while group 1 is down"
        );
    }
    for key in &group2_keys {
        assert_eq!(
            session.cmd(&["GET", key]),
            Frame::bulk("before"),
            "group 2 keeps serving {key}"
        );
    }
    let groups = groups(&cp);
    assert!(groups[0].down, "group 1 is shown down: {groups:?}");
    assert!(!groups[1].down, "group 2 is up: {groups:?}");

    let promoted: GroupView = cp
        .api()
        .post("/api/groups/1/promote", &json!({ "addr": replica }))
        .ok_as();
    assert_eq!(promoted.servers[0].addr, replica, "{promoted:?}");
    assert_eq!(promoted.servers[0].role, ServerRole::Master, "{promoted:?}");
    assert!(!promoted.down, "{promoted:?}");

    // The promote returned after the push: no wait.
    for key in &group1_keys {
        assert_eq!(
            session.cmd(&["GET", key]),
            Frame::bulk("before"),
            "{key} is served by the promoted replica with its replicated value"
        );
    }
    let fresh = keys_on(0, "after-promote:", 1).remove(0);
    assert_eq!(
        session.cmd(&["SET", &fresh, "new"]),
        Frame::Simple("OK".into()),
        "group 1 takes writes again"
    );
    assert!(
        cp.servers[1].has(&fresh),
        "the write reached the new master"
    );
    for key in &group2_keys {
        assert_eq!(session.cmd(&["GET", key]), Frame::bulk("before"));
    }
}

// === automatic failover (docs/failover.md) ===

/// Every group, as `GET /api/groups` shows it.
fn groups(cp: &ControlPlane) -> Vec<GroupView> {
    cp.api().get("/api/groups").ok_as()
}

/// `GET /api/failover`.
fn failover(cp: &ControlPlane) -> FailoverView {
    cp.api().get("/api/failover").ok_as()
}

/// Turns automatic failover on with the test's settings: fast (2 failed checks of 200 ms),
/// and `max_lag_bytes` as given.
fn failover_on(cp: &ControlPlane, max_lag_bytes: u64) -> FailoverView {
    let v = cp
        .api()
        .put(
            "/api/failover",
            &json!({
                "enabled": true,
                "max_lag_bytes": max_lag_bytes,
                "down_after_checks": 2,
                "cooldown_secs": 60,
            }),
        )
        .ok_as::<FailoverView>();
    assert!(v.settings.enabled, "{v:?}");
    v
}

/// Group 1 of servers 0 (master) and 1 (replica), owning every slot.
fn one_group_with_a_replica(proxies: usize) -> ControlPlane {
    let cp = ControlPlane::builder().servers(2).proxies(proxies).start();
    cp.group(1, &[0, 1]);
    cp.assign(0, 1023, 1);
    cp
}

/// Waits (bounded) until group 1's failover status has `kind`; returns it.
fn wait_for_status(cp: &ControlPlane, kind: &str) -> GroupStatus {
    let mut last = None;
    let seen = wait_until(Duration::from_secs(15), || {
        let f = failover(cp);
        let found = f
            .groups
            .iter()
            .any(|s| s.group == GroupId(1) && s.kind == kind);
        last = Some(f);
        found
    });
    assert!(
        seen,
        "within 15 s, /api/failover shows group 1 as {kind:?}: {last:?}"
    );
    last.expect("read above")
        .groups
        .into_iter()
        .find(|s| s.group == GroupId(1))
        .expect("found above")
}

/// Waits (bounded) until `/api/failover` lists a completed failover (recorded once the new
/// topology is acknowledged, just after the group shows its new master); returns it all.
fn wait_for_event(cp: &ControlPlane) -> FailoverView {
    let mut last = None;
    let seen = wait_until(Duration::from_secs(10), || {
        let f = failover(cp);
        let found = !f.events.is_empty();
        last = Some(f);
        found
    });
    assert!(
        seen,
        "within 10 s, /api/failover lists the failover: {last:?}"
    );
    last.expect("read above")
}

/// Whether (within 10 s: entries are written just after the state they describe) an audit
/// entry recorded by failover itself matches `pred`.
fn audited(cp: &ControlPlane, pred: impl Fn(&AuditEntry) -> bool) -> bool {
    wait_until(Duration::from_secs(10), || {
        failover_audit(cp).iter().any(&pred)
    })
}

/// The audit entries recorded by failover itself.
fn failover_audit(cp: &ControlPlane) -> Vec<AuditEntry> {
    let all: Vec<AuditEntry> = cp.api().get("/api/audit?limit=1000").ok_as();
    all.into_iter().filter(|e| e.actor == "failover").collect()
}

#[test]
fn with_failover_off_a_killed_master_stays_down_and_the_api_says_why() {
    let mut cp = one_group_with_a_replica(1);
    let defaults = failover(&cp);
    assert!(!defaults.settings.enabled, "off by default: {defaults:?}");
    let key = keys_on(0, "off:", 1).remove(0);
    let mut session = cp.proxies[0].raw();
    assert_eq!(session.cmd(&["SET", &key, "v"]), Frame::Simple("OK".into()));
    assert!(wait_until(Duration::from_secs(10), || cp.servers[1].has(&key)));
    let dead = cp.server_addr(0);
    cp.servers[0].kill();

    let status = wait_for_status(&cp, "off");
    assert_eq!(status.state, FailoverState::Off, "{status:?}");
    assert!(
        status.reason.contains("promote a replica by hand"),
        "{status:?}"
    );
    // Ten more rounds of checks: still nobody promoted.
    std::thread::sleep(Duration::from_secs(2));
    let groups = groups(&cp);
    assert_eq!(groups[0].servers[0].addr, dead, "{groups:?}");
    assert!(groups[0].down, "{groups:?}");
    assert_eq!(
        groups[0].failover.as_ref().map(|f| f.kind.as_str()),
        Some("off"),
        "{groups:?}"
    );
    let expected = format!("ERR group 1 master {dead} is down");
    assert_eq!(session.cmd(&["GET", &key]), Frame::Error(expected));
    assert!(failover_audit(&cp).is_empty(), "no failover was recorded");
}

/// One reply seen by the writer: when, which key, the value an acknowledged INCR returned.
struct Ack {
    at: Instant,
    key: usize,
    value: Option<i64>,
}

#[test]
fn killed_master_under_write_load_fails_over_within_the_lag_bound_and_rejoins_as_a_replica() {
    const MAX_LAG: u64 = 64 * 1024;
    let mut cp = one_group_with_a_replica(2);
    let old_master = cp.server_addr(0);
    let replica = cp.server_addr(1);
    // Each proxy answers "do you reach the masters?" to the dashboard only.
    let r = cp.proxies[0]
        .admin()
        .without_token()
        .get("/api/proxy/masters");
    assert_eq!(r.status, 401, "{}", r.body);
    let seen: MastersSeen = cp.proxies[0]
        .admin()
        .with_token(&cp.proxy_secret())
        .get("/api/proxy/masters")
        .ok_as();
    assert_eq!(seen.masters[0].addr, old_master, "{seen:?}");
    assert!(seen.masters[0].reachable, "{seen:?}");
    failover_on(&cp, MAX_LAG);
    // The replica's first sync (which Redis delays by a few seconds) must be done: until
    // then it lags by everything, and failover would rightly refuse it.
    let mut g = Vec::new();
    let in_sync = wait_until(Duration::from_secs(20), || {
        g = groups(&cp);
        g[0].servers[1].master_link.as_deref() == Some("up") && g[0].servers[1].lag_bytes == Some(0)
    });
    assert!(in_sync, "within 20 s, the replica is in sync: {g:?}");

    // A writer through proxy 0: INCRs on four keys, one at a time, every reply kept.
    let keys: Vec<String> = (0..4).map(|i| format!("load:{i}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (keys, stop, addr) = (keys.clone(), stop.clone(), cp.proxies[0].addr());
        std::thread::spawn(move || {
            let mut c = RawClient::connect(addr);
            let mut acks = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            for n in 0usize.. {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                let key = n % keys.len();
                let value = match c.cmd(&["INCR", &keys[key]]) {
                    Frame::Integer(v) => Some(v),
                    _ => {
                        std::thread::sleep(Duration::from_millis(2));
                        None
                    }
                };
                acks.push(Ack {
                    at: Instant::now(),
                    key,
                    value,
                });
            }
            acks
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    cp.servers[0].kill();
    let killed = Instant::now();

    let promoted = wait_until(Duration::from_secs(20), || {
        g = groups(&cp);
        g[0].servers[0].addr == replica && !g[0].down
    });
    assert!(
        promoted,
        "within 20 s, the replica is group 1's master: {g:?}"
    );
    // Let the writer show that writes resume.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let acks = writer.join().expect("the writer thread");

    // Replies before the first error came from the old master; after it, from the new one.
    let first_error = acks
        .iter()
        .position(|a| a.value.is_none())
        .expect("the writer saw errors while group 1 had no master");
    let (before, after) = acks.split_at(first_error);
    assert!(
        before.len() > 50,
        "the writer wrote before the kill: {}",
        before.len()
    );
    let resumed = after
        .iter()
        .find(|a| a.value.is_some())
        .expect("writes resumed after the failover");
    assert!(
        after.iter().filter(|a| a.value.is_some()).count() > 20,
        "writes keep succeeding after the failover"
    );
    let mut lost_writes = 0;
    let mut lost_bytes = 0;
    for (k, key) in keys.iter().enumerate() {
        let last_acked = before
            .iter()
            .filter(|a| a.key == k)
            .filter_map(|a| a.value)
            .max();
        let next = after.iter().filter(|a| a.key == k).find_map(|a| a.value);
        let (Some(last_acked), Some(next)) = (last_acked, next) else {
            continue;
        };
        // The new master had `next - 1`: acknowledged INCRs above it are lost. It may have one
        // more than was acknowledged: the INCR in flight at the kill, executed and replicated
        // but never answered (the client saw an error). More than that is a bug.
        let had = next - 1;
        assert!(
            had <= last_acked + 1,
            "{key}: the new master had {had}, but only {last_acked} were acknowledged and one was in flight"
        );
        let lost = (last_acked - had).max(0);
        lost_writes += lost;
        // What one INCR of this key costs in the replication stream.
        lost_bytes += lost as u64 * crate::support::encode(&["INCR", key]).len() as u64;
    }
    let write_gap = resumed.at.duration_since(killed);
    eprintln!(
        "failover under load: {} acknowledged writes before the kill, {lost_writes} lost ({lost_bytes} bytes \
         of replication stream, bound {MAX_LAG}), first write accepted {} ms after kill -9",
        before.len(),
        write_gap.as_millis()
    );
    assert!(
        lost_bytes <= MAX_LAG,
        "lost {lost_writes} acknowledged writes ({lost_bytes} bytes), more than max_lag_bytes {MAX_LAG}"
    );
    assert!(write_gap < Duration::from_secs(20), "{write_gap:?}");

    // The API and the CLI report it, with its time.
    let f = wait_for_event(&cp);
    let event = &f.events[0];
    assert_eq!(event.group, GroupId(1), "{f:?}");
    assert_eq!(event.old_master, old_master, "{f:?}");
    assert_eq!(event.new_master, replica, "{f:?}");
    assert_eq!(
        (event.votes, event.proxies),
        (2, 2),
        "both proxies saw it down: {f:?}"
    );
    let failover_ms = event.failover_ms.expect("a failover time");
    assert!(
        u64::try_from(event.lag_bytes).is_ok_and(|l| l <= MAX_LAG),
        "{f:?}"
    );
    eprintln!(
        "failover: detected {:?} ms after the first failed check, new topology acknowledged after {failover_ms} ms",
        event.detect_ms
    );
    let out = cp.admin_cli(TOKEN, &["failover", "status"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("{failover_ms} ms")), "{stdout}");
    assert!(stdout.contains(&replica), "{stdout}");

    // The audit log (which the console shows) records it.
    assert!(
        audited(&cp, |e| e.status == 200
            && e.method == "FAILOVER"
            && e.detail.contains(&format!("promoted {replica}"))),
        "the failover is audited"
    );

    // The old master comes back (empty, as after a crash without persistence): it is made a
    // replica of the new master and gets its data.
    cp.servers[0].restart();
    let new_port = cp.servers[1].port() as i64;
    let mut role = Frame::Null;
    let rejoined = wait_until(Duration::from_secs(20), || {
        role = cp.servers[0].raw().cmd(&["ROLE"]);
        matches!(&role, Frame::Array(r) if r.first() == Some(&Frame::bulk("slave"))
            && r.get(2) == Some(&Frame::Integer(new_port)))
    });
    assert!(
        rejoined,
        "within 20 s, the old master replicates the new one: ROLE {role:?}"
    );
    let synced = wait_until(Duration::from_secs(20), || cp.servers[0].has(&keys[0]));
    assert!(synced, "the old master got the new master's data");
    // Recorded just after the REPLICAOF: a moment later than ROLE may show it.
    let mut f = None;
    let recorded = wait_until(Duration::from_secs(10), || {
        let now = failover(&cp);
        let empty = now.rejoin.is_empty();
        f = Some(now);
        empty
    });
    assert!(recorded, "nothing left to rejoin: {f:?}");
    assert!(
        audited(&cp, |e| e.detail.contains(&format!(
            "{old_master} answers again: now a replica of {replica}"
        ))),
        "the rejoin is audited"
    );
    let groups = groups(&cp);
    assert_eq!(groups[0].servers[1].addr, old_master, "{groups:?}");
    assert_eq!(groups[0].servers[1].role, ServerRole::Replica, "{groups:?}");
}

#[test]
fn replica_lagging_past_the_bound_is_not_promoted_and_the_api_says_why() {
    let mut cp = one_group_with_a_replica(1);
    let mut session = cp.proxies[0].raw();
    let first = keys_on(0, "lag:", 1).remove(0);
    assert_eq!(
        session.cmd(&["SET", &first, "v"]),
        Frame::Simple("OK".into())
    );
    assert!(wait_until(Duration::from_secs(10), || cp.servers[1].has(&first)));
    failover_on(&cp, 100);
    // Cut the replica off its master, keeping its data and offset (it now follows a port
    // nobody listens on), then write ~13 KB it will never get.
    let nowhere = crate::support::free_port().to_string();
    let r = cp.servers[1]
        .raw()
        .cmd(&["REPLICAOF", "127.0.0.1", &nowhere]);
    assert!(r.error().is_none(), "{r:?}");
    let value = "x".repeat(100);
    for i in 0..100 {
        let k = format!("lag:{i}");
        assert_eq!(
            session.cmd(&["SET", &k, &value]),
            Frame::Simple("OK".into())
        );
    }
    let mut g = Vec::new();
    let lagging = wait_until(Duration::from_secs(10), || {
        g = groups(&cp);
        g[0].servers[1].lag_bytes.is_some_and(|l| l > 10_000)
    });
    assert!(lagging, "the dashboard sees the replica lag: {g:?}");
    let master = cp.server_addr(0);
    cp.servers[0].kill();

    let status = wait_for_status(&cp, "lag");
    assert_eq!(status.state, FailoverState::Refused, "{status:?}");
    let reason = &status.reason;
    assert!(reason.contains("more than max_lag_bytes 100"), "{reason}");
    assert!(reason.contains(&cp.server_addr(1)), "{reason}");
    std::thread::sleep(Duration::from_secs(1));
    g = groups(&cp);
    assert_eq!(g[0].servers[0].addr, master, "not promoted: {g:?}");
    assert_eq!(
        g[0].failover.as_ref().map(|f| f.kind.as_str()),
        Some("lag"),
        "the group says why: {g:?}"
    );
    let metrics = cp.api().get("/metrics").body;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("tessera_group_failover_refused{")
                && l.contains("group=\"1\"")
                && l.ends_with(" 1")),
        "{metrics}"
    );
    let overview: Overview = cp.api().get("/api/overview").ok_as();
    assert_eq!(
        overview.failover.not_failing_over[0].kind, "lag",
        "{overview:?}"
    );
    assert!(
        audited(&cp, |e| e.status == 409
            && e.detail.contains("more than max_lag_bytes 100")),
        "the refusal is audited"
    );

    // An operator accepting the loss raises the bound: failover proceeds.
    cp.api()
        .put("/api/failover", &json!({ "max_lag_bytes": 1 << 20 }))
        .ok_as::<FailoverView>();
    let promoted = wait_until(Duration::from_secs(15), || {
        g = groups(&cp);
        g[0].servers[0].addr == cp.server_addr(1)
    });
    assert!(
        promoted,
        "with a larger bound the replica is promoted: {g:?}"
    );
    let f = wait_for_event(&cp);
    assert!(f.events[0].lag_bytes > 10_000, "{f:?}");
    assert!(f.groups.is_empty(), "{f:?}");
}

#[test]
fn failover_settings_need_an_admin_and_are_validated() {
    let cp = ControlPlane::builder().servers(0).proxies(0).start();
    let bad = cp
        .api()
        .put("/api/failover", &json!({ "down_after_checks": 0 }));
    let msg = bad.expect_error(400, "bad_request");
    assert!(msg.contains("down_after_checks"), "{msg}");
    let unknown = cp.api().put("/api/failover", &json!({ "enable": true }));
    unknown.expect_error(400, "bad_request");
    let viewer: CreatedToken = cp
        .api()
        .post("/api/tokens", &json!({"name": "v", "role": "viewer"}))
        .ok_as();
    let as_viewer = cp.api().with_token(&viewer.token);
    as_viewer.get("/api/failover").ok_as::<FailoverView>();
    as_viewer
        .put("/api/failover", &json!({ "enabled": true }))
        .expect_error(403, "forbidden");
    let out = cp.admin_cli(TOKEN, &["failover", "on", "--max-lag-bytes", "4096"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("automatic failover: on"), "{stdout}");
    let v = failover(&cp);
    assert_eq!(v.settings.max_lag_bytes, 4096, "{v:?}");
    // Persisted: a successor dashboard has the same settings.
    let mut cp = cp;
    cp.restart_dashboard();
    let v = failover(&cp);
    assert!(v.settings.enabled, "{v:?}");
    assert_eq!(v.settings.max_lag_bytes, 4096, "{v:?}");
}

#[test]
fn a_decision_persisted_before_a_dashboard_crash_is_completed_by_its_successor() {
    let mut cp = one_group_with_a_replica(1);
    failover_on(&cp, 1 << 20);
    let (master, replica) = (cp.server_addr(0), cp.server_addr(1));
    // The dashboard decided to promote the replica, persisted that, ran REPLICAOF NO ONE on
    // it, and died before the group's model and the proxies knew; the master died too.
    cp.kill_dashboard();
    cp.servers[0].kill();
    let r = cp.servers[1].raw().cmd(&["REPLICAOF", "NO", "ONE"]);
    assert_eq!(r, Frame::Simple("OK".into()));
    let key = "/tessera/testc/failover";
    let mut doc = cp.store_json(key);
    doc["pending"] = json!({
        "group": 1, "from": master, "to": replica, "offset": 0, "lag_bytes": 0,
        "votes": 1, "proxies": 1, "decided_ms": 1,
    });
    cp.with_store(async |s| {
        s.put(key, doc.to_string().into_bytes().into())
            .await
            .expect("store put")
    });
    // A successor never saw the dead master's offset, so it would refuse to choose a
    // replica itself ("unknown_offset"): only the persisted decision promotes this one.
    cp.restart_dashboard();
    let f = wait_for_event(&cp);
    let event = &f.events[0];
    assert_eq!(event.new_master, replica, "{f:?}");
    assert!(event.resumed, "{f:?}");
    assert_eq!(f.pending, None, "{f:?}");
    let groups = groups(&cp);
    assert_eq!(groups[0].servers[0].addr, replica, "{groups:?}");
    assert!(!groups[0].down, "{groups:?}");
    let mut session = cp.proxies[0].raw();
    assert_eq!(
        session.cmd(&["SET", "after-resume", "v"]),
        Frame::Simple("OK".into()),
        "the proxies route to the promoted replica"
    );
    assert!(cp.servers[1].has("after-resume"));
    assert!(
        audited(&cp, |e| e
            .detail
            .contains("completed after a dashboard restart")),
        "audited"
    );

    // The console's audit page (its merged log) shows the failover with its cluster.
    let cluster = cp.options().cluster.clone();
    let console = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![("ada".to_owned(), "pw".to_owned())],
        roles: vec![("ada".to_owned(), "admin".to_owned())],
        tokens: vec![(cluster.clone(), TOKEN.to_owned())],
        ..ConsoleSetup::default()
    });
    let merged: Vec<MergedEntry> = console.login("ada", "pw").get("/api/audit").ok_as();
    assert!(
        merged.iter().any(|e| e.cluster == cluster
            && e.entry.actor == "failover"
            && e.entry.method == "FAILOVER"
            && e.entry.detail.contains(&format!("promoted {replica}"))),
        "the console lists the failover: {merged:?}"
    );
}

#[test]
fn a_master_the_proxies_still_reach_is_not_failed_over() {
    let cp = one_group_with_a_replica(1);
    failover_on(&cp, 1 << 20);
    let master = cp.server_addr(0);
    // The dashboard's checks fail (its user is disabled and `default` needs a password, so it
    // cannot create it again), while the master is alive: the proxy's PING gets -NOAUTH.
    let mut m = cp.servers[0].raw();
    for cmd in [
        &["ACL", "SETUSER", "tessera-admin", "off"][..],
        &["ACL", "SETUSER", "default", "resetpass", ">locked-out"][..],
    ] {
        assert_eq!(m.cmd(cmd), Frame::Simple("OK".into()), "{cmd:?}");
    }
    let status = wait_for_status(&cp, "quorum");
    assert_eq!(status.state, FailoverState::Waiting, "{status:?}");
    let reason = &status.reason;
    assert!(
        reason.contains(&format!("0 of 1 online proxies see master {master} down"))
            && reason.contains("1 still reach it"),
        "{reason}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let groups = groups(&cp);
    assert_eq!(
        groups[0].servers[0].addr, master,
        "not promoted: {groups:?}"
    );
    assert!(
        audited(&cp, |e| e.status == 409
            && e.detail.contains("0 of 1 online proxies")),
        "the refusal is audited"
    );

    // Its checks answer again: the group is up, nothing to explain any more.
    for cmd in [
        &["ACL", "SETUSER", "default", "nopass"][..],
        &["ACL", "SETUSER", "tessera-admin", "on"][..],
    ] {
        assert_eq!(m.cmd(cmd), Frame::Simple("OK".into()), "{cmd:?}");
    }
    let mut f = None;
    let cleared = wait_until(Duration::from_secs(10), || {
        let now = failover(&cp);
        let empty = now.groups.is_empty();
        f = Some(now);
        empty
    });
    assert!(cleared, "{f:?}");
    let f = f.expect("read above");
    assert!(f.events.is_empty(), "no failover happened: {f:?}");
}
