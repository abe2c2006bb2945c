//! Cluster-wide admin commands: refused (and not forwarded) by default; with
//! `admin_commands = true`, KEYS/SCAN/FLUSHALL/SCRIPT LOAD fan out to every backend.

use std::collections::BTreeMap;

use crate::support::{Cluster, Frame, RawClient, keys_on};

const ADMIN_ON: &str = "admin_commands = true\n";

/// Sets `n` keys on each backend through the proxy; returns them sorted.
fn seed(raw: &mut RawClient, n: usize) -> Vec<String> {
    let mut keys = [keys_on(0, "adm:", n), keys_on(1, "adm:", n)].concat();
    for key in &keys {
        assert_eq!(
            raw.cmd(&["SET", key, "v"]),
            Frame::Simple("OK".into()),
            "SET {key}"
        );
    }
    keys.sort();
    keys
}

fn strings(frame: &Frame) -> Vec<String> {
    match frame {
        Frame::Array(items) | Frame::Set(items) => items
            .iter()
            .map(|f| f.text().unwrap_or_else(|| panic!("not a string: {f:?}")))
            .collect(),
        other => panic!("expected an array of strings, got {other:?}"),
    }
}

#[test]
fn admin_commands_are_refused_by_default_and_not_forwarded() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    let keys = seed(&mut raw, 5);
    for cmd in [
        vec!["FLUSHALL"],
        vec!["KEYS", "*"],
        vec!["SCAN", "0"],
        vec!["CONFIG", "GET", "maxmemory"],
    ] {
        let reply = raw.cmd(&cmd);
        assert!(
            reply.error().is_some(),
            "{cmd:?} must be refused by default, got {reply:?}"
        );
    }
    let [a, b] = &cluster.backends;
    assert_eq!(
        a.dbsize() + b.dbsize(),
        keys.len() as i64,
        "FLUSHALL must not have been forwarded"
    );
    assert_eq!(raw.cmd(&["GET", &keys[0]]), Frame::bulk("v"));
}

#[test]
fn keys_star_returns_the_union_over_backends() {
    let cluster = Cluster::with_config(ADMIN_ON);
    let mut raw = cluster.proxy.raw();
    let keys = seed(&mut raw, 6);
    let mut direct = [cluster.backends[0].keys(), cluster.backends[1].keys()].concat();
    direct.sort();
    assert_eq!(
        direct, keys,
        "test setup: both backends hold the seeded keys"
    );

    let mut got = strings(&raw.cmd(&["KEYS", "*"]));
    got.sort();
    assert_eq!(got, keys);
    let mut filtered = strings(&raw.cmd(&["KEYS", "adm:1*"]));
    filtered.sort();
    let want: Vec<String> = keys
        .iter()
        .filter(|k| k.starts_with("adm:1"))
        .cloned()
        .collect();
    assert_eq!(filtered, want, "KEYS passes its pattern on");
}

#[test]
fn full_scan_returns_every_key_exactly_once() {
    let cluster = Cluster::with_config(ADMIN_ON);
    let mut raw = cluster.proxy.raw();
    let keys = seed(&mut raw, 100);

    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(
            calls <= 1000,
            "SCAN did not finish within 1000 calls (cursor {cursor})"
        );
        let reply = raw.cmd(&["SCAN", &cursor]);
        let Frame::Array(parts) = &reply else {
            panic!("SCAN reply: {reply:?}")
        };
        assert_eq!(parts.len(), 2, "SCAN reply is [cursor, keys]: {reply:?}");
        cursor = parts[0]
            .text()
            .unwrap_or_else(|| panic!("SCAN cursor: {reply:?}"));
        for key in strings(&parts[1]) {
            *seen.entry(key).or_default() += 1;
        }
        if cursor == "0" {
            break;
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "keys returned more than once: {twice:?}");
    assert_eq!(
        seen.into_keys().collect::<Vec<_>>(),
        keys,
        "after {calls} SCAN calls"
    );
}

#[test]
fn flushall_empties_both_backends() {
    let cluster = Cluster::with_config(ADMIN_ON);
    let mut raw = cluster.proxy.raw();
    seed(&mut raw, 5);
    assert_eq!(raw.cmd(&["FLUSHALL"]), Frame::Simple("OK".into()));
    let [a, b] = &cluster.backends;
    assert_eq!((a.dbsize(), b.dbsize()), (0, 0));
    assert_eq!(raw.cmd(&["DBSIZE"]), Frame::Integer(0));
}

#[test]
fn config_resetstat_resets_every_backend() {
    let cluster = Cluster::with_config(ADMIN_ON);
    let mut raw = cluster.proxy.raw();
    seed(&mut raw, 5);
    let calls = |b: &crate::support::RedisServer| -> String {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut b.client())
            .unwrap();
        info
    };
    assert!(
        cluster
            .backends
            .iter()
            .all(|b| calls(b).contains("cmdstat_set:"))
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "RESETSTAT"]),
        Frame::Simple("OK".into())
    );
    for b in &cluster.backends {
        assert!(!calls(b).contains("cmdstat_set:"), "{}", calls(b));
    }
}

#[test]
fn script_load_then_evalsha_works_for_keys_on_either_backend() {
    let cluster = Cluster::with_config(ADMIN_ON);
    let mut raw = cluster.proxy.raw();
    let script = "return redis.call('get',KEYS[1])";
    let sha = raw
        .cmd(&["SCRIPT", "LOAD", script])
        .text()
        .expect("SCRIPT LOAD returns the sha");
    assert_eq!(sha.len(), 40, "sha1 hex: {sha:?}");
    for index in 0..2 {
        let key = keys_on(index, "lua:", 1).remove(0);
        let value = format!("on-backend-{index}");
        assert_eq!(raw.cmd(&["SET", &key, &value]), Frame::Simple("OK".into()));
        assert_eq!(
            raw.cmd(&["EVALSHA", &sha, "1", &key]),
            Frame::bulk(&value),
            "backend {index}"
        );
    }
}

