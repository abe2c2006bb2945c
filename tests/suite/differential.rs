//! The session command paths compared frame for frame with one direct redis-server, in RESP2
//! and in RESP3: `CLIENT REPLY`, pub/sub (confirmations, messages, the counts `PUBLISH` and
//! `PUBSUB` answer), keyspace notifications, client-side caching's invalidations, blocking
//! commands that time out or are served, and transactions (`WATCH`, `DISCARD`, a command
//! refused while queued), Lua scripts' and functions' replies, `RESET`, and numbered databases
//! (`SELECT`, `MOVE`, `COPY … DB`, `SWAPDB`, `FLUSHDB`, and every other path in a database
//! other than 0). Each script runs on several connections of one client; every frame each
//! connection reads is compared, and afterwards no connection may have more to read.
//! The data path's own differential test is `pipeline::mixed_pipeline_…`.

use std::io::ErrorKind;
use std::time::Duration;

use crate::support::{Cluster, Frame, RawClient, RedisServer, encode, tag_on};

/// One step of a script: a command written on a connection (its reply read by a later
/// `Read`), or `n` frames read from a connection.
enum Step {
    Send(usize, &'static [&'static str]),
    Read(usize, usize),
}
use Step::{Read, Send};

/// A script and how many connections it uses; `resp3_only` for what RESP2 cannot do alike
/// on both sides (tracking without `REDIRECT`).
struct Script {
    name: &'static str,
    conns: usize,
    resp3_only: bool,
    steps: &'static [Step],
}

/// `CLIENT REPLY SKIP`, `OFF` and `ON` leave out exactly the replies Redis leaves out.
const CLIENT_REPLY: Script = Script {
    name: "client reply",
    conns: 1,
    resp3_only: false,
    steps: &[
        Send(0, &["SET", "%k", "1"]),
        Send(0, &["CLIENT", "REPLY", "SKIP"]),
        Send(0, &["SET", "%k", "2"]),
        Send(0, &["GET", "%k"]),
        Send(0, &["CLIENT", "REPLY", "OFF"]),
        Send(0, &["INCR", "%n"]),
        Send(0, &["GET", "%k"]),
        Send(0, &["CLIENT", "REPLY", "ON"]),
        Send(0, &["GET", "%k"]),
        Send(0, &["GET", "%n"]),
        Read(0, 5),
    ],
};

/// Subscriptions, messages and the counts: `PUBLISH` counts clients, `NUMSUB`/`NUMPAT` too.
const PUBSUB: Script = Script {
    name: "pub/sub",
    conns: 3,
    resp3_only: false,
    steps: &[
        Send(1, &["SUBSCRIBE", "%ch1", "%ch2"]),
        Read(1, 2),
        Send(2, &["PSUBSCRIBE", "%ch*"]),
        Read(2, 1),
        Send(0, &["PUBLISH", "%ch1", "hello"]),
        Read(0, 1),
        Read(1, 1),
        Read(2, 1),
        Send(0, &["PUBSUB", "NUMSUB", "%ch1", "%ch2", "%ch3"]),
        Read(0, 1),
        Send(0, &["PUBSUB", "CHANNELS", "%ch1"]),
        Read(0, 1),
        Send(1, &["UNSUBSCRIBE", "%ch1"]),
        Read(1, 1),
        Send(0, &["PUBLISH", "%ch1", "again"]),
        Read(0, 1),
        Read(2, 1),
        Send(0, &["PUBLISH", "%none", "lost"]),
        Read(0, 1),
        Send(1, &["PING"]),
        Read(1, 1),
        Send(1, &["PING", "there"]),
        Read(1, 1),
        Send(1, &["GET", "%k"]),
        Read(1, 1),
        Send(1, &["UNSUBSCRIBE"]),
        Read(1, 1),
        Send(2, &["PUNSUBSCRIBE"]),
        Read(2, 1),
        Send(1, &["GET", "%k"]),
        Read(1, 1),
    ],
};

