//! The web console's API (docs/console.md) against real dashboards: login and what needs a
//! session, CSRF, the lockout and the login log, relaying reads and changes, the audit log
//! with who made each change, clusters in fs and etcd stores, a dead dashboard failing only
//! its own cluster, a token bound to its store, only JSON relayed, and `tessera up --clusters 2`.

use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use tessera_wire::Empty;
use tessera_wire::access::Role;
use tessera_wire::audit::AuditEntry;
use tessera_wire::cluster::GroupView;
use tessera_wire::console::{ClusterView, LoginEvent, LoginOutcome, MergedEntry, Session};
use tessera_wire::topology::GroupId;

use crate::support::{
    Console, ConsoleClient, ConsoleSetup, ControlPlane, Dashboard, DashboardOptions, Etcd, TOKEN,
    Up, consecutive_free_ports, free_port, run_with_timeout, tessera_bin, wait_until,
};

fn user(name: &str, password: &str) -> (String, String) {
    (name.to_owned(), password.to_owned())
}

/// `name` has the role admin.
fn admin(name: &str) -> (String, String) {
    (name.to_owned(), "admin".to_owned())
}

/// A console over one empty fs store, users `admin`/`right` and `ops`/`other`.
fn console_without_clusters(lockout_failures: u32) -> (Console, tempfile::TempDir) {
    let store = tempfile::tempdir().expect("temp dir");
    let console = Console::start(&ConsoleSetup {
        stores: vec![format!("fs://{}", store.path().display())],
        users: vec![user("admin", "right"), user("ops", "other")],
        lockout_failures: Some(lockout_failures),
        ..ConsoleSetup::default()
    });
    (console, store)
}

#[test]
fn login_sets_an_http_only_strict_cookie_and_everything_else_needs_it() {
    let (console, _store) = console_without_clusters(5);
    let anon = console.client();
    assert_eq!(anon.get("/health").status, 200, "/health needs no session");
    for path in [
        "/api/clusters",
        "/api/audit",
        "/api/logins",
        "/api/nothing",
        "/auth/me",
    ] {
        anon.get(path).expect_error(401, "unauthorized");
    }
    anon.post("/api/clusters/x/groups", &json!({}))
        .expect_error(401, "unauthorized");

    let mut c = console.client();
    c.login("admin", "wrong")
        .reply
        .expect_error(401, "unauthorized");
    c.login("nobody", "right")
        .reply
        .expect_error(401, "unauthorized");
    assert!(c.cookie.is_none(), "no cookie after a failed login");
    let raw = c.request("POST", "/auth/login", None).reply;
    raw.expect_error(400, "bad_request");

    let ok = c.login("admin", "right");
    let body: Session = ok.reply.ok_as();
    assert_eq!(body.user, "admin");
    let cookie = ok.header("set-cookie").expect("a session cookie");
    for flag in ["tessera_session=", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(flag), "cookie lacks {flag}: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "no Secure flag without secure_cookie (plain HTTP): {cookie}"
    );
    let csrf = body.csrf;
    assert_eq!(csrf.len(), 64, "256-bit token in hex: {csrf}");
    // The raw answer: exactly the session's user and token, nothing else.
    let me = c.get("/auth/me").ok();
    assert_eq!(me, json!({"user": "admin", "csrf": csrf}));
    assert!(
        c.get("/api/clusters")
            .ok_as::<Vec<ClusterView>>()
            .is_empty()
    );
    c.get("/api/nothing").expect_error(404, "not_found");

    // A forged or stale cookie is no session.
    let mut forged = c.clone();
    forged.cookie = Some(format!("tessera_session={}", "0".repeat(64)));
    forged.get("/auth/me").expect_error(401, "unauthorized");

    // Mutations need the CSRF token; a wrong one is as bad as none.
    let no_csrf = c.without_csrf();
    no_csrf
        .post("/auth/logout", &json!({}))
        .expect_error(403, "csrf");
    no_csrf
        .post("/api/clusters/x/groups", &json!({}))
        .expect_error(403, "csrf");
    let mut wrong = c.clone();
    wrong.csrf = Some("0".repeat(64));
    wrong
        .post("/auth/logout", &json!({}))
        .expect_error(403, "csrf");

    let out = c.request("POST", "/auth/logout", None);
    out.reply.ok_as::<Empty>();
    assert_eq!(out.reply.ok(), json!({}));
    let cleared = out.header("set-cookie").expect("logout clears the cookie");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    c.get("/auth/me").expect_error(401, "unauthorized");

    // The single-page app (or the page saying how to build it) is served without a session.
    let page = console.client().get("/clusters/some/view");
    assert!(
        page.content_type.starts_with("text/html"),
        "an HTML page for a browser path: {} {}",
        page.status,
        page.content_type
    );
}

