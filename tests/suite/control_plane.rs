//! The control plane across processes: a dashboard on a store, cluster-mode proxies that take
//! their table from the store and then from the dashboard's pushes, and what each keeps doing
//! when another one dies: the barrier push, the dashboard lock and its takeover, proxies
//! serving without the dashboard, and through a short store outage (fenced in a long one,
//! `fencing.rs` has why), a restarted proxy reloading its table, and
//! `tessera up` with a resume.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_wire::cluster::{GroupView, Overview, ProxyView, SlotView};
use tessera_wire::topology::GroupId;

use crate::support::{
    Api, ClusterProxy, ControlPlane, Dashboard, Etcd, Frame, RedisServer, Up, answers_on, connect,
    free_port, keys_on, loopback, plugin_dir, run_with_timeout, slot, two_consecutive_free_ports,
    wait_until,
};

/// SETs `key` to `value` through `proxy`, asserting `+OK`.
fn set(proxy: &ClusterProxy, key: &str, value: &str) {
    let reply = proxy.raw().cmd(&["SET", key, value]);
    assert_eq!(
        reply,
        Frame::Simple("OK".into()),
        "SET {key} through proxy {}",
        proxy.addr()
    );
}

/// GETs `key` through `proxy`, asserting a bulk reply.
fn get(proxy: &ClusterProxy, key: &str) -> String {
    match proxy.raw().cmd(&["GET", key]) {
        Frame::Bulk(v) => String::from_utf8(v).expect("utf-8 value"),
        other => panic!("GET {key} through proxy {}: {other:?}", proxy.addr()),
    }
}

/// The value of `key` asked directly of `server`, if it has it.
fn direct_get(server: &RedisServer, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut server.client())
        .expect("direct GET")
}

/// A group as `(id, slots, [(addr, role)])`: the parts that must survive a dashboard change.
type GroupLayout = (u64, u64, Vec<(String, String)>);

/// Every group's [`GroupLayout`], in id order.
fn layout(api: &Api) -> Vec<GroupLayout> {
    let groups: Vec<GroupView> = api.get("/api/groups").ok_as();
    groups
        .into_iter()
        .map(|g| {
            let servers = g
                .servers
                .into_iter()
                .map(|s| (s.addr, format!("{:?}", s.role)))
                .collect();
            (u64::from(g.id.0), g.slots as u64, servers)
        })
        .collect()
}

/// Each slot's owning group (`None` when unassigned), in slot order.
fn slot_owners(api: &Api) -> Vec<Option<GroupId>> {
    let slots: Vec<SlotView> = api.get("/api/slots").ok_as();
    assert_eq!(slots.len(), 1024, "GET /api/slots lists every slot");
    slots.iter().map(|s| s.group).collect()
}

/// Two groups with one master each (servers 0 and 1), slots split in halves: keys_on(0, ..)
/// live on server 0, keys_on(1, ..) on server 1.
fn two_groups(cp: &ControlPlane) -> u64 {
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2)
}

/// Writes a fresh key on each half through every proxy and reads it back through every
/// proxy; checks each landed on its group's master and only there.
fn assert_serves_both_groups(cp: &ControlPlane, round: &str) {
    for (i, writer) in cp.proxies.iter().enumerate() {
        for half in 0..2 {
            let key = keys_on(half, &format!("{round}:p{i}:"), 1).remove(0);
            set(writer, &key, round);
            for reader in &cp.proxies {
                assert_eq!(get(reader, &key), round, "{key} read back");
            }
            assert_eq!(
                direct_get(&cp.servers[half], &key).as_deref(),
                Some(round),
                "{key} (slot {}) is on group {}'s master",
                slot(key.as_bytes()),
                half + 1
            );
            assert_eq!(
                direct_get(&cp.servers[1 - half], &key),
                None,
                "{key} is not on the other group's master"
            );
        }
    }
}

