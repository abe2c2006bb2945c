//! The cluster's users table (docs/users.md) from the outside: managed on the dashboard's
//! API, pushed to every proxy and loaded by a starting one, never a clear password in the
//! store or a hash in an answer, stale pushes and hostile bodies refused, a corrupt document
//! stopping neither the dashboard nor a proxy. (AUTH itself is the session's: tested there.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tessera_wire::audit::AuditEntry;
use tessera_wire::users::{ProxyUsers, UserView, UsersSource};

use crate::support::{ClusterProxy, ControlPlane, Reply, wait_until};

const ALICE_PASSWORD: &str = "alice-clear-password-7f3a";

/// The key of the users document in the fixture's cluster.
const USERS_KEY: &str = "/tessera/testc/users";

fn put(cp: &ControlPlane, path: &str, body: &Value) -> Reply {
    cp.api()
        .request("PUT", path, Some(body.to_string().as_bytes()))
}

fn put_raw(cp: &ControlPlane, path: &str, body: &[u8]) -> Reply {
    cp.api().request("PUT", path, Some(body))
}

/// `GET /api/proxy/users` of a proxy.
fn proxy_users(p: &ClusterProxy) -> ProxyUsers {
    p.admin().get("/api/proxy/users").ok_as()
}

/// `GET /api/users`.
fn users(cp: &ControlPlane) -> Vec<UserView> {
    cp.api().get("/api/users").ok_as()
}

fn store_put(cp: &ControlPlane, key: &str, value: Vec<u8>) {
    cp.with_store(async |s| s.put(key, value.into()).await.expect("store put"));
}

fn store_delete(cp: &ControlPlane, key: &str) {
    cp.with_store(async |s| s.delete(key).await.expect("store delete"));
}

fn store_json(cp: &ControlPlane, key: &str) -> Value {
    cp.store_json(key)
}

/// Every file under the fs store's directory.
fn store_files(cp: &ControlPlane) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir)
            .expect("reading the store dir")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let root = cp
        .options()
        .store
        .strip_prefix("fs://")
        .expect("an fs store");
    let mut out = Vec::new();
    walk(Path::new(root), &mut out);
    out
}

fn proxy_secret(cp: &ControlPlane) -> String {
    cp.proxy_secret()
}

fn names(list: &[UserView]) -> Vec<String> {
    list.iter().map(|u| u.name.clone()).collect()
}

#[test]
fn users_set_on_the_dashboard_reach_every_proxy_and_a_restarted_one() {
    let mut cp = ControlPlane::builder().proxies(2).start();
    let v = put(
        &cp,
        "/api/users/alice",
        &json!({"password": ALICE_PASSWORD, "commands": ["read", "WRITE"], "key_prefix": "a:"}),
    )
    .ok();
    assert_eq!(
        v,
        json!({"name": "alice", "commands": ["read", "write"], "key_prefix": "a:",
               "enabled": true, "password_set": true})
    );
    put(&cp, "/api/users/bob", &json!({"password": "bob-pw"})).ok();
    let listed = cp.api().get("/api/users");
    assert_eq!(names(&listed.ok_as::<Vec<UserView>>()), ["alice", "bob"]);
    // The raw answer: no field of any name holds a hash.
    assert!(
        !listed.body.contains("sha256$"),
        "no hash in {}",
        listed.body
    );

    // The call returned: every proxy has the table already (a barrier, as for topology).
    for p in &cp.proxies {
        let u = proxy_users(p);
        assert_eq!(u.version, 2, "{u:?}");
        assert_eq!(u.source, UsersSource::Cluster);
        assert!(!u.auth_required, "default stays nopass: {u:?}");
        assert_eq!(names(&u.users), ["alice", "bob"]);
        assert_eq!(
            u.users[0].commands.as_deref(),
            Some(&["read".to_owned(), "write".to_owned()][..])
        );
        assert_eq!(u.users[0].key_prefix.as_deref(), Some("a:"));
        let text = p.admin().get("/api/proxy/users").body;
        assert!(
            !text.contains("sha256$") && !text.contains(ALICE_PASSWORD),
            "{text}"
        );
        assert_eq!(p.info().users_version, 2);
    }

    // A change keeps what it leaves out.
    let v: UserView = put(&cp, "/api/users/alice", &json!({"enabled": false})).ok_as();
    assert_eq!((v.enabled, v.key_prefix.as_deref()), (false, Some("a:")));
    assert!(!proxy_users(&cp.proxies[1]).users[0].enabled);

    // The store holds the hash, never the password: not in the users document, not in the
    // audit log, nowhere.
    let doc = store_json(&cp, USERS_KEY);
    assert_eq!(doc["version"], 3);
    assert!(
        doc["users"][0]["password"]
            .as_str()
            .is_some_and(|h| h.starts_with("sha256$"))
    );
    for f in store_files(&cp) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(ALICE_PASSWORD) && !text.contains("bob-pw"),
            "{} holds a clear password: {text}",
            f.display()
        );
    }
    let audit: Vec<AuditEntry> = cp.api().get("/api/audit").ok_as();
    let put_alice = audit
        .iter()
        .find(|e| e.path == "/api/users/alice" && e.detail.contains("read"))
        .unwrap_or_else(|| panic!("the change is audited: {audit:?}"));
    assert!(put_alice.detail.contains("<redacted>"), "{put_alice:?}");

    // A proxy that starts later loads the table from the store before it serves.
    cp.proxies[0].kill();
    let p = cp.start_proxy();
    let u = proxy_users(&cp.proxies[p]);
    assert_eq!((u.version, u.source), (3, UsersSource::Cluster));
    assert_eq!(names(&u.users), ["alice", "bob"]);
    assert!(!u.users[0].enabled);

    // Removing a user removes it everywhere; removing it twice is a 404.
    cp.api().delete("/api/users/bob").ok();
    for p in &cp.proxies[1..] {
        assert_eq!(names(&proxy_users(p).users), ["alice"]);
    }
    cp.api()
        .delete("/api/users/bob")
        .expect_error(404, "not_found");
}

