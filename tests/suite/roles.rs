//! API tokens and roles (docs/api.md, "Tokens and roles"): what a viewer, an operator and an
//! admin token may do, tokens made and revoked through the CLI, the audit log naming the
//! token, the store holding HMACs only (and a sha256 admin token from before migrated), the
//! console bounding relayed calls by its user's role, and the overview's fan-out cached.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tessera_wire::access::Role;
use tessera_wire::audit::AuditEntry;
use tessera_wire::cluster::{GroupView, Overview, ProxyView, SlotView, Stats};
use tessera_wire::console::ClusterView;
use tessera_wire::migration::{MigrationStatus, Queued};
use tessera_wire::tokens::{CreatedToken, TokenView, WhoAmI};
use tessera_wire::topology::GroupId;

use crate::support::{
    Api, Console, ConsoleSetup, ControlPlane, Dashboard, TOKEN, cli_stdout, free_port, loopback,
    run_with_timeout, wait_until,
};

/// Creates a token with the admin token; returns a client of the API with the new one.
fn token(cp: &ControlPlane, name: &str, role: &str) -> Api {
    cp.api().with_token(&secret(cp, name, role))
}

/// Creates a token with the admin token; returns its secret.
fn secret(cp: &ControlPlane, name: &str, role: &str) -> String {
    let created = cp
        .api()
        .post("/api/tokens", &json!({"name": name, "role": role}));
    assert_eq!(created.status, 201, "creating {name}: {}", created.body);
    let v: CreatedToken = created.parse();
    assert_eq!(v.name, name, "{}", created.body);
    assert_eq!(v.role.as_str(), role, "{}", created.body);
    assert!(!v.token.is_empty(), "the secret, shown once");
    v.token
}

/// Two groups of one server each, every slot on group 1.
fn two_groups(cp: &ControlPlane) {
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
}

fn owner_of(cp: &ControlPlane, slot: usize) -> Option<GroupId> {
    cp.api().get("/api/slots").ok_as::<Vec<SlotView>>()[slot].group
}

/// `GET /api/whoami` with `api`'s token: (name, role).
fn who_am_i(api: &Api) -> (String, Role) {
    let w: WhoAmI = api.get("/api/whoami").ok_as();
    (w.token, w.role)
}

#[test]
fn a_viewer_token_reads_but_gets_403_with_the_reason_for_any_change() {
    let cp = ControlPlane::builder().servers(2).start();
    two_groups(&cp);
    let viewer = token(&cp, "watcher", "viewer");
    for path in [
        "/api/overview",
        "/api/groups",
        "/api/slots",
        "/api/stats",
        "/api/audit",
        "/api/plugins",
        "/api/migrations",
    ] {
        viewer.get(path).ok();
    }
    assert_eq!(who_am_i(&viewer), ("watcher".into(), Role::Viewer));

    let m = viewer
        .post("/api/migrations", &json!({"from": 0, "to": 3, "group": 2}))
        .expect_error(403, "forbidden");
    assert!(
        m.contains("watcher") && m.contains("viewer") && m.contains("operator"),
        "names the token, its role and the role needed: {m}"
    );
    for (path, body) in [
        ("/api/rebalance", json!({"dry_run": true})),
        ("/api/migrations/abort", json!({})),
        ("/api/plugins/filter/enable", json!({})),
        ("/api/groups", json!({"id": 3})),
        ("/api/tokens", json!({"name": "mine", "role": "admin"})),
    ] {
        viewer.post(path, &body).expect_error(403, "forbidden");
    }
    viewer.get("/api/tokens").expect_error(403, "forbidden");
    assert_eq!(
        owner_of(&cp, 0),
        Some(GroupId(1)),
        "the refused migration moved nothing"
    );
    assert_eq!(
        cp.api()
            .get("/api/migrations")
            .ok_as::<MigrationStatus>()
            .pending,
        0
    );
}

