//! Error replies that keep the session open (unknown and unsupported commands), and the commands
//! the proxy answers itself: PING, ECHO, QUIT, SELECT, CLIENT *, INFO, DBSIZE, TIME, COMMAND.

use std::time::Duration;

use crate::support::{Cluster, Frame, RedisServer, keys_on};

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

fn pong() -> Frame {
    Frame::Simple("PONG".into())
}

#[test]
fn unknown_command_is_an_error_and_the_session_goes_on() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["NOSUCHCOMMAND", "x"]);
    assert!(
        reply
            .error()
            .is_some_and(|e| e.starts_with("ERR unknown command")),
        "got {reply:?}"
    );
    assert_eq!(raw.cmd(&["PING"]), pong());
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
}

#[test]
fn unsupported_commands_name_themselves_in_upper_case_and_the_session_goes_on() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    for (cmd, name) in [
        (vec!["lolwut"], "LOLWUT"),
        (vec!["pubsub", "help"], "PUBSUB HELP"),
    ] {
        assert_eq!(
            raw.cmd(&cmd),
            Frame::Error(format!("ERR command '{name}' is not supported by tessera")),
            "for {cmd:?}"
        );
        assert_eq!(raw.cmd(&["PING"]), pong(), "after {cmd:?}");
    }
}

#[test]
fn ping_echo_and_select_are_answered_by_the_proxy() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["PING"]), pong());
    assert_eq!(
        raw.cmd(&["PING", "hello world"]),
        Frame::bulk("hello world")
    );
    assert_eq!(raw.cmd(&["ECHO", "tessera"]), Frame::bulk("tessera"));
    assert_eq!(raw.cmd(&["SELECT", "0"]), ok());
    assert_eq!(raw.cmd(&["SELECT", "1"]), ok());
    // Redis's default of 16 databases (`databases`): 0 to 15.
    let reply = raw.cmd(&["SELECT", "16"]);
    assert_eq!(
        reply.error(),
        Some("ERR DB index is out of range"),
        "SELECT 16 must be an error, got {reply:?}"
    );
    assert_eq!(raw.cmd(&["PING"]), pong());
}

#[test]
fn quit_answers_ok_then_closes() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["QUIT"]), ok());
    raw.expect_closed(Duration::from_secs(2));
}

#[test]
fn client_setname_getname_id_info_and_list_describe_proxy_sessions() {
    let cluster = Cluster::start();
    let mut first = cluster.proxy.raw();
    let mut second = cluster.proxy.raw();
    assert_eq!(
        first.cmd(&["CLIENT", "GETNAME"]),
        Frame::NullBulk,
        "no name yet"
    );
    assert_eq!(first.cmd(&["CLIENT", "SETNAME", "first-session"]), ok());
    assert_eq!(second.cmd(&["CLIENT", "SETNAME", "second-session"]), ok());
    assert_eq!(
        first.cmd(&["CLIENT", "GETNAME"]),
        Frame::bulk("first-session")
    );

    let Frame::Integer(first_id) = first.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID must be an integer");
    };
    let Frame::Integer(second_id) = second.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID must be an integer");
    };
    assert_ne!(first_id, second_id, "sessions need distinct ids");

    let info = first
        .cmd(&["CLIENT", "INFO"])
        .text()
        .expect("CLIENT INFO is a string");
    assert!(info.contains("name=first-session"), "CLIENT INFO: {info:?}");
    assert!(
        has_field(&info, &format!("id={first_id}")),
        "CLIENT INFO: {info:?}"
    );

    let list = first
        .cmd(&["CLIENT", "LIST"])
        .text()
        .expect("CLIENT LIST is a string");
    let lines = list.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(lines >= 2, "CLIENT LIST must show both sessions: {list:?}");
    assert!(list.contains("name=first-session"), "CLIENT LIST: {list:?}");
    assert!(
        list.contains("name=second-session"),
        "CLIENT LIST: {list:?}"
    );
    assert!(
        has_field(&list, &format!("id={second_id}")),
        "CLIENT LIST: {list:?}"
    );
}

/// Whether a `CLIENT INFO`/`CLIENT LIST` text has the space-separated field `field` (`k=v`).
fn has_field(text: &str, field: &str) -> bool {
    text.split_whitespace().any(|f| f == field)
}

/// Sets `n` keys on each backend through the proxy and returns the expected total.
fn seed_both_backends(cluster: &Cluster, n: usize) -> i64 {
    let mut raw = cluster.proxy.raw();
    for index in 0..2 {
        for key in keys_on(index, "seed:", n) {
            assert_eq!(raw.cmd(&["SET", &key, "v"]), ok());
        }
    }
    cluster.backends.iter().map(RedisServer::dbsize).sum()
}

#[test]
fn dbsize_is_the_sum_over_backends() {
    let cluster = Cluster::start();
    let total = seed_both_backends(&cluster, 7);
    assert_eq!(total, 14);
    assert_eq!(cluster.proxy.raw().cmd(&["DBSIZE"]), Frame::Integer(total));
}