#[test]
fn a_proxy_refuses_stale_unauthenticated_and_invalid_tables_and_keeps_its_own() {
    let cp = ControlPlane::builder().proxies(1).start();
    put(
        &cp,
        "/api/users/alice",
        &json!({"password": ALICE_PASSWORD}),
    )
    .ok();
    put(&cp, "/api/users/alice", &json!({"commands": ["read"]})).ok();
    let proxy = &cp.proxies[0];
    let secret = proxy_secret(&cp);
    let admin = proxy.admin().without_token();
    let push = |api: &crate::support::Api, body: &Value| {
        api.request("PUT", "/api/proxy/users", Some(body.to_string().as_bytes()))
    };
    let empty = |version: u64| json!({"version": version, "users": []});

    push(&admin, &empty(5)).expect_error(401, "unauthorized");
    push(&admin.with_token("not-the-secret"), &empty(5)).expect_error(401, "unauthorized");
    let authed = admin.with_token(&secret);
    let msg = push(&authed, &empty(1)).expect_error(409, "conflict");
    assert!(msg.contains("stale") && msg.contains('2'), "{msg}");
    let bad_hash = json!({"version": 7, "users": [{"name": "mallory", "password": "plain"}]});
    let msg = push(&authed, &bad_hash).expect_error(400, "bad_request");
    assert!(msg.contains("mallory") && msg.contains("sha256$"), "{msg}");
    let msg = push(
        &authed,
        &json!({"version": 7, "users": [{"name": "x", "password": 1}]}),
    )
    .expect_error(400, "bad_request");
    assert!(!msg.is_empty());

    let u = proxy_users(proxy);
    assert_eq!(u.version, 2, "the table in force stays: {u:?}");
    assert_eq!(names(&u.users), ["alice"]);
    assert!(
        u.last_error.as_ref().is_some_and(|e| e.contains("mallory")),
        "{u:?}"
    );
    // The same version again is fine (a retried push), and clears the error.
    let current = json!({"version": 2, "users": [{"name": "alice",
        "password": tessera_model::users::hash_password("x"), "commands": ["read"]}]});
    push(&authed, &current).ok();
    assert_eq!(proxy_users(proxy).last_error, None);
}