#[test]
fn slot_assignment_is_served_by_both_proxies_as_soon_as_the_call_returns() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    let first = keys_on(0, "assign:", 3);
    let second = keys_on(1, "assign:", 3);

    // Sessions opened before any slot is served keep working across the pushes.
    let mut sessions: Vec<_> = cp.proxies.iter().map(ClusterProxy::raw).collect();
    for s in &mut sessions {
        for key in first.iter().chain(&second) {
            assert_eq!(
                s.cmd(&["GET", key]),
                Frame::Error(format!(
                    "ERR slot {} is not served by any group",
                    slot(key.as_bytes())
                )),
                "GET {key} before any slot is assigned"
            );
        }
    }

    let epoch = cp.assign(0, 511, 1);
    // No wait: the call returned only once both proxies had acknowledged the push.
    for (i, s) in sessions.iter_mut().enumerate() {
        for key in &first {
            let value = format!("p{i}");
            assert_eq!(
                s.cmd(&["SET", key, &value]),
                Frame::Simple("OK".into()),
                "SET {key} through proxy {i} right after the assign returned"
            );
            assert_eq!(s.cmd(&["GET", key]), Frame::bulk(&value));
            assert_eq!(direct_get(&cp.servers[0], key), Some(value));
        }
        for key in &second {
            let err = s.cmd(&["GET", key]);
            assert!(
                err.error().is_some_and(|e| e.contains("is not served")),
                "{key} is still unassigned: {err:?}"
            );
        }
    }
    for p in &cp.proxies {
        assert_eq!(p.epoch(), epoch, "proxy {} runs the pushed epoch", p.addr());
    }

    let epoch = cp.assign(512, 1023, 2);
    assert_serves_both_groups(&cp, "assigned");
    for (i, s) in sessions.iter_mut().enumerate() {
        for key in &second {
            assert_eq!(
                s.cmd(&["SET", key, "v"]),
                Frame::Simple("OK".into()),
                "SET {key} through proxy {i}'s early session"
            );
            assert!(cp.servers[1].has(key), "{key} is on group 2's master");
        }
    }
    for p in &cp.proxies {
        assert_eq!(p.epoch(), epoch, "proxy {} runs the pushed epoch", p.addr());
    }
    assert_eq!(cp.servers[0].dbsize(), 3 + 2, "group 1 holds its keys only");
}

#[test]
fn killed_dashboard_is_replaced_and_its_lock_taken_over() {
    let mut cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 511, 1);
    // Slots 1000-1023 stay unassigned until the successor assigns them.
    let epoch = cp.assign(512, 999, 2);
    let groups_before = layout(&cp.api());
    let slots_before = slot_owners(&cp.api());
    let first_pid = cp.dashboard.pid();

    // While the first one lives, a second one for the same cluster is refused at start.
    let mut second = cp.dashboard.options().command(loopback(free_port()));
    let out = run_with_timeout(second.env("RUST_BACKTRACE", "0"), Duration::from_secs(15));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a second dashboard must be refused, it exited with {}: {stderr}",
        out.status
    );
    assert!(
        stderr.contains("already has a live dashboard")
            && stderr.contains(&format!("pid {first_pid}")),
        "the refusal names the live holder (pid {first_pid}): {stderr}"
    );
    assert!(cp.dashboard.api().healthy(), "the first one is unaffected");

    cp.kill_dashboard();
    let started = Instant::now();
    cp.restart_dashboard();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "the successor took {took:?} to start (the dead holder's pid should be seen at once)"
    );
    let log = cp.dashboard.log();
    assert!(
        log.contains("took over the lock of a dead dashboard")
            && log.contains(&first_pid.to_string()),
        "the successor logs the takeover from pid {first_pid}:\n{log}"
    );

    let api = cp.api();
    assert_eq!(
        layout(&api),
        groups_before,
        "same groups after the takeover"
    );
    assert_eq!(
        slot_owners(&api),
        slots_before,
        "same slots after the takeover"
    );
    let overview: Overview = api.get("/api/overview").ok_as();
    assert_eq!(overview.epoch, epoch, "same epoch: {overview:?}");
    assert_eq!(overview.dashboard.pid, cp.dashboard.pid());
    let proxies: Vec<ProxyView> = api.get("/api/proxies").ok_as();
    assert_eq!(
        proxies.len(),
        1,
        "the proxy is still registered: {proxies:?}"
    );

    // The successor owns the topology: its changes reach the proxy before the call returns.
    let next = cp.assign(1000, 1023, 2);
    assert_eq!(next, epoch + 1, "the successor continues the epochs");
    assert_eq!(
        cp.proxies[0].epoch(),
        next,
        "the proxy got the successor's push"
    );
    assert_serves_both_groups(&cp, "after-takeover");
}

