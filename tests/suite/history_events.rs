//! The dashboard's metrics history and events with real processes: commands driven through a
//! proxy come back as a rate whose sum is their count; a proxy killed and started again never
//! gives a negative rate; hostile queries are refused with a reason; a proxy frozen by SIGSTOP
//! gives a "lost" event and SIGCONT a "back" one; a migration gives its event; events survive
//! a dashboard restart; `tessera admin events` prints them; one token holds at most 8
//! waiting event requests.

use std::thread;
use std::time::Duration;

use serde_json::json;
use tessera_wire::events::{Event, EventKind, EventsPage, Severity};
use tessera_wire::history::{History, SeriesKind, SeriesList};

use crate::migration::{idle, wait_for};
use crate::support::{
    ControlPlane, Dashboard, DashboardOptions, Etcd, RawClient, TOKEN, cli_stdout,
};

fn events(cp: &ControlPlane) -> Vec<Event> {
    cp.api()
        .get("/api/events?limit=1000")
        .ok_as::<EventsPage>()
        .events
}

fn has_event(cp: &ControlPlane, kind: EventKind, addr: &str) -> bool {
    events(cp)
        .iter()
        .any(|e| e.kind == kind && e.detail.contains(addr))
}

fn history(cp: &ControlPlane, query: &str) -> History {
    cp.api().get(&format!("/api/history?{query}")).ok_as()
}

/// Sends `n` SETs through `client`, each answered before the next.
fn drive(client: &mut RawClient, n: usize) {
    for i in 0..n {
        let r = client.cmd(&["SET", &format!("k{i}"), "v"]);
        assert_eq!(r.text().as_deref(), Some("OK"), "{r:?}");
    }
}

/// The sum of the per-second points of `series` over the last five minutes: the count of
/// what it measures, when each point is a rate over one second.
fn integral(cp: &ControlPlane, series: &str) -> f64 {
    let l: SeriesList = cp.api().get("/api/history/series").ok_as();
    if !l.series.iter().any(|s| s.id == series) {
        return 0.0;
    }
    let h = history(cp, &format!("range=5m&series={series}"));
    assert_eq!(h.step_secs, 1);
    h.series[0].values.iter().flatten().sum()
}

#[test]
fn the_history_gives_rates_that_add_up_to_the_commands_sent_and_never_go_negative() {
    let mut cp = ControlPlane::builder().servers(1).proxies(1).start();
    cp.group(1, &[0]);
    cp.assign(0, 1023, 1);
    // The sampler has seen the proxy (its counters have a first reading).
    wait_for("the history to list ops", Duration::from_secs(20), || {
        let l: SeriesList = cp.api().get("/api/history/series").ok_as();
        l.series.iter().any(|s| s.id == "ops")
    });
    // No SET was sent yet.
    let before = integral(&cp, "cmd:set");
    let mut c = RawClient::connect(cp.proxies[0].addr());
    const N: usize = 3000;
    drive(&mut c, N);
    // Every command is counted once the sampler has read past them (a few seconds).
    wait_for(
        "the rate of SET to add up to the commands sent",
        Duration::from_secs(30),
        || {
            let sum = integral(&cp, "cmd:set") - before;
            (sum - N as f64).abs() <= N as f64 * 0.05
        },
    );
    let h = history(&cp, "range=5m&series=ops,cmd:set,latency:p99,sessions");
    let by_id = |id: &str| h.series.iter().find(|s| s.info.id == id).unwrap();
    assert_eq!(by_id("ops").info.kind, SeriesKind::Rate);
    assert_eq!(by_id("ops").info.unit, "ops/s");
    assert_eq!(by_id("latency:p99").info.unit, "s");
    assert_eq!(by_id("sessions").info.kind, SeriesKind::Gauge);
    assert!(
        by_id("latency:p99")
            .values
            .iter()
            .flatten()
            .any(|v| *v > 0.0),
        "{h:?}"
    );
    assert_eq!(h.timestamps.len(), by_id("ops").values.len());

    // The proxy is killed and another started: its counters start from 0 again.
    drop(c);
    cp.proxies[0].kill();
    let i = cp.start_proxy();
    wait_for(
        "the new proxy to be listed",
        Duration::from_secs(30),
        || {
            let l: SeriesList = cp.api().get("/api/history/series").ok_as();
            let addr = cp.proxies[i].addr().to_string();
            l.series.iter().any(|s| s.id == format!("proxy:{addr}"))
        },
    );
    // What the first proxy's SETs added up to (within 5 % of N above); the new proxy's add
    // to that.
    let first = integral(&cp, "cmd:set");
    let mut c = RawClient::connect(cp.proxies[i].addr());
    drive(&mut c, 500);
    wait_for(
        "the new proxy's commands in the history",
        Duration::from_secs(30),
        || integral(&cp, "cmd:set") - first >= 450.0,
    );
    let h = history(&cp, "range=1h&series=ops,cmd:set,errors");
    for s in &h.series {
        for v in s.values.iter().flatten() {
            assert!(*v >= 0.0, "{} went negative: {:?}", s.info.id, s.values);
            // One proxy answering one command at a time: far below this.
            assert!(*v < 1e6, "{} spiked: {:?}", s.info.id, s.values);
        }
    }
    // The 6h range reads minute points made from the seconds.
    let h = history(&cp, "range=6h&series=cmd:set");
    assert_eq!(h.step_secs, 60);
    assert!(
        h.series[0].values.iter().flatten().any(|v| *v > 0.0),
        "{h:?}"
    );
}