#[test]
fn hostile_user_bodies_and_names_get_400_with_the_reason() {
    let cp = ControlPlane::builder().start();
    let pw = json!({"password": "pw"});
    for (path, what) in [
        ("/api/users/with%20space", "space"),
        ("/api/users/ctl%01char", "control character"),
        ("/api/users/%C3%A9", "non-ASCII"),
        (&format!("/api/users/{}", "x".repeat(129)), "129 characters"),
    ] {
        let msg = put(&cp, path, &pw).expect_error(400, "bad_request");
        assert!(msg.contains("invalid user name"), "{what}: {msg}");
    }
    assert_eq!(
        put(&cp, &format!("/api/users/{}", "x".repeat(128)), &pw)
            .ok_as::<UserView>()
            .name
            .len(),
        128
    );
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            json!({"commands": ["read"]}).to_string().into(),
            "give it a password",
        ),
        (
            json!({"password": "pw", "commands": ["read", "admn"]})
                .to_string()
                .into(),
            "unknown command class \"admn\"",
        ),
        (
            json!({"password": ""}).to_string().into(),
            "password must be",
        ),
        (
            json!({"password": "x".repeat(1025)}).to_string().into(),
            "password must be",
        ),
        (
            json!({"password": "pw", "key_prefix": "a\u{7}b"})
                .to_string()
                .into(),
            "key_prefix",
        ),
        (
            json!({"password": "pw", "colour": "red"})
                .to_string()
                .into(),
            "unknown field",
        ),
        (
            json!({"password": "pw", "commands": "read"})
                .to_string()
                .into(),
            "invalid JSON body",
        ),
        (b"{not json".to_vec(), "invalid JSON body"),
        (b"".to_vec(), "body must be"),
        (
            format!(r#"{{"password": "{}"}}"#, "x".repeat(20_000)).into_bytes(),
            "is not a user change",
        ),
    ];
    for (body, reason) in cases {
        let msg = put_raw(&cp, "/api/users/newbie", &body).expect_error(400, "bad_request");
        assert!(
            msg.contains(reason),
            "{}: expected {reason:?} in {msg:?}",
            String::from_utf8_lossy(&body[..body.len().min(80)])
        );
    }
    assert_eq!(names(&users(&cp)), ["x".repeat(128)]);

    // Changes need the admin token, like every mutation.
    cp.api()
        .without_token()
        .request("PUT", "/api/users/eve", Some(pw.to_string().as_bytes()))
        .expect_error(401, "unauthorized");
    cp.api()
        .without_token()
        .delete("/api/users/eve")
        .expect_error(401, "unauthorized");

    // The table is bounded.
    let users: Vec<Value> = (0..tessera_model::users::MAX_USERS)
        .map(|i| json!({"name": format!("u{i}"), "password": tessera_model::users::hash_password("p")}))
        .collect();
    let doc = json!({"schema": 1, "version": 50, "users": users});
    store_put(&cp, USERS_KEY, doc.to_string().into_bytes());
    let msg = put(&cp, "/api/users/one-more", &pw).expect_error(400, "bad_request");
    assert!(msg.contains("at most") || msg.contains("the most"), "{msg}");
    // An existing one can still be changed.
    put(&cp, "/api/users/u7", &json!({"enabled": false})).ok();
}

#[test]
fn a_corrupt_users_document_stops_neither_the_dashboard_nor_a_proxy() {
    let mut cp = ControlPlane::builder().proxies(1).start();
    put(
        &cp,
        "/api/users/alice",
        &json!({"password": ALICE_PASSWORD}),
    )
    .ok();
    for (what, garbage) in [
        ("not JSON", b"{\"version\": 3, \"users\": [".to_vec()),
        (
            "a password that is no hash",
            json!({"version": 9, "users": [{"name": "mallory", "password": "letmein"}]})
                .to_string()
                .into_bytes(),
        ),
    ] {
        store_put(&cp, USERS_KEY, garbage);
        // The dashboard says what is wrong and where, and changes nothing.
        let msg = cp.api().get("/api/users").expect_error(503, "unavailable");
        assert!(msg.contains(USERS_KEY), "{what}: {msg}");
        put(&cp, "/api/users/bob", &json!({"password": "pw"})).expect_error(503, "unavailable");
        assert!(cp.api().healthy());
        // The running proxy keeps its last good table.
        assert_eq!(
            names(&proxy_users(&cp.proxies[0]).users),
            ["alice"],
            "{what}"
        );
        // A proxy starting now serves, but lets no one in until a good table comes.
        let p = cp.start_proxy();
        let u = proxy_users(&cp.proxies[p]);
        assert_eq!(u.source, UsersSource::Refused, "{what}: {u:?}");
        assert!(u.auth_required, "{what}: {u:?}");
        assert!(
            u.last_error.as_ref().is_some_and(|e| !e.is_empty()),
            "{what}: {u:?}"
        );
        let reply = cp.proxies[p].raw().cmd(&["PING"]);
        assert!(
            reply.text().as_deref() == Some("PONG")
                || reply.error().is_some_and(|e| e.starts_with("NOAUTH")),
            "{what}: the proxy answers: {reply:?}"
        );
    }

    // Repaired (removed, then set again), every proxy gets the table: the running ones by
    // the push, the refusing ones too (their version is behind).
    store_delete(&cp, USERS_KEY);
    assert!(users(&cp).is_empty());
    put(
        &cp,
        "/api/users/alice",
        &json!({"password": ALICE_PASSWORD}),
    )
    .ok();
    let doc = store_json(&cp, USERS_KEY);
    assert!(
        doc["version"].as_u64() > Some(1),
        "versions never go back: {doc}"
    );
    for p in &cp.proxies {
        let ok = wait_until(Duration::from_secs(10), || {
            let u = proxy_users(p);
            u.source == UsersSource::Cluster && names(&u.users) == ["alice"]
        });
        assert!(ok, "{:?}", proxy_users(p));
    }
}