#[test]
fn proxies_keep_serving_with_the_dashboard_killed() {
    let mut cp = ControlPlane::builder().servers(2).proxies(2).start();
    two_groups(&cp);
    assert_serves_both_groups(&cp, "before");

    cp.kill_dashboard();
    // For a while (several health-check intervals of a live dashboard), new sessions on
    // both proxies keep routing by the last table.
    let until = Instant::now() + Duration::from_secs(2);
    let mut round = 0;
    while Instant::now() < until {
        assert_serves_both_groups(&cp, &format!("no-dashboard-{round}"));
        round += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    // A proxy started now still finds its table in the store.
    cp.start_proxy();
    assert_serves_both_groups(&cp, "new-proxy");
}

/// Whether every proxy answers a GET with a reply that is not an error.
fn every_proxy_serves(cp: &ControlPlane) -> bool {
    cp.proxies
        .iter()
        .all(|p| !matches!(p.raw().cmd(&["GET", "probe"]), Frame::Error(_)))
}

#[test]
fn proxies_serve_through_a_short_etcd_outage_and_fence_themselves_in_a_long_one() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut etcd = rt.block_on(Etcd::start());
    let cp = ControlPlane::builder()
        .store(&etcd.url())
        .servers(2)
        .proxies(2)
        .start();
    two_groups(&cp);
    assert_serves_both_groups(&cp, "before");

    etcd.stop();
    // A proxy renews its 10 s registration every 2.5 s and serves until 3 s before it could
    // expire: at least 4.5 s into an outage, whenever it starts, it goes on serving.
    let until = Instant::now() + Duration::from_secs(3);
    let mut round = 0;
    while Instant::now() < until {
        assert_serves_both_groups(&cp, &format!("no-etcd-{round}"));
        round += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    // The dashboard cannot persist anything now: a change fails with 503 or 502, and
    // pushes nothing that the proxies would act on.
    let reply = cp.api().post(
        "/api/slots/assign",
        &json!({"from": 0, "to": 0, "group": 1}),
    );
    assert!(
        reply.status >= 500,
        "a change with the store down cannot succeed: HTTP {}: {}",
        reply.status,
        reply.body
    );
    // Past that, their registrations may have lapsed and they can no longer be sure of
    // their tables: they fence themselves, with a reason a client can act on.
    assert!(
        wait_until(Duration::from_secs(15), || cp.proxies.iter().all(|p| {
            matches!(p.raw().cmd(&["GET", "probe"]),
                Frame::Error(e) if e.starts_with("TRYAGAIN") && e.contains("cluster store"))
        })),
        "the proxies fenced themselves in a long store outage"
    );
    // The store is back: they register again, reload their tables, and serve.
    rt.block_on(etcd.restart());
    assert!(
        wait_until(Duration::from_secs(30), || every_proxy_serves(&cp)),
        "the proxies serve again once the store is back\n{}",
        cp.proxies[0].log()
    );
    assert_serves_both_groups(&cp, "after-the-outage");
}

#[test]
fn restarted_proxy_reloads_its_table_from_the_store() {
    // Group 1: server 0. Group 2: server 1, replica server 2.
    let mut cp = ControlPlane::builder().servers(3).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1, 2]);
    cp.assign(0, 511, 1);
    // Changed while the proxy runs: it learns this by a push.
    cp.assign(512, 1023, 2);
    let key2 = keys_on(1, "reload:", 1).remove(0);
    set(&cp.proxies[0], &key2, "before");
    assert_eq!(direct_get(&cp.servers[1], &key2).as_deref(), Some("before"));

    cp.proxies[0].kill();
    // Changed while no proxy runs: only the store knows.
    cp.api()
        .post("/api/groups/2/promote", &json!({"addr": cp.server_addr(2)}))
        .ok();
    let epoch = cp.api().get("/api/overview").ok_as::<Overview>().epoch;
    cp.proxies.clear();

    let p = cp.start_proxy();
    let proxy = &cp.proxies[p];
    assert_eq!(
        proxy.epoch(),
        epoch,
        "the new proxy loaded the current epoch"
    );
    for (half, master) in [(0, 0), (1, 2)] {
        for key in keys_on(half, "reloaded:", 3) {
            set(proxy, &key, "after");
            assert_eq!(
                direct_get(&cp.servers[master], &key).as_deref(),
                Some("after"),
                "{key} (slot {}) went to group {}'s master, server {master}",
                slot(key.as_bytes()),
                half + 1
            );
            assert_eq!(get(proxy, &key), "after");
        }
    }
    assert_eq!(
        direct_get(&cp.servers[0], &keys_on(1, "reloaded:", 1)[0]),
        None,
        "group 2's keys are not on group 1"
    );
    let registered: Vec<ProxyView> = cp
        .api()
        .get("/api/proxies")
        .ok_as::<Vec<ProxyView>>()
        .into_iter()
        .filter(|p| p.registered)
        .collect();
    assert_eq!(
        registered.len(),
        1,
        "only the live proxy is registered: {registered:?}"
    );
    assert_eq!(registered[0].pid, proxy.pid());
}