/// Keyspace and keyevent notifications of the keys written, from whichever server has them.
const KEYSPACE: Script = Script {
    name: "keyspace notifications",
    conns: 2,
    resp3_only: false,
    steps: &[
        Send(1, &["PSUBSCRIBE", "__keyspace@0__:%kn*"]),
        Read(1, 1),
        Send(1, &["SUBSCRIBE", "__keyevent@0__:del"]),
        Read(1, 1),
        Send(0, &["SET", "%kn1", "v"]),
        Send(0, &["EXPIRE", "%kn1", "100"]),
        Send(0, &["LPUSH", "%kn2", "a", "b"]),
        Send(0, &["DEL", "%kn1", "%kn2"]),
        Read(0, 4),
        // set, expire, lpush, then del twice on each channel.
        Read(1, 7),
    ],
};

/// RESP3 tracking: a read key's invalidation, and a broadcast prefix's.
const TRACKING: Script = Script {
    name: "client tracking",
    conns: 2,
    resp3_only: true,
    steps: &[
        Send(0, &["CLIENT", "TRACKING", "ON"]),
        Read(0, 1),
        Send(0, &["GET", "%tk"]),
        Read(0, 1),
        Send(1, &["SET", "%tk", "v"]),
        Read(1, 1),
        Read(0, 1),
        Send(0, &["GET", "%tk"]),
        Read(0, 1),
        Send(0, &["CLIENT", "TRACKING", "OFF"]),
        Read(0, 1),
        Send(1, &["SET", "%tk", "w"]),
        Read(1, 1),
        Send(0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "%bc:"]),
        Read(0, 1),
        Send(1, &["SET", "%bc:x", "1"]),
        Read(1, 1),
        Read(0, 1),
    ],
};

/// RESP3 BCAST tracking as Redis words it: a second `CLIENT TRACKING ON` adds its prefixes,
/// overlapping ones are refused (with one it has, among its own), `TRACKINGINFO` lists them
/// sorted, and one write's keys come as one message per prefix, prefixes in sorted order.
const TRACKING_BCAST: Script = Script {
    name: "client tracking, broadcast prefixes",
    conns: 2,
    resp3_only: true,
    steps: &[
        Send(
            0,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "%b:", "PREFIX", "%a:",
            ],
        ),
        Send(0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "%a:x"]),
        Send(0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "%"]),
        Send(
            0,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "%c:", "PREFIX", "%c",
            ],
        ),
        Send(0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "%c:"]),
        Send(0, &["CLIENT", "TRACKINGINFO"]),
        Read(0, 6),
        Send(
            1,
            &[
                "MSET",
                "%c:1{§0}",
                "1",
                "%b:1{§0}",
                "1",
                "%a:2{§0}",
                "1",
                "%a:1{§0}",
                "1",
            ],
        ),
        Read(1, 1),
        Read(0, 3),
        Send(0, &["CLIENT", "TRACKING", "OFF"]),
        Read(0, 1),
        Send(0, &["CLIENT", "TRACKING", "ON", "BCAST"]),
        Send(0, &["CLIENT", "TRACKINGINFO"]),
        Read(0, 2),
    ],
};

/// Blocking commands: timeouts (their null replies differ between RESP2 and RESP3) and one
/// served by another connection's push.
const BLOCKING: Script = Script {
    name: "blocking",
    conns: 2,
    resp3_only: false,
    steps: &[
        Send(0, &["BLPOP", "%none", "0.1"]),
        Read(0, 1),
        Send(
            0,
            &["BLMOVE", "{%b}none", "{%b}dst", "LEFT", "RIGHT", "0.1"],
        ),
        Read(0, 1),
        Send(0, &["BZPOPMIN", "%none", "0.1"]),
        Read(0, 1),
        Send(0, &["XREAD", "BLOCK", "100", "STREAMS", "%nos", "$"]),
        Read(0, 1),
        Send(0, &["BLPOP", "%bl", "5"]),
        Send(1, &["RPUSH", "%bl", "a"]),
        Read(1, 1),
        Read(0, 1),
    ],
};

