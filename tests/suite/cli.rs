//! redis-cli against the proxy (RESP2 and `-3`), compared with the same redis-cli invocation
//! against a direct redis-server; inline commands over a raw socket.

use std::process::Command;
use std::time::Duration;

use crate::support::{Cluster, RedisServer, bin_from_env, run_with_timeout, tag_on};

/// Runs `redis-cli -h 127.0.0.1 -p port args...` and returns its stdout, asserting success.
fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = run_with_timeout(
        Command::new(bin_from_env("REDIS_CLI_BIN", "redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "redis-cli {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn redis_cli_ping_gets_pong() {
    let cluster = Cluster::start();
    assert_eq!(redis_cli(cluster.proxy.port(), &["ping"]), "PONG\n");
}

#[test]
fn redis_cli_resp3_hgetall_prints_what_direct_redis_prints() {
    let cluster = Cluster::start();
    let direct = RedisServer::start();
    let key = format!("{{{}}}h", tag_on(1));
    let hset = ["hset", &key, "f1", "v1", "f2", "v2"];
    assert_eq!(redis_cli(cluster.proxy.port(), &hset), "2\n");
    assert_eq!(redis_cli(direct.port(), &hset), "2\n");

    let through_proxy = redis_cli(cluster.proxy.port(), &["-3", "hgetall", &key]);
    let from_direct = redis_cli(direct.port(), &["-3", "hgetall", &key]);
    assert_eq!(through_proxy, from_direct);
    assert!(
        through_proxy.contains("f1") && through_proxy.contains("v2"),
        "{through_proxy:?}"
    );
    assert!(!through_proxy.contains("ERR"), "{through_proxy:?}");
}

#[test]
fn inline_ping_gets_pong() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    raw.send(b"PING\r\n");
    assert_eq!(raw.read_exact_bytes(7), b"+PONG\r\n");
}

#[test]
fn inline_commands_with_arguments_reach_the_backends() {
    let cluster = Cluster::start();
    let key = format!("{{{}}}inline", tag_on(1));
    let mut raw = cluster.proxy.raw();
    raw.send(format!("SET {key} v1\r\nGET {key}\r\n").as_bytes());
    assert_eq!(raw.read_exact_bytes(5), b"+OK\r\n");
    assert_eq!(raw.read_exact_bytes(8), b"$2\r\nv1\r\n");
    assert!(cluster.owner_of(&key).has(&key));
}
