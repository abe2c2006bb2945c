//! What the console says when no dashboard holds a cluster's lock (docs/console.md, "When a
//! dashboard is down"): a dashboard frozen by SIGSTOP until its lock lapses is named as the
//! last holder that does not answer, without advice to start another; woken, it either renews
//! its lock or exits, and the console follows; a console started after the dashboard died
//! says that none held the lock since it started, and how to start one.

use std::time::Duration;

use tessera_wire::console::ClusterView;

use crate::support::{
    Console, ConsoleClient, ConsoleSetup, Dashboard, DashboardOptions, TOKEN, wait_until,
};

/// Longer than the dashboard's lock TTL (10 s) and the console's scan cache (2 s), under load.
const LAPSE_WITHIN: Duration = Duration::from_secs(60);

/// A dashboard of cluster `name` in a new fs store; the store's directory and URL.
fn dashboard(name: &str) -> (Dashboard, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("fs://{}", dir.path().join("store").display());
    let mut o = DashboardOptions::new(&store);
    o.cluster = name.to_owned();
    (Dashboard::start(&o), dir, store)
}

/// A console over `store` with admin `ada` and the cluster's token; logged in.
fn console(store: &str, cluster: &str) -> (Console, ConsoleClient) {
    let console = Console::start(&ConsoleSetup {
        stores: vec![store.to_owned()],
        users: vec![("ada".into(), "pw".into())],
        roles: vec![("ada".into(), "admin".into())],
        tokens: vec![(cluster.to_owned(), TOKEN.to_owned())],
        ..ConsoleSetup::default()
    });
    let c = console.login("ada", "pw");
    (console, c)
}

/// The cluster `name` as `/api/clusters` lists it.
fn cluster(c: &ConsoleClient, name: &str) -> ClusterView {
    c.get("/api/clusters")
        .ok_as::<Vec<ClusterView>>()
        .into_iter()
        .find(|cl| cl.name == name)
        .unwrap_or_else(|| panic!("cluster {name} not listed"))
}

/// Polls until the cluster satisfies `ready`; the last view seen, or a panic naming it.
fn wait_for(
    c: &ConsoleClient,
    name: &str,
    what: &str,
    ready: impl Fn(&ClusterView) -> bool,
) -> ClusterView {
    let mut seen = None;
    let ok = wait_until(LAPSE_WITHIN, || {
        let v = cluster(c, name);
        let done = ready(&v);
        seen = Some(v);
        done
    });
    let seen = seen.expect("polled at least once");
    assert!(ok, "{what}: never seen; last: {seen:?}");
    seen
}

#[test]
fn a_frozen_dashboard_is_named_as_the_silent_last_holder_not_replaced() {
    let (mut d, _dir, store) = dashboard("frozen");
    let (_console, c) = console(&store, "frozen");
    let addr = d.addr().to_string();

    let live = wait_for(&c, "frozen", "the dashboard reachable", |v| v.reachable);
    assert_eq!(live.dashboard.as_ref().map(|d| &d.admin_addr), Some(&addr));
    assert_eq!(live.error, None, "{live:?}");
    assert_eq!(live.last_dashboard, None, "{live:?}");

    d.signal("-STOP");
    let lapsed = wait_for(&c, "frozen", "the lock lapsed", |v| v.dashboard.is_none());
    let last = lapsed
        .last_dashboard
        .clone()
        .unwrap_or_else(|| panic!("the last holder is named: {lapsed:?}"));
    assert_eq!(last.admin_addr, addr);
    assert_eq!(last.pid, d.pid());
    assert!(
        !last.answers,
        "a frozen dashboard does not answer: {last:?}"
    );
    assert!(last.last_seen_unix_ms > 0, "{last:?}");
    assert!(!lapsed.reachable, "{lapsed:?}");
    let error = lapsed.error.clone().expect("an error says why");
    assert!(error.contains("does not answer"), "{error}");
    assert!(error.contains(&addr), "{error}");
    assert!(error.contains(&format!("pid {}", d.pid())), "{error}");
    assert!(error.contains("Check that process"), "{error}");
    assert!(
        !error.contains("`tessera dashboard"),
        "no advice to start a second dashboard while the first may be alive: {error}"
    );
    // A relayed call fails with the same reason.
    let r = c.get("/api/clusters/frozen/groups");
    let message = r.expect_error(503, "unavailable");
    assert!(message.contains("does not answer"), "{message}");

    d.signal("-CONT");
    // Woken, it checks its lock at its next store write: it exits, unless the fs store's
    // heartbeat renewed the lock first (docs/console.md). The console follows either way.
    match d.wait_exit(Duration::from_secs(20)) {
        Some(status) => {
            assert!(!status.success(), "it exits for its lost lock: {status}");
            let gone = wait_for(&c, "frozen", "the last holder exited", |v| {
                v.error.as_deref().is_some_and(|e| e.contains("has exited"))
            });
            let error = gone.error.unwrap();
            assert!(
                error.contains(&format!(
                    "start `tessera dashboard --cluster frozen --store {store}`"
                )),
                "{error}"
            );
            assert_eq!(
                gone.last_dashboard.map(|l| (l.pid, l.answers)),
                Some((d.pid(), false))
            );
            let again = Dashboard::start(d.options());
            let back = wait_for(&c, "frozen", "a new dashboard reachable", |v| {
                v.reachable && v.error.is_none()
            });
            assert_eq!(
                back.dashboard.map(|x| x.admin_addr),
                Some(again.addr().to_string())
            );
            assert_eq!(back.last_dashboard, None);
        }
        None => {
            let back = wait_for(&c, "frozen", "the woken dashboard reachable", |v| {
                v.reachable && v.error.is_none()
            });
            assert_eq!(back.dashboard.map(|x| x.pid), Some(d.pid()));
            assert_eq!(back.last_dashboard, None);
        }
    }
}

#[test]
fn a_console_started_after_its_dashboard_died_says_none_held_the_lock_since() {
    let (mut d, _dir, store) = dashboard("orphan");
    d.kill();
    let (_console, c) = console(&store, "orphan");
    let v = cluster(&c, "orphan");
    assert_eq!(v.dashboard, None, "{v:?}");
    assert_eq!(v.last_dashboard, None, "{v:?}");
    let error = v.error.expect("an error says why");
    assert!(
        error.contains("no dashboard has held the cluster lock since the console started"),
        "{error}"
    );
    assert!(
        error.contains(&format!(
            "start `tessera dashboard --cluster orphan --store {store}`"
        )),
        "{error}"
    );
}
