//! Routing by key prefix (docs/prefix-routes.md): two clusters in one store, a prefix of the
//! first routed to the second. Keys with the prefix live in the second cluster whatever the
//! command (strings, multi-key, transactions, blocking pops; scripts as the route's user may),
//! a command spanning
//! both clusters is refused, writes through the route survive the second cluster's migration
//! and the loss of the proxy it forwards to, and a bad route change or a wrong password is a
//! clear error.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tessera_wire::cluster::Overview;
use tessera_wire::routes::{RouteRef, RouteStatus, RoutesView};

use crate::migration::{idle, owners, status, wait_for};
use crate::support::{ControlPlane, Frame, RawClient, TOKEN, keys_on, wait_until};

const OTHER: &str = "routedb";

/// Cluster A (the suite's default name): one server owning every slot, one proxy.
fn cluster_a() -> ControlPlane {
    let cp = ControlPlane::builder().servers(1).proxies(1).start();
    cp.group(1, &[0]);
    cp.assign(0, 1023, 1);
    cp
}

/// Cluster B in A's store: two servers split over two groups, `proxies` proxies, and the
/// user `front` confined to `user:` and `m:` keys when `with_user`.
fn cluster_b(a: &ControlPlane, proxies: usize) -> ControlPlane {
    let cp = ControlPlane::builder()
        .cluster(OTHER)
        .store(&a.options().store)
        .servers(2)
        .proxies(proxies)
        .start();
    cp.split_over_two_groups();
    cp
}

fn add_front_user(b: &ControlPlane, prefix: &str) {
    b.api()
        .put(
            "/api/users/front",
            &json!({"password": "front-pw", "key_prefix": prefix}),
        )
        .ok();
}

/// `PUT /api/routes`: the answer, and its raw JSON (for what it must never hold).
fn set_routes(a: &ControlPlane, routes: Value) -> (RoutesView, Value) {
    let reply = a.api().put("/api/routes", &json!({ "routes": routes }));
    (reply.ok_as(), reply.ok())
}

/// Where A's proxy `i` forwards each prefix now.
fn proxy_routes(a: &ControlPlane, i: usize) -> Vec<RouteStatus> {
    a.proxies[i].admin().get("/api/proxy/routes").ok_as()
}

