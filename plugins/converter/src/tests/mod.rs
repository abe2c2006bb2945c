//! Native tests of the converter through the SDK harness (real ABI layouts): config checks,
//! the shape of rewritten commands, refusals, and replies converted back. The differential
//! tests against Redis, through the proxy, are in `tests/suite/converter.rs`.

use std::collections::HashMap;

use tessera_plugin_sdk::Merge;
use tessera_plugin_sdk::testing::{self, ClientInfo, Harness, Outcome, command, command_bytes};

use crate::Converter;
use crate::codec;

const CONFIG: &str = r#"{"namespaces":[{"users":["alice"],"prefix":"a:"},{"users":["bob","carol"],"prefix":"b:"}],
  "compression":{"prefixes":["c:"],"min_bytes":100}}"#;

fn harness(config: &str) -> Harness<Converter> {
    testing::reset();
    testing::set_client(1, ClientInfo::new("10.0.0.1:5000").user("alice"));
    testing::set_client(2, ClientInfo::new("10.0.0.2:5000").user("bob"));
    testing::set_client(3, ClientInfo::new("10.0.0.3:5000"));
    Harness::new(config)
}

fn rewritten(h: &mut Harness<Converter>, conn: u64, args: &[&str]) -> Vec<Vec<String>> {
    h.on_command(conn, &command(args)).rewrite().strings()
}

#[test]
fn bad_configs_are_refused_with_the_reason() {
    for (cfg, words) in [
        ("{}", "nothing to do"),
        (r#"{"namespaces":[{"users":["a"],"prefix":""}]}"#, "empty"),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"},{"users":["b"],"prefix":"t:x"}]}"#,
            "overlap",
        ),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t*"}]}"#,
            "glob character",
        ),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"},{"users":["a"],"prefix":"u:"}]}"#,
            "two namespaces",
        ),
        (r#"{"compression":{"min_bytes":10}}"#, "at least 64"),
        (
            r#"{"compression":{"max_value_bytes":999999999}}"#,
            "max_value_bytes",
        ),
        (r#"{"compresion":{}}"#, "unknown field"),
        // Issue 25: KEYS prefixed confined nothing, the body names any key.
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"}],"scripts":"prefix_keys"}"#,
            "confines nothing",
        ),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"}],"scripts":"allow"}"#,
            "must be \"refuse\"",
        ),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"}],"scripts":{"allow_sha1":["abc"]}}"#,
            "not a SHA1",
        ),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"}],"scripts":{"allow_functions":["a b"]}}"#,
            "not a function name",
        ),
        (
            r#"{"namespaces":[{"users":["a"],"prefix":"t:"}],"scripts":{"allow":[]}}"#,
            "unknown field",
        ),
    ] {
        testing::reset();
        let e = Harness::<Converter>::try_new(cfg).expect_err(cfg);
        assert!(
            e.starts_with("converter: ") && e.contains(words),
            "{cfg}: {e}"
        );
    }
}

#[test]
fn keys_of_a_namespaced_user_get_its_prefix_and_others_pass() {
    let mut h = harness(CONFIG);
    let rw = h.on_command(1, &command(&["MGET", "x", "y"])).rewrite();
    assert_eq!(rw.merge, Merge::First);
    assert_eq!(rw.strings(), [["MGET", "a:x", "a:y"]]);
    assert_eq!(
        rewritten(&mut h, 2, &["SET", "x", "1"]),
        [["SET", "b:x", "1"]]
    );
    let eval = command(&["EVAL", "s", "2", "k1", "k2", "arg"]).with_keys(&[3, 4]);
    assert_eq!(
        h.on_command(1, &eval),
        Outcome::Deny(
            "ERR converter: EVAL is not available in a namespace: the client writes the \
             script, which can name any key (scripts an operator loaded run by EVALSHA when the \
             converter lists them)"
                .into()
        )
    );
    // Not confined: nothing changes; keyless commands of confined users pass too.
    assert_eq!(h.on_command(3, &command(&["SET", "x", "1"])), Outcome::Pass);
    assert_eq!(h.on_command(1, &command(&["PING"])), Outcome::Pass);
    // The user is asked for on every command: a client that logs in as another user is in
    // the other namespace at once.
    testing::set_client(1, ClientInfo::new("10.0.0.1:5000").user("bob"));
    assert_eq!(rewritten(&mut h, 1, &["GET", "x"]), [["GET", "b:x"]]);
}