#[test]
fn repeated_failures_lock_the_user_out_with_429_and_are_in_the_login_log() {
    let (console, _store) = console_without_clusters(3);
    let mut c = console.client();
    c.login("admin", "bad1")
        .reply
        .expect_error(401, "unauthorized");
    c.login("admin", "bad2")
        .reply
        .expect_error(401, "unauthorized");
    let locked = c.login("admin", "bad3");
    let message = locked.reply.expect_error(429, "locked_out");
    assert!(message.contains("try again in"), "{message}");
    let retry: u64 = locked
        .header("retry-after")
        .expect("a Retry-After header")
        .parse()
        .expect("seconds");
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // Locked out even with the right password; other users are not.
    c.login("admin", "right")
        .reply
        .expect_error(429, "locked_out");
    let ops = console.login("ops", "other");

    let logins: Vec<LoginEvent> = ops.get("/api/logins?limit=50").ok_as();
    let events: Vec<(String, LoginOutcome, u16, u64)> = logins
        .iter()
        .map(|e| {
            assert!(e.time_ms > 0, "{e:?}");
            assert_eq!(e.addr, "127.0.0.1", "{e:?}");
            (e.user.clone(), e.outcome, e.status, e.count)
        })
        .collect();
    // Newest first: ops's login, admin's two lockouts (one entry), then the two failures.
    assert_eq!(
        events,
        vec![
            ("ops".into(), LoginOutcome::Login, 200, 1),
            ("admin".into(), LoginOutcome::LockedOut, 429, 2),
            ("admin".into(), LoginOutcome::Failed, 401, 2),
        ]
    );
    // Logins are not changes: the audit log (here: no clusters) has none of them.
    assert!(ops.get("/api/audit").ok_as::<Vec<MergedEntry>>().is_empty());
}

