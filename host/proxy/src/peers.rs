//! The proxy fleet as a Redis Cluster client sees it: `CLUSTER SLOTS`, `SHARDS`, `NODES`,
//! `MYID` and `INFO` answered by every proxy alike, so that go-redis' `ClusterClient`, Jedis,
//! lettuce, redis-py's `RedisCluster` or ioredis' `Cluster` find the proxies from one address
//! and spread their load over them. Redis Cluster's 16384 slots (CRC16, not Tessera's own)
//! are split evenly over the proxies in address order; any proxy serves any key (it routes
//! by Tessera's slots behind), so no client is ever sent `MOVED`. Each proxy is a master with
//! no replica: replicas are Tessera's business behind the proxies (docs/cluster-clients.md).
//!
//! Cluster mode learns its peers from the proxies registered in the store
//! (`server::cluster`); static mode presents itself alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use bytes::Bytes;

use tessera_model::secret::sha256_hex;
use tessera_resp::Frame;

/// Redis Cluster's slot count.
pub const CLUSTER_SLOTS: u32 = 16384;
/// Peers presented at most (the store's list is input like any other).
pub const MAX_PEERS: usize = 1024;

/// One proxy as cluster clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// 40 hex characters, as Redis Cluster node ids are: a hash of the proxy's token, stable
    /// for the life of the process and the same on every peer.
    pub id: String,
    pub host: String,
    pub port: u16,
}

impl Peer {
    /// The peer at `addr` (`host:port`) known by `token`; `None` for an address that is not
    /// one.
    pub fn new(token: &str, addr: &str) -> Option<Peer> {
        let (host, port) = addr.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.len() > 255 {
            return None;
        }
        Some(Peer {
            id: sha256_hex(token)[..40].to_owned(),
            host: host.to_owned(),
            port: port.parse().ok()?,
        })
    }
}

/// The peers this proxy presents, itself among them.
pub struct Peers {
    me: ArcSwap<Peer>,
    all: ArcSwap<Vec<Peer>>,
    /// Draining: this proxy leaves the map it presents, where others remain to take its share.
    leaving: AtomicBool,
}

impl Peers {
    /// This proxy alone, until [`Peers::set`] gives the others.
    pub fn new(me: Peer) -> Self {
        Self {
            all: ArcSwap::from_pointee(vec![me.clone()]),
            me: ArcSwap::from_pointee(me),
            leaving: AtomicBool::new(false),
        }
    }

    /// This proxy, once its registration names it (cluster mode): alone again until the
    /// next [`Peers::set`].
    pub fn set_me(&self, me: Peer) {
        self.all.store(Arc::new(vec![me.clone()]));
        self.me.store(Arc::new(me));
    }

    /// The fleet: `others` as the store lists them (this proxy among them or not), sorted by
    /// address, one per address (this proxy first when another shares its address, as
    /// during an upgrade in place), at most [`MAX_PEERS`] with this proxy always among them,
    /// unless it is leaving and others remain.
    pub fn set(&self, others: impl IntoIterator<Item = Peer>) {
        let me = self.me.load_full();
        let key = |p: &Peer| (p.host.clone(), p.port, p.id != me.id, p.id.clone());
        let mut all: Vec<Peer> = others
            .into_iter()
            .filter(|p| p.id != me.id)
            .take(MAX_PEERS * 4)
            .collect();
        all.sort_by_key(key);
        all.dedup_by(|a, b| a.host == b.host && a.port == b.port);
        all.truncate(MAX_PEERS - 1);
        if all.is_empty() || !self.leaving.load(Ordering::Acquire) {
            all.push((*me).clone());
        }
        all.sort_by_key(key);
        all.dedup_by(|a, b| a.host == b.host && a.port == b.port);
        self.all.store(Arc::new(all));
    }

