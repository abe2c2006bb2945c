//! Numbered databases (`SELECT n`) through the proxies: Tessera's internal database (the
//! backends' 1) is never reached nor seen from any client database, each client database is
//! its backends' n + 1, what cannot follow a database is refused with the reason (`SELECT`
//! inside `MULTI` or while keys are watched), sessions show their database, and a
//! cluster's migration moves every database's keys. The replies themselves are compared with
//! direct Redis in `differential::numbered_databases_…`.

use crate::support::{Cluster, ControlPlane, Frame};

fn ok(f: Frame) {
    assert_eq!(f, Frame::Simple("OK".into()));
}

fn int(f: Frame) -> i64 {
    match f {
        Frame::Integer(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Both backends of `cluster` in backend database `db`: what they hold in all.
fn backend_dbsize(cluster: &Cluster, db: u32) -> i64 {
    cluster
        .backends
        .iter()
        .map(|b| {
            let mut c = b.raw();
            ok(c.cmd(&["SELECT", &db.to_string()]));
            int(c.cmd(&["DBSIZE"]))
        })
        .sum()
}

#[test]
fn the_internal_database_is_never_reached_nor_seen_from_any_client_database() {
    let cluster = Cluster::start_on(&["--databases", "17"], |b| {
        b.config("admin_commands = true\n")
    });
    // Tessera's own keys in the internal database of both backends.
    for b in &cluster.backends {
        let mut c = b.raw();
        ok(c.cmd(&["SELECT", "1"]));
        ok(c.cmd(&["SET", "internal", "secret"]));
        ok(c.cmd(&["SET", "__tessera:temp:{x}k", "copy"]));
    }
    let mut c = cluster.proxy.raw();
    for db in 0..16 {
        ok(c.cmd(&["SELECT", &db.to_string()]));
        ok(c.cmd(&["SET", &format!("mine:{db}"), "v"]));
        // Only its own key: none of the internal database's.
        assert_eq!(int(c.cmd(&["DBSIZE"])), 1, "database {db}");
        assert_eq!(
            c.cmd(&["GET", "internal"]),
            Frame::NullBulk,
            "database {db}"
        );
        assert_eq!(
            c.cmd(&["KEYS", "*"]),
            Frame::Array(vec![Frame::bulk(&format!("mine:{db}"))]),
            "database {db}"
        );
        assert_eq!(c.cmd(&["RANDOMKEY"]), Frame::bulk(&format!("mine:{db}")));
        // SCAN over both backends, to its end: this database's key only.
        let mut cursor = "0".to_owned();
        let mut seen = Vec::new();
        for _ in 0..100 {
            let Frame::Array(page) = c.cmd(&["SCAN", &cursor, "COUNT", "100"]) else {
                panic!("SCAN")
            };
            cursor = page[0].text().expect("cursor");
            if let Frame::Array(keys) = &page[1] {
                seen.extend(keys.iter().filter_map(Frame::text));
            }
            if cursor == "0" {
                break;
            }
        }
        assert_eq!((cursor.as_str(), seen), ("0", vec![format!("mine:{db}")]));
        // Not by a script either: the backend user may not SELECT.
        let escape = c.cmd(&[
            "EVAL",
            "redis.call('SELECT', 1) return redis.call('GET', 'internal')",
            "0",
        ]);
        assert!(
            escape
                .error()
                .is_some_and(|e| e.contains("can't run this command")),
            "database {db}: {escape:?}"
        );
    }
    // Client database n is the backends' n + 1; their 1 is untouched.
    for db in 0..16u32 {
        let backend = if db == 0 { 0 } else { db + 1 };
        assert_eq!(backend_dbsize(&cluster, backend), 1, "client database {db}");
    }
    assert_eq!(backend_dbsize(&cluster, 1), 4);
    // MOVE, COPY … DB and SWAPDB name client databases, never the internal one.
    ok(c.cmd(&["SELECT", "0"]));
    assert_eq!(int(c.cmd(&["MOVE", "mine:0", "1"])), 1);
    ok(c.cmd(&["SET", "{m}a", "v"]));
    assert_eq!(int(c.cmd(&["COPY", "{m}a", "{m}a", "DB", "1"])), 1);
    assert_eq!(int(c.cmd(&["DEL", "{m}a"])), 1);
    ok(c.cmd(&["SWAPDB", "0", "1"]));
    ok(c.cmd(&["SWAPDB", "1", "2"]));
    assert_eq!(backend_dbsize(&cluster, 1), 4, "the internal database");
    // INFO's keyspace names client databases and leaves the internal one out.
    let info = c.cmd(&["INFO", "keyspace"]).text().expect("INFO is text");
    let dbs: Vec<&str> = info
        .lines()
        .filter(|l| l.starts_with("db"))
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(dbs.len(), 15, "{info}");
    assert!(
        !info.contains("keys=4"),
        "the internal database's keys: {info}"
    );
    // The internal database's keys are where they were.
    let mut direct = cluster.backends[0].raw();
    ok(direct.cmd(&["SELECT", "1"]));
    assert_eq!(direct.cmd(&["GET", "internal"]), Frame::bulk("secret"));
}

#[test]
fn backends_without_the_databases_a_client_selects_give_a_clear_error() {
    // Redis's default of 16: client database 15 would be the backends' 16.
    let cluster = Cluster::start();
    let mut c = cluster.proxy.raw();
    ok(c.cmd(&["SELECT", "14"]));
    ok(c.cmd(&["SET", "k", "v"]));
    ok(c.cmd(&["SELECT", "15"]));
    let e = c.cmd(&["GET", "k"]);
    let text = e.error().unwrap_or_else(|| panic!("{e:?}")).to_owned();
    assert!(
        text.contains("SELECT") && text.contains("out of range"),
        "{text}"
    );
    // The session goes on in another database.
    ok(c.cmd(&["SELECT", "14"]));
    assert_eq!(c.cmd(&["GET", "k"]), Frame::bulk("v"));
}

#[test]
fn select_is_refused_with_the_reason_where_it_cannot_follow_and_sessions_show_their_database() {
    let cluster = Cluster::start_on(&["--databases", "17"], |b| b);
    let mut c = cluster.proxy.raw();
    ok(c.cmd(&["SELECT", "4"]));
    ok(c.cmd(&["CLIENT", "SETNAME", "four"]));
    let mut other = cluster.proxy.raw();
    let list = other.cmd(&["CLIENT", "LIST"]).text().expect("text");
    let line = list.lines().find(|l| l.contains("name=four")).expect(&list);
    assert!(line.contains(" db=4 "), "{line}");
    // Inside MULTI: refused, and the transaction with it, as for any command not queued.
    ok(c.cmd(&["MULTI"]));
    let e = c.cmd(&["SELECT", "2"]);
    assert!(e.error().is_some(), "{e:?}");
    let e = c.cmd(&["EXEC"]);
    assert!(
        e.error().is_some_and(|e| e.starts_with("EXECABORT")),
        "{e:?}"
    );
    // While keys are watched: the watch's connection stays in its database.
    ok(c.cmd(&["WATCH", "k"]));
    let e = c.cmd(&["SELECT", "2"]);
    assert!(
        e.error().is_some_and(|e| e.contains("UNWATCH first")),
        "{e:?}"
    );
    ok(c.cmd(&["SELECT", "4"]));
    ok(c.cmd(&["UNWATCH"]));
    ok(c.cmd(&["SELECT", "2"]));
    ok(c.cmd(&["SET", "k", "two"]));
    // Client database 2 is the backends' 3.
    let mut direct = cluster.owner_of("k").raw();
    ok(direct.cmd(&["SELECT", "3"]));
    assert_eq!(direct.cmd(&["GET", "k"]), Frame::bulk("two"));
    // RESET goes back to database 0.
    assert_eq!(c.cmd(&["RESET"]), Frame::Simple("RESET".into()));
    assert_eq!(c.cmd(&["GET", "k"]), Frame::NullBulk);
}

/// A cluster's proxies serve every database, and a migration moves every database's keys:
/// the same name in several databases, a big key (copied in chunks) and a key with a TTL in
/// others, while a client writes to yet another one throughout. No write is lost, nothing
/// is left on the source or in the internal database, and each client database is its
/// backends' n + 1 on the target too.
#[test]
fn a_cluster_moves_every_databases_keys_and_loses_no_write_in_any() {
    use crate::migration::{conn, idle, owners, wait_for};
    use redis::Commands;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    const KEYS: usize = 300;
    let cp = ControlPlane::builder()
        .servers(2)
        .proxies(1)
        .server_args(&["--databases", "17"])
        .start();
    cp.split_over_two_groups();
    let proxy = cp.proxies[0].addr();
    let in_db = |db: u32| {
        let mut c = conn(proxy);
        let _: () = redis::cmd("SELECT").arg(db).query(&mut c).expect("SELECT");
        c
    };
    for db in [0u32, 2, 15] {
        let mut c = in_db(db);
        let pairs: Vec<(String, String)> = (0..KEYS)
            .map(|i| (format!("same:{i}"), format!("db{db}:{i}")))
            .collect();
        let _: () = c.mset(&pairs).expect("MSET");
    }
    let mut c3 = in_db(3);
    let fields: Vec<(String, i64)> = (0..6000).map(|i| (format!("f{i}"), i)).collect();
    let _: () = c3.hset_multiple("big", &fields).expect("HSET");
    let mut c2 = in_db(2);
    let _: () = c2.set_ex("ttl", "v", 3600).expect("SET EX");

    // A writer in database 5 throughout the move.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, mut c) = (stop.clone(), in_db(5));
        std::thread::spawn(move || {
            let mut acked = 0u64;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && i < 1_000_000 {
                let r: redis::RedisResult<i64> = c.incr(format!("w:{}", i % 50), 1);
                r.unwrap_or_else(|e| panic!("INCR {i} in database 5 failed: {e}"));
                acked += 1;
                i += 1;
            }
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    cp.api()
        .post(
            "/api/migrations",
            &serde_json::json!({"from": 0, "to": 511, "group": 2}),
        )
        .ok();
    wait_for("the move to finish", Duration::from_secs(120), || {
        idle(&cp) && owners(&cp).iter().all(|g| *g == Some(2))
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().expect("the writer");
    assert!(acked > 0);

    // Every database's keys, through the proxy.
    for db in [0u32, 2, 15] {
        let mut c = in_db(db);
        let names: Vec<String> = (0..KEYS).map(|i| format!("same:{i}")).collect();
        let values: Vec<Option<String>> = c.mget(&names).expect("MGET");
        for (i, v) in values.iter().enumerate() {
            assert_eq!(
                v.as_deref(),
                Some(&*format!("db{db}:{i}")),
                "same:{i} in {db}"
            );
        }
    }
    let mut c3 = in_db(3);
    assert_eq!(c3.hlen::<_, i64>("big").expect("HLEN"), 6000);
    let mut c2 = in_db(2);
    let ttl: i64 = c2.ttl("ttl").expect("TTL");
    assert!((3000..=3600).contains(&ttl), "the TTL moved: {ttl}");
    let mut c5 = in_db(5);
    let total: i64 = (0..50)
        .map(|k| {
            c5.get::<_, Option<i64>>(format!("w:{k}"))
                .expect("GET")
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(
        total as u64, acked,
        "every acknowledged INCR in database 5 is there"
    );

    // On the servers: the target (now every slot's) holds each client database n ≥ 1 as its
    // n + 1; the source and both internal databases end empty.
    let dbsize = |addr, db: u32| -> i64 {
        let mut c = conn(addr);
        let _: () = redis::cmd("SELECT").arg(db).query(&mut c).expect("SELECT");
        redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE")
    };
    let (source, target) = (cp.servers[0].addr(), cp.servers[1].addr());
    assert_eq!(
        dbsize(target, 16),
        KEYS as i64,
        "client 15 is the target's 16"
    );
    assert_eq!(
        dbsize(target, 4),
        1,
        "client 3 (the big key) is the target's 4"
    );
    wait_for("the source to be cleaned", Duration::from_secs(60), || {
        (0..17).all(|db| dbsize(source, db) == 0)
    });
    assert_eq!(
        dbsize(target, 1),
        0,
        "nothing left in the internal database"
    );
}

#[test]
fn a_user_limited_to_some_databases_is_refused_the_others_whatever_names_them() {
    let cluster = Cluster::start_on(&["--databases", "17"], |b| {
        b.config(&format!(
            "admin_commands = true\n[[users]]\nname = \"app\"\npassword = \"{}\"\ndatabases = [2, 5]\n",
            crate::auth::hash("pw")
        ))
    });
    let mut c = cluster.proxy.raw();
    ok(c.cmd(&["AUTH", "app", "pw"]));
    let refused = |f: Frame, db: &str| {
        let e = f.error().unwrap_or_else(|| panic!("{f:?}")).to_owned();
        assert!(
            e.starts_with("NOPERM") && e.ends_with(&format!("database {db}")),
            "{e}"
        );
    };
    // It connected in database 0, which it may not use: refused there but for what the
    // proxy answers itself.
    refused(c.cmd(&["SET", "k", "v"]), "0");
    refused(c.cmd(&["DBSIZE"]), "0");
    assert_eq!(c.cmd(&["PING"]), Frame::Simple("PONG".into()));
    refused(c.cmd(&["SELECT", "3"]), "3");
    ok(c.cmd(&["SELECT", "2"]));
    ok(c.cmd(&["SET", "k", "two"]));
    assert_eq!(int(c.cmd(&["DBSIZE"])), 1);
    // Commands that name a database: each named one must be the user's.
    refused(c.cmd(&["MOVE", "k", "0"]), "0");
    refused(c.cmd(&["COPY", "k", "k", "DB", "7"]), "7");
    refused(c.cmd(&["SWAPDB", "2", "0"]), "0");
    assert_eq!(int(c.cmd(&["COPY", "k", "k", "DB", "5"])), 1);
    assert_eq!(int(c.cmd(&["MOVE", "k", "5"])), 0);
    ok(c.cmd(&["SWAPDB", "2", "5"]));
    ok(c.cmd(&["SELECT", "5"]));
    assert_eq!(c.cmd(&["GET", "k"]), Frame::bulk("two"));
    // Nothing reached database 0 (the backends' 0).
    assert_eq!(cluster.backends.iter().map(|b| b.dbsize()).sum::<i64>(), 0);
}