/// Transactions: queued and run, discarded, aborted by a `WATCH`ed key, and refused whole
/// after a command refused while queued.
const TRANSACTIONS: Script = Script {
    name: "transactions",
    conns: 2,
    resp3_only: false,
    steps: &[
        Send(0, &["MULTI"]),
        Send(0, &["SET", "{%t}a", "1"]),
        Send(0, &["INCR", "{%t}a"]),
        Send(0, &["GET", "{%t}a"]),
        Send(0, &["HSET", "{%t}h", "f", "v"]),
        Send(0, &["HGETALL", "{%t}h"]),
        Send(0, &["EXEC"]),
        Read(0, 7),
        Send(0, &["MULTI"]),
        Send(0, &["INCR", "{%t}a"]),
        Send(0, &["DISCARD"]),
        Send(0, &["GET", "{%t}a"]),
        Read(0, 4),
        Send(0, &["WATCH", "{%t}a"]),
        Read(0, 1),
        Send(1, &["SET", "{%t}a", "5"]),
        Read(1, 1),
        Send(0, &["MULTI"]),
        Send(0, &["GET", "{%t}a"]),
        Send(0, &["EXEC"]),
        Read(0, 3),
        Send(0, &["MULTI"]),
        Send(0, &["SET", "{%t}a"]),
        Send(0, &["INCR", "{%t}a"]),
        Send(0, &["EXEC"]),
        Send(0, &["GET", "{%t}a"]),
        Read(0, 5),
        Send(0, &["EXEC"]),
        Send(0, &["DISCARD"]),
        Read(0, 2),
    ],
};

/// Lua scripts and functions: every Lua type converted to RESP2 and to RESP3 (booleans, doubles
/// and maps differ between them), errors raised and returned, `EVALSHA` of a loaded script.
const LUA: Script = Script {
    name: "scripts and functions",
    conns: 1,
    resp3_only: false,
    steps: &[
        Send(
            0,
            &[
                "EVAL",
                "return redis.call('SET', KEYS[1], ARGV[1])",
                "1",
                "%s",
                "v",
            ],
        ),
        Send(0, &["EVAL", "return {1, 'two', {3}, false, true}", "0"]),
        Send(
            0,
            &[
                "EVAL",
                "redis.setresp(3); return redis.call('HGETALL', KEYS[1])",
                "1",
                "%h",
            ],
        ),
        Send(0, &["EVAL", "return {double=3.5}", "0"]),
        Send(0, &["EVAL", "return redis.error_reply('MY failure')", "0"]),
        Send(0, &["EVAL", "return redis.status_reply('FINE')", "0"]),
        Send(0, &["EVAL", "return redis.call('NOSUCH')", "0"]),
        Send(0, &["EVAL", "return nil", "0"]),
        Read(0, 8),
        Send(0, &["SCRIPT", "LOAD", "return KEYS[1] .. ARGV[1]"]),
        Read(0, 1),
        Send(
            0,
            &[
                "EVALSHA",
                "dc8235f4444d746adf3374579406c129fb1f0f0a",
                "1",
                "%k",
                "x",
            ],
        ),
        Send(
            0,
            &[
                "SCRIPT",
                "EXISTS",
                "0000000000000000000000000000000000000000",
            ],
        ),
        Read(0, 2),
        Send(
            0,
            &[
                "FUNCTION",
                "LOAD",
                "REPLACE",
                "#!lua name=difflib\nredis.register_function('diffget', function(keys) return redis.call('GET', keys[1]) end)",
            ],
        ),
        Send(0, &["FCALL", "diffget", "1", "%s"]),
        Send(0, &["FCALL_RO", "diffget", "1", "%s"]),
        Read(0, 3),
    ],
};