#[test]
fn an_operator_token_migrates_and_manages_plugins_but_cannot_add_a_server() {
    let cp = ControlPlane::builder().servers(3).start();
    two_groups(&cp);
    let operator = token(&cp, "mover", "operator");
    let queued: Queued = operator
        .post("/api/migrations", &json!({"from": 0, "to": 3, "group": 2}))
        .ok_as();
    assert_eq!(queued.queued, 4, "{queued:?}");
    assert!(
        wait_until(Duration::from_secs(30), || owner_of(&cp, 3)
            == Some(GroupId(2))),
        "slots 0-3 never reached group 2: {}",
        cp.api().get("/api/migrations").body
    );
    operator
        .post("/api/rebalance", &json!({"dry_run": true}))
        .ok();
    // Plugins are the operator's: the catalog is empty, so the answer is the API's 404,
    // not a refusal of the role.
    operator
        .post("/api/plugins/nosuch/enable", &json!({}))
        .expect_error(404, "not_found");

    let m = operator
        .post("/api/groups/2/servers", &json!({"addr": cp.server_addr(2)}))
        .expect_error(403, "forbidden");
    assert!(
        m.contains("mover") && m.contains("operator") && m.contains("admin"),
        "{m}"
    );
    for (method, path, body) in [
        ("POST", "/api/groups", Some(json!({"id": 3}))),
        ("DELETE", "/api/groups/2", None),
        (
            "POST",
            "/api/groups/1/promote",
            Some(json!({"addr": "x:1"})),
        ),
        (
            "POST",
            "/api/slots/assign",
            Some(json!({"from": 0, "to": 1, "group": 1})),
        ),
        ("PUT", "/api/users/eve", Some(json!({"password": "pw"}))),
        (
            "POST",
            "/api/tokens",
            Some(json!({"name": "x", "role": "viewer"})),
        ),
        ("DELETE", "/api/tokens/mover", None),
    ] {
        let body = body.map(|b| b.to_string());
        operator
            .request(method, path, body.as_deref().map(str::as_bytes))
            .expect_error(403, "forbidden");
    }
    let groups: Vec<GroupView> = cp.api().get("/api/groups").ok_as();
    assert_eq!(groups[1].servers.len(), 1, "{groups:?}");
}