/// The ports `tessera up` remembers for its redis-servers.
fn redis_ports(data_dir: &Path) -> Vec<u16> {
    ["redis-1a", "redis-1b", "redis-2a", "redis-2b"]
        .iter()
        .map(|name| {
            let file = data_dir.join(name).join("port");
            std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
                .trim()
                .parse()
                .expect("a port number")
        })
        .collect()
}

/// SIGINT, then asserts a clean exit within 30 s.
fn stop(up: &mut Up) {
    match up.interrupt(Duration::from_secs(30)) {
        Some(status) => assert!(
            status.success(),
            "tessera up exited with {status} after SIGINT\n{}",
            up.output()
        ),
        None => panic!("tessera up still runs 30 s after SIGINT\n{}", up.output()),
    }
}

#[test]
fn tessera_up_starts_a_cluster_and_resumes_it() {
    let data = tempfile::tempdir().expect("temp dir");
    let port = two_consecutive_free_ports();
    let dashboard_port = free_port();
    let admin_port = two_consecutive_free_ports();
    let keys: Vec<String> = (0..2).flat_map(|half| keys_on(half, "up:", 2)).collect();

    let mut up = Up::start(data.path(), port, dashboard_port, admin_port);
    // Reads need a token too: `up` keeps the admin token it starts the dashboard with here.
    let token = std::fs::read_to_string(data.path().join("admin-token")).expect("up's token");
    let dashboard = Api::new(loopback(dashboard_port), Some(token.trim()));
    let groups = layout(&dashboard);
    assert_eq!(groups.len(), 2, "two groups: {groups:?}");
    // Backups go under the cluster's data directory.
    assert_eq!(dashboard.get("/api/backups").ok()["enabled"], true);
    assert!(
        groups
            .iter()
            .all(|(_, slots, servers)| *slots == 512 && servers.len() == 2),
        "each group has half the slots, a master and a replica: {groups:?}"
    );
    let mut first = connect(&format!("redis://127.0.0.1:{port}/"));
    let mut second = connect(&format!("redis://127.0.0.1:{}/", port + 1));
    for key in &keys {
        let () = redis::cmd("SET")
            .arg(key)
            .arg("kept")
            .query(&mut first)
            .expect("SET through the first proxy");
        let value: Option<String> = redis::cmd("GET")
            .arg(key)
            .query(&mut second)
            .expect("GET through the second proxy");
        assert_eq!(
            value.as_deref(),
            Some("kept"),
            "{key} through the second proxy"
        );
    }
    // The example plugins: the filter is loaded when its wasm32 build is there (tools/test.sh
    // builds it); without it `up` still runs and says how to build it.
    let filter_built = plugin_dir().join("tessera_plugin_filter.wasm").exists();
    let plugins_line = |up: &Up| {
        up.line(Duration::from_secs(5), |l| {
            l.trim_start().starts_with("plugins:")
        })
        .unwrap_or_else(|| panic!("no plugins line\n{}", up.output()))
    };
    let line = plugins_line(&up);
    if filter_built {
        assert!(line.contains("filter (enabled"), "{line}");
        let refused = redis::cmd("FLUSHALL")
            .query::<()>(&mut first)
            .expect_err("FLUSHALL through the filter");
        assert!(
            refused.to_string().contains("is not allowed"),
            "the filter's refusal: {refused}"
        );
    } else {
        assert!(line.contains("cargo build"), "{line}");
    }
    drop((first, second));

    // Its secrets are its owner's only: the store (the meta holds the proxies' secret), the
    // admin token, console.toml (password hash and tokens).
    for (path, want) in [
        (data.path().join("store"), 0o700),
        (data.path().join("admin-token"), 0o600),
        (data.path().join("console.toml"), 0o600),
    ] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, want, "{} is mode {mode:o}", path.display());
    }
    let redis = redis_ports(data.path());
    stop(&mut up);
    for p in [port, port + 1].into_iter().chain(redis.iter().copied()) {
        assert!(
            !answers_on(p),
            "port {p} still answers PING after tessera up exited: a child outlived it"
        );
    }
    assert!(!dashboard.healthy(), "the dashboard outlived tessera up");
    drop(up);

    let mut up = Up::start(data.path(), port, dashboard_port, admin_port);
    assert_eq!(layout(&dashboard), groups, "the same groups and servers");
    if filter_built {
        let line = plugins_line(&up);
        assert!(line.contains("filter (enabled)"), "kept on resume: {line}");
    }
    let mut second = connect(&format!("redis://127.0.0.1:{}/", port + 1));
    for key in &keys {
        let value: Option<String> = redis::cmd("GET")
            .arg(key)
            .query(&mut second)
            .expect("GET through the second proxy after the resume");
        assert_eq!(value.as_deref(), Some("kept"), "{key} survived the restart");
    }
    drop(second);
    stop(&mut up);
}

