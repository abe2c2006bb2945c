//! The converter plugin in the proxy (its real wasm32 build), against plain Redis: the same
//! command sequences sent by a user confined to a namespace through a proxy with two backends,
//! and straight to a plain redis-server with the namespace's prefix put on the keys by hand,
//! give the same replies, in RESP2 and RESP3, for values above and below the compression
//! threshold. Namespaces do not see each other; what cannot be confined is refused; old plain
//! values still read; a corrupt compressed value is a clear error.

use serde_json::json;

use crate::auth::hash;
use crate::support::{Frame, Proxy, RawClient, RedisServer, metric, plugin_toml};

const PASSWORD: &str = "pw-1";

/// A proxy over `backends` with the converter: alice in `alice:`, bob in `bob:`, values of
/// keys under `c:` compressed from 256 bytes; `default` (no password) is not confined.
fn proxy(backends: &[&RedisServer], extra: serde_json::Value) -> Proxy {
    let mut config = json!({
        "namespaces": [
            { "users": ["alice"], "prefix": "alice:" },
            { "users": ["bob"], "prefix": "bob:" }
        ],
        "compression": { "prefixes": ["c:"], "min_bytes": 256 }
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let h = hash(PASSWORD);
    let toml = format!(
        "admin_commands = true\n\
         [[users]]\nname = \"alice\"\npassword = \"{h}\"\n\
         [[users]]\nname = \"bob\"\npassword = \"{h}\"\n\
         {}",
        plugin_toml("converter", &config, "")
    );
    Proxy::builder(backends).config(&toml).admin().start()
}

/// A client of `proxy` logged in as `user`, in RESP3 if asked.
fn login(proxy: &Proxy, user: &str, resp3: bool) -> RawClient {
    let mut c = proxy.raw();
    let r = if resp3 {
        c.cmd(&["HELLO", "3", "AUTH", user, PASSWORD])
    } else {
        c.cmd(&["AUTH", user, PASSWORD])
    };
    assert!(r.error().is_none(), "login as {user}: {r:?}");
    c
}

fn error_of(f: &Frame) -> String {
    f.error()
        .unwrap_or_else(|| panic!("expected an error reply, got {f:?}"))
        .to_owned()
}

/// A compressible value of `n` bytes (text with repeats, as JSON documents are).
fn doc(n: usize, seed: u32) -> String {
    let mut s = String::new();
    let mut i = seed;
    while s.len() < n {
        i = i.wrapping_mul(1_103_515_245).wrapping_add(12345);
        s.push_str(&format!(
            "{{\"id\":{},\"name\":\"user-{}\"}},",
            i % 1000,
            i % 97
        ));
    }
    s.truncate(n);
    s
}

/// One command sent through the proxy as a namespaced user and to plain Redis with the
/// prefix written out: an argument `@k` is the key `k` (sent as `k` and as `<prefix>k`).
struct Diff {
    via: RawClient,
    direct: RawClient,
    prefix: &'static str,
}

impl Diff {
    fn sides(&self, args: &[&str]) -> (Vec<String>, Vec<String>) {
        let via = args
            .iter()
            .map(|a| a.strip_prefix('@').unwrap_or(a).to_owned())
            .collect();
        let direct = args
            .iter()
            .map(|a| match a.strip_prefix('@') {
                Some(k) => format!("{}{k}", self.prefix),
                None => (*a).to_owned(),
            })
            .collect();
        (via, direct)
    }

    /// Both replies: (through the proxy, from plain Redis).
    fn both(&mut self, args: &[&str]) -> (Frame, Frame) {
        let (v, d) = self.sides(args);
        (self.via.cmd(&v), self.direct.cmd(&d))
    }

    /// Asserts the same reply; returns it.
    fn same(&mut self, args: &[&str]) -> Frame {
        let (via, direct) = self.both(args);
        assert_eq!(via, direct, "{args:?}: through the converter vs. Redis");
        via
    }

    /// For replies that name keys: plain Redis's reply with the prefix taken off by hand.
    fn same_keys(&mut self, args: &[&str]) -> Frame {
        let (via, direct) = self.both(args);
        assert_eq!(via, unprefix(direct, self.prefix), "{args:?}");
        via
    }

    /// For replies whose order Redis leaves open (hash iteration): compared sorted.
    fn same_unordered(&mut self, args: &[&str]) {
        let (via, direct) = self.both(args);
        assert_eq!(sorted(via), sorted(direct), "{args:?}");
    }
}

fn unprefix(f: Frame, prefix: &str) -> Frame {
    let un = |v: Vec<Frame>| v.into_iter().map(|x| unprefix(x, prefix)).collect();
    match f {
        Frame::Bulk(b) => Frame::Bulk(
            b.strip_prefix(prefix.as_bytes())
                .map(<[u8]>::to_vec)
                .unwrap_or(b),
        ),
        Frame::Array(v) => Frame::Array(un(v)),
        Frame::Set(v) => Frame::Set(un(v)),
        Frame::Map(v) => Frame::Map(
            v.into_iter()
                .map(|(k, x)| (unprefix(k, prefix), unprefix(x, prefix)))
                .collect(),
        ),
        f => f,
    }
}

fn sorted(f: Frame) -> Vec<String> {
    let mut v: Vec<String> = match f {
        Frame::Map(pairs) => pairs.iter().map(|p| format!("{p:?}")).collect(),
        Frame::Array(items) | Frame::Set(items) => items.iter().map(|i| format!("{i:?}")).collect(),
        other => panic!("not an aggregate: {other:?}"),
    };
    v.sort();
    v
}

/// Strings, hashes and lists above and below the threshold, multi-key and blocking commands,
/// streams, sorted sets and SORT, with replies that name keys.
fn sequence(d: &mut Diff) {
    let big = doc(5000, 1);
    let big2 = doc(3000, 2);
    let big3 = doc(700, 3);
    let (big, big2, big3) = (big.as_str(), big2.as_str(), big3.as_str());
    // Strings.
    for cmd in [
        &["SET", "@s1", "small"][..],
        &["SET", "@c:big", big],
        &["SET", "@c:small", "short"],
        &["GET", "@s1"],
        &["GET", "@c:big"],
        &["GET", "@c:small"],
        &["GET", "@c:missing"],
        &["MSET", "@c:m1", big2, "@m2", "v2", "@c:m3", "tiny"],
        &["MGET", "@c:m1", "@m2", "@c:m3", "@nope", "@c:big", "@s1"],
        &["GETSET", "@c:big", big3],
        &["SET", "@c:big", big, "GET"],
        &["SETEX", "@c:ex", "100", big2],
        &["GET", "@c:ex"],
        &["TTL", "@c:ex"],
        &["SETNX", "@c:nx", big],
        &["SETNX", "@c:nx", "x"],
        &["GETDEL", "@c:nx"],
        &["GETEX", "@c:ex", "PERSIST"],
        &["STRLEN", "@c:big"],
        &["STRLEN", "@c:small"],
        &["STRLEN", "@c:missing"],
        &["APPEND", "@s1", "-more"],
        &["GET", "@s1"],
        &["INCR", "@c:n"],
        &["INCRBY", "@c:n", "41"],
        &["GET", "@c:n"],
        &["EXISTS", "@c:big", "@s1", "@nope"],
        &["TYPE", "@c:big"],
        &["GET", "@c:h"],
    ] {
        d.same(cmd);
    }
    // Hashes.
    for cmd in [
        &["HSET", "@c:h", "f1", big, "f2", "small", "f3", big2][..],
        &["HGET", "@c:h", "f1"],
        &["HMGET", "@c:h", "f1", "f2", "nope", "f3"],
        &["HSETNX", "@c:h", "f4", big3],
        &["HSETNX", "@c:h", "f4", "x"],
        &["HSTRLEN", "@c:h", "f1"],
        &["HSTRLEN", "@c:h", "f2"],
        &["HLEN", "@c:h"],
        &["HSET", "@h2", "a", big, "b", "2"],
        &["HGET", "@h2", "a"],
        &["GET", "@c:h"],
    ] {
        d.same(cmd);
    }
    d.same_unordered(&["HGETALL", "@c:h"]);
    d.same_unordered(&["HVALS", "@c:h"]);
    d.same_unordered(&["HKEYS", "@c:h"]);
    let (via, direct) = d.both(&["HSCAN", "@c:h", "0", "COUNT", "1000"]);
    assert_eq!(hscan_pairs(via), hscan_pairs(direct), "HSCAN");
    // HRANDFIELD picks at random: each value it returns must be the field's value.
    let picked = match d.via.cmd(&["HRANDFIELD", "c:h", "-6", "WITHVALUES"]) {
        // RESP3: [[field, value], …]; RESP2: field, value, ….
        Frame::Array(v) if matches!(v.first(), Some(Frame::Array(_))) => v
            .into_iter()
            .flat_map(|p| match p {
                Frame::Array(p) => p,
                other => panic!("not a pair: {other:?}"),
            })
            .collect(),
        Frame::Array(v) => v,
        other => panic!("HRANDFIELD: {other:?}"),
    };
    assert_eq!(picked.len(), 12);
    for pair in picked.chunks(2) {
        let field = pair[0].text().expect("field");
        let (_, value) = d.both(&["HGET", "@c:h", &field]);
        assert_eq!(pair[1], value, "HRANDFIELD's value of {field}");
    }
    // Lists (the two list keys share a hash tag: LMOVE and BLPOP name both).
    for cmd in [
        &["RPUSH", "@c:{t}l", big, "a", big2, "b"][..],
        &["LPUSH", "@c:{t}l", "z"],
        &["LRANGE", "@c:{t}l", "0", "-1"],
        &["LINDEX", "@c:{t}l", "1"],
        &["LSET", "@c:{t}l", "2", big3],
        &["LINSERT", "@c:{t}l", "BEFORE", big3, "pivoted"],
        &["LPOS", "@c:{t}l", big2],
        &["LREM", "@c:{t}l", "1", "a"],
        &["LRANGE", "@c:{t}l", "0", "-1"],
        &["LPOP", "@c:{t}l"],
        &["RPOP", "@c:{t}l", "2"],
        &["LMOVE", "@c:{t}l", "@c:{t}l2", "LEFT", "RIGHT"],
        &["RPUSH", "@c:{t}l", big, big2, "x"],
        &["LLEN", "@c:{t}l"],
    ] {
        d.same(cmd);
    }
    // Replies that name keys.
    for cmd in [
        &["BLPOP", "@c:{t}empty", "@c:{t}l", "1"][..],
        &["BRPOP", "@c:{t}l2", "1"],
        &["LMPOP", "2", "@c:{t}empty", "@c:{t}l", "LEFT", "COUNT", "2"],
        &["BLMPOP", "1", "2", "@c:{t}empty", "@c:{t}l", "RIGHT"],
        &["XADD", "@{s}st", "1-1", "f", "v"],
        &["XADD", "@{s}st2", "1-1", "g", "w"],
        &[
            "XREAD", "COUNT", "5", "STREAMS", "@{s}st", "@{s}st2", "0", "0",
        ],
        &["ZADD", "@{z}z", "1", "a", "2", "b", "3", "c"],
        &["ZUNIONSTORE", "@{z}u", "2", "@{z}z", "@{z}z"],
        &["ZRANGE", "@{z}u", "0", "-1", "WITHSCORES"],
        &["BZPOPMIN", "@{z}z", "1"],
        &["ZMPOP", "1", "@{z}z", "MAX"],
        &["RPUSH", "@{o}ids", "1", "2", "3"],
        &[
            "MSET", "@{o}w_1", "3", "@{o}w_2", "1", "@{o}w_3", "2", "@{o}n_2", "two",
        ],
        // SORT BY / GET patterns are prefixed too (native tests); Redis refuses them to the
        // proxy's backend user, which has no access to the reserved keys.
        &["SORT", "@{o}ids", "DESC"],
        &["RENAME", "@{o}ids", "@{o}ids2"],
        &["DEL", "@c:big", "@s1", "@{o}ids2", "@nope"],
        &["EXISTS", "@c:big"],
    ] {
        d.same_keys(cmd);
    }
}

#[test]
fn a_namespaced_user_gets_the_replies_of_plain_redis_with_the_prefix_in_resp2_and_resp3() {
    let a = RedisServer::start();
    let b = RedisServer::start();
    let plain = RedisServer::start();
    let p = proxy(&[&a, &b], json!({}));
    for resp3 in [false, true] {
        let mut direct = plain.raw();
        assert_eq!(direct.cmd(&["FLUSHALL"]), Frame::Simple("OK".into()));
        if resp3 {
            assert!(direct.cmd(&["HELLO", "3"]).error().is_none());
        }
        let mut admin = p.raw();
        for s in [&a, &b] {
            assert_eq!(s.raw().cmd(&["FLUSHALL"]), Frame::Simple("OK".into()));
        }
        // Other namespaces' and unconfined keys on the same servers.
        admin.cmd(&["SET", "outside", "1"]);
        login(&p, "bob", false).cmd(&["SET", "s1", "bob's"]);
        let mut d = Diff {
            via: login(&p, "alice", resp3),
            direct,
            prefix: "alice:",
        };
        sequence(&mut d);
        // The stored values: under the prefix, compressed above the threshold only.
        let stored = |key: &str| -> Frame {
            let f = a.raw().cmd(&["GET", key]);
            if f == Frame::NullBulk {
                b.raw().cmd(&["GET", key])
            } else {
                f
            }
        };
        let Frame::Bulk(m1) = stored("alice:c:m1") else {
            panic!("alice:c:m1 is not stored under the namespace")
        };
        assert!(
            m1.starts_with(b"\xFFTZ1") && m1.len() < 3000 / 2,
            "{}",
            m1.len()
        );
        assert_eq!(stored("alice:c:m3"), Frame::bulk("tiny"));
        assert_eq!(stored("m2"), Frame::NullBulk);
        // The whole keyspace of the namespace, by SCAN and by KEYS, as plain Redis has it.
        let mut expected = key_list(d.direct.cmd(&["KEYS", "*"]));
        expected
            .iter_mut()
            .for_each(|k| *k = k["alice:".len()..].to_owned());
        expected.sort();
        assert!(expected.len() > 10, "{expected:?}");
        let mut keys = key_list(d.via.cmd(&["KEYS", "*"]));
        keys.sort();
        assert_eq!(keys, expected, "KEYS *");
        assert_eq!(full_scan(&mut d.via, &[]), expected, "SCAN without MATCH");
        let c_keys: Vec<String> = expected
            .iter()
            .filter(|k| k.starts_with("c:"))
            .cloned()
            .collect();
        assert_eq!(
            full_scan(&mut d.via, &["MATCH", "c:*"]),
            c_keys,
            "SCAN MATCH c:*"
        );
        let (via, direct) = d.both(&["KEYS", "@c:m*"]);
        let mut via = key_list(via);
        via.sort();
        assert_eq!(via, ["c:m1", "c:m3"]);
        assert_eq!(key_list(unprefix(direct, "alice:")).len(), 2);
    }
}

/// HSCAN's field-value pairs of one complete call, sorted.
fn hscan_pairs(f: Frame) -> Vec<String> {
    let Frame::Array(v) = f else {
        panic!("HSCAN: {f:?}")
    };
    assert_eq!(v[0], Frame::bulk("0"), "HSCAN did not finish in one call");
    let Frame::Array(items) = &v[1] else {
        panic!("HSCAN items: {v:?}")
    };
    let mut pairs: Vec<String> = items.chunks(2).map(|p| format!("{p:?}")).collect();
    pairs.sort();
    pairs
}

fn key_list(f: Frame) -> Vec<String> {
    match f {
        Frame::Array(v) | Frame::Set(v) => v.iter().map(|k| k.text().expect("a key")).collect(),
        other => panic!("not a list of keys: {other:?}"),
    }
}

/// Every key a whole SCAN returns (deduplicated, sorted).
fn full_scan(c: &mut RawClient, opts: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_owned();
    let mut all = Vec::new();
    for _ in 0..10_000 {
        let mut cmd = vec!["SCAN", cursor.as_str(), "COUNT", "3"];
        cmd.extend_from_slice(opts);
        let Frame::Array(v) = c.cmd(&cmd) else {
            panic!("SCAN {cursor}: not an array");
        };
        let next = v[0].text().expect("cursor");
        all.extend(key_list(v[1].clone()));
        cursor = next;
        if cursor == "0" {
            all.sort();
            all.dedup();
            return all;
        }
    }
    panic!("SCAN never finished");
}

#[test]
fn two_namespaces_cannot_see_or_reach_each_others_keys() {
    let a = RedisServer::start();
    let b = RedisServer::start();
    let p = proxy(&[&a, &b], json!({}));
    let mut alice = login(&p, "alice", false);
    let mut bob = login(&p, "bob", true);
    let mut admin = p.raw();
    for k in ["k1", "k2", "c:doc"] {
        assert_eq!(
            alice.cmd(&["SET", k, &format!("alice {k}")]),
            Frame::Simple("OK".into())
        );
    }
    assert_eq!(
        bob.cmd(&["SET", "k1", "bob k1"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(alice.cmd(&["GET", "k1"]), Frame::bulk("alice k1"));
    assert_eq!(bob.cmd(&["GET", "k1"]), Frame::bulk("bob k1"));
    assert_eq!(bob.cmd(&["GET", "k2"]), Frame::Null);
    // Naming the other namespace's stored key stays inside one's own.
    assert_eq!(bob.cmd(&["GET", "alice:k2"]), Frame::Null);
    // Issue 25, item 1: every STORE of GEORADIUS is a key (Redis writes the last one), so a
    // second STORE naming the other namespace's stored key lands inside one's own too.
    assert_eq!(
        alice.cmd(&["SET", "{g}k", "alice v"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(
        bob.cmd(&["GEOADD", "{g}geo", "0", "0", "m"]),
        Frame::Integer(1)
    );
    assert_eq!(
        bob.cmd(&[
            "GEORADIUS",
            "{g}geo",
            "0",
            "0",
            "1",
            "km",
            "STORE",
            "{g}x",
            "STORE",
            "alice:{g}k"
        ]),
        Frame::Integer(1)
    );
    assert_eq!(alice.cmd(&["GET", "{g}k"]), Frame::bulk("alice v"));
    assert_eq!(
        admin.cmd(&["TYPE", "bob:alice:{g}k"]),
        Frame::Simple("zset".into())
    );
    assert_eq!(
        bob.cmd(&["DEL", "{g}geo", "{g}x", "alice:{g}k"]),
        Frame::Integer(2)
    );
    assert_eq!(alice.cmd(&["DEL", "{g}k"]), Frame::Integer(1));
    assert_eq!(bob.cmd(&["EXISTS", "alice:k1", "k2"]), Frame::Integer(0));
    assert_eq!(key_list(bob.cmd(&["KEYS", "*"])), ["k1"]);
    assert_eq!(full_scan(&mut bob, &[]), ["k1"]);
    assert_eq!(
        full_scan(&mut alice, &["MATCH", "*"]),
        ["c:doc", "k1", "k2"]
    );
    assert_eq!(
        full_scan(&mut alice, &["MATCH", "bob:*"]),
        Vec::<String>::new()
    );
    // An unconfined client sees the stored names.
    assert_eq!(admin.cmd(&["GET", "alice:k1"]), Frame::bulk("alice k1"));
    assert_eq!(admin.cmd(&["GET", "bob:k1"]), Frame::bulk("bob k1"));
    assert_eq!(admin.cmd(&["GET", "k1"]), Frame::NullBulk);
    // Logging in as another user on the same connection changes the namespace at once.
    assert_eq!(
        alice.cmd(&["AUTH", "bob", PASSWORD]),
        Frame::Simple("OK".into())
    );
    assert_eq!(alice.cmd(&["GET", "k1"]), Frame::bulk("bob k1"));
}

#[test]
fn what_cannot_be_confined_is_refused_with_the_reason() {
    let a = RedisServer::start();
    let p = proxy(&[&a], json!({}));
    let mut alice = login(&p, "alice", false);
    assert_eq!(alice.cmd(&["SET", "k", "v"]), Frame::Simple("OK".into()));
    for (cmd, words) in [
        (&["FLUSHALL"][..], "whole database"),
        (&["FLUSHDB"], "whole database"),
        (&["DBSIZE"], "whole database"),
        (&["RANDOMKEY"], "SCAN"),
        (&["SUBSCRIBE", "news"], "channels"),
        (&["PUBLISH", "news", "x"], "channels"),
        (
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"],
            "script",
        ),
        (&["MULTI"], "queue"),
        (&["SCRIPT", "FLUSH"], "every namespace"),
        (&["SCRIPT", "KILL"], "whichever namespace"),
        (&["CLIENT", "TRACKING", "ON"], "invalidation"),
        (&["COMMANDLOG", "GET", "-1", "slow"], "other clients"),
        (&["APPEND", "c:doc", "x"], "compressed"),
        (&["GETRANGE", "c:doc", "0", "3"], "compressed"),
        (&["SETBIT", "c:doc", "1", "1"], "compressed"),
    ] {
        let e = error_of(&alice.cmd(cmd));
        assert!(e.starts_with("ERR converter: "), "{cmd:?}: {e}");
        assert!(e.contains(words), "{cmd:?}: {e}");
    }
    // Nothing refused reached Redis; the session goes on.
    assert_eq!(a.keys(), ["alice:k"]);
    assert_eq!(alice.cmd(&["GET", "k"]), Frame::bulk("v"));
    // An unconfined client is not refused, and the same byte commands work outside `c:`.
    assert_eq!(alice.cmd(&["APPEND", "k", "w"]), Frame::Integer(2));
    assert_eq!(p.raw().cmd(&["DBSIZE"]), Frame::Integer(1));
}

/// `tessera proxy` over `backend` with the converter configured as `config`, expected to stop
/// at start; its stderr. Bounded by `timeout`: a proxy that starts is killed after 30 s.
fn refused_at_start(backend: &RedisServer, config: &serde_json::Value) -> String {
    let out = std::process::Command::new("timeout")
        .arg("30")
        .arg(crate::support::tessera_bin())
        .args(["proxy", "--listen", "127.0.0.1:0", "--backends"])
        .arg(backend.addr().to_string())
        .arg("--plugin")
        .arg(crate::support::plugin_wasm("converter"))
        .arg("--plugin-config")
        .arg(config.to_string())
        .output()
        .expect("running tessera proxy");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the proxy started with {config}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// Issue 25, item 5: with "scripts": "prefix_keys", a confined user read and wrote another
// namespace's keys (`EVAL "return redis.call('GET',ARGV[1])" 1 {X}d bob:payroll`).
#[test]
fn issue_25_a_confined_user_runs_only_the_scripts_and_functions_an_operator_listed() {
    let a = RedisServer::start();
    let mut direct = a.raw();
    direct.cmd(&["SET", "bob:payroll", "bob's secret"]);
    direct.cmd(&["SET", "alice:k", "alice v"]);
    let by_arg = "return redis.call('GET', ARGV[1])";

    let e = refused_at_start(
        &a,
        &json!({
            "namespaces": [{ "users": ["alice"], "prefix": "alice:" }],
            "scripts": "prefix_keys"
        }),
    );
    assert!(
        e.contains("prefix_keys") && e.contains("confines nothing"),
        "{e}"
    );

    // The operator's script and function, loaded by an unconfined client; their SHA1 and
    // name listed.
    let listed = "return {KEYS[1], redis.call('GET', KEYS[1])}";
    let Frame::Bulk(sha) = direct.cmd(&["SCRIPT", "LOAD", listed]) else {
        panic!("SCRIPT LOAD");
    };
    let sha = String::from_utf8(sha).unwrap();
    let p = proxy(
        &[&a],
        json!({ "scripts": { "allow_sha1": [sha], "allow_functions": ["kget"] } }),
    );
    let mut admin = p.raw();
    let lib = "#!lua name=tlib\n\
               redis.register_function('kget', function(keys, args) return redis.call('GET', keys[1]) end)\n\
               redis.register_function('aget', function(keys, args) return redis.call('GET', args[1]) end)";
    assert_eq!(
        admin.cmd(&["FUNCTION", "LOAD", lib]),
        Frame::bulk("tlib"),
        "the operator loads the library"
    );
    let mut alice = login(&p, "alice", false);
    assert_eq!(
        alice.cmd(&["EVALSHA", &sha, "1", "k"]),
        Frame::Array(vec![Frame::bulk("alice:k"), Frame::bulk("alice v")])
    );
    assert_eq!(
        alice.cmd(&["FCALL", "kget", "1", "k"]),
        Frame::bulk("alice v")
    );
    // The client's own code, or code nobody listed, does not run: EVAL, a script it loads
    // itself and then calls by SHA1, an unlisted function.
    let own = match alice.cmd(&["SCRIPT", "LOAD", by_arg]) {
        Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("SCRIPT LOAD as alice: {other:?}"),
    };
    for cmd in [
        &["EVAL", by_arg, "1", "{X}d", "bob:payroll"][..],
        &["EVAL_RO", by_arg, "1", "{X}d", "bob:payroll"],
        &["EVALSHA", &own, "1", "{X}d", "bob:payroll"],
        &["EVALSHA_RO", &own, "1", "{X}d", "bob:payroll"],
        &["FCALL", "aget", "1", "{X}d", "bob:payroll"],
        &["FCALL_RO", "aget", "1", "{X}d", "bob:payroll"],
    ] {
        let e = error_of(&alice.cmd(cmd));
        assert!(e.starts_with("ERR converter: "), "{cmd:?}: {e}");
        assert!(!e.contains("secret"), "{cmd:?}: {e}");
    }
    // Unconfined, the same calls run (the operator's own client is not confined).
    assert_eq!(
        admin.cmd(&["EVAL", by_arg, "0", "bob:payroll"]),
        Frame::bulk("bob's secret")
    );
}

#[test]
fn old_plain_values_still_read_and_corrupt_compressed_ones_are_clear_errors() {
    let a = RedisServer::start();
    let p = proxy(&[&a], json!({}));
    let mut alice = login(&p, "alice", false);
    let mut alice3 = login(&p, "alice", true);
    // Written before compression was on: plain, above the threshold.
    let old = doc(4000, 9);
    a.raw().cmd(&["SET", "alice:c:old", &old]);
    a.raw().cmd(&["HSET", "alice:c:oldh", "f", &old]);
    assert_eq!(alice.cmd(&["GET", "c:old"]), Frame::bulk(&old));
    assert_eq!(alice.cmd(&["HGET", "c:oldh", "f"]), Frame::bulk(&old));
    assert_eq!(alice.cmd(&["STRLEN", "c:old"]), Frame::Integer(4000));

    let mut claim_4g = b"\xFFTZ1".to_vec();
    claim_4g.extend_from_slice(&u32::MAX.to_le_bytes());
    claim_4g.extend_from_slice(b"xyz");
    let mut garbage = b"\xFFTZ1".to_vec();
    garbage.extend_from_slice(&1000u32.to_le_bytes());
    garbage.extend_from_slice(&[0xF0, 0xFF, 0xFF, 0xFF, 0x7F, 1, 2, 3]);
    let mut raw = a.raw();
    raw.cmd(&[b"SET".as_slice(), b"alice:c:huge", &claim_4g]);
    raw.cmd(&[b"SET".as_slice(), b"alice:c:bad", &garbage]);
    raw.cmd(&[b"RPUSH".as_slice(), b"alice:c:list", b"fine", &garbage]);
    for c in [&mut alice, &mut alice3] {
        let e = error_of(&c.cmd(&["GET", "c:huge"]));
        assert!(
            e.starts_with("ERR converter: compressed value claims 4294967295 bytes"),
            "{e}"
        );
        let e = error_of(&c.cmd(&["MGET", "c:old", "c:bad"]));
        assert_eq!(e, "ERR converter: compressed value is corrupt");
        let e = error_of(&c.cmd(&["LRANGE", "c:list", "0", "-1"]));
        assert_eq!(e, "ERR converter: compressed value is corrupt");
        let e = error_of(&c.cmd(&["STRLEN", "c:huge"]));
        assert!(e.contains("over the limit"), "{e}");
        // The plugin and the session are fine.
        assert_eq!(c.cmd(&["LINDEX", "c:list", "0"]), Frame::bulk("fine"));
        assert_eq!(c.cmd(&["GET", "c:old"]), Frame::bulk(&old));
    }
    assert_eq!(
        metric(&p.metrics(), "tessera_plugin_converter_reply_errors_total"),
        Some(8.0),
        "each failed conversion is counted"
    );
}

#[test]
fn compression_alone_compresses_only_its_prefixes_for_every_client() {
    let a = RedisServer::start();
    let plain = RedisServer::start();
    let config = json!({ "compression": { "prefixes": ["doc:"], "min_bytes": 512 } });
    let p = Proxy::builder(&[&a])
        .config(&plugin_toml("converter", &config, ""))
        .start();
    let mut d = Diff {
        via: p.raw(),
        direct: plain.raw(),
        prefix: "",
    };
    let big = doc(6000, 4);
    for cmd in [
        &["SET", "@doc:1", &big][..],
        &["SET", "@other:1", &big],
        &["GET", "@doc:1"],
        &["GET", "@other:1"],
        &["MGET", "@doc:1", "@other:1", "@doc:none"],
        &["STRLEN", "@doc:1"],
        &["GETRANGE", "@other:1", "0", "9"],
        &["APPEND", "@other:1", "!"],
    ] {
        d.same(cmd);
    }
    let Frame::Bulk(stored) = a.raw().cmd(&["GET", "doc:1"]) else {
        panic!("doc:1 not stored")
    };
    assert!(stored.starts_with(b"\xFFTZ1") && stored.len() < 6000 / 2);
    assert_eq!(a.raw().cmd(&["STRLEN", "other:1"]), Frame::Integer(6001));
    let e = error_of(&d.via.cmd(&["GETRANGE", "doc:1", "0", "9"]));
    assert!(
        e.starts_with("ERR converter: GETRANGE works on a value's bytes"),
        "{e}"
    );
}