#[test]
fn tokens_are_made_and_revoked_from_the_cli_and_a_revoked_one_gets_401() {
    let mut cp = ControlPlane::builder().start();
    let out = cli_stdout(
        &cp.admin_cli(TOKEN, &["token", "create", "ci", "--role", "viewer"]),
        "token create",
    );
    assert!(out.starts_with("created token ci (viewer)"), "{out}");
    let secret = out
        .lines()
        .nth(1)
        .expect("the secret's line")
        .trim()
        .to_owned();
    assert_eq!(secret.len(), 32, "128 random bits in hex: {out}");
    let ci = cp.api().with_token(&secret);
    ci.get("/api/overview").ok_as::<Overview>();
    let whoami = cli_stdout(&cp.admin_cli(&secret, &["token", "whoami"]), "whoami");
    assert_eq!(whoami.trim(), "token ci (viewer)");

    let list = cli_stdout(&cp.admin_cli(TOKEN, &["--json", "token", "list"]), "list");
    let tokens: Vec<TokenView> = serde_json::from_str(&list).expect("a list of tokens");
    let names: Vec<(&str, Role)> = tokens.iter().map(|t| (t.name.as_str(), t.role)).collect();
    assert_eq!(
        names,
        [("admin", Role::Admin), ("ci", Role::Viewer)],
        "{list}"
    );
    // The raw answer, not only the fields the type knows.
    assert!(
        !list.contains(&secret) && !list.contains("hmac"),
        "no secret nor HMAC is listed: {list}"
    );
    let table = cli_stdout(&cp.admin_cli(TOKEN, &["token", "list"]), "list");
    assert!(table.starts_with("NAME"), "{table}");

    cli_stdout(&cp.admin_cli(TOKEN, &["token", "revoke", "ci"]), "revoke");
    for reply in [
        ci.get("/api/overview"),
        ci.post("/api/migrations", &json!({"from": 0, "to": 0, "group": 1})),
    ] {
        reply.expect_error(401, "unauthorized");
    }
    let out = cp.admin_cli(&secret, &["overview"]);
    assert!(!out.status.success(), "a revoked token is refused");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The last admin token stays; `--admin-token` restores one an admin revoked.
    let out = cp.admin_cli(TOKEN, &["token", "revoke", "admin"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("409") && stderr.contains("last admin token"),
        "{stderr}"
    );
    let root = token(&cp, "root", "admin");
    root.delete("/api/tokens/admin").ok();
    cp.api()
        .get("/api/overview")
        .expect_error(401, "unauthorized");
    cp.restart_dashboard();
    assert_eq!(who_am_i(&cp.api()), ("admin".into(), Role::Admin));
}

#[test]
fn audit_entries_name_the_token_and_record_refused_roles() {
    let cp = ControlPlane::builder().servers(2).start();
    two_groups(&cp);
    let operator = token(&cp, "mover", "operator");
    let viewer_secret = secret(&cp, "watcher", "viewer");
    let viewer = cp.api().with_token(&viewer_secret);
    operator
        .post("/api/migrations", &json!({"from": 0, "to": 0, "group": 2}))
        .ok();
    viewer
        .post("/api/migrations", &json!({"from": 1, "to": 1, "group": 2}))
        .expect_error(403, "forbidden");
    // Without a valid token the call is recorded as refused, without the token it tried
    // (rate-limited: `refused_tokens_are_throttled_by_address_and_audited_at_a_bounded_rate`).
    let guess = "guess-0123456789abcdef";
    viewer
        .with_token(guess)
        .post("/api/migrations", &json!({}))
        .expect_error(401, "unauthorized");

    let mut log: Vec<AuditEntry> = cp.api().get("/api/audit?limit=5").ok_as();
    assert_eq!(log[0].actor, "unauthenticated", "{log:?}");
    assert_eq!(log[0].status, 401, "{log:?}");
    assert_eq!(log[0].path, "/api/migrations", "{log:?}");
    assert!(log[0].token.is_none(), "{log:?}");
    let log = log.split_off(1);
    let row = |i: usize| {
        let e = &log[i];
        (
            e.token.clone().unwrap_or_else(|| "-".into()),
            e.role.map_or("-", Role::as_str).to_owned(),
            e.path.clone(),
            u64::from(e.status),
        )
    };
    let mig = "/api/migrations".to_owned();
    assert_eq!(
        row(0),
        ("watcher".into(), "viewer".into(), mig.clone(), 403),
        "{log:?}"
    );
    assert_eq!(
        row(1),
        ("mover".into(), "operator".into(), mig, 200),
        "{log:?}"
    );
    assert_eq!(
        row(2),
        ("admin".into(), "admin".into(), "/api/tokens".into(), 201),
        "{log:?}"
    );
    assert_eq!(log[2].detail, r#"{"name":"watcher","role":"viewer"}"#);
    let whole = cp.api().get("/api/audit?limit=1000").body;
    assert!(
        !whole.contains(&viewer_secret) && !whole.contains(TOKEN) && !whole.contains(guess),
        "no secret is in the log: {whole}"
    );
}

/// Every file under `dir`, with its contents.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default()).into_owned();
            out.push((p, text));
        }
    }
    out
}

fn store_dir(cp: &ControlPlane) -> PathBuf {
    PathBuf::from(
        cp.options()
            .store
            .strip_prefix("fs://")
            .expect("an fs store"),
    )
}

fn key_file(cp: &ControlPlane) -> PathBuf {
    PathBuf::from(format!("{}.keys", store_dir(cp).display())).join("testc.token-key")
}

#[test]
fn the_store_holds_tokens_only_as_hmacs_under_a_key_kept_outside_it() {
    let cp = ControlPlane::builder().start();
    let created = cp
        .api()
        .post("/api/tokens", &json!({"name": "ci", "role": "operator"}))
        .ok_as::<CreatedToken>();
    let secret = created.token;
    let all = files(&store_dir(&cp));
    let tokens_doc = all
        .iter()
        .find(|(p, _)| p.ends_with("tessera/testc/tokens"))
        .unwrap_or_else(|| {
            panic!(
                "no tokens document among {:?}",
                all.iter().map(|f| &f.0).collect::<Vec<_>>()
            )
        });
    assert!(tokens_doc.1.contains("\"hmac\""), "{}", tokens_doc.1);
    for s in [TOKEN, secret.as_str()] {
        let sha = tessera_model::secret::sha256_hex(s);
        for (path, text) in &all {
            assert!(
                !text.contains(s) && !text.to_ascii_lowercase().contains(&sha),
                "{} holds a token, or its plain sha256 (which checks a guess without the key)",
                path.display()
            );
        }
    }
    let key = key_file(&cp);
    let mode = std::fs::metadata(&key)
        .unwrap_or_else(|e| panic!("{}: {e}", key.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", key.display());
    assert!(
        !key.starts_with(store_dir(&cp)),
        "the key is beside the store, not in it"
    );
}

/// Makes the fixture's store look like one written before tokens: the meta holds the admin
/// token's unsalted sha256, and there is neither a tokens document nor a key.
fn as_before_tokens(cp: &ControlPlane) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let store = tessera_store::open(&cp.options().store)
            .await
            .expect("opening the store");
        let meta_key = "/tessera/testc/meta";
        let raw = store.get(meta_key).await.unwrap().expect("a meta");
        let mut meta: Value = serde_json::from_slice(&raw.value).unwrap();
        assert_eq!(
            meta["admin_token_sha256"], "",
            "a new meta holds no sha256: {meta}"
        );
        meta["admin_token_sha256"] = json!(tessera_model::secret::sha256_hex(TOKEN));
        store
            .put(meta_key, meta.to_string().into_bytes().into())
            .await
            .unwrap();
        assert!(store.delete("/tessera/testc/tokens").await.unwrap());
    });
    std::fs::remove_file(key_file(cp)).expect("removing the key");
}

