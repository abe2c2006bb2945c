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

/// A proxy caching `h:` with the admin commands on (FLUSHALL), and a plain one beside it.
fn admin_proxies(servers: &[RedisServer; 2]) -> (Proxy, Proxy) {
    let config =
        format!("admin_commands = true\n{CONFIG}").replace("t-pw", &crate::auth::hash("t-pw"));
    let a = Proxy::builder(&[&servers[0], &servers[1]])
        .threads(1)
        .admin()
        .config(&config)
        .start();
    let b = Proxy::builder(&[&servers[0], &servers[1]]).start();
    (a, b)
}

/// Issue 25, item 2: with the cache on, a pipelined `SET h:k vN; GET h:k` answered the GET
/// with the previous value (20 times out of 20): the cache was asked when the batch was
/// dispatched, before the SET's reply, and a write through the proxy did not invalidate. The
/// same for DEL, MULTI/SET/EXEC, EVAL and FLUSHALL before the GET, and for another client of
/// the same proxy reading right after the writer's `+OK`.
#[test]
fn issue_25_a_client_reads_its_own_writes_through_the_cache() {
    let servers = [RedisServer::start(), RedisServer::start()];
    let (a, b) = admin_proxies(&servers);
    let key = "h:ryw";
    let _: () = conn(b.addr()).set(key, "v0").unwrap();
    let mut c = conn(a.addr());
    let mut other = conn(a.addr());
    for i in 1..=20 {
        make_hot(&a, key);
        let v = format!("v{i}");
        let (_, got): ((), Option<String>) =
            redis::pipe().set(key, &v).get(key).query(&mut c).unwrap();
        assert_eq!(got.as_deref(), Some(v.as_str()), "SET; GET, round {i}");
    }
    let writes: [(&str, Option<&str>); 5] = [
        ("DEL", None),
        ("MULTI/SET/EXEC", Some("tx")),
        ("EVAL", Some("script")),
        ("FLUSHALL", None),
        ("SET EX", Some("ex")),
    ];
    for (what, want) in writes {
        let _: () = conn(b.addr()).set(key, "old").unwrap();
        make_hot(&a, key);
        let mut p = redis::pipe();
        match what {
            "DEL" => p.del(key).ignore(),
            "MULTI/SET/EXEC" => p
                .cmd("MULTI")
                .ignore()
                .set(key, "tx")
                .ignore()
                .cmd("EXEC")
                .ignore(),
            "EVAL" => p
                .cmd("EVAL")
                .arg("return redis.call('SET', KEYS[1], ARGV[1])")
                .arg(1)
                .arg(key)
                .arg("script")
                .ignore(),
            "FLUSHALL" => p.cmd("FLUSHALL").ignore(),
            _ => p.set_ex(key, "ex", 60).ignore(),
        };
        let (got,): (Option<String>,) = p.get(key).query(&mut c).unwrap();
        assert_eq!(got.as_deref(), want, "{what}; GET");
    }
    // Another client of the proxy reads right after the writer was answered.
    for i in 0..20 {
        make_hot(&a, key);
        let v = format!("w{i}");
        let _: () = c.set(key, &v).unwrap();
        let got: Option<String> = other.get(key).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(v.as_str()),
            "another client, round {i}"
        );
    }
}

/// Issue 25, item 2: a cached entry outlived its key's TTL (by up to `ttl_ms`). Ten thousand
/// other keys with a TTL keep Redis's active expiry from finding the key (and so from sending
/// the invalidation) within the test: only the entry's own bound can end it.
#[test]
fn issue_25_a_cached_entry_never_outlives_its_key() {
    let servers = [RedisServer::start(), RedisServer::start()];
    let (a, _b) = admin_proxies(&servers);
    for s in &servers {
        let mut p = redis::pipe();
        for i in 0..10_000 {
            p.set_ex(format!("filler:{i}"), "x", 3600).ignore();
        }
        let _: () = p.query(&mut s.client()).unwrap();
    }
    let key = "h:ttl";
    let ttl = Duration::from_millis(8000);
    let set_at = std::time::Instant::now();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("v")
        .arg("PX")
        .arg(ttl.as_millis() as u64)
        .query(&mut conn(a.addr()))
        .unwrap();
    make_hot(&a, key);
    // Read it until it expires, so the cache holds a fresh fill when it does.
    let mut c = conn(a.addr());
    let expired = set_at + ttl + Duration::from_millis(200);
    let hits = metric(&a, "hits_total");
    while std::time::Instant::now() < expired {
        let _: Option<String> = c.get(key).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        metric(&a, "hits_total") > hits,
        "the key was served from the cache"
    );
    let got: Option<String> = c.get(key).unwrap();
    assert_eq!(got, None, "served after its TTL");
}
