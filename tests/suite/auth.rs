//! The `session_password` gate: NOAUTH before AUTH; AUTH in its one- and two-argument forms,
//! HELLO with AUTH, and the redis crate with the password in its URL.

use redis::Value;

use crate::support::{Cluster, Frame, RawClient, connect};

const PASSWORD_CONFIG: &str = "session_password = \"s3cret\"\n";

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

fn assert_serves(raw: &mut RawClient) {
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(raw.cmd(&["GET", "k"]), Frame::bulk("v"));
}

#[test]
fn commands_before_auth_get_noauth_and_wrong_password_is_refused() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["GET", "k"]);
    assert!(
        reply.error().is_some_and(|e| e.starts_with("NOAUTH")),
        "before AUTH: {reply:?}"
    );
    let reply = raw.cmd(&["AUTH", "wrong"]);
    assert!(
        reply.error().is_some(),
        "AUTH wrong must fail, got {reply:?}"
    );
    let reply = raw.cmd(&["SET", "k", "v"]);
    assert!(
        reply.error().is_some_and(|e| e.starts_with("NOAUTH")),
        "after bad AUTH: {reply:?}"
    );
    let [a, b] = &cluster.backends;
    assert_eq!(
        a.dbsize() + b.dbsize(),
        0,
        "nothing may reach a backend before AUTH"
    );
}

#[test]
fn auth_with_the_password_opens_the_session() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let mut raw = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["AUTH", "s3cret"]), ok());
    assert_serves(&mut raw);
}

#[test]
fn two_argument_auth_with_default_user_opens_the_session() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let mut raw = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["AUTH", "default", "s3cret"]), ok());
    assert_serves(&mut raw);
}

#[test]
fn hello_3_with_auth_authenticates_and_switches_protocol() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["HELLO", "3", "AUTH", "default", "s3cret"]);
    assert!(
        matches!(reply, Frame::Map(_)),
        "HELLO 3 AUTH must answer a map, got {reply:?}"
    );
    assert_eq!(
        raw.cmd(&["GET", "missing"]),
        Frame::Null,
        "RESP3 null after HELLO 3"
    );
    assert_serves(&mut raw);
}

#[test]
fn hello_3_with_a_wrong_password_is_refused() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["HELLO", "3", "AUTH", "default", "wrong"]);
    assert!(
        reply.error().is_some(),
        "HELLO with a wrong password must fail, got {reply:?}"
    );
    let reply = raw.cmd(&["GET", "k"]);
    assert!(
        reply.error().is_some_and(|e| e.starts_with("NOAUTH")),
        "still locked: {reply:?}"
    );
}

#[test]
fn redis_crate_with_password_in_url_works_in_resp2_and_resp3() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let base = format!("redis://:s3cret@{}/", cluster.proxy.addr());
    for url in [base.clone(), format!("{base}?protocol=resp3")] {
        let mut con = connect(&url);
        let () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query(&mut con)
            .expect("SET");
        let got: Value = redis::cmd("GET").arg("k").query(&mut con).expect("GET");
        assert_eq!(got, Value::BulkString(b"v".to_vec()), "via {url}");
    }
}

#[test]
fn redis_crate_with_a_wrong_password_fails_to_connect() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let url = format!("redis://:wrong@{}/", cluster.proxy.addr());
    let client = redis::Client::open(url).expect("url");
    assert!(
        client
            .get_connection_with_timeout(crate::support::REPLY_TIMEOUT)
            .is_err()
    );
}