#[test]
fn changes_through_the_console_reach_the_dashboard_and_its_audit_log() {
    let cp = ControlPlane::builder().servers(1).start();
    let cluster = cp.options().cluster.clone();
    let console = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![user("ada", "pw")],
        roles: vec![admin("ada")],
        tokens: vec![(cluster.clone(), TOKEN.to_owned())],
        ..ConsoleSetup::default()
    });
    let c = console.login("ada", "pw");
    let base = format!("/api/clusters/{cluster}");

    let list: Vec<ClusterView> = c.get("/api/clusters").ok_as();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].name, cluster);
    assert!(list[0].reachable, "{list:?}");
    assert!(list[0].has_token);
    assert_eq!(list[0].token_role, Some(Role::Admin), "{list:?}");
    assert_eq!(list[0].role, Some(Role::Admin), "{list:?}");
    assert_eq!(
        list[0].overview.as_ref().map(|o| o.cluster.as_str()),
        Some(cluster.as_str())
    );
    assert_eq!(
        list[0].dashboard.as_ref().map(|d| d.admin_addr.clone()),
        Some(cp.dashboard.addr().to_string())
    );

    assert!(
        c.get(&format!("{base}/groups"))
            .ok_as::<Vec<GroupView>>()
            .is_empty()
    );
    let created = c.post(&format!("{base}/groups"), &json!({"id": 1}));
    assert_eq!(created.status, 201, "{}", created.body);
    let server = cp.server_addr(0);
    c.post(
        &format!("{base}/groups/1/servers"),
        &json!({"addr": server}),
    )
    .ok();
    // The address travels percent-encoded in the path, as a browser sends it.
    let encoded = server.replace(':', "%3A");
    c.delete(&format!("{base}/groups/1/servers/{encoded}")).ok();
    let groups: Vec<GroupView> = cp.api().get("/api/groups").ok_as();
    assert_eq!(
        groups[0].id,
        GroupId(1),
        "the dashboard has the group: {groups:?}"
    );
    assert!(groups[0].servers.is_empty(), "{groups:?}");

    // The dashboard's errors and 404s pass through; unknown clusters are the console's 404.
    c.post(&format!("{base}/groups"), &json!({"id": "x"}))
        .expect_error(400, "bad_request");
    c.get(&format!("{base}/nothing"))
        .expect_error(404, "not_found");
    c.get("/api/clusters/nosuch/groups")
        .expect_error(404, "not_found");
    c.get(&format!("{base}/%2e%2e/health"))
        .expect_error(400, "bad_request");

    // The dashboard recorded the changes with who made them.
    let log: Vec<AuditEntry> = cp.api().get("/api/audit").ok_as();
    let mine: Vec<&AuditEntry> = log.iter().filter(|e| e.actor == "console:ada").collect();
    assert_eq!(mine.len(), 4, "three changes and one bad request: {log:?}");
    assert_eq!(mine[3].method, "POST");
    assert_eq!(mine[3].path, "/api/groups");
    assert_eq!(mine[3].detail, r#"{"id":1}"#);
    assert_eq!(mine[3].status, 201);
    assert_eq!(mine[0].status, 400, "the newest first");
    assert_eq!(mine[1].method, "DELETE");

    // The console serves them with their cluster, newest first; the login is in the
    // separate login log.
    let merged: Vec<MergedEntry> = c.get("/api/audit").ok_as();
    assert_eq!(merged[0].cluster, cluster);
    assert_eq!(merged[0].entry.status, 400);
    assert!(merged.iter().all(|e| e.cluster == cluster), "{merged:?}");
    let logins: Vec<LoginEvent> = c.get("/api/logins").ok_as();
    assert!(
        logins
            .iter()
            .any(|e| e.user == "ada" && e.outcome == LoginOutcome::Login),
        "the login is in the login log: {logins:?}"
    );
    let times: Vec<u64> = merged.iter().map(|e| e.entry.time_ms).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");

    // `tessera admin` says who runs it; a direct API call is `api`.
    let out = run_with_timeout(
        Command::new(tessera_bin())
            .args(["admin", "--dashboard", &cp.dashboard.addr().to_string()])
            .args(["--token", TOKEN, "group", "create", "--id", "2"])
            .env("USER", "grace"),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cp.api().post("/api/groups", &json!({"id": 3})).ok();
    let log: Vec<AuditEntry> = cp.api().get("/api/audit?limit=2").ok_as();
    assert_eq!(log[0].actor, "api", "{log:?}");
    assert_eq!(log[1].actor, "cli:grace", "{log:?}");
    assert_eq!(log.len(), 2, "limit");
    // A call refused for want of a token is recorded as such, without its body (issue 25:
    // 401s are audited, at most one entry per 10 s counting those since).
    cp.api()
        .without_token()
        .post("/api/groups", &json!({"id": 4}))
        .expect_error(401, "unauthorized");
    let newest = cp
        .api()
        .get("/api/audit?limit=1")
        .ok_as::<Vec<AuditEntry>>()
        .remove(0);
    assert_eq!(newest.path, "/api/groups", "{newest:?}");
    assert_eq!(newest.actor, "unauthenticated", "{newest:?}");
    assert_eq!(newest.status, 401, "{newest:?}");
    assert!(newest.token.is_none(), "{newest:?}");
    assert!(!newest.detail.contains("\"id\""), "{newest:?}");

    // A console without the cluster's token says why neither a read nor a change goes through.
    let tokenless = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![user("ada", "pw")],
        roles: vec![admin("ada")],
        ..ConsoleSetup::default()
    });
    let t = tokenless.login("ada", "pw");
    let listed: Vec<ClusterView> = t.get("/api/clusters").ok_as();
    assert!(!listed[0].has_token, "{listed:?}");
    assert_eq!(listed[0].role, None, "{listed:?}");
    for reply in [
        t.get(&format!("{base}/groups")),
        t.post(&format!("{base}/groups"), &json!({"id": 9})),
    ] {
        let message = reply.expect_error(403, "cluster_token");
        assert!(message.contains("[tokens]"), "{message}");
    }
}