/// `tessera dashboard` with these options on a free port, expected to refuse to start.
fn refused_start(options: &crate::support::DashboardOptions) -> String {
    let mut cmd = options.command(loopback(free_port()));
    let out = run_with_timeout(&mut cmd, Duration::from_secs(30));
    assert!(!out.status.success(), "{cmd:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_sha256_admin_token_from_before_is_migrated_at_first_start() {
    let mut cp = ControlPlane::builder().start();
    cp.kill_dashboard();
    as_before_tokens(&cp);
    // Without --admin-token: the migration needs only the sha256.
    let mut options = cp.options().clone();
    options.token = None;
    let mut d = Dashboard::start(&options);
    let api = Api::new(d.addr(), Some(TOKEN));
    assert_eq!(who_am_i(&api), ("admin".into(), Role::Admin));
    let listed: Vec<TokenView> = api.get("/api/tokens").ok_as();
    assert_eq!(listed[0].created_by, "migrated", "{listed:?}");
    let all = files(&store_dir(&cp));
    let sha = tessera_model::secret::sha256_hex(TOKEN);
    assert!(
        all.iter().all(|(_, text)| !text.contains(&sha)),
        "the sha256 is gone from the store"
    );
    let mode = std::fs::metadata(key_file(&cp))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    d.kill();

    // Later starts check --admin-token and the key.
    let mut wrong = cp.options().clone();
    wrong.token = Some("not-the-token".into());
    let e = refused_start(&wrong);
    assert!(e.contains("--admin-token does not match"), "{e}");
    let other = tempfile::tempdir().unwrap();
    let other_key = other.path().join("k");
    std::fs::write(&other_key, format!("{}\n", "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&other_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut with_other_key = cp.options().clone();
    with_other_key.token_key_file = Some(other_key.clone());
    let e = refused_start(&with_other_key);
    assert!(e.contains("is not the one the tokens"), "{e}");
    with_other_key.token_key_file = Some(other.path().join("missing"));
    let e = refused_start(&with_other_key);
    assert!(e.contains("does not exist"), "{e}");
    std::fs::set_permissions(&other_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    with_other_key.token_key_file = Some(other_key);
    let e = refused_start(&with_other_key);
    assert!(e.contains("chmod 600"), "{e}");
    drop(d);
}

#[test]
fn console_users_do_what_their_role_and_the_clusters_token_allow() {
    let cp = ControlPlane::builder().servers(2).start();
    two_groups(&cp);
    let user = |n: &str| (n.to_owned(), "pw".to_owned());
    let role = |n: &str, r: &str| (n.to_owned(), r.to_owned());
    let console = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![user("vic"), user("olga"), user("ada")],
        roles: vec![role("olga", "operator"), role("ada", "admin")],
        tokens: vec![("testc".into(), TOKEN.into())],
        ..ConsoleSetup::default()
    });
    let base = "/api/clusters/testc";
    let migrate = json!({"from": 0, "to": 0, "group": 2});
    let (vic, olga, ada) = (
        console.login("vic", "pw"),
        console.login("olga", "pw"),
        console.login("ada", "pw"),
    );
    for (c, want) in [
        (&vic, Role::Viewer),
        (&olga, Role::Operator),
        (&ada, Role::Admin),
    ] {
        let listed: Vec<ClusterView> = c.get("/api/clusters").ok_as();
        assert_eq!(listed[0].role, Some(want), "{listed:?}");
        assert_eq!(listed[0].token_role, Some(Role::Admin), "{listed:?}");
    }
    vic.get(&format!("{base}/groups")).ok_as::<Vec<GroupView>>();
    let m = vic
        .post(&format!("{base}/migrations"), &migrate)
        .expect_error(403, "forbidden");
    assert!(
        m.contains("console user vic") && m.contains("operator"),
        "{m}"
    );
    vic.get(&format!("{base}/tokens"))
        .expect_error(403, "forbidden");
    olga.post(&format!("{base}/migrations"), &migrate).ok();
    let m = olga
        .post(&format!("{base}/groups"), &json!({"id": 3}))
        .expect_error(403, "forbidden");
    assert!(m.contains("olga"), "{m}");
    let made = ada.post(
        &format!("{base}/tokens"),
        &json!({"name": "console-ro", "role": "viewer"}),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    let viewer_token = made.parse::<CreatedToken>().token;
    let log: Vec<AuditEntry> = cp.api().get("/api/audit?limit=2").ok_as();
    assert_eq!(log[0].actor, "console:ada", "{log:?}");
    assert_eq!(log[0].token.as_deref(), Some("admin"), "{log:?}");
    assert_eq!(log[1].actor, "console:olga", "{log:?}");

    // With a viewer token in console.toml even the admin user only reads there.
    let read_only = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![user("ada")],
        roles: vec![role("ada", "admin")],
        tokens: vec![("testc".into(), viewer_token)],
        ..ConsoleSetup::default()
    });
    let ada = read_only.login("ada", "pw");
    let listed: Vec<ClusterView> = ada.get("/api/clusters").ok_as();
    assert_eq!(listed[0].token_role, Some(Role::Viewer), "{listed:?}");
    assert_eq!(listed[0].role, Some(Role::Viewer), "{listed:?}");
    ada.get(&format!("{base}/overview")).ok_as::<Overview>();
    let m = ada
        .post(&format!("{base}/groups"), &json!({"id": 3}))
        .expect_error(403, "forbidden");
    assert!(
        m.contains("token console-ro"),
        "the dashboard's refusal: {m}"
    );
}

// === the overview's fan-out ===

/// An HTTP server standing in for a proxy's admin API: `/api/proxy/stats` answers fixed
/// stats, anything else `{}`; counts the stats calls. Its thread ends with the test process.
struct FakeProxy {
    addr: SocketAddr,
    stats_calls: Arc<AtomicUsize>,
}

impl FakeProxy {
    fn start() -> FakeProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let addr = listener.local_addr().unwrap();
        let stats_calls = Arc::new(AtomicUsize::new(0));
        let calls = stats_calls.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let calls = calls.clone();
                std::thread::spawn(move || serve(conn, &calls));
            }
        });
        FakeProxy { addr, stats_calls }
    }
}