#[test]
fn values_are_not_copied_into_the_plugin_unless_it_reads_them() {
    let h = harness(CONFIG);
    let m = h.manifest();
    assert!(!m.copies_values(&command(&["ZADD", "z", "1", "m"])));
    assert!(!m.copies_values(&command(&["EXPIRE", "k", "10"])));
    assert!(m.copies_values(&command(&["SCAN", "0"])));
    assert!(m.copies_values(&command(&["CLIENT", "TRACKING", "on"])));
    assert!(m.copies_values(&command(&["SET", "k", "v"])));
    // An elided value is passed on by reference.
    let mut h = harness(CONFIG);
    assert_eq!(
        rewritten(&mut h, 1, &["ZADD", "z", "1", "member"]),
        [["ZADD", "a:z", "1", "member"]]
    );
}

// Issue 25, item 5: "scripts": "prefix_keys" confined nothing, the client wrote the body.
#[test]
fn issue_25_a_confined_client_runs_only_listed_scripts_and_functions_with_keys_prefixed() {
    const SHA: &str = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
    let cfg = format!(
        r#"{{"namespaces":[{{"users":["alice"],"prefix":"a:"}}],
            "scripts":{{"allow_sha1":["{}"],"allow_functions":["hget_one"]}}}}"#,
        SHA.to_ascii_uppercase()
    );
    let mut h = harness(&cfg);
    // The SHA1 and the function name are read, so their bytes are copied into the plugin.
    assert!(h.manifest().copies_values(&command(&["EVALSHA", SHA, "0"])));
    assert!(h.manifest().copies_values(&command(&["FCALL", "f", "0"])));
    // EVAL is refused whatever the list says: the client wrote the body.
    for name in ["EVAL", "EVAL_RO"] {
        let c =
            command(&[name, "return redis.call('GET',ARGV[1])", "1", "k", "b:x"]).with_keys(&[3]);
        let Outcome::Deny(e) = h.on_command(1, &c) else {
            panic!("{name} ran");
        };
        assert!(e.contains("the client writes the script"), "{e}");
    }
    // A listed SHA1 (compared case-insensitively, as Redis does) runs with KEYS prefixed.
    for (name, sha) in [
        ("EVALSHA", SHA),
        ("EVALSHA_RO", &SHA.to_ascii_uppercase()[..]),
    ] {
        let c = command(&[name, sha, "2", "k1", "k2", "arg"]).with_keys(&[3, 4]);
        assert_eq!(
            h.on_command(1, &c).rewrite().strings(),
            [[name, sha, "2", "a:k1", "a:k2", "arg"]]
        );
    }
    let other = "0000000000000000000000000000000000000000";
    let c = command(&["EVALSHA", other, "1", "k"]).with_keys(&[3]);
    let Outcome::Deny(e) = h.on_command(1, &c) else {
        panic!("an unlisted script ran");
    };
    assert!(e.contains("scripts.allow_sha1"), "{e}");
    // Functions likewise, by exact name.
    let c = command(&["FCALL", "hget_one", "1", "h"]).with_keys(&[3]);
    assert_eq!(
        h.on_command(1, &c).rewrite().strings(),
        [["FCALL", "hget_one", "1", "a:h"]]
    );
    for name in ["HGET_ONE", "other"] {
        let c = command(&["FCALL_RO", name, "1", "h"]).with_keys(&[3]);
        let Outcome::Deny(e) = h.on_command(1, &c) else {
            panic!("function {name} ran");
        };
        assert!(e.contains("scripts.allow_functions"), "{e}");
    }
    // Unconfined clients are not concerned.
    let c = command(&["EVAL", "return 1", "0"]);
    assert_eq!(h.on_command(3, &c), Outcome::Pass);
}

