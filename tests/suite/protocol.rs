//! RESP2 and RESP3 through the proxy: typed replies seen by the redis crate in both protocols,
//! and HELLO 2/3/4 over a raw socket.

use redis::Value;

use crate::support::{Cluster, Frame, tag_on};

/// Runs the same commands on keys tagged for each backend and returns the replies in order:
/// SET, GET, INCR, HSET, HGETALL, SADD, SMEMBERS, ZADD, ZSCORE, GET of a missing key.
fn typed_replies(con: &mut redis::Connection, tag: &str) -> Vec<Value> {
    let k = |suffix: &str| format!("{{{tag}}}{suffix}");
    let commands: Vec<redis::Cmd> = vec![
        redis::cmd("SET").arg(k("s")).arg("hello").clone(),
        redis::cmd("GET").arg(k("s")).clone(),
        redis::cmd("INCR").arg(k("n")).clone(),
        redis::cmd("HSET")
            .arg(k("h"))
            .arg("f1")
            .arg("v1")
            .arg("f2")
            .arg("v2")
            .clone(),
        redis::cmd("HGETALL").arg(k("h")).clone(),
        redis::cmd("SADD").arg(k("set")).arg("a").arg("b").clone(),
        redis::cmd("SMEMBERS").arg(k("set")).clone(),
        redis::cmd("ZADD").arg(k("z")).arg("1.5").arg("m").clone(),
        redis::cmd("ZSCORE").arg(k("z")).arg("m").clone(),
        redis::cmd("GET").arg(k("missing")).clone(),
    ];
    commands
        .iter()
        .map(|c| {
            c.query::<Value>(con)
                .unwrap_or_else(|e| panic!("{c:?} failed: {e}"))
        })
        .collect()
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// Set members sorted, so that comparisons don't depend on the backend's hash order.
fn sorted(mut members: Vec<Value>) -> Vec<Value> {
    members.sort_by_key(|v| format!("{v:?}"));
    members
}

#[test]
fn resp2_client_gets_resp2_replies_from_both_backends() {
    let cluster = Cluster::start();
    let mut con = cluster.proxy.client();
    for backend in 0..2 {
        let r = typed_replies(&mut con, &tag_on(backend));
        assert_eq!(r[0], Value::Okay, "SET on backend {backend}");
        assert_eq!(r[1], bulk("hello"), "GET on backend {backend}");
        assert_eq!(r[2], Value::Int(1), "INCR on backend {backend}");
        assert_eq!(r[3], Value::Int(2), "HSET on backend {backend}");
        assert_eq!(
            r[4],
            Value::Array(vec![bulk("f1"), bulk("v1"), bulk("f2"), bulk("v2")]),
            "HGETALL is a flat array in RESP2 (backend {backend})"
        );
        assert_eq!(r[5], Value::Int(2), "SADD on backend {backend}");
        let Value::Array(members) = r[6].clone() else {
            panic!("SMEMBERS is an array in RESP2, got {:?}", r[6]);
        };
        assert_eq!(sorted(members), vec![bulk("a"), bulk("b")]);
        assert_eq!(r[7], Value::Int(1), "ZADD on backend {backend}");
        assert_eq!(
            r[8],
            bulk("1.5"),
            "ZSCORE is a bulk string in RESP2 (backend {backend})"
        );
        assert_eq!(r[9], Value::Nil, "GET of a missing key (backend {backend})");
    }
}

#[test]
fn resp3_client_gets_resp3_replies_from_both_backends() {
    let cluster = Cluster::start();
    let mut con = crate::support::connect(&format!("{}?protocol=resp3", cluster.proxy.url()));
    for backend in 0..2 {
        let r = typed_replies(&mut con, &tag_on(backend));
        assert_eq!(r[0], Value::Okay, "SET on backend {backend}");
        assert_eq!(r[1], bulk("hello"), "GET on backend {backend}");
        assert_eq!(r[2], Value::Int(1), "INCR on backend {backend}");
        assert_eq!(r[3], Value::Int(2), "HSET on backend {backend}");
        assert_eq!(
            r[4],
            Value::Map(vec![(bulk("f1"), bulk("v1")), (bulk("f2"), bulk("v2"))]),
            "HGETALL is a map in RESP3 (backend {backend})"
        );
        assert_eq!(r[5], Value::Int(2), "SADD on backend {backend}");
        let Value::Set(members) = r[6].clone() else {
            panic!("SMEMBERS is a set in RESP3, got {:?}", r[6]);
        };
        assert_eq!(sorted(members), vec![bulk("a"), bulk("b")]);
        assert_eq!(r[7], Value::Int(1), "ZADD on backend {backend}");
        assert_eq!(
            r[8],
            Value::Double(1.5),
            "ZSCORE is a double in RESP3 (backend {backend})"
        );
        assert_eq!(r[9], Value::Nil, "GET of a missing key (backend {backend})");
    }
}

/// The value of `field` in a HELLO reply, given as a map (RESP3) or a flat array (RESP2).
fn hello_field(reply: &Frame, field: &str) -> Option<Frame> {
    let pairs: Vec<(Frame, Frame)> = match reply {
        Frame::Map(pairs) => pairs.clone(),
        Frame::Array(items) => items
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        _ => return None,
    };
    pairs
        .into_iter()
        .find(|(k, _)| k.text().as_deref() == Some(field))
        .map(|(_, v)| v)
}

#[test]
fn hello_3_returns_a_map_and_switches_the_session_to_resp3() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["HELLO", "3"]);
    assert!(
        matches!(reply, Frame::Map(_)),
        "HELLO 3 must answer a RESP3 map, got {reply:?}"
    );
    assert_eq!(
        hello_field(&reply, "proto"),
        Some(Frame::Integer(3)),
        "in {reply:?}"
    );
    assert_eq!(
        raw.cmd(&["GET", "missing"]),
        Frame::Null,
        "a RESP3 session gets `_` for nil"
    );
    let key = format!("{{{}}}h", tag_on(1));
    assert_eq!(raw.cmd(&["HSET", &key, "f", "v"]), Frame::Integer(1));
    assert_eq!(
        raw.cmd(&["HGETALL", &key]),
        Frame::Map(vec![(Frame::bulk("f"), Frame::bulk("v"))])
    );
}