#[test]
fn hostile_history_and_events_queries_get_a_400_with_a_reason() {
    let cp = ControlPlane::builder().servers(1).proxies(0).start();
    let api = cp.api();
    let many = vec!["ops"; 40].join(",");
    let long = "x".repeat(5000);
    for (path, says) in [
        ("/api/history?range=1y", "unknown range"),
        ("/api/history?range=5m&series=nope", "no series"),
        ("/api/history?series=%2C%2C", "names no series"),
        (
            &format!("/api/history?series={many}") as &str,
            "limit of 32",
        ),
        (&format!("/api/history?series={long}"), "bytes long"),
        ("/api/history?bogus=1", "unknown field"),
        ("/api/events?limit=0", "limit must be"),
        ("/api/events?limit=100000", "limit must be"),
        ("/api/events?wait=3600&after=0", "wait must be"),
        ("/api/events?after=-1", "after"),
    ] {
        let msg = api.get(path).expect_error(400, "bad_request");
        assert!(msg.contains(says), "{path}: {msg}");
    }
    // A viewer reads both (metrics and sentences, no client data).
    let viewer = api
        .post("/api/tokens", &json!({"name": "watch", "role": "viewer"}))
        .ok();
    let v = api.with_token(viewer["token"].as_str().unwrap());
    v.get("/api/history").ok();
    v.get("/api/history/series").ok();
    v.get("/api/events").ok();
}

#[test]
fn one_token_holds_at_most_eight_waiting_event_requests() {
    let cp = ControlPlane::builder().servers(1).proxies(0).start();
    let api = cp.api();
    let token = |name: &str| {
        let t = api
            .post("/api/tokens", &json!({"name": name, "role": "viewer"}))
            .ok();
        api.with_token(t["token"].as_str().unwrap())
    };
    let follower = token("follower");
    let last = follower.get("/api/events").ok_as::<EventsPage>().last_id;
    // Nine waits at once: nothing happens in this cluster meanwhile, so eight run their whole
    // 10 s and the one that came last is refused at once, with the reason.
    let path = format!("/api/events?after={last}&wait=10");
    let (tx, rx) = std::sync::mpsc::channel();
    let waits: Vec<_> = (0..9)
        .map(|_| {
            let (api, path, tx) = (follower.clone(), path.clone(), tx.clone());
            thread::spawn(move || tx.send(api.get(&path)).expect("the test is listening"))
        })
        .collect();
    let first = rx
        .recv_timeout(Duration::from_secs(8))
        .expect("one of nine waits answered before the others' 10 s");
    let msg = first.expect_error(429, "too_many_requests");
    assert!(msg.contains("follower holds 8 waiting"), "{msg}");
    // Another token, and a read without wait by the same one, are served meanwhile.
    let other = token("other");
    assert_eq!(
        other
            .get(&format!("/api/events?after={last}&wait=1"))
            .status,
        200
    );
    follower.get("/api/events").ok();
    for w in waits {
        w.join().expect("a waiting request");
    }
    let rest: Vec<u16> = rx.try_iter().map(|r| r.status).collect();
    assert_eq!(rest, [200; 8], "the eight that waited");
    // Their slots are given back when they answer.
    assert_eq!(
        follower
            .get(&format!("/api/events?after={last}&wait=1"))
            .status,
        200
    );
}

