//! How the mover copies keys (docs/migration.md, "The mover"), with real processes: TTLs are
//! the source's own absolute expire times on the target and keys that expire meanwhile end
//! deleted; a big stream moves in chunks with its consumer groups and pending entries; keys
//! a dead mover left in transit are read by no client as missing, and end restored on the
//! target or, after an abort, back in place.

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use redis::Commands;
use serde_json::json;

use crate::migration::{conn, idle, owners, preload, status, wait_for};
use crate::support::{ControlPlane, slot};

/// The server's clock in ms.
fn now_ms(c: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1000 + us / 1000
}

/// A connection to a server's internal database (Tessera's keys in transit and markers).
fn internal_db(addr: SocketAddr) -> redis::Connection {
    let mut c = conn(addr);
    let _: () = redis::cmd("SELECT").arg(1).query(&mut c).expect("SELECT 1");
    c
}

/// Keys named `prefix{i}` whose slot is in `slots`, `n` of them.
fn keys_in(prefix: &str, slots: std::ops::RangeInclusive<u32>, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| slots.contains(&slot(k.as_bytes())))
        .take(n)
        .collect()
}

#[test]
fn ttls_survive_a_move_exactly_and_keys_expiring_meanwhile_end_deleted() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let proxy = cp.proxies[0].addr();
    preload(proxy, 3000);
    let mut c = conn(proxy);
    let now = now_ms(&mut cp.servers[0].client());
    // Long TTLs at fixed absolute times, short ones that run out while the slots move, and
    // two big keys (copied in chunks): one long-lived, one that may expire during its copy.
    let long_at = now + 3_600_000;
    let mut p = redis::pipe();
    for i in 0..2000i64 {
        p.set(format!("long:{i}"), i)
            .ignore()
            .cmd("PEXPIREAT")
            .arg(format!("long:{i}"))
            .arg(long_at + i)
            .ignore();
        p.set(format!("short:{i}"), i)
            .ignore()
            .cmd("PEXPIREAT")
            .arg(format!("short:{i}"))
            .arg(now + 800 + i)
            .ignore();
    }
    let _: () = p.query(&mut c).expect("keys with TTLs");
    for (key, at) in [("big:long", long_at), ("big:short", now + 1500)] {
        let fields: Vec<(String, i64)> = (0..6000).map(|i| (format!("f{i}"), i)).collect();
        let _: () = c.hset_multiple(key, &fields).expect("HSET");
        let _: () = redis::cmd("PEXPIREAT")
            .arg(key)
            .arg(at)
            .query(&mut c)
            .expect("PEXPIREAT");
    }
    // Capped, so the move lasts while the short keys run out.
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": 0, "to": 1023, "group": 2, "max_keys_per_sec": 2000}),
        )
        .ok();
    wait_for("the move to finish", Duration::from_secs(120), || {
        idle(&cp) && owners(&cp).iter().all(|g| *g == Some(2))
    });
    let mut target = cp.servers[1].client();
    for i in 0..2000i64 {
        let at: i64 = redis::cmd("PEXPIRETIME")
            .arg(format!("long:{i}"))
            .query(&mut target)
            .expect("PEXPIRETIME");
        assert_eq!(at, long_at + i, "long:{i} has the source's expire time");
        let short: i64 = redis::cmd("PEXPIRETIME")
            .arg(format!("short:{i}"))
            .query(&mut target)
            .expect("PEXPIRETIME");
        assert!(
            short == -2 || short == now + 800 + i,
            "short:{i} is gone or has the source's expire time, not {short}"
        );
    }
    let big: i64 = redis::cmd("PEXPIRETIME")
        .arg("big:long")
        .query(&mut target)
        .expect("PEXPIRETIME");
    assert_eq!(big, long_at, "a big key keeps the source's expire time");
    let fields: i64 = target.hlen("big:long").expect("HLEN");
    assert_eq!(fields, 6000);
    // Once every short expire time has passed, none of them is anywhere.
    while now_ms(&mut cp.servers[0].client()) < now + 2900 {
        thread::sleep(Duration::from_millis(100));
    }
    for s in &cp.servers {
        let mut c = s.client();
        let mut internal = internal_db(s.addr());
        for i in 0..2000 {
            let k = format!("short:{i}");
            assert!(!c.exists::<_, bool>(&k).unwrap(), "{k} on {}", s.addr());
            assert!(!internal.exists::<_, bool>(&k).unwrap(), "{k} in transit");
        }
        assert!(!c.exists::<_, bool>("big:short").unwrap());
        let left: i64 = redis::cmd("DBSIZE").query(&mut internal).unwrap();
        assert_eq!(
            left,
            0,
            "nothing is left in {}'s internal database",
            s.addr()
        );
    }
    let st = status(&cp);
    assert!(st["keys_moved"].as_u64() > Some(4000), "{st}");
}