/// `RESET` ends what a connection set up: tracking, a transaction, `CLIENT REPLY`.
const RESET: Script = Script {
    name: "reset",
    conns: 1,
    resp3_only: false,
    steps: &[
        Send(0, &["MULTI"]),
        Send(0, &["SET", "%r", "1"]),
        Send(0, &["RESET"]),
        Send(0, &["GET", "%r"]),
        Send(0, &["EXEC"]),
        Read(0, 5),
        // RESET ends OFF before it answers; a SKIP takes its reply.
        Send(0, &["CLIENT", "REPLY", "OFF"]),
        Send(0, &["RESET"]),
        Send(0, &["GET", "%r"]),
        Read(0, 2),
        Send(0, &["CLIENT", "REPLY", "SKIP"]),
        Send(0, &["RESET"]),
        Send(0, &["GET", "%r"]),
        Read(0, 1),
    ],
};

const SCRIPTS: [Script; 9] = [
    CLIENT_REPLY,
    PUBSUB,
    KEYSPACE,
    TRACKING,
    TRACKING_BCAST,
    BLOCKING,
    TRANSACTIONS,
    LUA,
    RESET,
];

/// Numbered databases: what each database holds, the database arguments (checked as Redis
/// checks them), and transactions, blocking commands, scripts and `RESET` in a database other
/// than 0. Run with `admin_commands` (`FLUSHDB`, `SWAPDB`, `KEYS`).
const DATABASES: Script = Script {
    name: "numbered databases",
    conns: 2,
    resp3_only: false,
    steps: &[
        Send(0, &["SET", "{%t}k", "zero"]),
        Send(0, &["SELECT", "3"]),
        Send(0, &["GET", "{%t}k"]),
        Send(0, &["SET", "{%t}k", "three"]),
        Send(0, &["SET", "{%t}other", "x"]),
        Send(0, &["KEYS", "{%t}o*"]),
        Send(0, &["EXISTS", "{%t}k", "{%t}other"]),
        Read(0, 7),
        Send(0, &["SELECT", "16"]),
        Send(0, &["SELECT", "-1"]),
        Send(0, &["SELECT", "x"]),
        Send(0, &["SELECT", "15"]),
        Send(0, &["GET", "{%t}k"]),
        Send(0, &["SELECT", "0"]),
        Send(0, &["GET", "{%t}k"]),
        Read(0, 7),
        // MOVE to another database, and the arguments Redis refuses.
        Send(0, &["MOVE", "{%t}k", "5"]),
        Send(0, &["MOVE", "{%t}k", "5"]),
        Send(0, &["MOVE", "{%t}other", "0"]),
        Send(0, &["MOVE", "{%t}k", "16"]),
        Send(0, &["MOVE", "{%t}k", "x"]),
        Send(0, &["SELECT", "5"]),
        Send(0, &["GET", "{%t}k"]),
        Read(0, 7),
        // COPY into another database, then SWAPDB: 5 becomes 6.
        Send(0, &["COPY", "{%t}k", "{%t}k", "DB", "7"]),
        Send(0, &["COPY", "{%t}k", "{%t}k2", "DB", "16"]),
        Send(0, &["COPY", "{%t}k", "{%t}k", "DB", "7"]),
        Send(0, &["SWAPDB", "5", "6"]),
        Send(0, &["SWAPDB", "5", "99"]),
        Send(0, &["GET", "{%t}k"]),
        Send(0, &["SELECT", "6"]),
        Send(0, &["GET", "{%t}k"]),
        Send(0, &["SELECT", "7"]),
        Send(0, &["GET", "{%t}k"]),
        Read(0, 10),
        // A transaction runs in its database.
        Send(0, &["MULTI"]),
        Send(0, &["INCR", "{%t}n"]),
        Send(0, &["INCR", "{%t}n"]),
        Send(0, &["EXEC"]),
        Send(0, &["WATCH", "{%t}n"]),
        Send(0, &["MULTI"]),
        Send(0, &["GET", "{%t}n"]),
        Send(0, &["EXEC"]),
        Read(0, 8),
        // A script reads its database's keys.
        Send(
            0,
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "{%t}n"],
        ),
        Read(0, 1),
        // A blocked pop is woken by a push in its database, not by one in another.
        Send(1, &["SELECT", "7"]),
        Read(1, 1),
        Send(1, &["BLPOP", "{%t}list", "2"]),
        Send(0, &["SELECT", "8"]),
        Send(0, &["RPUSH", "{%t}list", "elsewhere"]),
        Send(0, &["SELECT", "7"]),
        Send(0, &["RPUSH", "{%t}list", "here"]),
        Read(0, 4),
        Read(1, 1),
        // FLUSHDB empties its database only; RESET goes back to database 0.
        Send(0, &["FLUSHDB"]),
        Send(0, &["EXISTS", "{%t}k"]),
        Send(0, &["SELECT", "8"]),
        Send(0, &["LLEN", "{%t}list"]),
        Send(0, &["RESET"]),
        Send(0, &["GET", "{%t}k"]),
        Read(0, 6),
    ],
};

