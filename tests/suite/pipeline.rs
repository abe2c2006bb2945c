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

/// `n` commands over 4 key families (strings, counters, lists, hashes) of 50 keys each.
fn mixed_commands(n: usize) -> Vec<Vec<String>> {
    let mut rng = Lcg(0x7e55e7a);
    (0..n)
        .map(|i| {
            let k = rng.below(50);
            let cmd: Vec<String> = match rng.below(8) {
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
                    let family = ["str", "ctr", "list", "hash"][rng.below(4) as usize];
                    vec!["DEL".into(), format!("{family}:{k}")]
                }
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
    assert_matches_direct_redis(&Cluster::start_with(|b| b.threads(2)));
}

/// Issue 25, a sibling of item 2 (a client reads its own writes): with `backend_connections`
/// above 1 a worker spread a client's requests to one backend over its connections, one
/// request each, so a pipelined `SET k v; GET k` could run in either order (1 980 of 2 000
/// such GETs read the value before their SET). A client's requests to a backend now keep to
/// one connection of the set.
#[test]
fn issue_25_a_pipeline_keeps_its_order_over_several_backend_connections() {
    assert_matches_direct_redis(&Cluster::start_with(|b| {
        b.threads(2).config("backend_connections = 4\n")
    }));
}

/// The mixed pipeline through `cluster`'s proxy gives, reply for reply, what a direct
/// redis-server gives, and leaves each key on its owner only.
fn assert_matches_direct_redis(cluster: &Cluster) {
    let direct = RedisServer::start();
    let commands = mixed_commands(1000);

    let through_proxy = run_pipeline(cluster.proxy.addr(), &commands);
    let from_direct = run_pipeline(direct.addr(), &commands);

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
