//! Multi-key commands the proxy does not split: with keys sharing a hash tag they work as on
//! one direct redis-server; with keys in different slots (even on one backend) the reply is
//! exactly CROSSSLOT and nothing is written. Keys are found by the command's real key spec.

use crate::support::{Cluster, Frame, RedisServer, assert_same_replies};

const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Keys substituted for `$A`, `$B` and `$C` in a command template.
struct Keys<'a>([&'a str; 3]);

impl Keys<'_> {
    fn expand(&self, template: &[&str]) -> Vec<String> {
        template
            .iter()
            .map(|arg| match *arg {
                "$A" => self.0[0].to_string(),
                "$B" => self.0[1].to_string(),
                "$C" => self.0[2].to_string(),
                other => other.to_string(),
            })
            .collect()
    }
}

const GET_SCRIPT: &str = "return redis.call('get',KEYS[1])";
const GET2_SCRIPT: &str = "return {redis.call('get',KEYS[1]),redis.call('get',KEYS[2])}";

/// Sequences whose last commands need all their keys in one slot.
fn same_slot_cases() -> Vec<(&'static str, Vec<Vec<&'static str>>)> {
    vec![
        (
            "SINTERSTORE",
            vec![
                vec!["SADD", "$A", "x", "y"],
                vec!["SADD", "$B", "y", "z"],
                vec!["SINTERSTORE", "$C", "$A", "$B"],
                vec!["SMEMBERS", "$C"],
            ],
        ),
        (
            "RENAME",
            vec![
                vec!["SET", "$A", "v"],
                vec!["RENAME", "$A", "$B"],
                vec!["GET", "$B"],
                vec!["EXISTS", "$A"],
            ],
        ),
        (
            "SMOVE",
            vec![
                vec!["SADD", "$A", "m"],
                vec!["SMOVE", "$A", "$B", "m"],
                vec!["SISMEMBER", "$B", "m"],
            ],
        ),
        (
            "RPOPLPUSH",
            vec![
                vec!["RPUSH", "$A", "1", "2"],
                vec!["RPOPLPUSH", "$A", "$B"],
                vec!["LRANGE", "$B", "0", "-1"],
            ],
        ),
        (
            "LMOVE",
            vec![
                vec!["RPUSH", "$A", "1", "2"],
                vec!["LMOVE", "$A", "$B", "LEFT", "RIGHT"],
                vec!["LRANGE", "$B", "0", "-1"],
            ],
        ),
        (
            "PFMERGE",
            vec![
                vec!["PFADD", "$A", "x", "y"],
                vec!["PFADD", "$B", "y", "z"],
                vec!["PFMERGE", "$C", "$A", "$B"],
                vec!["PFCOUNT", "$C"],
            ],
        ),
        (
            "MSETNX",
            vec![
                vec!["MSETNX", "$A", "1", "$B", "2"],
                vec!["MSETNX", "$A", "3", "$C", "4"],
                vec!["MGET", "$A", "$B", "$C"],
            ],
        ),
        (
            "EVAL 1 key",
            vec![vec!["SET", "$A", "v"], vec!["EVAL", GET_SCRIPT, "1", "$A"]],
        ),
        (
            "EVAL 2 keys",
            vec![
                vec!["SET", "$A", "v"],
                vec!["SET", "$B", "w"],
                vec!["EVAL", GET2_SCRIPT, "2", "$A", "$B"],
            ],
        ),
        (
            "ZUNION",
            vec![
                vec!["ZADD", "$A", "1", "x"],
                vec!["ZADD", "$B", "2", "x", "3", "y"],
                vec!["ZUNION", "2", "$A", "$B", "WITHSCORES"],
                vec!["ZUNION", "2", "$A", "$B", "WEIGHTS", "1", "2"],
            ],
        ),
        (
            "LCS",
            vec![
                vec!["SET", "$A", "ohmytext"],
                vec!["SET", "$B", "mynewtext"],
                vec!["LCS", "$A", "$B"],
            ],
        ),
        (
            "EXPIRE NX",
            vec![
                vec!["SET", "$A", "v"],
                vec!["EXPIRE", "$A", "100", "NX"],
                vec!["EXPIRE", "$A", "100", "NX"],
            ],
        ),
        (
            "EXPIRETIME",
            vec![
                vec!["SET", "$A", "v"],
                vec!["EXPIREAT", "$A", "4102444800"],
                vec!["EXPIRETIME", "$A"],
                vec!["EXPIRETIME", "$B"],
            ],
        ),
    ]
}