/// Keyspace notifications of a numbered database, of keys on either backend: a key event's
/// channel and a key's pattern in database 3, none from database 0's writes; a client's
/// PUBLISH and NUMSUB of a keyspace channel of database 3.
const KEYSPACE_DATABASES: Script = Script {
    name: "keyspace notifications of numbered databases",
    conns: 2,
    resp3_only: false,
    steps: &[
        Send(1, &["SUBSCRIBE", "__keyevent@3__:del"]),
        Read(1, 1),
        Send(1, &["PSUBSCRIBE", "__keyspace@3__:%ks*"]),
        Read(1, 1),
        // One at a time: the keys are on both backends, whose notifications reach the
        // proxy on two connections.
        Send(0, &["SET", "%ks{§0}1", "zero"]),
        Read(0, 1),
        Send(0, &["SELECT", "3"]),
        Read(0, 1),
        Send(0, &["SET", "%ks{§0}1", "v"]),
        Read(0, 1),
        Read(1, 1),
        Send(0, &["SET", "%ks{§1}2", "v"]),
        Read(0, 1),
        Read(1, 1),
        Send(0, &["SET", "%ks{§0}3", "v"]),
        Read(0, 1),
        Read(1, 1),
        // Each del on both channels.
        Send(0, &["DEL", "%ks{§0}1"]),
        Read(0, 1),
        Read(1, 2),
        Send(0, &["DEL", "%ks{§1}2"]),
        Read(0, 1),
        Read(1, 2),
        Send(0, &["DEL", "%ks{§0}3"]),
        Read(0, 1),
        Read(1, 2),
        // A client's own message on a keyspace channel reaches its subscribers, and both
        // PUBLISH and NUMSUB count them, under the client database's name.
        Send(0, &["PUBLISH", "__keyevent@3__:del", "from a client"]),
        Read(0, 1),
        Read(1, 1),
        Send(
            0,
            &[
                "PUBSUB",
                "NUMSUB",
                "__keyevent@3__:del",
                "__keyevent@4__:del",
            ],
        ),
        Read(0, 1),
    ],
};