/// Every cluster's `(name, store, reachable, error)` as `/api/clusters` lists them.
fn listed(c: &ConsoleClient) -> Vec<(String, String, bool, Option<String>)> {
    c.get("/api/clusters")
        .ok_as::<Vec<ClusterView>>()
        .into_iter()
        .map(|cl| (cl.name, cl.store, cl.reachable, cl.error))
        .collect()
}

#[test]
fn clusters_of_fs_and_etcd_stores_are_listed_and_a_dead_dashboard_fails_alone() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let etcd = rt.block_on(Etcd::start());
    let fs_dir = tempfile::tempdir().expect("temp dir");
    let fs = format!("fs://{}", fs_dir.path().join("store").display());
    let start = |name: &str, store: &str| {
        let mut o = DashboardOptions::new(store);
        o.cluster = name.to_owned();
        if store.starts_with("etcd://") {
            // An etcd store has no place beside it for the token key.
            o.token_key_file = Some(fs_dir.path().join(format!("{name}.token-key")));
        }
        Dashboard::start(&o)
    };
    let mut east = start("east", &fs);
    let _west = start("west", &fs);
    let _north = start("north", &etcd.url());
    let console = Console::start(&ConsoleSetup {
        stores: vec![fs.clone(), etcd.url()],
        users: vec![user("ada", "pw")],
        roles: vec![admin("ada")],
        tokens: ["east", "west"]
            .iter()
            .map(|n| ((*n).to_owned(), TOKEN.to_owned()))
            .collect(),
        bound_tokens: vec![("north".into(), etcd.url(), TOKEN.into())],
        ..ConsoleSetup::default()
    });
    let c = console.login("ada", "pw");
    let all = listed(&c);
    let names: Vec<(&str, &str, bool)> = all
        .iter()
        .map(|(n, s, r, _)| (n.as_str(), s.as_str(), *r))
        .collect();
    assert_eq!(
        names,
        vec![
            ("east", fs.as_str(), true),
            ("west", fs.as_str(), true),
            ("north", etcd.url().as_str(), true)
        ],
        "{all:?}"
    );
    c.post("/api/clusters/north/groups", &json!({"id": 7})).ok();

    east.kill();
    let mut seen = Vec::new();
    assert!(
        wait_until(Duration::from_secs(15), || {
            seen = listed(&c);
            seen.iter().any(|(n, _, r, _)| n == "east" && !r)
        }),
        "east never showed as unreachable: {seen:?}"
    );
    let (_, _, _, error) = seen.iter().find(|(n, ..)| n == "east").unwrap();
    assert!(
        error.as_ref().is_some_and(|e| !e.is_empty()),
        "an unreachable cluster says why: {seen:?}"
    );
    let r = c.get("/api/clusters/east/groups");
    assert!(
        r.status == 502 || r.status == 503,
        "a dead dashboard's cluster is 502 or 503, got {}: {}",
        r.status,
        r.body
    );
    let code = if r.status == 502 {
        "bad_gateway"
    } else {
        "unavailable"
    };
    let message = r.expect_error(r.status, code);
    assert!(message.contains("east"), "{message}");
    for other in ["west", "north"] {
        assert!(
            seen.iter().any(|(n, _, r, _)| n == other && *r),
            "{other}: {seen:?}"
        );
        c.get(&format!("/api/clusters/{other}/groups"))
            .ok_as::<Vec<GroupView>>();
    }
    let north: Vec<GroupView> = c.get("/api/clusters/north/groups").ok_as();
    assert_eq!(north[0].id, GroupId(7), "{north:?}");
    // The merged audit log still answers, with what the live clusters recorded.
    let merged: Vec<MergedEntry> = c.get("/api/audit").ok_as();
    assert!(
        merged
            .iter()
            .any(|e| e.cluster == "north" && e.entry.actor == "console:ada"),
        "{merged:?}"
    );
}