#[test]
fn same_slot_multi_key_commands_with_a_shared_hash_tag_match_direct_redis() {
    let direct = RedisServer::start();
    let cluster = Cluster::start();
    let (mut proxy, mut direct_raw) = (cluster.proxy.raw(), direct.raw());
    // Tags on each backend, so both get exercised; each case gets its own keys.
    for (i, (name, commands)) in same_slot_cases().into_iter().enumerate() {
        for tag in ["t", "foo"] {
            let (a, b, c) = (
                format!("{{{tag}}}a{i}"),
                format!("{{{tag}}}b{i}"),
                format!("{{{tag}}}c{i}"),
            );
            let keys = Keys([&a, &b, &c]);
            let expanded: Vec<Vec<String>> = commands.iter().map(|c| keys.expand(c)).collect();
            eprintln!("case {name} with tag {{{tag}}}");
            assert_same_replies(&mut proxy, &mut direct_raw, &expanded);
        }
    }
}

/// Commands that must name keys of one slot only; `$B` is the odd one out.
fn cross_slot_cases() -> Vec<Vec<&'static str>> {
    vec![
        vec!["SINTERSTORE", "$C", "$A", "$B"],
        vec!["SINTERSTORE", "$B", "$A", "$C"],
        vec!["RENAME", "$A", "$B"],
        vec!["SMOVE", "$A", "$B", "m"],
        vec!["RPOPLPUSH", "$A", "$B"],
        vec!["LMOVE", "$A", "$B", "LEFT", "RIGHT"],
        vec!["PFMERGE", "$C", "$A", "$B"],
        vec!["MSETNX", "$A", "1", "$B", "2"],
        vec!["MSETNX", "$A", "1", "$C", "2", "$B", "3"],
        vec!["EVAL", GET2_SCRIPT, "2", "$A", "$B"],
        vec!["ZUNION", "2", "$A", "$B"],
        vec!["LCS", "$A", "$B"],
    ]
}

/// Asserts every cross-slot case is refused with exactly CROSSSLOT and changes nothing.
fn assert_all_crossslot(keys: Keys<'_>) {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    for template in cross_slot_cases() {
        let cmd = keys.expand(&template);
        assert_eq!(raw.cmd(&cmd), Frame::Error(CROSSSLOT.into()), "for {cmd:?}");
    }
    assert_eq!(
        raw.cmd(&["PING"]),
        Frame::Simple("PONG".into()),
        "the session goes on"
    );
    let [a, b] = &cluster.backends;
    assert_eq!(
        (a.dbsize(), b.dbsize()),
        (0, 0),
        "a refused command must not write anything"
    );
}

#[test]
fn multi_key_commands_on_different_slots_of_one_backend_are_crossslot() {
    // {a} is slot 579, {b} slot 1017: both on the second backend, but different slots.
    assert_all_crossslot(Keys(["{a}x", "{b}y", "{a}z"]));
}

#[test]
fn multi_key_commands_on_different_backends_are_crossslot() {
    // {a} is slot 579 (second backend), {foo} slot 289 (first backend).
    assert_all_crossslot(Keys(["{a}x", "{foo}y", "{a}z"]));
}

#[test]
fn zunion_is_routed_by_its_numkeys_keys_and_refused_across_slots() {
    let cluster = Cluster::start();
    let mut raw = cluster.proxy.raw();
    let reply = raw.cmd(&["ZUNION", "2", "{a}x", "{b}y"]);
    assert_eq!(reply, Frame::Error(CROSSSLOT.into()));
    // "2" is not a key: the same keys in one slot are fine.
    assert_eq!(raw.cmd(&["ZADD", "{a}x", "1", "m"]), Frame::Integer(1));
    assert_eq!(
        raw.cmd(&["ZUNION", "2", "{a}x", "{a}y"]),
        Frame::Array(vec![Frame::bulk("m")])
    );
    assert!(cluster.owner_of("{a}x").has("{a}x"));
}