#[test]
fn numbered_databases_answer_as_direct_redis_does_in_resp2_and_resp3() {
    let direct = RedisServer::start();
    // Client database n ≥ 1 is the backends' n + 1: they need 17 for Redis's 16.
    let cluster = Cluster::start_on(&["--databases", "17"], |b| {
        b.config("admin_commands = true\n")
    });
    for server in [&direct, &cluster.backends[0], &cluster.backends[1]] {
        let on = server
            .raw()
            .cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        assert_eq!(on, Frame::Simple("OK".into()));
    }
    let mut compared = 0;
    for script in [&DATABASES, &KEYSPACE_DATABASES] {
        for proto in [2u8, 3] {
            let want = run(direct.addr(), proto, script);
            let got = run(cluster.proxy.addr(), proto, script);
            for (w, g) in want.iter().zip(&got) {
                assert_eq!(
                    g, w,
                    "{} in RESP{proto}, step {}: the proxy answered {:?} where Redis answered {:?}",
                    script.name, w.0, g.1, w.1
                );
            }
            assert_eq!(got.len(), want.len(), "{} in RESP{proto}", script.name);
            compared += want.len();
        }
    }
    assert!(compared > 130, "{compared} frames compared");
}

/// Runs `script` against `addr` in RESP `proto`, its keys and channels (`%`) prefixed so that
/// runs do not meet; every frame read, with the step that read it.
fn run(addr: std::net::SocketAddr, proto: u8, script: &Script) -> Vec<(usize, Frame)> {
    let prefix = format!("d{proto}:");
    let tags = [tag_on(0), tag_on(1)];
    let mut conns: Vec<RawClient> = (0..script.conns)
        .map(|_| {
            let mut c = RawClient::connect(addr);
            if proto == 3 {
                let hello = c.cmd(&["HELLO", "3"]);
                assert!(matches!(hello, Frame::Map(_)), "HELLO 3: {hello:?}");
            }
            c
        })
        .collect();
    let mut read = Vec::new();
    for (i, step) in script.steps.iter().enumerate() {
        match step {
            Send(c, args) => {
                // `§0`, `§1`: a hash tag of a key on backend 0 or 1 (of two).
                let args: Vec<String> = args
                    .iter()
                    .map(|a| {
                        a.replace('%', &prefix)
                            .replace("§0", &tags[0])
                            .replace("§1", &tags[1])
                    })
                    .collect();
                conns[*c].send(&encode(&args));
            }
            Read(c, n) => {
                for k in 0..*n {
                    let frame = conns[*c].try_read_frame().unwrap_or_else(|e| {
                        panic!(
                            "{} in RESP{proto} at {addr}, step {i}: frame {} of {n}: {e}; read so far: {read:?}",
                            script.name,
                            k + 1
                        )
                    });
                    read.push((i, frame));
                }
            }
        }
    }
    for (k, c) in conns.iter_mut().enumerate() {
        c.set_read_timeout(Duration::from_millis(300));
        match c.try_read_frame() {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            more => panic!(
                "{} in RESP{proto} at {addr}: connection {k} has more to read: {more:?}; read: {read:?}",
                script.name
            ),
        }
    }
    read
}

#[test]
fn session_command_paths_answer_as_direct_redis_does_in_resp2_and_resp3() {
    let direct = RedisServer::start();
    let cluster = Cluster::start();
    for server in [&direct, &cluster.backends[0], &cluster.backends[1]] {
        let on = server
            .raw()
            .cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        assert_eq!(on, Frame::Simple("OK".into()));
    }
    let mut compared = 0;
    for script in &SCRIPTS {
        for proto in [2u8, 3] {
            if proto == 2 && script.resp3_only {
                continue;
            }
            let want = run(direct.addr(), proto, script);
            let got = run(cluster.proxy.addr(), proto, script);
            for (w, g) in want.iter().zip(&got) {
                assert_eq!(
                    g, w,
                    "{} in RESP{proto}, step {}: the proxy answered {:?} where Redis answered {:?}",
                    script.name, w.0, g.1, w.1
                );
            }
            assert_eq!(got.len(), want.len(), "{} in RESP{proto}", script.name);
            compared += want.len();
        }
    }
    // Every script read something on each side: nothing above compared empty transcripts.
    assert!(compared > 100, "{compared} frames compared");
}