/// XINFO/XPENDING/XRANGE of `key` as comparable text: entries, the stream's IDs and
/// counters, each group's last delivered ID, entries read, consumers and pending entries
/// (ID, consumer, deliveries).
fn stream_state(c: &mut redis::Connection, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let entries: redis::Value = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(c)
        .unwrap();
    out.push(format!("{entries:?}"));
    let info: Vec<redis::Value> = redis::cmd("XINFO").arg("STREAM").arg(key).query(c).unwrap();
    for pair in info.chunks(2) {
        let name = match &pair[0] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        };
        if [
            "length",
            "last-generated-id",
            "max-deleted-entry-id",
            "entries-added",
            "groups",
        ]
        .contains(&name.as_str())
        {
            out.push(format!("{name}={:?}", pair[1]));
        }
    }
    let groups: Vec<Vec<redis::Value>> =
        redis::cmd("XINFO").arg("GROUPS").arg(key).query(c).unwrap();
    for g in groups {
        let text = |v: &redis::Value| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        };
        let fields: Vec<(String, String)> =
            g.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect();
        let name = fields.iter().find(|f| f.0 == "name").unwrap().1.clone();
        out.push(format!("group {fields:?}"));
        let consumers: Vec<Vec<redis::Value>> = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(key)
            .arg(&name)
            .query(c)
            .unwrap();
        for cons in consumers {
            let f: Vec<String> = cons
                .chunks(2)
                .filter(|p| ["name", "pending"].contains(&text(&p[0]).as_str()))
                .map(|p| format!("{}={}", text(&p[0]), text(&p[1])))
                .collect();
            out.push(format!("consumer {f:?}"));
        }
        let pending: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
            .arg(key)
            .arg(&name)
            .arg("-")
            .arg("+")
            .arg(100_000)
            .query(c)
            .unwrap();
        for (id, consumer, _idle, deliveries) in pending {
            out.push(format!("pending {id} {consumer} {deliveries}"));
        }
    }
    out
}

#[test]
fn a_big_stream_moves_in_chunks_with_its_groups_and_pending_entries() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let proxy = cp.proxies[0].addr();
    let key = "big:stream";
    let mut c = conn(proxy);
    for start in (0..12_000).step_by(1000) {
        let mut p = redis::pipe();
        for i in start..start + 1000 {
            p.cmd("XADD")
                .arg(key)
                .arg("*")
                .arg("n")
                .arg(i)
                .arg("pad")
                .arg("x".repeat(i % 50))
                .ignore();
        }
        let _: () = p.query(&mut c).expect("XADD");
    }
    let first: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(10)
        .query(&mut c)
        .expect("XRANGE");
    let _: i64 = redis::cmd("XDEL")
        .arg(key)
        .arg(&first[3].0)
        .arg(&first[7].0)
        .query(&mut c)
        .expect("XDEL");
    for (group, from) in [("g1", "0"), ("g2", "0"), ("empty", "$")] {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(key)
            .arg(group)
            .arg(from)
            .query(&mut c)
            .expect("XGROUP CREATE");
    }
    for (group, consumer, n) in [("g1", "alice", 300), ("g1", "bob", 200), ("g2", "dave", 50)] {
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(group)
            .arg(consumer)
            .arg("COUNT")
            .arg(n)
            .arg("STREAMS")
            .arg(key)
            .arg(">")
            .query(&mut c)
            .expect("XREADGROUP");
    }
    let _: () = redis::cmd("XGROUP")
        .arg("CREATECONSUMER")
        .arg(key)
        .arg("g1")
        .arg("carol")
        .query(&mut c)
        .map(|_: i64| ())
        .expect("XGROUP CREATECONSUMER");
    let acked: Vec<String> = first.iter().skip(8).map(|e| e.0.clone()).collect();
    let _: i64 = redis::cmd("XACK")
        .arg(key)
        .arg("g1")
        .arg(&acked)
        .query(&mut c)
        .expect("XACK");
    // Delivered twice: a second read of alice's pending entries.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g1")
        .arg("alice")
        .arg("COUNT")
        .arg(20)
        .arg("STREAMS")
        .arg(key)
        .arg("0")
        .query(&mut c)
        .expect("XREADGROUP of pending");
    let before = stream_state(&mut c, key);
    let s = slot(key.as_bytes());
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    wait_for("the stream to move", Duration::from_secs(120), || {
        idle(&cp) && owners(&cp)[s as usize] == Some(2)
    });
    assert!(!cp.servers[0].has(key), "the source still has the stream");
    assert!(
        cp.dashboard.log().contains("big key copied in chunks"),
        "the stream did not take the chunked path"
    );
    let after = stream_state(&mut c, key);
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "the stream differs after its move");
    }
    assert!(
        before.iter().filter(|l| l.starts_with("pending")).count() > 500,
        "the test made pending entries"
    );
}

