//! A 1000-command mixed pipeline written in one go through the proxy returns, reply for reply,
//! what the same pipeline returns from one direct redis-server (a differential test), with one
//! backend connection per worker and with several.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};

use crate::support::{Cluster, Frame, REPLY_TIMEOUT, RedisServer, encode};

/// A small deterministic generator (64-bit LCG, Knuth's constants) so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// `n` commands over 5 key families (strings, counters, lists, hashes, sorted sets) of 50 keys
/// each.
fn mixed_commands(n: usize) -> Vec<Vec<String>> {
    let mut rng = Lcg(0x7e55e7a);
    (0..n)
        .map(|i| {
            let k = rng.below(50);
            let cmd: Vec<String> = match rng.below(10) {
                0 => vec!["SET".into(), format!("str:{k}"), format!("v{i}")],
                1 => vec!["GET".into(), format!("str:{k}")],
                2 => vec!["INCR".into(), format!("ctr:{k}")],
                3 => vec!["RPUSH".into(), format!("list:{k}"), format!("e{i}")],
                4 => vec![
                    "LRANGE".into(),
                    format!("list:{k}"),
                    "0".into(),
                    "-1".into(),
                ],
                5 => vec![
                    "HSET".into(),
                    format!("hash:{k}"),
                    format!("f{}", rng.below(4)),
                    format!("v{i}"),
                ],
                6 => {
                    let family = ["str", "ctr", "list", "hash", "zset"][rng.below(5) as usize];
                    vec!["DEL".into(), format!("{family}:{k}")]
                }
                // A map in RESP3, a flat array in RESP2.
                7 => vec!["HGETALL".into(), format!("hash:{k}")],
                // A double in RESP3, a bulk string in RESP2.
                8 => vec![
                    "ZINCRBY".into(),
                    format!("zset:{k}"),
                    "1.5".into(),
                    format!("m{}", rng.below(3)),
                ],
                _ => vec!["GET".into(), format!("ctr:{k}")],
            };
            cmd
        })
        .collect()
}

/// Writes all `commands` from one thread while reading the replies on another, so neither side
/// can stall on a full socket buffer.
fn run_pipeline(addr: SocketAddr, commands: &[Vec<String>]) -> Vec<Frame> {
    let mut writer = TcpStream::connect(addr).expect("connecting");
    writer
        .set_read_timeout(Some(REPLY_TIMEOUT))
        .expect("set_read_timeout");
    let reader = writer.try_clone().expect("cloning stream");
    let bytes: Vec<u8> = commands.iter().flat_map(|c| encode(c)).collect();
    std::thread::scope(|s| {
        s.spawn(move || writer.write_all(&bytes).expect("writing the pipeline"));
        let mut reader = std::io::BufReader::new(reader);
        (0..commands.len())
            .map(|i| {
                crate::support::read_frame(&mut reader)
                    .unwrap_or_else(|e| panic!("reading reply {i} of {}: {e}", commands.len()))
            })
            .collect()
    })
}

#[test]
fn mixed_pipeline_of_1000_commands_matches_direct_redis() {
    assert_matches_direct_redis(&Cluster::start_with(|b| b.threads(2)), 2);
}

/// The same pipeline after `HELLO 3`: maps, doubles and nulls as Redis sends them in RESP3.
#[test]
fn mixed_pipeline_of_1000_commands_matches_direct_redis_in_resp3() {
    assert_matches_direct_redis(&Cluster::start_with(|b| b.threads(2)), 3);
}

/// Issue 25, a sibling of item 2 (a client reads its own writes): with `backend_connections`
/// above 1 a worker spread a client's requests to one backend over its connections, one
/// request each, so a pipelined `SET k v; GET k` could run in either order (1 980 of 2 000
/// such GETs read the value before their SET). A client's requests to a backend now keep to
/// one connection of the set.
#[test]
fn issue_25_a_pipeline_keeps_its_order_over_several_backend_connections() {
    assert_matches_direct_redis(
        &Cluster::start_with(|b| b.threads(2).config("backend_connections = 4\n")),
        2,
    );
}

/// The mixed pipeline through `cluster`'s proxy gives, reply for reply, what a direct
/// redis-server gives in RESP `proto`, and leaves each key on its owner only.
fn assert_matches_direct_redis(cluster: &Cluster, proto: u8) {
    let direct = RedisServer::start();
    let mut commands = mixed_commands(1000);
    if proto == 3 {
        commands.insert(0, vec!["HELLO".into(), "3".into()]);
    }

    let mut through_proxy = run_pipeline(cluster.proxy.addr(), &commands);
    let mut from_direct = run_pipeline(direct.addr(), &commands);
    if proto == 3 {
        // HELLO's own reply names the server: not compared.
        for hello in [through_proxy.remove(0), from_direct.remove(0)] {
            assert!(matches!(hello, Frame::Map(_)), "HELLO 3: {hello:?}");
        }
        commands.remove(0);
        assert!(
            from_direct.iter().any(|f| matches!(f, Frame::Double(_)))
                && from_direct.iter().any(|f| matches!(f, Frame::Map(_))),
            "the pipeline has RESP3's own types to compare"
        );
    }

    for (i, (got, want)) in through_proxy.iter().zip(&from_direct).enumerate() {
        assert_eq!(got, want, "reply {i} differs, for {:?}", commands[i]);
    }
    let [a, b] = &cluster.backends;
    assert!(
        a.dbsize() > 0 && b.dbsize() > 0,
        "the keys must be spread over both backends"
    );
    assert_eq!(a.dbsize() + b.dbsize(), direct.dbsize());
    for key in direct.keys() {
        assert!(
            cluster.owner_of(&key).has(&key),
            "{key} missing from its owner"
        );
        assert!(
            !cluster.non_owner_of(&key).has(&key),
            "{key} on the wrong backend"
        );
    }
}