#[test]
fn scan_and_keys_patterns_stay_inside_the_namespace_and_replies_lose_the_prefix() {
    let mut h = harness(CONFIG);
    assert_eq!(
        rewritten(&mut h, 1, &["SCAN", "0"]),
        [["SCAN", "0", "MATCH", "a:*"]]
    );
    assert_eq!(
        rewritten(&mut h, 1, &["SCAN", "7", "match", "u*", "COUNT", "5"]),
        [["SCAN", "7", "match", "a:u*", "COUNT", "5"]]
    );
    assert_eq!(rewritten(&mut h, 2, &["KEYS", "*"]), [["KEYS", "b:*"]]);
    // Redis uses the last MATCH; every one gets the prefix. A malformed SCAN stays malformed.
    assert_eq!(
        rewritten(&mut h, 1, &["SCAN", "0", "MATCH", "x", "MATCH", "*"]),
        [["SCAN", "0", "MATCH", "a:x", "MATCH", "a:*"]]
    );
    assert_eq!(
        rewritten(&mut h, 1, &["SCAN", "0", "MATCH"]),
        [["SCAN", "0", "MATCH", "MATCH", "a:*"]]
    );
    let mut backend = |c: &[Vec<u8>]| -> Vec<u8> {
        match c[0].as_slice() {
            b"SCAN" => b"*2\r\n$2\r\n12\r\n*2\r\n$3\r\na:x\r\n$4\r\na:yy\r\n".to_vec(),
            _ => b"*1\r\n$3\r\nb:k\r\n".to_vec(),
        }
    };
    assert_eq!(
        h.run(1, &command(&["SCAN", "0"]), &mut backend),
        b"*2\r\n$2\r\n12\r\n*2\r\n$1\r\nx\r\n$2\r\nyy\r\n"
    );
    assert_eq!(
        h.run(2, &command(&["KEYS", "*"]), &mut backend),
        b"*1\r\n$1\r\nk\r\n"
    );
    // BLPOP's key, in RESP3 too (the reply keeps its protocol's types).
    let blpop = command(&["BLPOP", "q", "0"]).with_keys(&[1]);
    let mut backend = |_: &[Vec<u8>]| b">2\r\n$3\r\na:q\r\n$1\r\nv\r\n".to_vec();
    assert_eq!(
        h.run(1, &blpop, &mut backend),
        b">2\r\n$1\r\nq\r\n$1\r\nv\r\n"
    );
}

#[test]
fn sort_patterns_that_read_keys_get_the_prefix() {
    let mut h = harness(CONFIG);
    assert_eq!(
        rewritten(
            &mut h,
            1,
            &[
                "SORT", "ids", "LIMIT", "0", "5", "BY", "w_*", "GET", "#", "GET", "h_*->f"
            ]
        ),
        [[
            "SORT", "a:ids", "LIMIT", "0", "5", "BY", "a:w_*", "GET", "#", "GET", "a:h_*->f"
        ]]
    );
    // The argument after STORE is the destination key, even when it reads "BY".
    let store = command(&["SORT", "ids", "STORE", "BY", "GET", "x_*"]).with_keys(&[1, 3]);
    assert_eq!(
        h.on_command(1, &store).rewrite().strings(),
        [["SORT", "a:ids", "STORE", "a:BY", "GET", "a:x_*"]]
    );
    assert_eq!(
        rewritten(&mut h, 1, &["SORT", "ids", "BY", "nosort"]),
        [["SORT", "a:ids", "BY", "nosort"]]
    );
}