#[test]
fn a_dashboard_that_lost_its_lock_stops_writing_and_exits() {
    let cp = ControlPlane::builder().servers(1).start();
    cp.group(1, &[0]);
    // Simulate a lease lost during a store outage: the lock node vanishes and a successor
    // takes it while the first dashboard still runs.
    let store = cp
        .options()
        .store
        .strip_prefix("fs://")
        .expect("an fs store")
        .to_string();
    let lock = std::path::Path::new(&store)
        .join("tessera")
        .join(&cp.options().cluster)
        .join("topom");
    std::fs::remove_file(&lock).expect("removing the lock node");
    let successor = Dashboard::start(cp.options());
    assert!(successor.api().healthy());

    let reply = cp.api().post("/api/groups", &serde_json::json!({"id": 2}));
    let message = reply.expect_error(503, "unavailable");
    assert!(message.contains("lost the cluster lock"), "{message}");
    assert!(
        wait_until(Duration::from_secs(10), || !cp.dashboard.api().healthy()),
        "the dashboard that lost its lock kept running"
    );
    // Nothing it tried was written: the successor sees no group 2.
    let groups: Vec<GroupView> = successor.api().get("/api/groups").ok_as();
    assert!(
        groups.iter().all(|g| g.id != GroupId(2)),
        "a write got through: {groups:?}"
    );
}
