//! The bucket plugin against a real `redis-server`: every command is run on a plain key
//! directly and on a bucketed key through the plugin (SDK harness: real ABI layouts, host
//! merges, `on_reply`), and the client-visible replies must be equal. Shape tests (manifest,
//! rewrites, refusals) need no server.

use tessera_plugin_sdk::resp::{self, Value};
use tessera_plugin_sdk::testing::{self, Harness, Outcome, command};
use tessera_plugin_sdk::{Merge, abi};

use crate::Bucket;
use crate::naming::{bucket_key, slot};

mod redis;
use redis::{Client, RedisServer};

const CONFIG: &str =
    r#"{"patterns":[{"prefix":"big:","buckets":8},{"prefix":"big:tiny:","buckets":2}]}"#;

struct Fixture {
    _server: RedisServer,
    direct: Client,
    via: Client,
    h: Harness<Bucket>,
}

/// A server and the plugin. Panics, naming what to install, when `redis-server` is missing:
/// these tests compare the plugin with Redis, and skipping them would pass without checking.
fn fixture(config: &str) -> Fixture {
    testing::reset();
    let server = RedisServer::start();
    Fixture {
        direct: server.client(),
        via: server.client(),
        _server: server,
        h: Harness::new(config),
    }
}

fn sub(args: &[&str], key: &str) -> Vec<String> {
    args.iter()
        .map(|a| {
            if *a == "K" {
                key.to_owned()
            } else {
                (*a).to_owned()
            }
        })
        .collect()
}

/// Elements of an array reply, sorted (in groups of `chunk`, for maps sent as flat arrays).
fn sorted(reply: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let (v, _) = resp::parse(reply).unwrap_or_else(|_| panic!("bad reply {reply:?}"));
    let items: Vec<&[u8]> = match v.as_seq() {
        Some(s) => s.raw_items().collect(),
        None => panic!("not an array: {}", String::from_utf8_lossy(reply)),
    };
    let mut groups: Vec<Vec<u8>> = items.chunks(chunk).map(|c| c.concat()).collect();
    groups.sort();
    groups
}

impl Fixture {
    /// (reply for the plain key `plain:k`, reply for the bucketed key `big:k`); `K` in `args`
    /// stands for the key.
    fn both_keys(&mut self, args: &[&str], plain: &str, big: &str) -> (Vec<u8>, Vec<u8>) {
        let d: Vec<Vec<u8>> = sub(args, plain)
            .into_iter()
            .map(String::into_bytes)
            .collect();
        let direct = self.direct.call(&d);
        let v = sub(args, big);
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        let Fixture { h, via, .. } = self;
        let through = h.run(1, &command(&v), &mut |c| via.call(c));
        (direct, through)
    }

    fn both(&mut self, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
        self.both_keys(args, "plain:k", "big:k")
    }

    /// Asserts the plugin answers exactly like Redis; returns the reply.
    fn same(&mut self, args: &[&str]) -> Vec<u8> {
        let (d, v) = self.both(args);
        assert_eq!(
            String::from_utf8_lossy(&v),
            String::from_utf8_lossy(&d),
            "{args:?}: through the plugin vs. Redis"
        );
        v
    }

    /// Like `same` for replies whose order Redis does not define.
    fn same_set(&mut self, args: &[&str], chunk: usize) {
        let (d, v) = self.both(args);
        assert_eq!(sorted(&v, chunk), sorted(&d, chunk), "{args:?}");
    }

    fn via(&mut self, args: &[&str]) -> Vec<u8> {
        let Fixture { h, via, .. } = self;
        h.run(1, &command(args), &mut |c| via.call(c))
    }
}