#[test]
fn a_clusters_token_never_goes_to_a_same_named_cluster_of_another_store() {
    // The cluster's own store is down from the start (its path is a file), so the console has
    // never seen the real `local`; a stranger's store has a cluster of the same name, whose
    // dashboard would accept the token (it stands for one that records it).
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = dir.path().join("broken");
    std::fs::write(&broken, "not a store").unwrap();
    let own = format!("fs://{}", broken.display());
    let strangers = format!("fs://{}", dir.path().join("strangers").display());
    let rogue = Dashboard::start(&DashboardOptions::new(&strangers));
    let name = rogue.options().cluster.clone();
    let console = Console::start(&ConsoleSetup {
        stores: vec![own, strangers.clone()],
        users: vec![user("ada", "pw")],
        roles: vec![admin("ada")],
        tokens: vec![(name.clone(), TOKEN.into())],
        // Sessions go to the first store by default, which is the broken one here: keep them
        // in the one that works, so the login does not fail before the relay is tried.
        extra: format!("session_store = \"{strangers}\"\n"),
        ..ConsoleSetup::default()
    });
    let c = console.login("ada", "pw");
    let all = listed(&c);
    assert!(
        all.iter().any(|(n, s, ..)| *n == name && *s == strangers),
        "the stranger's cluster is listed: {all:?}"
    );
    let r = c.post(&format!("/api/clusters/{name}/groups"), &json!({"id": 3}));
    let message = r.expect_error(403, "cluster_token");
    assert!(message.contains("bound to its store"), "{message}");
    let listed_token: Vec<ClusterView> = c.get("/api/clusters").ok_as();
    let local = listed_token
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} is listed: {listed_token:?}"));
    assert!(!local.has_token, "{listed_token:?}");
}

/// A console relaying to a dashboard that is then killed, and whatever next answers at that
/// dashboard's address: `answer` writes the whole HTTP answer to each call. Returns what the
/// console answered for the first relayed call that reached it.
fn relayed_from_an_impostor(
    answer: impl Fn(&mut std::net::TcpStream) + Send + 'static,
) -> crate::support::Reply {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("fs://{}", dir.path().join("store").display());
    let mut dashboard = Dashboard::start(&DashboardOptions::new(&store));
    let name = dashboard.options().cluster.clone();
    let groups = format!("/api/clusters/{name}/groups");
    let console = Console::start(&ConsoleSetup {
        stores: vec![store],
        users: vec![user("ada", "pw")],
        tokens: vec![(name.clone(), TOKEN.into())],
        ..ConsoleSetup::default()
    });
    let c = console.login("ada", "pw");
    c.get(&groups).ok();
    let addr = dashboard.addr();
    dashboard.kill();
    let listener = wait_for_bind(addr);
    listener.set_nonblocking(true).unwrap();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = {
        let served = served.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while std::time::Instant::now() < deadline && served.load(Ordering::SeqCst) < 3 {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                // Counted once called: the console may stop reading before the answer ends.
                served.fetch_add(1, Ordering::SeqCst);
                answer(&mut s);
            }
        })
    };
    // The console's first call may still find its pooled connection to the dead dashboard.
    let mut hit = None;
    for _ in 0..10 {
        let before = served.load(Ordering::SeqCst);
        let r = c.get(&groups);
        if served.load(Ordering::SeqCst) > before {
            hit = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    served.store(usize::MAX / 2, Ordering::SeqCst);
    server.join().unwrap();
    hit.expect("the console called the impostor")
}

#[test]
fn the_relay_serves_only_json_from_a_dashboard() {
    // Whatever answers at the dashboard's address now serves a page with a script.
    let r = relayed_from_an_impostor(|s| {
        use std::io::Write;
        let page = "<script>steal()</script>";
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{page}",
            page.len()
        );
    });
    assert_eq!(r.status, 502, "{}", r.body);
    assert!(!r.body.contains("<script>"), "{}", r.body);
    assert!(
        r.content_type.starts_with("application/json"),
        "{}",
        r.content_type
    );
    let message = r.expect_error(502, "bad_gateway");
    assert!(message.contains("no JSON"), "{message}");
}