#[test]
fn a_frozen_proxy_gives_lost_then_back_and_events_survive_a_dashboard_restart() {
    let mut cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let addr = cp.proxies[0].addr().to_string();
    // The dashboard's lock is the first event.
    assert!(
        events(&cp)
            .iter()
            .any(|e| e.kind == EventKind::LockAcquired),
        "{:?}",
        events(&cp)
    );
    cp.proxies[0].signal("-STOP");
    let lost = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for("a lost event", Duration::from_secs(30), || {
            has_event(&cp, EventKind::ProxyLost, &addr)
        })
    }));
    cp.proxies[0].signal("-CONT");
    if let Err(e) = lost {
        std::panic::resume_unwind(e);
    }
    wait_for("a back event", Duration::from_secs(60), || {
        has_event(&cp, EventKind::ProxyBack, &addr)
    });
    let all = events(&cp);
    let lost = all.iter().find(|e| e.kind == EventKind::ProxyLost).unwrap();
    let back = all
        .iter()
        .rfind(|e| e.kind == EventKind::ProxyBack)
        .unwrap();
    assert_eq!(lost.severity, Severity::Critical);
    assert!(back.id > lost.id && back.time_ms >= lost.time_ms, "{all:?}");

    // A migration that finishes says so.
    cp.api()
        .post("/api/migrations", &json!({"from": 0, "to": 9, "group": 2}))
        .ok();
    wait_for("the migration to finish", Duration::from_secs(60), || {
        idle(&cp)
    });
    wait_for("a migration event", Duration::from_secs(20), || {
        events(&cp)
            .iter()
            .any(|e| e.kind == EventKind::MigrationFinished && e.detail.contains("10 slots"))
    });

    // The CLI prints them: time, severity, sentence.
    let out = cli_stdout(&cp.admin_cli(TOKEN, &["events"]), "events");
    let line = out
        .lines()
        .find(|l| l.contains(&addr) && l.contains("is lost"))
        .unwrap_or_else(|| panic!("no lost line in:\n{out}"));
    assert!(line.contains("critical") && line.contains("Z "), "{line}");

    // A new dashboard shows them (read back from the store) and numbers after them.
    let before = events(&cp);
    // Written within a second or so of the last one.
    wait_for(
        "the events to reach the store",
        Duration::from_secs(10),
        || {
            let key = format!("/tessera/{}/events", cp.options().cluster);
            let stored = cp.with_store(async |s| s.get(&key).await.expect("store get"));
            stored.is_some_and(|v| {
                let doc: serde_json::Value =
                    serde_json::from_slice(&v.value).expect("a JSON document");
                doc["events"].as_array().map_or(0, |a| a.len()) >= before.len()
            })
        },
    );
    cp.restart_dashboard();
    let after = events(&cp);
    for e in &before {
        assert!(
            after.contains(e),
            "{e:?} was lost in the restart: {after:?}"
        );
    }
    let newest = before.last().unwrap().id;
    assert!(
        after
            .iter()
            .any(|e| e.kind == EventKind::LockAcquired && e.id > newest),
        "{after:?}"
    );
}

#[test]
fn events_survive_a_dashboard_restart_on_an_etcd_store() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let etcd = rt.block_on(Etcd::start());
    let keys = tempfile::tempdir().expect("temp dir");
    let mut o = DashboardOptions::new(&etcd.url());
    // An etcd store has no place beside it for the token key.
    o.token_key_file = Some(keys.path().join("token-key"));
    let mut first = Dashboard::start(&o);
    let page = |d: &Dashboard| d.api().get("/api/events").ok_as::<EventsPage>().events;
    let before = page(&first);
    assert!(
        before.iter().any(|e| e.kind == EventKind::LockAcquired),
        "{before:?}"
    );
    // Written to etcd within a second or so of being recorded.
    let key = format!("/tessera/{}/events", o.cluster);
    wait_for("the events to reach etcd", Duration::from_secs(10), || {
        rt.block_on(async {
            let store = tessera_store::open(&o.store).await.expect("open etcd");
            store.get(&key).await.expect("etcd get").is_some()
        })
    });
    first.kill();
    let second = Dashboard::start(&o);
    let after = page(&second);
    for e in &before {
        assert!(
            after.contains(e),
            "{e:?} was lost in the restart: {after:?}"
        );
    }
    assert!(
        after
            .iter()
            .filter(|e| e.kind == EventKind::LockAcquired)
            .count()
            >= 2,
        "{after:?}"
    );
}