#[test]
fn commands_that_cannot_be_confined_are_refused() {
    let mut h = harness(CONFIG);
    for args in [
        &["FLUSHALL"][..],
        &["RANDOMKEY"],
        &["SUBSCRIBE", "ch"],
        &["MULTI"],
        &["SCRIPT", "FLUSH"],
        &["SCRIPT", "KILL"],
        &["CLIENT", "TRACKING", "on"],
        &["SLOWLOG", "GET"],
        &["COMMANDLOG", "GET", "10", "large-request"],
    ] {
        match h.on_command(1, &command(args)) {
            Outcome::Deny(e) => assert!(e.starts_with("ERR converter: "), "{e}"),
            other => panic!("{args:?}: {other:?}"),
        }
        assert!(
            matches!(h.on_command(3, &command(args)), Outcome::Pass),
            "{args:?} refused to an unconfined client"
        );
    }
    assert_eq!(
        h.on_command(1, &command(&["SCRIPT", "LOAD", "return 1"])),
        Outcome::Pass
    );
}

/// A tiny string/hash store standing in for Redis.
fn store() -> impl FnMut(&[Vec<u8>]) -> Vec<u8> {
    let mut kv: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    move |c: &[Vec<u8>]| {
        let bulk = |v: Option<&Vec<u8>>| match v {
            Some(v) => [format!("${}\r\n", v.len()).as_bytes(), v, b"\r\n"].concat(),
            None => b"$-1\r\n".to_vec(),
        };
        match c[0].as_slice() {
            b"SET" => {
                kv.insert(c[1].clone(), c[2].clone());
                b"+OK\r\n".to_vec()
            }
            b"GET" => bulk(kv.get(&c[1])),
            b"MGET" => {
                let mut r = format!("*{}\r\n", c.len() - 1).into_bytes();
                for k in &c[1..] {
                    r.extend(bulk(kv.get(k)));
                }
                r
            }
            _ => b"-ERR unexpected\r\n".to_vec(),
        }
    }
}

#[test]
fn large_values_are_stored_compressed_and_read_back_plain() {
    let mut h = harness(r#"{"compression":{"prefixes":["c:"],"min_bytes":100}}"#);
    let big = "abc".repeat(200);
    // Compression alone hooks only value commands, and only under its prefixes.
    assert_eq!(h.on_command(3, &command(&["GET", "x"])), Outcome::NotHooked);
    assert_eq!(
        h.on_command(3, &command(&["SET", "c:small", "v"])),
        Outcome::Pass
    );
    let rw = h.on_command(3, &command(&["SET", "c:k", &big])).rewrite();
    assert!(codec::is_compressed(&rw.commands[0][2]));
    assert!(rw.commands[0][2].len() < 100);
    let mut be = store();
    assert_eq!(
        h.run(3, &command(&["SET", "c:k", &big]), &mut be),
        b"+OK\r\n"
    );
    assert_eq!(
        h.run(3, &command(&["SET", "c:s", "short"]), &mut be),
        b"+OK\r\n"
    );
    let want = format!("${}\r\n{big}\r\n", big.len()).into_bytes();
    assert_eq!(h.run(3, &command(&["GET", "c:k"]), &mut be), want);
    assert_eq!(
        h.run(3, &command(&["MGET", "c:s", "c:k", "c:none"]), &mut be),
        [
            b"*3\r\n$5\r\nshort\r\n".as_slice(),
            &want,
            b"$-1\r\n".as_slice()
        ]
        .concat()
    );
    assert_eq!(h.run(3, &command(&["STRLEN", "c:k"]), &mut be), b":600\r\n");
    match h.on_command(3, &command(&["APPEND", "c:k", "x"])) {
        Outcome::Deny(e) => assert!(e.starts_with("ERR converter: APPEND "), "{e}"),
        other => panic!("{other:?}"),
    }
    // A stored value whose header claims 4 GiB fails before anything is allocated.
    let mut hostile = codec::MAGIC.to_vec();
    hostile.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut be = |_: &[Vec<u8>]| [b"$8\r\n".as_slice(), &hostile, b"\r\n"].concat();
    let got = h.run(3, &command_bytes(&[b"GET", b"c:k"]), &mut be);
    assert!(
        got.starts_with(b"-ERR converter: compressed value claims 4294967295 bytes"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(testing::counter("reply_errors_total", &[]), Some(1));
}