#[test]
fn the_relay_stops_reading_an_endless_answer() {
    // JSON without a length, chunk after chunk: 1 MiB chunks, at most 100 (past the 64 MiB cap).
    let r = relayed_from_an_impostor(|s| {
        use std::io::Write;
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        );
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..100 {
            if write!(s, "{:x}\r\n", chunk.len()).is_err()
                || s.write_all(&chunk).is_err()
                || s.write_all(b"\r\n").is_err()
            {
                return;
            }
        }
        let _ = s.write_all(b"0\r\n\r\n");
    });
    let message = r.expect_error(502, "bad_gateway");
    assert!(message.contains("more than"), "{message}");
}

/// Binds `addr` once the process that held it has let it go (bounded).
fn wait_for_bind(addr: std::net::SocketAddr) -> std::net::TcpListener {
    for _ in 0..100 {
        if let Ok(l) = std::net::TcpListener::bind(addr) {
            return l;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{addr} stayed taken");
}

#[test]
fn tessera_up_with_two_clusters_shows_both_in_the_console() {
    let data = tempfile::tempdir().expect("temp dir");
    let console_port = free_port();
    let args: Vec<String> = [
        "--clusters".to_owned(),
        "2".to_owned(),
        "--groups".to_owned(),
        "1".to_owned(),
        "--port".to_owned(),
        consecutive_free_ports(4).to_string(),
        "--dashboard-port".to_owned(),
        consecutive_free_ports(2).to_string(),
        "--admin-port".to_owned(),
        consecutive_free_ports(4).to_string(),
        "--console-port".to_owned(),
        console_port.to_string(),
    ]
    .into();
    let console_line = |up: &Up| {
        up.line(Duration::from_secs(10), |l| l.starts_with("console:"))
            .unwrap_or_else(|| panic!("no console line\n{}", up.output()))
    };
    let mut up = Up::start_with(data.path(), &args);
    let line = console_line(&up);
    let password = line
        .split("password: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no password in {line:?}"))
        .to_owned();
    let console = ConsoleClient::for_port(console_port);
    let mut c = console.clone();
    c.login("admin", &password).reply.ok();
    // console.toml holds the password hash and the clusters' tokens: owner only.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(data.path().join("console.toml"))
            .expect("console.toml exists")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "console.toml mode {:o}", mode & 0o777);
    let all = listed(&c);
    let names: Vec<(&str, bool)> = all.iter().map(|(n, _, r, _)| (n.as_str(), *r)).collect();
    assert_eq!(names, vec![("local", true), ("local2", true)], "{all:?}");
    for name in ["local", "local2"] {
        let groups: Vec<GroupView> = c.get(&format!("/api/clusters/{name}/groups")).ok_as();
        assert_eq!(groups.len(), 1, "{name}: {groups:?}");
        // The console has each cluster's token: changes go through.
        c.post(&format!("/api/clusters/{name}/groups"), &json!({"id": 2}))
            .ok();
    }
    stop(&mut up);
    drop(up);

    // A resume keeps the user and its password (and sessions), and says so instead of
    // printing the password.
    let mut up = Up::start_with(data.path(), &args);
    let line = console_line(&up);
    assert!(!line.contains("password:"), "{line}");
    assert!(
        up.line(Duration::from_secs(10), |l| l.contains("--reset-password"))
            .is_some(),
        "a resume says how to get a new password\n{}",
        up.output()
    );
    // The first run's session is in the store, so it outlived the restart.
    let kept = c.clone();
    assert_eq!(kept.get("/auth/me").ok_as::<Session>().user, "admin");
    let mut c = console.clone();
    c.login("admin", &password).reply.ok();
    assert_eq!(listed(&c).len(), 2);
    stop(&mut up);
}

/// SIGINT, then asserts a clean exit within 30 s.
fn stop(up: &mut Up) {
    match up.interrupt(Duration::from_secs(30)) {
        Some(status) => assert!(
            status.success(),
            "tessera up exited with {status}\n{}",
            up.output()
        ),
        None => panic!("tessera up still runs 30 s after SIGINT\n{}", up.output()),
    }
}