/// The target A's proxy `i` forwards `prefix` to, once it has one (within 15 s).
fn target_of(a: &ControlPlane, i: usize, prefix: &str) -> String {
    let mut seen = Vec::new();
    let found = wait_until(Duration::from_secs(15), || {
        seen = proxy_routes(a, i);
        seen.iter()
            .find(|r| r.prefix == prefix)
            .is_some_and(|r| r.target.is_some())
    });
    assert!(found, "proxy {i} has no target for {prefix}: {seen:?}");
    let r = seen
        .iter()
        .find(|r| r.prefix == prefix)
        .expect("the prefix is listed");
    r.target.clone().expect("a target")
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

#[test]
fn a_routed_prefix_lives_in_the_other_cluster_whatever_the_command() {
    let a = cluster_a();
    let b = cluster_b(&a, 2);
    add_front_user(&b, "user:");
    let b_proxies: Vec<String> = b.proxies.iter().map(|p| p.addr().to_string()).collect();

    let (view, raw) = set_routes(
        &a,
        json!([{"prefix": "user:", "cluster": OTHER, "user": "front", "password": "front-pw"}]),
    );
    // The raw answer: no password in any field.
    assert_eq!(
        raw["routes"],
        json!([{"prefix": "user:", "cluster": OTHER, "user": "front"}]),
        "the view never shows a password: {raw}"
    );
    assert_eq!(view.clusters, [OTHER], "{view:?}");
    let target = target_of(&a, 0, "user:");
    assert!(
        b_proxies.contains(&target),
        "{target} is not one of {b_proxies:?}"
    );
    // The proxy's /metrics says the route has a target, in text promtool accepts.
    let metrics = a.proxies[0].metrics();
    let up = format!("tessera_prefix_route_up{{prefix=\"user:\",cluster=\"{OTHER}\"}} 1");
    assert!(metrics.contains(&up), "{metrics}");
    let checked = crate::dashboard_api::promtool_check(&metrics);
    assert!(
        checked.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let overview: Overview = a.api().get("/api/overview").ok_as();
    assert_eq!(
        overview.routes,
        [RouteRef {
            prefix: "user:".into(),
            cluster: OTHER.into()
        }]
    );

    let mut c = a.proxies[0].raw();
    let mut at_b = b.proxies[1].raw();
    at_b.cmd(&["AUTH", "front", "front-pw"]);

    // Strings: the routed key is in B (on whichever of its groups owns it), the other in A.
    assert_eq!(c.cmd(&["SET", "user:1", "v1"]), ok());
    assert_eq!(c.cmd(&["SET", "plain:1", "p1"]), ok());
    assert_eq!(at_b.cmd(&["GET", "user:1"]), bulk("v1"));
    assert!(!a.servers[0].has("user:1"), "a routed key was written in A");
    assert!(a.servers[0].has("plain:1"));
    assert!(
        b.servers.iter().any(|s| s.has("user:1")) && !b.servers.iter().any(|s| s.has("plain:1"))
    );
    assert_eq!(c.cmd(&["GET", "user:1"]), bulk("v1"));

    // Multi-key within B, across B's two groups: one command to B's proxy, split there.
    let spread = [keys_on(0, "user:", 1), keys_on(1, "user:", 1)].concat();
    assert_eq!(c.cmd(&["MSET", &spread[0], "x", &spread[1], "y"]), ok());
    assert_eq!(
        c.cmd(&["MGET", &spread[0], &spread[1]]),
        Frame::Array(vec![bulk("x"), bulk("y")])
    );

    // Across clusters: refused, naming them, and nothing is written.
    for cmd in [
        vec!["MGET", "user:1", "plain:1"],
        vec!["MSET", "user:9", "a", "plain:9", "b"],
        vec!["DEL", "plain:1", "user:1"],
        vec!["RPOPLPUSH", "user:1", "plain:1"],
    ] {
        let r = c.cmd(&cmd);
        let e = r
            .error()
            .unwrap_or_else(|| panic!("{cmd:?} answered {r:?}"));
        assert!(
            e.starts_with("CROSSSLOT") && e.contains(OTHER),
            "{cmd:?}: {e}"
        );
    }
    assert!(!a.servers[0].has("plain:9") && !b.servers.iter().any(|s| s.has("user:9")));
    assert_eq!(c.cmd(&["GET", "plain:1"]), bulk("p1"));

    // A transaction on B's keys runs there; one that mixes clusters is refused as queued.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "user:n"]), Frame::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["INCR", "user:n"]), Frame::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![Frame::Integer(1), Frame::Integer(2)])
    );
    assert_eq!(at_b.cmd(&["GET", "user:n"]), bulk("2"));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SET", "user:t", "1"]),
        Frame::Simple("QUEUED".into())
    );
    let mixed = c.cmd(&["SET", "plain:t", "1"]);
    let e = mixed
        .error()
        .unwrap_or_else(|| panic!("a mixed transaction queued {mixed:?}"));
    assert!(e.starts_with("CROSSSLOT") && e.contains(OTHER), "{e}");
    assert!(
        c.cmd(&["EXEC"])
            .error()
            .is_some_and(|e| e.starts_with("EXECABORT"))
    );
    assert!(!b.servers.iter().any(|s| s.has("user:t")));

    // A blocking pop through A waits in B, and gets what is pushed there.
    let a_addr = a.proxies[0].addr();
    let popper = thread::spawn(move || {
        let mut p = RawClient::connect(a_addr);
        p.cmd(&["BLPOP", "user:q", "10"])
    });
    thread::sleep(Duration::from_millis(300));
    assert_eq!(at_b.cmd(&["RPUSH", "user:q", "job"]), Frame::Integer(1));
    assert_eq!(
        popper.join().expect("the popper"),
        Frame::Array(vec![bulk("user:q"), bulk("job")])
    );

    // Commands run in B as the route's user: B's rules for it bound what A's clients may do
    // there. `front` is confined to a prefix, and B runs no script for such a user (a script
    // could reach any key): the refusal comes back as B gave it, and nothing is written.
    let script = "return redis.call('SET', 'secret:1', 'x')";
    let r = c.cmd(&["EVAL", script, "1", "user:s"]);
    let e = r
        .error()
        .unwrap_or_else(|| panic!("EVAL through the route answered {r:?}"));
    assert!(e.starts_with("NOPERM") && e.contains("front"), "{e}");
    assert!(
        !b.servers
            .iter()
            .any(|s| s.has("secret:1") || s.has("user:s"))
    );

    // The CLI shows the route and its target, and removes it: the prefix is A's again.
    let out = a.admin_cli(TOKEN, &["routes"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(&target), "{text}");
    let out = a.admin_cli(TOKEN, &["routes", "remove", "user:"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gone = wait_until(Duration::from_secs(10), || proxy_routes(&a, 0).is_empty());
    assert!(gone, "the proxy still routes user:");
    assert_eq!(c.cmd(&["GET", "user:1"]), Frame::NullBulk);
    assert_eq!(
        c.cmd(&["MGET", "user:1", "plain:1"]),
        Frame::Array(vec![Frame::NullBulk, bulk("p1")])
    );
    let out = a.admin_cli(
        TOKEN,
        &[
            "routes",
            "add",
            "user:",
            OTHER,
            "--user",
            "front",
            "--password",
            "front-pw",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target_of(&a, 0, "user:");
    assert_eq!(c.cmd(&["GET", "user:1"]), bulk("v1"));
}

/// Writes `m:<i>` = `<i>` through `proxy` until `stop`, retrying each write until it is
/// acknowledged (bounded); returns the acknowledged count and the failed attempts.
fn writer(proxy: SocketAddr, stop: Arc<AtomicBool>) -> (u64, u64) {
    let mut c: Option<RawClient> = None;
    let (mut i, mut failed) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) && i < 200_000 {
        let conn = c.get_or_insert_with(|| RawClient::connect(proxy));
        let key = format!("m:{i}");
        conn.send(&crate::support::encode(&[
            "SET",
            key.as_str(),
            &i.to_string(),
        ]));
        match conn.try_read_frame() {
            Ok(Frame::Simple(s)) if s == "OK" => i += 1,
            Ok(_) => {
                failed += 1;
                thread::sleep(Duration::from_millis(20));
            }
            Err(_) => {
                failed += 1;
                c = None;
                thread::sleep(Duration::from_millis(20));
            }
        }
        assert!(failed < 5_000, "writes kept failing");
    }
    (i, failed)
}

#[test]
fn writes_through_a_route_survive_the_other_clusters_migration_and_its_proxys_loss() {
    let a = cluster_a();
    let mut b = cluster_b(&a, 2);
    set_routes(&a, json!([{"prefix": "m:", "cluster": OTHER}]));
    let first = target_of(&a, 0, "m:");

    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (p, s) = (a.proxies[0].addr(), stop.clone());
        thread::spawn(move || writer(p, s))
    };
    thread::sleep(Duration::from_millis(500));
    b.api()
        .post(
            "/api/migrations",
            &json!({"from": 0, "to": 511, "group": 2}),
        )
        .ok();
    wait_for("keys to start moving in B", Duration::from_secs(60), || {
        status(&b).keys_moved > 0
    });
    // The proxy of B that A forwards to dies half way through the migration.
    let dead = b
        .proxies
        .iter()
        .position(|p| p.addr().to_string() == first)
        .expect("A forwards to one of B's proxies");
    b.proxies[dead].kill();
    let lost_at = Instant::now();
    let moved = wait_until(Duration::from_secs(15), || {
        let t = proxy_routes(&a, 0);
        t[0].target.as_ref().is_some_and(|t| *t != first)
    });
    assert!(moved, "A still forwards m: to the dead proxy {first}");
    let took = lost_at.elapsed();
    wait_for("B's migration to finish", Duration::from_secs(120), || {
        idle(&b) && owners(&b).iter().all(|o| *o == Some(2))
    });
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (acked, failed) = w.join().expect("the writer");
    assert!(acked > 100, "only {acked} writes went through");
    eprintln!("{acked} writes acknowledged, {failed} attempts failed, new target after {took:?}");

    // Every acknowledged write is in B, with its value; none in A.
    let alive = 1 - dead;
    let mut at_b = b.proxies[alive].raw();
    for start in (0..acked).step_by(500) {
        let keys: Vec<String> = (start..(start + 500).min(acked))
            .map(|i| format!("m:{i}"))
            .collect();
        let mut cmd = vec!["MGET".to_string()];
        cmd.extend(keys.iter().cloned());
        let Frame::Array(values) = at_b.cmd(&cmd) else {
            panic!("MGET through B's proxy");
        };
        for (k, v) in keys.iter().zip(values) {
            let want = k.trim_start_matches("m:");
            assert_eq!(v, bulk(want), "{k} lost or wrong after B's migration");
        }
    }
    let in_a = a.servers[0].raw().cmd(&["DBSIZE"]);
    assert_eq!(in_a, Frame::Integer(0), "routed writes landed in A");
}

#[test]
fn a_bad_route_change_is_refused_and_a_wrong_password_is_a_clear_error() {
    let a = cluster_a();
    let b = cluster_b(&a, 1);
    add_front_user(&b, "user:");
    let refused = |routes: Value, why: &str| {
        let r = a.api().put("/api/routes", &json!({ "routes": routes }));
        let msg = r.expect_error(400, "bad_request");
        assert!(msg.contains(why), "{routes}: {msg}");
    };
    refused(
        json!([{"prefix": "u:", "cluster": "nosuch"}]),
        "not in this store",
    );
    refused(
        json!([{"prefix": "u:", "cluster": a.options().cluster.as_str()}]),
        "this cluster",
    );
    refused(json!([{"prefix": "", "cluster": OTHER}]), "non-empty");
    refused(
        json!([{"prefix": "u:", "cluster": OTHER}, {"prefix": "u:", "cluster": OTHER}]),
        "twice",
    );
    refused(
        json!([{"prefix": "u:", "cluster": "../x"}]),
        "not a cluster name",
    );
    refused(json!([{"prefix": "__tes", "cluster": OTHER}]), "reserved");
    refused(
        json!([{"prefix": "u:", "cluster": OTHER, "password": "p"}]),
        "goes with a user",
    );
    refused(
        json!([{"prefix": "u:", "cluster": OTHER, "user": "front"}]),
        "needs a password",
    );
    let many: Vec<Value> = (0..33)
        .map(|i| json!({"prefix": format!("p{i}:"), "cluster": OTHER}))
        .collect();
    refused(json!(many), "at most 32");
    assert!(
        a.api()
            .get("/api/routes")
            .ok_as::<RoutesView>()
            .routes
            .is_empty()
    );

    // A wrong password: the route has no target, the proxies say why, and a command on the
    // prefix gets a TRYAGAIN naming the cluster. Other keys are served as before.
    set_routes(
        &a,
        json!([{"prefix": "user:", "cluster": OTHER, "user": "front", "password": "wrong"}]),
    );
    let mut seen = None;
    let explained = wait_until(Duration::from_secs(10), || {
        let v: RoutesView = a.api().get("/api/routes").ok_as();
        let why = v
            .proxies
            .first()
            .and_then(|p| p.routes.first())
            .and_then(|r| r.error.as_ref())
            .is_some_and(|e| e.contains("WRONGPASS") || e.contains("AUTH"));
        seen = Some(v);
        why
    });
    assert!(explained, "{seen:?}");
    let seen = seen.expect("read above");
    assert!(seen.proxies[0].routes[0].target.is_none(), "{seen:?}");
    let down = format!("tessera_prefix_route_up{{prefix=\"user:\",cluster=\"{OTHER}\"}} 0");
    let metrics = a.proxies[0].metrics();
    assert!(metrics.contains(&down), "{metrics}");
    let mut c = a.proxies[0].raw();
    let r = c.cmd(&["SET", "user:1", "v"]);
    let e = r
        .error()
        .unwrap_or_else(|| panic!("SET through a broken route answered {r:?}"));
    assert!(
        e.starts_with("TRYAGAIN") && e.contains(OTHER) && e.contains("user:"),
        "{e}"
    );
    assert_eq!(c.cmd(&["SET", "plain:1", "v"]), ok());

    // The right password: the route works. The list sent back without the password (as the
    // console and the CLI do) keeps it.
    set_routes(
        &a,
        json!([{"prefix": "user:", "cluster": OTHER, "user": "front", "password": "front-pw"}]),
    );
    let target = target_of(&a, 0, "user:");
    assert_eq!(c.cmd(&["SET", "user:1", "v"]), ok());
    set_routes(
        &a,
        json!([{"prefix": "user:", "cluster": OTHER, "user": "front"},
               {"prefix": "user:vip:", "cluster": OTHER, "user": "front", "password": "front-pw"}]),
    );
    assert_eq!(target_of(&a, 0, "user:"), target);
    target_of(&a, 0, "user:vip:");
    assert_eq!(c.cmd(&["SET", "user:vip:1", "w"]), ok());
    assert_eq!(c.cmd(&["GET", "user:1"]), bulk("v"));
    assert!(b.servers.iter().any(|s| s.has("user:vip:1")));
}

fn resp3(addr: SocketAddr) -> RawClient {
    let mut c = RawClient::connect(addr);
    let hello = c.cmd(&["HELLO", "3"]);
    assert!(matches!(hello, Frame::Map(_)), "{hello:?}");
    c
}

fn invalidate(keys: &[&str]) -> Frame {
    Frame::Push(vec![
        bulk("invalidate"),
        Frame::Array(keys.iter().map(|k| bulk(k)).collect()),
    ])
}

#[test]
fn a_routed_key_a_client_cached_is_invalidated_by_a_write_in_the_other_cluster() {
    let a = cluster_a();
    let b = cluster_b(&a, 1);
    add_front_user(&b, "user:");
    set_routes(
        &a,
        json!([{"prefix": "user:", "cluster": OTHER, "user": "front", "password": "front-pw"}]),
    );
    target_of(&a, 0, "user:");
    let mut writer = b.proxies[0].raw();
    writer.cmd(&["AUTH", "front", "front-pw"]);
    assert_eq!(writer.cmd(&["SET", "user:c", "v1"]), ok());

    // Default mode: the key read through A's route is invalidated when B's own proxy writes
    // it, as a key of A's own would be by a write through another proxy of A.
    let mut reader = resp3(a.proxies[0].addr());
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(reader.cmd(&["GET", "user:c"]), bulk("v1"));
    assert_eq!(writer.cmd(&["SET", "user:c", "v2"]), ok());
    reader.set_read_timeout(Duration::from_secs(5));
    assert_eq!(reader.read_frame(), invalidate(&["user:c"]));
    assert_eq!(reader.cmd(&["GET", "user:c"]), bulk("v2"));

    // BCAST under the routed prefix: every write there, and A's own keys as before.
    let mut bcast = resp3(a.proxies[0].addr());
    let r = bcast.cmd(&[
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "own:",
    ]);
    assert_eq!(r, ok());
    assert_eq!(writer.cmd(&["SET", "user:b", "x"]), ok());
    bcast.set_read_timeout(Duration::from_secs(5));
    assert_eq!(bcast.read_frame(), invalidate(&["user:b"]));
    let mut at_a = a.proxies[0].raw();
    assert_eq!(at_a.cmd(&["SET", "own:1", "x"]), ok());
    assert_eq!(bcast.read_frame(), invalidate(&["own:1"]));

    // The route removed: what was cached from B no longer is where the key lives, so every
    // tracking client drops its whole cache (an `invalidate` push with no keys).
    assert_eq!(reader.cmd(&["GET", "user:c"]), bulk("v2"));
    set_routes(&a, json!([]));
    let flush = Frame::Push(vec![bulk("invalidate"), Frame::Null]);
    assert_eq!(reader.read_frame(), flush);
    assert_eq!(
        reader.cmd(&["GET", "user:c"]),
        Frame::Null,
        "A has no user:c"
    );
}