/// Answers the requests of one keep-alive connection.
fn serve(conn: TcpStream, stats_calls: &AtomicUsize) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(conn.try_clone().expect("cloning the socket"));
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut length = 0;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h.trim().is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply = if path == "/api/proxy/stats" {
            stats_calls.fetch_add(1, Ordering::SeqCst);
            json!({"token": "fake", "epoch": 1, "sessions": 0, "ops_total": 70,
                   "errors_total": 0, "ops_per_sec": 7, "commands": [],
                   "backend": {"requests": 0, "batches": 0, "connects": 0,
                               "connect_failures": 0, "reconnects": 0},
                   "uptime_secs": 1})
        } else {
            json!({})
        };
        let text = reply.to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            text.len()
        );
        if out
            .write_all(head.as_bytes())
            .and_then(|()| out.write_all(text.as_bytes()))
            .is_err()
        {
            return;
        }
    }
}

#[test]
fn overview_and_stats_call_each_proxy_at_most_once_a_second() {
    let cp = ControlPlane::builder().start();
    let fake = FakeProxy::start();
    // Registered as a proxy registers itself: a holder node under proxy/ in the store.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = tessera_store::open(&cp.options().store).await.unwrap();
        let holder = json!({"pid": std::process::id(), "host": tessera_store::hostname(),
            "payload": {"schema": 1, "token": "fake", "addr": "127.0.0.1:1",
                        "admin_addr": fake.addr.to_string(), "pid": std::process::id(),
                        "host": "test", "start_unix": 0, "state": "online", "version": "0"}});
        store
            .put(
                "/tessera/testc/proxy/fake",
                holder.to_string().into_bytes().into(),
            )
            .await
            .unwrap();
    });
    let api = cp.api();
    assert_eq!(
        api.get("/api/proxies").ok_as::<Vec<ProxyView>>()[0].token,
        "fake"
    );

    let before = fake.stats_calls.load(Ordering::SeqCst);
    let started = Instant::now();
    let replies = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let (api, replies) = (api.clone(), replies.clone());
            std::thread::spawn(move || {
                let path = if i % 2 == 0 {
                    "/api/overview"
                } else {
                    "/api/stats"
                };
                // Both answers carry the proxies' ops per second.
                let reply = api.get(path);
                let ops = if path == "/api/overview" {
                    reply.ok_as::<Overview>().ops_per_sec
                } else {
                    reply.ok_as::<Stats>().ops_per_sec
                };
                replies.lock().unwrap().push((path, ops));
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a request thread");
    }
    let elapsed = started.elapsed();
    let calls = fake.stats_calls.load(Ordering::SeqCst) - before;
    // A fetch starts only once the last one's answer is a second old. The metrics history
    // reads the stats once a second too and shares its answer with these routes
    // (docs/api.md, "Metrics history"): the window may hold one of its reads besides, or
    // only its read, every request served the answer it fetched.
    let most = elapsed.as_secs() as usize + 2;
    assert!(
        calls <= most,
        "20 requests in {elapsed:?} called the proxy {calls} times (at most {most})"
    );
    for (path, ops) in replies.lock().unwrap().iter() {
        assert_eq!(*ops, 7, "the proxy's stats are in every answer: {path}");
    }
    // The shared answer is at most a second old: a second later the stats were fetched anew
    // (by the history's read or by this call), and never more than once per second since.
    let before = fake.stats_calls.load(Ordering::SeqCst);
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(1100));
    api.get("/api/stats").ok();
    let calls = fake.stats_calls.load(Ordering::SeqCst) - before;
    let most = started.elapsed().as_secs() as usize + 2;
    assert!(
        (1..=most).contains(&calls),
        "a second later the stats are fetched anew: {calls} calls (at most {most})"
    );
}