fn fields(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn hash_commands_answer_as_redis_for_one_key() {
    let mut f = fixture(CONFIG);
    let mut hset = vec!["HSET", "K"];
    let names = fields(40, "f");
    for n in &names {
        hset.extend([n.as_str(), "v"]);
    }
    assert_eq!(f.same(&hset), b":40\r\n");
    f.same(&["HSET", "K", "f1", "new", "f99", "x", "f2", "y"]);
    f.same(&["HMSET", "K", "m1", "1", "m2", "2"]);
    f.same(&["HSETNX", "K", "f1", "z"]);
    f.same(&["HSETNX", "K", "nx", "z"]);
    f.same(&["HGET", "K", "f1"]);
    f.same(&["HGET", "K", "missing"]);
    f.same(&[
        "HMGET", "K", "f3", "missing", "f1", "f7", "f2", "f30", "m1", "f3",
    ]);
    f.same(&["HDEL", "K", "f4", "f5", "missing", "f4"]);
    f.same(&["HEXISTS", "K", "f4"]);
    f.same(&["HEXISTS", "K", "f6"]);
    f.same(&["HINCRBY", "K", "m1", "5"]);
    f.same(&["HINCRBYFLOAT", "K", "m2", "0.5"]);
    f.same(&["HINCRBY", "K", "f1", "5"]); // error: not an integer
    f.same(&["HSTRLEN", "K", "f1"]);
    f.same(&["HLEN", "K"]);
    f.same_set(&["HGETALL", "K"], 2);
    f.same_set(&["HKEYS", "K"], 1);
    f.same_set(&["HVALS", "K"], 1);
    // Arity errors are Redis's own.
    f.same(&["HGET", "K"]);
    f.same(&["HSET", "K", "a"]);
    f.same(&["HMGET", "K"]);
}

#[test]
fn set_commands_answer_as_redis_for_one_key() {
    let mut f = fixture(CONFIG);
    let names = fields(30, "m");
    let mut sadd = vec!["SADD", "K"];
    sadd.extend(names.iter().map(String::as_str));
    sadd.push("m1");
    f.same(&sadd);
    f.same(&["SADD", "K", "m1", "new"]);
    f.same(&["SREM", "K", "m2", "m3", "nope"]);
    f.same(&["SISMEMBER", "K", "m4"]);
    f.same(&["SISMEMBER", "K", "m3"]);
    f.same(&["SMISMEMBER", "K", "m4", "m3", "new", "zz", "m9"]);
    f.same(&["SCARD", "K"]);
    f.same_set(&["SMEMBERS", "K"], 1);
}

#[test]
fn sorted_set_commands_and_ranges_answer_as_redis() {
    let mut f = fixture(CONFIG);
    let mut zadd = vec!["ZADD", "K"];
    let names = fields(25, "z");
    let scores: Vec<String> = (0..25).map(|i| ((i * 7) % 10).to_string()).collect();
    for (n, s) in names.iter().zip(&scores) {
        zadd.extend([s.as_str(), n.as_str()]);
    }
    f.same(&zadd);
    f.same(&["ZADD", "K", "NX", "1", "z1", "100", "new"]);
    f.same(&["ZADD", "K", "XX", "CH", "5", "z1", "5", "absent", "9", "z2"]);
    f.same(&["ZADD", "K", "GT", "CH", "0", "z3", "50", "z4"]);
    f.same(&["ZADD", "K", "LT", "1", "z5", "60", "z6"]);
    f.same(&["ZADD", "K", "INCR", "2.5", "z7"]);
    f.same(&["ZADD", "K", "INCR", "1", "z7", "1", "z8"]);
    f.same(&["ZADD", "K", "1", "a", "nan-ish", "b"]);
    f.same(&["ZADD", "K", "1", "a", "2"]);
    f.same(&["ZADD", "K", "NX", "XX", "1", "a"]);
    f.same(&["ZADD", "K", "-inf", "low", "+inf", "high"]);
    f.same(&["ZREM", "K", "z10", "z11", "none"]);
    f.same(&["ZSCORE", "K", "z7"]);
    f.same(&["ZMSCORE", "K", "z7", "none", "z1", "high"]);
    f.same(&["ZINCRBY", "K", "3", "z12"]);
    f.same(&["ZCARD", "K"]);
    f.same(&["ZCOUNT", "K", "2", "(7"]);
    f.same(&["ZCOUNT", "K", "-inf", "+inf"]);
    for range in [
        &["ZRANGE", "K", "0", "-1"][..],
        &["ZRANGE", "K", "0", "-1", "WITHSCORES"],
        &["ZRANGE", "K", "3", "9", "WITHSCORES"],
        &["ZRANGE", "K", "-5", "-2"],
        &["ZRANGE", "K", "-100", "2"],
        &["ZRANGE", "K", "5", "2"],
        &["ZRANGE", "K", "40", "50"],
        &["ZREVRANGE", "K", "0", "6", "WITHSCORES"],
        &["ZREVRANGE", "K", "-3", "-1"],
        &["ZRANGEBYSCORE", "K", "2", "7"],
        &[
            "ZRANGEBYSCORE",
            "K",
            "(2",
            "7",
            "WITHSCORES",
            "LIMIT",
            "2",
            "5",
        ],
        &["ZRANGEBYSCORE", "K", "-inf", "+inf", "LIMIT", "3", "-1"],
        &["ZRANGEBYSCORE", "K", "-inf", "+inf", "LIMIT", "-1", "3"],
        &[
            "ZREVRANGEBYSCORE",
            "K",
            "8",
            "1",
            "WITHSCORES",
            "LIMIT",
            "1",
            "4",
        ],
        &[
            "ZRANGE",
            "K",
            "1",
            "8",
            "BYSCORE",
            "LIMIT",
            "1",
            "3",
            "WITHSCORES",
        ],
        &["ZRANGE", "K", "8", "1", "BYSCORE", "REV", "WITHSCORES"],
        &["ZRANGE", "K", "0", "4", "REV", "WITHSCORES"],
        &["ZRANGE", "K", "0", "4", "LIMIT", "0", "1"],
        &["ZRANGEBYSCORE", "K", "x", "1"],
        &["ZRANGE", "K", "a", "1"],
    ] {
        f.same(range);
    }
    assert_eq!(
        f.h.plugin().pending.in_flight(),
        0,
        "every range query was answered"
    );
}

#[test]
fn key_commands_treat_the_buckets_as_one_key() {
    let mut f = fixture(CONFIG);
    for args in [
        &["EXISTS", "K"][..],
        &["TYPE", "K"],
        &["TTL", "K"],
        &["DEL", "K"],
        &["HSET", "K", "a", "1", "b", "2", "c", "3"],
        &["EXISTS", "K"],
        &["TYPE", "K"],
        &["TTL", "K"],
        &["PERSIST", "K"],
        &["EXPIRE", "K", "100"],
        &["PERSIST", "K"],
        &["PEXPIRE", "K", "100000"],
    ] {
        f.same(args);
    }
    let (d, v) = f.both(&["TTL", "K"]);
    assert_eq!((d, v), (b":100\r\n".to_vec(), b":100\r\n".to_vec()));
    for args in [
        &["DEL", "K"][..],
        &["DEL", "K"],
        &["EXISTS", "K"],
        &["TTL", "K"],
        &["TYPE", "K"],
    ] {
        f.same(args);
    }
    f.same(&["SADD", "K", "x"]);
    f.same(&["TYPE", "K"]);
    f.same(&["UNLINK", "K"]);
    f.same(&["ZADD", "K", "1", "x"]);
    f.same(&["TYPE", "K"]);
}

#[test]
fn scan_cursors_walk_every_bucket_once() {
    let mut f = fixture(CONFIG);
    for (scan, add) in [("HSCAN", "HSET"), ("SSCAN", "SADD"), ("ZSCAN", "ZADD")] {
        let key = format!("big:{scan}");
        let mut want = Vec::new();
        for i in 0..60 {
            let m = format!("m{i}");
            match add {
                "HSET" => f.via(&[add, &key, &m, "v"]),
                _ if add == "ZADD" => f.via(&[add, &key, "1", &m]),
                _ => f.via(&[add, &key, &m]),
            };
            want.push(m.into_bytes());
        }
        want.sort();
        let mut got = Vec::new();
        let mut cursor = "0".to_owned();
        let mut rounds = 0;
        loop {
            let reply = f.via(&[scan, &key, &cursor, "COUNT", "7"]);
            let (v, _) = resp::parse(&reply).unwrap();
            let mut it = v.as_seq().unwrap().into_iter();
            cursor = String::from_utf8(it.next().unwrap().as_bytes().unwrap().to_vec()).unwrap();
            let items: Vec<Value<'_>> = it.next().unwrap().as_seq().unwrap().into_iter().collect();
            let step = if scan == "SSCAN" { 1 } else { 2 };
            got.extend(
                items
                    .iter()
                    .step_by(step)
                    .map(|m| m.as_bytes().unwrap().to_vec()),
            );
            rounds += 1;
            if cursor == "0" {
                break;
            }
            assert!(rounds < 200, "{scan} does not end");
        }
        got.sort();
        got.dedup();
        assert_eq!(got, want, "{scan}");
    }
}

#[test]
fn fields_spread_over_buckets_and_slots_and_nothing_is_left_under_the_logical_name() {
    let mut f = fixture(CONFIG);
    let key = "big:{tag}:h";
    for i in 0..200 {
        f.via(&["HSET", key, &format!("f{i}"), "v"]);
    }
    let mut slots = std::collections::HashSet::new();
    for b in 0..8 {
        let name = bucket_key(key.as_bytes(), b);
        assert_eq!(
            f.direct.call(&[b"EXISTS".to_vec(), name.clone()]),
            b":1\r\n",
            "bucket {b}"
        );
        slots.insert(slot(&name, 1024));
    }
    assert!(slots.len() >= 7, "{slots:?}");
    assert_eq!(f.direct.call_str(&["EXISTS", key]), b":0\r\n");
    assert_eq!(f.via(&["HLEN", key]), b":200\r\n");
    // The longest prefix wins: big:tiny: keys have 2 buckets.
    f.via(&["SADD", "big:tiny:s", "a", "b", "c", "d", "e"]);
    let two = (0..3)
        .map(|b| {
            f.direct
                .call(&[b"EXISTS".to_vec(), bucket_key(b"big:tiny:s", b)])
        })
        .collect::<Vec<_>>();
    assert_eq!(
        two,
        [b":1\r\n".to_vec(), b":1\r\n".to_vec(), b":0\r\n".to_vec()]
    );
}

#[test]
fn manifest_hooks_every_command_on_the_prefixes_only() {
    testing::reset();
    let mut h = Harness::<Bucket>::new(CONFIG);
    let m = h.manifest().clone();
    assert_ne!(m.flags & abi::MF_ALL, 0);
    assert_ne!(m.flags & abi::MF_CLASS_VALUES, 0);
    assert!(m.wants_close());
    assert_eq!(m.prefixes, vec![b"big:tiny:".to_vec(), b"big:".to_vec()]);
    assert_eq!(
        h.on_command(1, &command(&["HGET", "small:k", "f"])),
        Outcome::NotHooked
    );
    assert_eq!(h.on_command(1, &command(&["PING"])), Outcome::NotHooked);
    let rw = h.on_command(1, &command(&["HGET", "big:k", "f"])).rewrite();
    assert_eq!(rw.merge, Merge::First);
    let b = crate::naming::field_bucket(b"f", 8);
    assert_eq!(
        rw.commands,
        vec![vec![
            b"HGET".to_vec(),
            bucket_key(b"big:k", b),
            b"f".to_vec()
        ]]
    );
    let rw = h.on_command(1, &command(&["HLEN", "big:k"])).rewrite();
    assert_eq!((rw.merge, rw.commands.len()), (Merge::Sum, 8));
}

#[test]
fn what_cannot_stay_exact_is_refused() {
    testing::reset();
    let mut h = Harness::<Bucket>::new(CONFIG);
    let refused = |h: &mut Harness<Bucket>, args: &[&str]| match h.on_command(1, &command(args)) {
        Outcome::Deny(t) => t,
        other => panic!("{args:?} should be refused, got {other:?}"),
    };
    for (args, text) in [
        (
            &["RENAME", "big:k", "x"][..],
            "ERR bucket: RENAME naming several keys is not supported with bucketed key 'big:k'",
        ),
        (
            &["SUNION", "a", "big:k"],
            "ERR bucket: SUNION naming several keys is not supported with bucketed key 'big:k'",
        ),
        (
            &["DEL", "big:k", "other"],
            "ERR bucket: DEL naming several keys is not supported with bucketed key 'big:k'",
        ),
        (
            &["HRANDFIELD", "big:k"],
            "ERR bucket: HRANDFIELD is not supported on bucketed key 'big:k'",
        ),
        (
            &["SET", "big:k", "v"],
            "ERR bucket: SET is not supported on bucketed key 'big:k'",
        ),
        (
            &["ZRANGE", "big:k", "[a", "[z", "BYLEX"],
            "ERR bucket: ZRANGE BYLEX is not supported on bucketed keys",
        ),
        (
            &["EXPIRE", "big:k", "10", "NX"],
            "ERR bucket: EXPIRE options (NX XX GT LT) are not supported on bucketed keys",
        ),
    ] {
        assert_eq!(refused(&mut h, args), text);
    }
    let mut strict =
        Harness::<Bucket>::new(r#"{"patterns":[{"prefix":"big:","buckets":4}],"expire":"refuse"}"#);
    assert_eq!(
        refused(&mut strict, &["pexpire", "big:k", "10"]),
        "ERR bucket: PEXPIRE is disabled on bucketed keys (expire: refuse)"
    );
}

#[test]
fn pending_range_queries_are_freed_when_the_client_goes() {
    testing::reset();
    let mut h = Harness::<Bucket>::new(CONFIG);
    let rw = h
        .on_command(7, &command(&["ZRANGE", "big:z", "0", "-1"]))
        .rewrite();
    assert_eq!(rw.merge, Merge::Plugin);
    assert_eq!(rw.strings()[0][2..], ["0", "-1", "WITHSCORES"]);
    assert_eq!(h.plugin().pending.in_flight(), 1);
    h.on_close(7);
    assert_eq!(h.plugin().pending.in_flight(), 0);
}

#[test]
fn bad_configs_are_refused() {
    let err = |c: &str| Harness::<Bucket>::try_new(c).unwrap_err();
    assert_eq!(err(r#"{"patterns":[]}"#), "bucket: no patterns");
    assert_eq!(
        err(r#"{"patterns":[{"prefix":"big:","buckets":0}]}"#),
        r#"bucket: prefix "big:": buckets must be 1..=1024, not 0"#
    );
    assert_eq!(
        err(r#"{"patterns":[{"prefix":"","buckets":2}]}"#),
        "bucket: empty prefix"
    );
    assert!(
        err(r#"{"patterns":[{"prefix":"a","buckets":2}],"expire":"never"}"#)
            .starts_with("bucket: bad config: unknown variant `never`")
    );
}