#[test]
fn info_keyspace_counts_keys_over_both_backends() {
    let cluster = Cluster::start();
    let total = seed_both_backends(&cluster, 5);
    let [a, b] = &cluster.backends;
    assert!(a.dbsize() > 0 && b.dbsize() > 0);
    let info = cluster
        .proxy
        .raw()
        .cmd(&["INFO"])
        .text()
        .expect("INFO is a string");
    assert!(
        info.contains("# Keyspace"),
        "INFO lacks # Keyspace:\n{info}"
    );
    let db0 = info
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("db0:keys="))
        .unwrap_or_else(|| panic!("INFO lacks db0:keys=:\n{info}"));
    let keys: i64 = db0
        .split(',')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("db0:keys=N,...");
    assert_eq!(keys, total, "db0 line: {db0:?}");
}

#[test]
fn time_is_a_two_element_array_of_numbers() {
    let cluster = Cluster::start();
    let reply = cluster.proxy.raw().cmd(&["TIME"]);
    let Frame::Array(parts) = &reply else {
        panic!("TIME must be an array, got {reply:?}");
    };
    assert_eq!(parts.len(), 2, "{reply:?}");
    for part in parts {
        let text = part
            .text()
            .unwrap_or_else(|| panic!("TIME part is not a string: {reply:?}"));
        text.parse::<u64>()
            .unwrap_or_else(|_| panic!("TIME part is not a number: {reply:?}"));
    }
}

#[test]
fn command_count_is_above_100() {
    let cluster = Cluster::start();
    let reply = cluster.proxy.raw().cmd(&["COMMAND", "COUNT"]);
    assert!(
        matches!(reply, Frame::Integer(n) if n > 100),
        "COMMAND COUNT: {reply:?}"
    );
}

/// CLIENT REPLY OFF, SKIP and ON: the same replies through the proxy as from Redis itself, and
/// the commands whose replies are left out still run.
#[test]
fn client_reply_off_skip_and_on_leave_out_the_replies_redis_leaves_out() {
    use crate::support::{RawClient, encode};
    let cluster = Cluster::start();
    let script: &[&[&str]] = &[
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "cr:a", "1"],
        &["INCR", "cr:a"],
        &["CLIENT", "REPLY", "NOPE"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "cr:a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["SET", "cr:b", "x"],
        &["GET", "cr:b"],
        // A refused command takes its turn too.
        &["CLIENT", "REPLY", "SKIP"],
        &["NOSUCHCOMMAND"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "OFF"],
        &["PING"],
        &["CLIENT", "REPLY", "ON"],
        &["PING"],
    ];
    let pipeline: Vec<u8> = script.iter().flat_map(|c| encode(c)).collect();
    let replies = |mut raw: RawClient| {
        raw.send(&pipeline);
        let got: Vec<Frame> = (0..5).map(|_| raw.read_frame()).collect();
        raw.expect_no_reply(Duration::from_millis(300));
        got
    };
    let direct = replies(cluster.backends[0].raw());
    let through = replies(cluster.proxy.raw());
    assert_eq!(
        direct,
        vec![ok(), Frame::bulk("2"), Frame::bulk("x"), ok(), pong()],
        "what Redis answers"
    );
    assert_eq!(through, direct, "the proxy leaves out the same replies");
    // The silenced commands ran.
    let mut raw = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["GET", "cr:b"]), Frame::bulk("x"));
}

/// Subscription confirmations and messages are pushes, which Redis sends whatever CLIENT
/// REPLY says (Redis's own `PubSub messages with CLIENT REPLY OFF` test); a subscribed RESP2
/// PING's reply is left out, not the messages that arrived before it.
#[test]
fn client_reply_off_leaves_pubsub_pushes_alone_as_redis_does() {
    use crate::support::{RawClient, encode};
    let cluster = Cluster::start();
    let run = |mut sub: RawClient, mut publisher: RawClient, hello: &str| {
        let mut got = Vec::new();
        if hello == "3" {
            sub.cmd(&["HELLO", "3"]);
        }
        sub.send(&encode(&["CLIENT", "REPLY", "OFF"]));
        sub.send(&encode(&["SUBSCRIBE", "crch"]));
        got.push(sub.read_frame());
        sub.send(&encode(&["PSUBSCRIBE", "crc*"]));
        got.push(sub.read_frame());
        assert!(matches!(
            publisher.cmd(&["PUBLISH", "crch", "hello"]),
            Frame::Integer(_)
        ));
        got.push(sub.read_frame());
        got.push(sub.read_frame());
        // Published before the PING: the messages come, the PING's own reply does not.
        assert!(matches!(
            publisher.cmd(&["PUBLISH", "crch", "again"]),
            Frame::Integer(_)
        ));
        std::thread::sleep(Duration::from_millis(100));
        sub.send(&encode(&["PING"]));
        got.push(sub.read_frame());
        got.push(sub.read_frame());
        sub.send(&encode(&["UNSUBSCRIBE", "crch"]));
        got.push(sub.read_frame());
        sub.expect_no_reply(Duration::from_millis(300));
        got
    };
    for hello in ["2", "3"] {
        let direct = run(cluster.backends[0].raw(), cluster.backends[0].raw(), hello);
        let through = run(cluster.proxy.raw(), cluster.proxy.raw(), hello);
        assert_eq!(
            through, direct,
            "RESP{hello}: the proxy sends the pushes Redis sends"
        );
    }
}