    /// This proxy drains: from now on it presents the others alone (itself only if no other
    /// is known), so that a cluster client refreshing its map here moves away, as it does
    /// from a node removed from a Redis Cluster. Its peers leave it out once they read its
    /// draining mark from the store.
    pub fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
        let now = self.all.load_full();
        self.set(now.iter().cloned());
    }

    /// This proxy's node id (`CLUSTER MYID`).
    pub fn my_id(&self) -> String {
        self.me.load().id.clone()
    }

    /// Each peer with its range of Redis Cluster slots (every slot is some peer's).
    pub fn ranges(&self) -> Vec<(u32, u32, Peer)> {
        let all = self.all.load();
        let n = all.len().max(1) as u32;
        all.iter()
            .enumerate()
            .map(|(i, p)| {
                let i = i as u32;
                (
                    i * CLUSTER_SLOTS / n,
                    (i + 1) * CLUSTER_SLOTS / n - 1,
                    p.clone(),
                )
            })
            .collect()
    }

    /// `CLUSTER SLOTS`, as Redis 7.0 answers it.
    pub fn slots(&self) -> Frame {
        Frame::Array(
            self.ranges()
                .into_iter()
                .map(|(start, end, p)| {
                    Frame::Array(vec![
                        Frame::Integer(start.into()),
                        Frame::Integer(end.into()),
                        Frame::Array(vec![
                            bulk(&p.host),
                            Frame::Integer(p.port.into()),
                            bulk(&p.id),
                            Frame::Map(Vec::new()),
                        ]),
                    ])
                })
                .collect(),
        )
    }

    /// `CLUSTER SHARDS`: one shard per peer, its one node a master.
    pub fn shards(&self) -> Frame {
        let pair = |k: &str, v: Frame| (bulk(k), v);
        Frame::Array(
            self.ranges()
                .into_iter()
                .map(|(start, end, p)| {
                    let node = Frame::Map(vec![
                        pair("id", bulk(&p.id)),
                        pair("port", Frame::Integer(p.port.into())),
                        pair("ip", bulk(&p.host)),
                        pair("endpoint", bulk(&p.host)),
                        pair("role", bulk("master")),
                        pair("replication-offset", Frame::Integer(0)),
                        pair("health", bulk("online")),
                    ]);
                    Frame::Map(vec![
                        pair(
                            "slots",
                            Frame::Array(vec![
                                Frame::Integer(start.into()),
                                Frame::Integer(end.into()),
                            ]),
                        ),
                        pair("nodes", Frame::Array(vec![node])),
                    ])
                })
                .collect(),
        )
    }

    /// `CLUSTER NODES`: one line per peer, `myself` marking this proxy.
    pub fn nodes(&self, epoch: u64) -> String {
        let mut out = String::new();
        for (start, end, p) in self.ranges() {
            let flags = if p.id == self.me.load().id {
                "myself,master"
            } else {
                "master"
            };
            out.push_str(&format!(
                "{} {}:{}@0 {flags} - 0 0 {epoch} connected {start}-{end}\n",
                p.id, p.host, p.port
            ));
        }
        out
    }

    /// `CLUSTER INFO`.
    pub fn info(&self, epoch: u64) -> String {
        let n = self.all.load().len();
        format!(
            "cluster_state:ok\r\ncluster_slots_assigned:{CLUSTER_SLOTS}\r\n\
             cluster_slots_ok:{CLUSTER_SLOTS}\r\ncluster_slots_pfail:0\r\n\
             cluster_slots_fail:0\r\ncluster_known_nodes:{n}\r\ncluster_size:{n}\r\n\
             cluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\n\
             cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
             total_cluster_links_buffer_limit_exceeded:0\r\n"
        )
    }
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(token: &str, addr: &str) -> Peer {
        Peer::new(token, addr).unwrap()
    }

    #[test]
    fn every_slot_is_one_peers_and_all_peers_agree() {
        let (a, b, c) = (
            peer("ta", "10.0.0.2:19000"),
            peer("tb", "10.0.0.1:19000"),
            peer("tc", "10.0.0.3:19000"),
        );
        let on_a = Peers::new(a.clone());
        on_a.set([b.clone(), c.clone(), a.clone()]);
        let on_c = Peers::new(c.clone());
        on_c.set([a.clone(), b.clone()]);
        let ranges = on_a.ranges();
        assert_eq!(ranges, on_c.ranges(), "the same map on every proxy");
        assert_eq!(ranges.len(), 3);
        assert_eq!(ranges[0].2, b, "sorted by address");
        assert_eq!((ranges[0].0, ranges[2].1), (0, CLUSTER_SLOTS - 1));
        for w in ranges.windows(2) {
            assert_eq!(w[0].1 + 1, w[1].0, "no gap, no overlap");
        }
        assert_eq!(a.id.len(), 40);
        assert!(a.id.chars().all(|c| c.is_ascii_hexdigit()));
        let nodes = on_a.nodes(7);
        assert_eq!(nodes.lines().count(), 3);
        assert!(nodes.contains(&format!("{} 10.0.0.2:19000@0 myself,master - 0 0 7", a.id)));
        assert!(on_a.info(7).contains("cluster_known_nodes:3"));
    }

    #[test]
    fn hostile_store_entries_are_left_out() {
        assert!(Peer::new("t", "no-port").is_none());
        assert!(Peer::new("t", ":6379").is_none());
        assert!(Peer::new("t", "h:99999").is_none());
        assert!(Peer::new("t", &format!("{}:1", "h".repeat(300))).is_none());
        assert_eq!(Peer::new("t", "[::1]:7000").unwrap().host, "::1");
        let me = peer("me", "10.0.0.1:1");
        let p = Peers::new(me.clone());
        p.set((0..5000).map(|i| peer(&format!("t{i}"), &format!("10.1.0.1:{}", i + 2))));
        assert_eq!(p.ranges().len(), MAX_PEERS);
        // The same address twice is one peer.
        p.set([peer("x", "10.0.0.9:1"), peer("y", "10.0.0.9:1")]);
        assert_eq!(p.ranges().len(), 2);
    }

    #[test]
    fn a_leaving_proxy_presents_the_others_and_a_successor_at_its_address() {
        let (me, other) = (peer("me", "10.0.0.1:1"), peer("o", "10.0.0.2:1"));
        let successor = peer("next", "10.0.0.1:1");
        let p = Peers::new(me.clone());
        p.set([other.clone(), me.clone()]);
        p.leave();
        let listed = |p: &Peers| p.ranges().into_iter().map(|r| r.2).collect::<Vec<_>>();
        assert_eq!(listed(&p), vec![other.clone()], "left out at once");
        p.set([other.clone(), me.clone(), successor.clone()]);
        assert_eq!(
            listed(&p),
            vec![successor, other],
            "the successor takes its place"
        );
        // Alone, it still presents itself: every slot must be some node's.
        let alone = Peers::new(me.clone());
        alone.leave();
        assert_eq!(listed(&alone), vec![me.clone()]);
        alone.set([me.clone()]);
        assert_eq!(listed(&alone), vec![me]);
    }
}