/// The rank of a role's name, lowest first.
fn rank(role: &str) -> usize {
    ["viewer", "operator", "admin"]
        .iter()
        .position(|r| *r == role)
        .unwrap_or_else(|| panic!("unknown role {role}"))
}

// Issue 25, item 9: a viewer token read `GET /api/mirror`'s samples (clients' keys, values
// and replies) while the command log already needed an operator for that reason.
#[test]
fn issue_25_every_read_needs_the_role_the_table_gives_route_by_route() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    two_groups(&cp);
    let callers = [
        ("viewer", token(&cp, "watcher", "viewer")),
        ("operator", token(&cp, "ops", "operator")),
        ("admin", cp.api()),
    ];
    // The reads of clients' data, by name.
    for path in ["/api/mirror", "/api/hotkeys", "/api/commandlog"] {
        let m = callers[0].1.get(path).expect_error(403, "forbidden");
        assert!(m.contains("needs operator"), "{path}: {m}");
        callers[1].1.get(path).ok();
    }
    // Every read the API describes, as each role: refused exactly when the role is below the
    // one its `x-tessera-role` names (a unit test holds that to `access::RULES`).
    let doc = cp.api().get("/api/openapi.json").ok();
    let mut checked = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let Some(get) = ops.get("get") else {
            continue;
        };
        let needs = get["x-tessera-role"].as_str();
        let concrete = path
            .replace("{id}", "1")
            .replace("{name}", "nosuch")
            .replace("{token}", "nosuch")
            .replace("{addr}", "127.0.0.1:1");
        for (role, api) in &callers {
            let r = api.get(&concrete);
            let allowed = needs.is_none_or(|n| rank(role) >= rank(n));
            if allowed {
                assert_ne!(r.status, 403, "{role} GET {concrete}: {}", r.body);
                assert_ne!(r.status, 401, "{role} GET {concrete}: {}", r.body);
            } else {
                let m = r.expect_error(403, "forbidden");
                assert!(
                    m.contains(&format!("needs {}", needs.unwrap())),
                    "{role} GET {concrete}: {m}"
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} reads described");
}
