//! The control plane's own Redis user: the dashboard creates `tessera-admin` on every server
//! it adds and works on servers only as that user (health checks, REPLICAOF), so locking
//! the `default` user later changes nothing for it; a server it cannot create the user on
//! is refused with the reason; a server (or a store) that lost the user gets it back.

use std::time::Duration;

use serde_json::{Value, json};
use tessera_wire::cluster::{GroupView, ServerView};

use crate::support::{ControlPlane, RedisServer, wait_until};

const META_KEY: &str = "/tessera/testc/meta";

fn meta(cp: &ControlPlane) -> Value {
    cp.store_json(META_KEY)
}

/// `ACL GETUSER tessera-admin` on `server`, as `default` (with `password` when it has one):
/// the user's flags and commands, or `None` when there is no such user.
fn admin_user_on(server: &RedisServer, password: Option<&str>) -> Option<(Vec<String>, String)> {
    let mut c = server.client();
    if let Some(p) = password {
        redis::cmd("AUTH")
            .arg(p)
            .query::<()>(&mut c)
            .expect("AUTH default");
    }
    let v: redis::Value = redis::cmd("ACL")
        .arg("GETUSER")
        .arg("tessera-admin")
        .query(&mut c)
        .expect("ACL GETUSER");
    let redis::Value::Array(items) = v else {
        return None;
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    let field = |name: &str| {
        items
            .chunks(2)
            .find(|kv| text(&kv[0]) == name)
            .map(|kv| kv[1].clone())
    };
    let flags = match field("flags") {
        Some(redis::Value::Array(f)) => f.iter().map(text).collect(),
        _ => vec![],
    };
    Some((
        flags,
        field("commands").map(|c| text(&c)).unwrap_or_default(),
    ))
}

/// The health the dashboard reports for `addr`.
fn server_view(cp: &ControlPlane, addr: &str) -> ServerView {
    let groups: Vec<GroupView> = cp.api().get("/api/groups").ok_as();
    groups
        .iter()
        .flat_map(|g| g.servers.iter())
        .find(|s| s.addr == addr)
        .cloned()
        .unwrap_or_else(|| panic!("{addr} is in no group: {groups:?}"))
}

fn set_with_password(server: &RedisServer, password: &str, key: &str) {
    let mut c = server.client();
    redis::cmd("AUTH")
        .arg(password)
        .query::<()>(&mut c)
        .expect("AUTH default");
    redis::cmd("SET")
        .arg(key)
        .arg("v")
        .query::<()>(&mut c)
        .expect("SET");
}

#[test]
fn added_servers_get_the_admin_user_and_stay_checked_when_default_is_locked() {
    let cp = ControlPlane::builder().servers(2).start();
    let cred = meta(&cp)["backend_admin"].clone();
    assert_eq!(cred["user"], "tessera-admin", "{cred}");
    assert_eq!(cred["password"].as_str().map(str::len), Some(32));
    cp.group(1, &[0, 1]);
    for s in &cp.servers {
        let (flags, commands) = admin_user_on(s, None).expect("the user exists");
        assert!(flags.iter().any(|f| f == "on"), "{flags:?}");
        assert_eq!(commands, "+@all");
    }

    // Lock `default` on both servers, each its own way; the dashboard does not notice.
    let mut c = cp.servers[0].client();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("x0")
        .query::<()>(&mut c)
        .expect("CONFIG SET requirepass");
    let mut c = cp.servers[1].client();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("resetpass")
        .arg(">x1")
        .query::<()>(&mut c)
        .expect("ACL SETUSER default");
    // A key written now shows in the next checks' INFO keyspace: they ran after the lock.
    set_with_password(&cp.servers[0], "x0", "after-the-lock");
    let master = cp.server_addr(0);
    let ok = wait_until(Duration::from_secs(10), || {
        let v = server_view(&cp, &master);
        v.up && v.keys == Some(1)
    });
    assert!(
        ok,
        "health checks see the server: {:?}",
        server_view(&cp, &master)
    );
    assert!(server_view(&cp, &cp.server_addr(1)).up);

    // Promotion works too (REPLICAOF as the admin user), and the old master replicates from
    // the new one although `default` needs a password there (masteruser is the admin user).
    cp.api()
        .post("/api/groups/1/promote", &json!({"addr": cp.server_addr(1)}))
        .ok();
    let ok = wait_until(Duration::from_secs(15), || {
        let v = server_view(&cp, &master);
        v.role_reported.as_deref() == Some("replica") && v.master_link.as_deref() == Some("up")
    });
    assert!(
        ok,
        "the old master replicates: {:?}",
        server_view(&cp, &master)
    );
}

#[test]
fn a_server_that_refuses_the_admin_user_is_not_added_and_says_why() {
    let cp = ControlPlane::builder().servers(1).start();
    let mut c = cp.servers[0].client();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("locked")
        .query::<()>(&mut c)
        .expect("CONFIG SET requirepass");
    cp.api().post("/api/groups", &json!({"id": 1})).ok();
    let msg = cp
        .api()
        .post("/api/groups/1/servers", &json!({"addr": cp.server_addr(0)}))
        .expect_error(409, "conflict");
    assert!(
        msg.contains("tessera-admin") && msg.contains("NOAUTH") && msg.contains("default"),
        "{msg}"
    );
    let groups: Vec<GroupView> = cp.api().get("/api/groups").ok_as();
    assert!(
        groups[0].servers.is_empty(),
        "nothing was added: {groups:?}"
    );
    assert!(admin_user_on(&cp.servers[0], Some("locked")).is_none());
}

#[test]
fn a_server_or_a_store_that_lost_the_admin_user_gets_it_back() {
    let mut cp = ControlPlane::builder().servers(1).start();
    cp.group(1, &[0]);
    let addr = cp.server_addr(0);

    // Restarted without an ACL file, a server forgets the user: the health checks put it back.
    cp.servers[0].restart();
    assert!(admin_user_on(&cp.servers[0], None).is_none());
    let ok = wait_until(Duration::from_secs(10), || {
        admin_user_on(&cp.servers[0], None).is_some() && server_view(&cp, &addr).up
    });
    assert!(ok, "re-created: {:?}", server_view(&cp, &addr));

    // A store from before the admin user: the next dashboard gives the cluster one and
    // provisions it on the servers already in the store (they have the old one: replaced).
    let old = meta(&cp)["backend_admin"]["password"].clone();
    cp.kill_dashboard();
    let mut m = meta(&cp);
    m.as_object_mut()
        .expect("meta object")
        .remove("backend_admin");
    cp.with_store(async |s| {
        s.put(META_KEY, m.to_string().into_bytes().into())
            .await
            .expect("store put")
    });
    cp.restart_dashboard();
    let new = meta(&cp)["backend_admin"]["password"].clone();
    assert!(new.is_string() && new != old, "a new credential: {new}");
    let ok = wait_until(Duration::from_secs(10), || {
        let v = server_view(&cp, &addr);
        v.up && v.error.is_none()
    });
    assert!(ok, "checked as the new user: {:?}", server_view(&cp, &addr));
    let mut c = cp.servers[0].client();
    let auth: redis::RedisResult<()> = redis::cmd("AUTH")
        .arg("tessera-admin")
        .arg(new.as_str().expect("a password"))
        .query(&mut c);
    assert!(auth.is_ok(), "{auth:?}");
}