/// A target that refuses writes (maxmemory) holds the move in its copy: the source keeps
/// serving every key (read and written), the status says why with the server's own error,
/// the copy is retried with a backoff rather than in a loop, an abort leaves every key in
/// place with its expire time and nothing on the target; made writable, the next move lands
/// them there exactly.
#[test]
fn a_target_that_refuses_writes_holds_the_move_and_loses_nothing() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 2);
    let proxy = cp.proxies[0].addr();
    let g1 = cp.servers[0].addr();
    preload(proxy, 2000);
    let mut c = conn(proxy);
    let keys = keys_in("held:", 0..=511, 50);
    let at = now_ms(&mut cp.servers[1].client()) + 3_600_000;
    for k in &keys {
        let _: () = c.set(k, format!("v-{k}")).expect("SET");
        let _: () = redis::cmd("PEXPIREAT")
            .arg(k)
            .arg(at)
            .query(&mut c)
            .unwrap();
    }
    let mut g1c = cp.servers[0].client();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "1"])
        .query(&mut g1c)
        .unwrap();
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": 0, "to": 511, "group": 1}),
        )
        .ok();
    wait_for(
        "the target's refusal in the status",
        Duration::from_secs(60),
        || {
            status(&cp)["blocked"]
                .as_str()
                .is_some_and(|b| b.contains("RESTORE") && b.contains("OOM"))
        },
    );
    // Meanwhile every key reads and takes writes, on its source.
    for k in &keys {
        let v: Option<String> = c.get(k).expect("GET while the move is held");
        assert_eq!(v, Some(format!("v-{k}")), "{k} while the move is held");
    }
    let _: () = c
        .set(&keys[0], "written meanwhile")
        .expect("SET while held");
    let _: () = redis::cmd("PEXPIREAT")
        .arg(&keys[0])
        .arg(at)
        .query(&mut c)
        .unwrap();
    // Retried with a backoff: the source is not scanned in a loop. Over 3 s, a copy that
    // restarted without waiting would SCAN it hundreds of times.
    let scans = |c: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_scan:calls="))
            .and_then(|l| l.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let mut g2c = cp.servers[1].client();
    let before = scans(&mut g2c);
    thread::sleep(Duration::from_secs(3));
    let during = scans(&mut g2c) - before;
    assert!(during < 60, "the source was scanned {during} times in 3 s");

    cp.api().post("/api/migrations/abort", &json!({})).ok();
    wait_for("the abort to finish", Duration::from_secs(60), || {
        idle(&cp) && owners(&cp)[..512].iter().all(|g| *g == Some(2))
    });
    let target_keys: i64 = redis::cmd("DBSIZE").query(&mut g1c).unwrap();
    assert_eq!(target_keys, 0, "the target kept copies after the abort");
    let mut expected: Vec<String> = keys.iter().map(|k| format!("v-{k}")).collect();
    expected[0] = "written meanwhile".into();
    for (k, want) in keys.iter().zip(&expected) {
        let v: Option<String> = c.get(k).expect("GET after the abort");
        assert_eq!(v.as_ref(), Some(want), "{k} after the abort");
    }
    let all: Vec<String> = (0..2000).map(|i| format!("fill:{i}")).collect();
    let values: Vec<Option<String>> = c.mget(&all).expect("MGET");
    assert!(
        values
            .iter()
            .all(|v| v.as_deref() == Some(&"x".repeat(32)[..]))
    );

    // Writable again, the next move lands every key there with its expire time.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "0"])
        .query(&mut g1c)
        .unwrap();
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": 0, "to": 511, "group": 1}),
        )
        .ok();
    wait_for("the move to finish", Duration::from_secs(60), || {
        idle(&cp) && owners(&cp)[..512].iter().all(|g| *g == Some(1))
    });
    let mut target = conn(g1);
    for (k, want) in keys.iter().zip(&expected) {
        let v: Option<String> = target.get(k).expect("GET on group 1");
        assert_eq!(v.as_ref(), Some(want), "{k} on the target");
        let t: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut target).unwrap();
        assert_eq!(t, at, "{k} keeps its expire time");
    }
    let values: Vec<Option<String>> = c.mget(&all).expect("MGET");
    assert!(
        values
            .iter()
            .all(|v| v.as_deref() == Some(&"x".repeat(32)[..]))
    );
}