/// Issue 25, sibling of item 2 (a cached answer going stale): each worker kept a user's
/// backend login (the Redis ACL user its commands and scripts run as) by the user's name, so
/// after the dashboard took `write` away from carol, her new sessions still ran as the ACL user
/// derived from her old rights, and a script could still write. A login is now reused only for
/// the same rights.
#[test]
fn issue_25_a_user_whose_rights_change_gets_a_backend_user_of_the_new_rights() {
    let cp = ControlPlane::builder().servers(2).start();
    cp.split_over_two_groups();
    // One worker: every session shares its cache of logins.
    let proxy = ClusterProxy::start_with_args(
        &cp.options().cluster,
        &cp.options().store,
        &["--threads", "1"],
    );
    let script = "return redis.call('SET', KEYS[1], ARGV[1])";
    put(
        &cp,
        "/api/users/carol",
        &json!({"password": "carol-pw", "commands": ["read", "write", "scripting"]}),
    )
    .ok();
    let mut before = proxy.raw();
    assert_eq!(
        before.cmd(&["AUTH", "carol", "carol-pw"]).text().as_deref(),
        Some("OK")
    );
    assert_eq!(
        before
            .cmd(&["EVAL", script, "1", "k", "v1"])
            .text()
            .as_deref(),
        Some("OK")
    );
    put(
        &cp,
        "/api/users/carol",
        &json!({"commands": ["read", "scripting"]}),
    )
    .ok();
    let mut after = proxy.raw();
    assert_eq!(
        after.cmd(&["AUTH", "carol", "carol-pw"]).text().as_deref(),
        Some("OK")
    );
    let set = after.cmd(&["SET", "k", "v2"]);
    assert!(
        set.error().is_some_and(|e| e.starts_with("NOPERM")),
        "{set:?}"
    );
    let eval = after.cmd(&["EVAL", script, "1", "k", "v3"]);
    assert!(
        eval.error()
            .is_some_and(|e| e.contains("user executing the script can't run this command")),
        "a script of carol's wrote after write was taken from her: {eval:?}"
    );
    assert_eq!(after.cmd(&["GET", "k"]), crate::support::Frame::bulk("v1"));
}

/// Issue 25, the same sibling for sessions already open: a session kept the rights it
/// authenticated with for its whole life, so a tenant moved to another prefix, or disabled,
/// kept its old rights on every connection it had open. A new users table now applies to open
/// sessions from their next command, and a session whose user is disabled or removed ends
/// (as Redis applies ACL changes to its clients, and disconnects a deleted user's).
#[test]
fn issue_25_an_open_session_follows_its_users_new_rights_and_ends_when_it_is_disabled() {
    let cp = ControlPlane::builder().servers(2).start();
    cp.split_over_two_groups();
    let proxy = ClusterProxy::start(&cp.options().cluster, &cp.options().store);
    put(
        &cp,
        "/api/users/dora",
        &json!({"password": "dora-pw", "key_prefix": "d1:"}),
    )
    .ok();
    let mut open = proxy.raw();
    assert_eq!(
        open.cmd(&["AUTH", "dora", "dora-pw"]).text().as_deref(),
        Some("OK")
    );
    assert_eq!(
        open.cmd(&["SET", "d1:k", "v"]).text().as_deref(),
        Some("OK")
    );
    put(&cp, "/api/users/dora", &json!({"key_prefix": "d2:"})).ok();
    let old = open.cmd(&["GET", "d1:k"]);
    assert!(
        old.error().is_some_and(|e| e.starts_with("NOPERM")),
        "the open session kept its old prefix: {old:?}"
    );
    assert_eq!(
        open.cmd(&["SET", "d2:k", "w"]).text().as_deref(),
        Some("OK")
    );
    put(&cp, "/api/users/dora", &json!({"enabled": false})).ok();
    open.set_read_timeout(Duration::from_secs(10));
    open.send(&crate::support::encode(&["GET", "d2:k"]));
    assert!(
        open.try_read_frame().is_err(),
        "a session of a disabled user is closed"
    );
}