/// A key on backend `b` (of a 2-backend cluster).
fn key_on(b: usize, prefix: &str) -> String {
    keys_on(b, prefix, 1).remove(0)
}

fn config_get(server: &crate::support::RedisServer, name: &str) -> Frame {
    match server.raw().cmd(&["CONFIG", "GET", name]) {
        Frame::Array(kv) if kv.len() == 2 => kv[1].clone(),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

#[test]
fn cluster_wide_commands_queued_in_a_transaction_reach_every_master_after_exec() {
    let mut cluster = Cluster::with_config(ADMIN_ON);
    let mut raw = cluster.proxy.raw();
    seed(&mut raw, 5);
    let (k0, k1) = (key_on(0, "tx0:"), key_on(1, "tx1:"));

    // The transaction runs on backend 1 (its key's): FLUSHDB and CONFIG SET run there in
    // their place, then on backend 0 before EXEC is answered.
    let mut block = Vec::new();
    for cmd in [
        vec!["MULTI"],
        vec!["SET", &k1, "before"],
        vec!["FLUSHDB"],
        vec!["SET", &k1, "after"],
        vec!["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        vec!["CONFIG", "GET", "maxmemory-policy"],
        vec!["EXEC"],
        // Pipelined behind EXEC: runs after backend 0 was flushed, so it stays.
        vec!["SET", &k0, "kept"],
    ] {
        block.extend(crate::support::encode(&cmd));
    }
    raw.send(&block);
    for _ in 0..6 {
        let f = raw.read_frame();
        assert!(f.error().is_none(), "while queuing: {f:?}");
    }
    let ok = Frame::Simple("OK".into());
    assert_eq!(
        raw.read_frame(),
        Frame::Array(vec![
            ok.clone(),
            ok.clone(),
            ok.clone(),
            ok.clone(),
            Frame::Array(vec![
                Frame::bulk("maxmemory-policy"),
                Frame::bulk("allkeys-lru")
            ]),
        ])
    );
    assert_eq!(raw.read_frame(), ok);
    let [a, b] = &cluster.backends;
    assert_eq!(
        (a.keys(), b.keys()),
        (vec![k0.clone()], vec![k1.clone()]),
        "each master flushed, only what was written after FLUSHDB left"
    );
    for server in [a, b] {
        assert_eq!(
            config_get(server, "maxmemory-policy"),
            Frame::bulk("allkeys-lru")
        );
    }

    // Refused by the transaction's server: an error in its place, sent nowhere else.
    assert_eq!(raw.cmd(&["MULTI"]), ok);
    raw.cmd(&["SET", &k1, "v"]);
    raw.cmd(&["CONFIG", "SET", "maxmemory-policy", "no-such-policy"]);
    raw.cmd(&["FLUSHDB"]);
    let Frame::Array(items) = raw.cmd(&["EXEC"]) else {
        panic!("EXEC did not answer an array")
    };
    assert_eq!(items[0], ok);
    assert!(
        items[1]
            .error()
            .is_some_and(|e| e.contains("CONFIG SET failed")),
        "{items:?}"
    );
    assert_eq!(items[2], ok);
    assert_eq!((a.dbsize(), b.dbsize()), (0, 0), "the FLUSHDB after it ran");
    assert_eq!(
        config_get(a, "maxmemory-policy"),
        Frame::bulk("allkeys-lru")
    );

    // A watched key changed: nothing ran, so nothing is sent to the other master.
    raw.cmd(&["SET", &k0, "v0"]);
    assert_eq!(raw.cmd(&["WATCH", &k1]), ok);
    assert_eq!(cluster.proxy.raw().cmd(&["SET", &k1, "changed"]), ok);
    raw.cmd(&["MULTI"]);
    raw.cmd(&["FLUSHDB"]);
    assert_eq!(raw.cmd(&["EXEC"]), Frame::NullArray);
    assert!(
        a.has(&k0),
        "backend 0 was flushed by a transaction that did not run"
    );

    // Bounded: the 65th is refused, and the transaction with it.
    raw.cmd(&["MULTI"]);
    for i in 0..64 {
        let r = raw.cmd(&["CONFIG", "GET", "maxmemory"]);
        assert_eq!(r, Frame::Simple("QUEUED".into()), "fan-out {i}");
    }
    let refused = raw.cmd(&["CONFIG", "GET", "maxmemory"]);
    assert!(
        refused.error().is_some_and(|e| e.contains("at most 64")),
        "{refused:?}"
    );
    let aborted = raw.cmd(&["EXEC"]);
    assert!(
        aborted.error().is_some_and(|e| e.starts_with("EXECABORT")),
        "{aborted:?}"
    );

    // Another master refuses (it is down): its error in the command's place.
    cluster.backends[0].kill();
    raw.cmd(&["MULTI"]);
    raw.cmd(&["SET", &k1, "v"]);
    raw.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let Frame::Array(items) = raw.cmd(&["EXEC"]) else {
        panic!("EXEC did not answer an array")
    };
    assert_eq!(items[0], ok);
    assert!(items[1].error().is_some(), "{items:?}");
    assert_eq!(
        config_get(&cluster.backends[1], "maxmemory-policy"),
        Frame::bulk("noeviction"),
        "the transaction's own server ran it"
    );
}
