//! The proxy-side cache of hot keys with real processes: two proxies over two redis-servers,
//! proxy A caching `h:`. A key hammered through A is served from the cache (hits in the
//! metrics); a write through B or straight to a server reaches A's next read; with a tracking
//! link broken A reads from Redis; keys outside the prefixes, replies over the size limit,
//! GETs inside MULTI and GETs refused by rights are never answered from the cache; the cache
//! stays within its byte bound under many hot keys.

use std::net::SocketAddr;
use std::time::Duration;

use redis::Commands;

use crate::migration::{conn, wait_for};
use crate::support::{Frame, Proxy, RedisServer};

const CONFIG: &str = "[hot_cache]\nprefixes = [\"h:\"]\nttl_ms = 5000\nmax_bytes = 8192\n\
     max_value_bytes = 512\n\n[[users]]\nname = \"tenant\"\npassword = \"t-pw\"\n\
     key_prefix = \"t1:\"\n";

/// One series of A's `/metrics`.
fn metric(p: &Proxy, name: &str) -> u64 {
    let m = p.metrics();
    m.lines()
        .find_map(|l| l.strip_prefix(&format!("tessera_hot_cache_{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no tessera_hot_cache_{name} in:\n{m}"))
}

/// GETs `key` through `addr` until it is in the worker's hot-key table and a read is a hit.
fn make_hot(a: &Proxy, key: &str) {
    let mut c = conn(a.addr());
    wait_for(
        &format!("{key} served from the cache"),
        Duration::from_secs(30),
        || {
            let before = metric(a, "hits_total");
            for _ in 0..200 {
                let _: Option<String> = c.get(key).unwrap();
            }
            metric(a, "hits_total") > before
        },
    );
}

fn get(addr: SocketAddr, key: &str) -> Option<String> {
    conn(addr).get(key).unwrap()
}

fn proxies(servers: &[RedisServer; 2]) -> (Proxy, Proxy) {
    let config = CONFIG.replace("t-pw", &crate::auth::hash("t-pw"));
    let a = Proxy::builder(&[&servers[0], &servers[1]])
        .threads(1)
        .admin()
        .config(&config)
        .start();
    let b = Proxy::builder(&[&servers[0], &servers[1]]).start();
    (a, b)
}

#[test]
fn hot_reads_hit_the_cache_and_writes_anywhere_reach_the_next_read() {
    let mut servers = [RedisServer::start(), RedisServer::start()];
    let (a, b) = proxies(&servers);
    let _: () = conn(b.addr()).set("h:hot", "v1").unwrap();
    make_hot(&a, "h:hot");
    assert!(metric(&a, "fills_total") > 0 && metric(&a, "entries") > 0);
    assert_eq!(get(a.addr(), "h:hot").as_deref(), Some("v1"));

    // Written through the other proxy: the invalidation reaches A's cache.
    let _: () = conn(b.addr()).set("h:hot", "v2").unwrap();
    wait_for(
        "the write through B seen by A",
        Duration::from_secs(10),
        || get(a.addr(), "h:hot").as_deref() == Some("v2"),
    );
    // Written straight to the server that owns it.
    let owner = crate::support::backend_of("h:hot", 2);
    let _: () = servers[owner].client().set("h:hot", "v3").unwrap();
    wait_for(
        "the direct write seen by A",
        Duration::from_secs(10),
        || get(a.addr(), "h:hot").as_deref() == Some("v3"),
    );
    assert!(metric(&a, "invalidations_total") >= 2);
    make_hot(&a, "h:hot");
    assert_eq!(get(a.addr(), "h:hot").as_deref(), Some("v3"));

    // The tracking link broken (the owner restarted, empty): the cache empties and reads go
    // to Redis, which has the key no more, until the link is back.
    servers[owner].restart();
    let _: () = servers[owner].client().set("h:hot", "v4").unwrap();
    wait_for(
        "the cache emptied by the broken link",
        Duration::from_secs(10),
        || metric(&a, "entries") == 0,
    );
    let misses = metric(&a, "misses_total");
    let got = get(a.addr(), "h:hot");
    assert_ne!(got.as_deref(), Some("v3"), "a stale value served");
    wait_for(
        "the direct write after the restart seen by A",
        Duration::from_secs(10),
        || get(a.addr(), "h:hot").as_deref() == Some("v4"),
    );
    assert!(metric(&a, "misses_total") > misses);
    // And once the link is back, the key is served from the cache again, fresh.
    make_hot(&a, "h:hot");
    assert_eq!(get(a.addr(), "h:hot").as_deref(), Some("v4"));
}

#[test]
fn what_the_cache_must_not_answer_goes_to_redis() {
    let servers = [RedisServer::start(), RedisServer::start()];
    let (a, b) = proxies(&servers);
    let _: () = conn(b.addr()).set("h:hot", "v1").unwrap();
    make_hot(&a, "h:hot");

    // A key outside the prefixes is never cached, however hot.
    let _: () = conn(b.addr()).set("other:hot", "x").unwrap();
    let fills = metric(&a, "fills_total");
    let mut c = conn(a.addr());
    for _ in 0..2000 {
        let _: Option<String> = c.get("other:hot").unwrap();
    }
    // A reply over max_value_bytes is not cached either.
    let _: () = conn(b.addr()).set("h:big", "x".repeat(1000)).unwrap();
    for _ in 0..2000 {
        let _: Option<String> = c.get("h:big").unwrap();
    }
    assert_eq!(
        metric(&a, "fills_total"),
        fills,
        "no fill for other:hot or h:big"
    );

    // Inside MULTI, the GET goes to Redis.
    make_hot(&a, "h:hot");
    let hits = metric(&a, "hits_total");
    let mut raw = a.raw();
    assert_eq!(raw.cmd(&["MULTI"]), Frame::Simple("OK".into()));
    assert_eq!(raw.cmd(&["GET", "h:hot"]), Frame::Simple("QUEUED".into()));
    assert_eq!(raw.cmd(&["EXEC"]), Frame::Array(vec![Frame::bulk("v1")]));
    // While WATCHing as well.
    assert_eq!(raw.cmd(&["WATCH", "h:hot"]), Frame::Simple("OK".into()));
    assert_eq!(raw.cmd(&["GET", "h:hot"]), Frame::bulk("v1"));
    assert_eq!(raw.cmd(&["UNWATCH"]), Frame::Simple("OK".into()));
    // A user without rights to the key is refused, cached or not.
    let mut tenant = a.raw();
    assert_eq!(
        tenant.cmd(&["AUTH", "tenant", "t-pw"]),
        Frame::Simple("OK".into())
    );
    let refused = tenant.cmd(&["GET", "h:hot"]);
    assert!(
        matches!(&refused, Frame::Error(e) if e.starts_with("NOPERM")),
        "{refused:?}"
    );
    assert_eq!(
        metric(&a, "hits_total"),
        hits,
        "none of these answered from the cache"
    );
    // A plain GET is.
    assert_eq!(raw.cmd(&["GET", "h:hot"]), Frame::bulk("v1"));
    assert_eq!(metric(&a, "hits_total"), hits + 1);
}

#[test]
fn the_cache_stays_within_max_bytes_under_many_hot_keys() {
    let servers = [RedisServer::start(), RedisServer::start()];
    let (a, b) = proxies(&servers);
    let value = "v".repeat(400);
    let mut w = conn(b.addr());
    let keys: Vec<String> = (0..40).map(|i| format!("h:many:{i}")).collect();
    for k in &keys {
        let _: () = w.set(k, &value).unwrap();
    }
    let mut c = conn(a.addr());
    let mut round = || {
        let mut p = redis::pipe();
        for k in &keys {
            p.get(k);
        }
        let got: Vec<String> = p.query(&mut c).unwrap();
        assert!(got.iter().all(|v| *v == value));
    };
    wait_for("hot keys filled", Duration::from_secs(30), || {
        round();
        metric(&a, "fills_total") > 0
    });
    for _ in 0..20 {
        round();
    }
    assert!(metric(&a, "bytes") <= 8192, "{}", metric(&a, "bytes"));
    assert!(metric(&a, "entries") < 40);
    let view = ureq::get(&format!("http://{}/api/proxy/hotkeys", a.admin()))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let view: tessera_wire::telemetry::HotKeysView = serde_json::from_str(&view).unwrap();
    assert!(view.hot_cache.enabled);
    assert!(view.hot_cache.bytes <= 8192);
}