#[test]
fn hello_2_returns_a_flat_array() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["HELLO", "2"]);
    let Frame::Array(items) = &reply else {
        panic!("HELLO 2 must answer a flat array, got {reply:?}");
    };
    assert!(
        items.len() % 2 == 0,
        "HELLO 2 reply must be field/value pairs: {reply:?}"
    );
    assert_eq!(
        hello_field(&reply, "proto"),
        Some(Frame::Integer(2)),
        "in {reply:?}"
    );
    assert_eq!(raw.cmd(&["GET", "missing"]), Frame::NullBulk);
}

#[test]
fn hello_3_then_hello_2_switches_back_to_resp2() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    assert!(matches!(raw.cmd(&["HELLO", "3"]), Frame::Map(_)));
    assert!(matches!(raw.cmd(&["HELLO", "2"]), Frame::Array(_)));
    assert_eq!(raw.cmd(&["GET", "missing"]), Frame::NullBulk);
}

#[test]
fn hello_4_is_refused_with_noproto_and_the_session_goes_on() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["HELLO", "4"]);
    assert!(
        reply.error().is_some_and(|e| e.starts_with("NOPROTO")),
        "HELLO 4 must be a -NOPROTO error, got {reply:?}"
    );
    assert_eq!(raw.cmd(&["PING"]), Frame::Simple("PONG".into()));
    assert_eq!(
        raw.cmd(&["GET", "missing"]),
        Frame::NullBulk,
        "still RESP2 after a failed HELLO"
    );
}
