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

/// `tessera hash-password` for `password`: the hash a `[[users]]` entry holds.
pub(crate) fn hash(password: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(crate::support::tessera_bin())
        .arg("hash-password")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running tessera hash-password");
    writeln!(child.stdin.take().expect("stdin"), "{password}").expect("writing the password");
    let out = child.wait_with_output().expect("tessera hash-password");
    assert!(out.status.success(), "tessera hash-password failed");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

fn error_of(f: &Frame) -> String {
    f.error()
        .unwrap_or_else(|| panic!("expected an error, got {f:?}"))
        .to_owned()
}

#[test]
fn only_users_the_proxy_knows_authenticate() {
    // No password and no table: the default user is nopass, as in Redis; no one else exists.
    let open = Cluster::start();
    let mut c = open.proxy.raw();
    assert_eq!(c.cmd(&["AUTH", "default", "anything"]), ok());
    let e = error_of(&c.cmd(&["AUTH", "alice", "whatever"]));
    assert!(e.starts_with("WRONGPASS"), "{e}");
    let e = error_of(&c.cmd(&["HELLO", "3", "AUTH", "alice", "whatever"]));
    assert!(e.starts_with("WRONGPASS"), "{e}");

    let config = format!(
        "[[users]]\nname = \"alice\"\npassword = \"{}\"\n",
        hash("alice-pw")
    );
    let cluster = Cluster::with_config(&config);
    let mut c = cluster.proxy.raw();
    let e = error_of(&c.cmd(&["AUTH", "alice", "wrong"]));
    assert!(e.starts_with("WRONGPASS"), "{e}");
    assert_eq!(c.cmd(&["AUTH", "alice", "alice-pw"]), ok());
    let info = c.cmd(&["CLIENT", "INFO"]).text().unwrap_or_default();
    assert!(info.contains(" user=alice "), "{info}");
    assert_serves(&mut c);
}

#[test]
fn failed_auth_attempts_are_slowed_down_per_connection() {
    let cluster = Cluster::with_config(PASSWORD_CONFIG);
    let mut guesser = cluster.proxy.raw();
    let mut times = Vec::new();
    for _ in 0..4 {
        let t = std::time::Instant::now();
        let e = error_of(&guesser.cmd(&["AUTH", "guess"]));
        assert!(e.starts_with("WRONGPASS"), "{e}");
        times.push(t.elapsed());
    }
    // 100 ms, 200, 400, 800: each failure waits longer than the one before.
    assert!(
        times[0] >= std::time::Duration::from_millis(90),
        "{times:?}"
    );
    assert!(
        times[3] >= std::time::Duration::from_millis(700),
        "{times:?}"
    );
    // Another connection is not slowed by the guesser's failures.
    let mut other = cluster.proxy.raw();
    let t = std::time::Instant::now();
    assert_eq!(other.cmd(&["AUTH", "s3cret"]), ok());
    assert!(
        t.elapsed() < std::time::Duration::from_millis(90),
        "{:?}",
        t.elapsed()
    );
    // Pipelined guesses wait too: the second AUTH is not even read before the first's delay.
    let t = std::time::Instant::now();
    guesser.send(&crate::support::encode(&["AUTH", "g1"]));
    guesser.send(&crate::support::encode(&["AUTH", "g2"]));
    guesser.read_frame();
    guesser.read_frame();
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn confined_users_keep_to_their_classes_and_prefix_even_in_scripts() {
    let config = format!(
        "[[users]]\nname = \"reader\"\npassword = \"{}\"\ncommands = [\"read\", \"scripting\"]\n\
         [[users]]\nname = \"tenant\"\npassword = \"{}\"\nkey_prefix = \"t1:\"\n",
        hash("r-pw"),
        hash("t-pw")
    );
    let cluster = Cluster::with_config(&config);
    let mut admin = cluster.proxy.raw();
    assert_eq!(admin.cmd(&["SET", "shared", "v"]), ok());

    let mut reader = cluster.proxy.raw();
    assert_eq!(reader.cmd(&["AUTH", "reader", "r-pw"]), ok());
    assert_eq!(reader.cmd(&["GET", "shared"]), Frame::bulk("v"));
    let e = error_of(&reader.cmd(&["SET", "shared", "x"]));
    assert!(e.starts_with("NOPERM"), "{e}");
    // A script is the reader's too: it may read, and the backend refuses its writes.
    assert_eq!(
        reader.cmd(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "shared"]),
        Frame::bulk("v")
    );
    let e = error_of(&reader.cmd(&[
        "EVAL",
        "return redis.call('SET', KEYS[1], 'x')",
        "1",
        "shared",
    ]));
    assert!(e.contains("can't run this command"), "{e}");

    let mut tenant = cluster.proxy.raw();
    assert_eq!(tenant.cmd(&["AUTH", "tenant", "t-pw"]), ok());
    assert_eq!(tenant.cmd(&["SET", "t1:a", "1"]), ok());
    let e = error_of(&tenant.cmd(&["GET", "shared"]));
    assert!(e.starts_with("NOPERM"), "{e}");
    let e = error_of(&tenant.cmd(&["MGET", "t1:a", "shared"]));
    assert!(e.starts_with("NOPERM"), "{e}");
    let e = error_of(&tenant.cmd(&["KEYS", "*"]));
    assert!(e.starts_with("NOPERM") || e.contains("disabled"), "{e}");
    let e = error_of(&tenant.cmd(&["EVAL", "return 1", "0"]));
    assert!(e.starts_with("NOPERM"), "{e}");
    assert_eq!(admin.cmd(&["GET", "shared"]), Frame::bulk("v"));
}
