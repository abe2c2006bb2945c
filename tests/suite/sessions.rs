//! Stateful sessions through the proxy, with real servers and clients: transactions (WATCH
//! conflicts, queue-time refusals by the proxy and by the server they are queued on, the
//! session's database, no dedicated connection free, a slot moving under an open WATCH or
//! transaction), blocking commands
//! (a queue fed through one proxy and drained through another, a client gone while blocked,
//! the dedicated connection limit, blocked clients following their slot through a
//! migration), WAIT, and scripts loaded on every group.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::json;
use tessera_wire::cluster::GroupView;
use tessera_wire::migration::Aborted;

use crate::migration::{idle, owners, status};
use crate::support::{Cluster, ControlPlane, Frame, RawClient, slot, tag_on, wait_until};

fn conn(addr: std::net::SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}"))
        .and_then(|c| c.get_connection())
        .expect("connecting to the proxy")
}

fn blocked_clients(server: &crate::support::RedisServer) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut server.client())
        .expect("INFO clients");
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("blocked_clients in INFO")
}

#[test]
fn optimistic_increments_with_watch_count_exactly_the_successful_execs() {
    let cluster = Cluster::start();
    let addr = cluster.proxy.addr();
    let key = "tx:counter";
    let _: () = conn(addr).set(key, 0).unwrap();
    let workers = 4;
    let barrier = Arc::new(Barrier::new(workers));
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                let mut c = conn(addr);
                barrier.wait();
                let (mut committed, mut conflicts) = (0i64, 0i64);
                for _ in 0..60 {
                    let _: () = redis::cmd("WATCH").arg(key).query(&mut c).unwrap();
                    let v: i64 = c.get(key).unwrap();
                    let r: Option<(String,)> = redis::pipe()
                        .atomic()
                        .set(key, v + 1)
                        .query(&mut c)
                        .unwrap();
                    match r {
                        Some(_) => committed += 1,
                        None => conflicts += 1,
                    }
                }
                (committed, conflicts)
            })
        })
        .collect();
    let (mut committed, mut conflicts) = (0, 0);
    for h in handles {
        let (a, b) = h.join().expect("worker panicked");
        committed += a;
        conflicts += b;
    }
    let final_value: i64 = conn(addr).get(key).unwrap();
    assert_eq!(
        final_value, committed,
        "the counter must equal the EXECs that succeeded ({conflicts} conflicted)"
    );
    assert!(committed > 0);
    // Every WATCH connection went back or was closed: nothing is left watching.
    let owner = cluster.owner_of(key);
    assert_eq!(blocked_clients(owner), 0);
}

#[test]
fn a_transaction_refused_at_queue_time_runs_nothing() {
    let cluster = Cluster::start();
    let mut c = RawClient::connect(cluster.proxy.addr());
    let (a, b) = (format!("{{{}}}a", tag_on(0)), format!("{{{}}}b", tag_on(1)));
    assert_eq!(c.cmd(&["MULTI"]).text().as_deref(), Some("OK"));
    assert_eq!(c.cmd(&["SET", &a, "1"]).text().as_deref(), Some("QUEUED"));
    let cross = c.cmd(&["SET", &b, "1"]);
    assert!(cross.error().unwrap().starts_with("CROSSSLOT"), "{cross:?}");
    let abort = c.cmd(&["EXEC"]);
    assert!(abort.error().unwrap().starts_with("EXECABORT"), "{abort:?}");
    assert!(!cluster.owner_of(&a).has(&a), "nothing of it ran");

    // An arity error at queue time, as Redis answers it.
    c.cmd(&["MULTI"]);
    let arity = c.cmd(&["GET"]);
    assert!(arity.error().unwrap().contains("wrong number of arguments"));
    assert!(c.cmd(&["EXEC"]).error().unwrap().starts_with("EXECABORT"));

    // A good one: one block, replies in order.
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", &a]);
    c.cmd(&["INCR", &a]);
    c.cmd(&["GET", &a]);
    let exec = c.cmd(&["EXEC"]);
    assert_eq!(
        format!("{exec:?}"),
        format!("{:?}", {
            let mut d = RawClient::connect(cluster.owner_of(&a).addr());
            d.cmd(&["DEL", &a]);
            d.cmd(&["MULTI"]);
            d.cmd(&["INCR", &a]);
            d.cmd(&["INCR", &a]);
            d.cmd(&["GET", &a]);
            d.cmd(&["EXEC"])
        })
    );
    // A command Redis never queues (`no-multi`), refused by the proxy anyway: Redis's words
    // inside MULTI, and the transaction aborts.
    let q = format!("{{{}}}q", tag_on(0));
    for cmd in ["SAVE", "SHUTDOWN"] {
        let mut d = RawClient::connect(cluster.owner_of(&q).addr());
        let run = |r: &mut RawClient| {
            r.cmd(&["MULTI"]);
            r.cmd(&["SET", &q, "queued"]);
            (r.cmd(&[cmd]), r.cmd(&["EXEC"]))
        };
        let (direct, through) = (run(&mut d), run(&mut c));
        assert_eq!(through, direct, "{cmd} inside MULTI");
        assert_eq!(
            direct.0.error(),
            Some("ERR Command not allowed inside a transaction")
        );
    }
    assert!(
        !cluster.owner_of(&q).has(&q),
        "the aborted transactions ran nothing"
    );
    // Nesting, EXEC and DISCARD without MULTI: Redis's words.
    assert_eq!(c.cmd(&["EXEC"]).error(), Some("ERR EXEC without MULTI"));
    assert_eq!(
        c.cmd(&["DISCARD"]).error(),
        Some("ERR DISCARD without MULTI")
    );
}

#[test]
fn a_blocking_queue_fed_through_one_proxy_drains_through_the_other_exactly_once() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let (a, b) = (cp.proxies[0].addr(), cp.proxies[1].addr());
    let items = 300;
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            thread::spawn(move || {
                let mut c = conn(b);
                let mut got = Vec::new();
                loop {
                    let r: Option<(String, String)> = c.blpop("jobs", 2.0).unwrap();
                    match r {
                        Some((_, v)) if v == "stop" => return got,
                        Some((_, v)) => got.push(v),
                        None => {}
                    }
                }
            })
        })
        .collect();
    let mut p = conn(a);
    for i in 0..items {
        let _: () = p.rpush("jobs", format!("job{i}")).unwrap();
    }
    for _ in 0..4 {
        let _: () = p.rpush("jobs", "stop").unwrap();
    }
    let mut all = Vec::new();
    for c in consumers {
        all.extend(c.join().expect("consumer panicked"));
    }
    let unique: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), items, "every job popped once");
    assert_eq!(unique.len(), items, "no job popped twice");
    let left: i64 = p.llen("jobs").unwrap();
    assert_eq!(left, 0);

    // BLMOVE, BZPOPMIN and XREAD … BLOCK wake on a write through the other proxy too.
    let waiter = thread::spawn(move || {
        let mut c = conn(b);
        let moved: Option<String> = redis::cmd("BLMOVE")
            .arg("{q}src")
            .arg("{q}dst")
            .arg("LEFT")
            .arg("RIGHT")
            .arg(5)
            .query(&mut c)
            .unwrap();
        let popped: Option<(String, String, f64)> = c.bzpopmin("z", 5.0).unwrap();
        let read: redis::Value = redis::cmd("XREAD")
            .arg("BLOCK")
            .arg(5000)
            .arg("STREAMS")
            .arg("s")
            .arg("$")
            .query(&mut c)
            .unwrap();
        (moved, popped, read)
    });
    thread::sleep(Duration::from_millis(300));
    let _: () = p.rpush("{q}src", "m").unwrap();
    thread::sleep(Duration::from_millis(200));
    let _: () = p.zadd("z", "member", 1).unwrap();
    thread::sleep(Duration::from_millis(200));
    let _: String = redis::cmd("XADD")
        .arg("s")
        .arg("*")
        .arg("f")
        .arg("v")
        .query(&mut p)
        .unwrap();
    let (moved, popped, read) = waiter.join().expect("waiter panicked");
    assert_eq!(moved.as_deref(), Some("m"));
    assert_eq!(popped.map(|p| p.1), Some("member".to_string()));
    assert!(
        !matches!(read, redis::Value::Nil),
        "XREAD BLOCK woke with the entry"
    );

    // Redis's timeout semantics: a timeout answers null.
    let r: Option<(String, String)> = p.blpop("nothing-here", 0.2).unwrap();
    assert_eq!(r, None);
}

#[test]
fn a_client_gone_while_blocked_frees_its_server_side_client_at_once() {
    let cluster = Cluster::start();
    let owner = cluster.owner_of("waiting");
    let mut c = RawClient::connect(cluster.proxy.addr());
    c.send(&crate::support::encode(&["BLPOP", "waiting", "0"]));
    assert!(
        wait_until(Duration::from_secs(5), || blocked_clients(owner) == 1),
        "the BLPOP blocks on its owner"
    );
    drop(c);
    assert!(
        wait_until(Duration::from_secs(2), || blocked_clients(owner) == 0),
        "closing the client unblocks and frees its backend connection"
    );
    // The element pushed afterwards is not taken by anyone.
    let mut d = owner.client();
    let _: () = d.rpush("waiting", "x").unwrap();
    let n: i64 = d.llen("waiting").unwrap();
    assert_eq!(n, 1);
}

#[test]
fn past_the_dedicated_connection_limit_a_blocking_command_gets_a_clear_error() {
    let cluster = Cluster::with_config("dedicated_connections = 2\n");
    let key = format!("{{{}}}q", tag_on(0));
    let owner = cluster.owner_of(&key);
    let mut held: Vec<RawClient> = (0..2)
        .map(|_| {
            let mut c = RawClient::connect(cluster.proxy.addr());
            c.send(&crate::support::encode(&["BLPOP", key.as_str(), "0"]));
            c
        })
        .collect();
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        owner
    ) == 2));
    let mut third = RawClient::connect(cluster.proxy.addr());
    let r = third.cmd(&["BLPOP", &key, "0"]);
    let e = r.error().expect("an error past the limit");
    assert!(e.contains("dedicated_connections"), "{e}");
    // The other backend is not affected, nor are ordinary commands.
    assert_eq!(third.cmd(&["SET", &key, "v"]).text().as_deref(), Some("OK"));
    held.clear();
    assert!(wait_until(Duration::from_secs(2), || blocked_clients(
        owner
    ) == 0));
    let _ = third.cmd(&["DEL", &key]);
    let r = third.cmd(&["BLPOP", &key, "0.1"]);
    assert!(
        r.error().is_none(),
        "a freed connection is usable again: {r:?}"
    );
}

#[test]
fn blocked_clients_follow_their_slot_through_a_migration_and_pop_each_element_once() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let (a, b) = (cp.proxies[0].addr(), cp.proxies[1].addr());
    let key = "moving:queue";
    let s = slot(key.as_bytes());
    let consumers = 10;
    let handles: Vec<_> = (0..consumers)
        .map(|_| {
            thread::spawn(move || {
                let mut c = conn(b);
                let r: Option<(String, String)> = c.blpop(key, 30.0).unwrap();
                r.map(|(_, v)| v)
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        &cp.servers[0]
    ) == consumers as i64));
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    let moved = wait_until(Duration::from_secs(30), || {
        owners(&cp)[s as usize] == Some(2) && idle(&cp)
    });
    assert!(moved, "the slot moved to group 2");
    assert!(
        wait_until(Duration::from_secs(5), || blocked_clients(&cp.servers[1])
            == consumers as i64),
        "every blocked client now waits on the new owner"
    );
    assert_eq!(
        blocked_clients(&cp.servers[0]),
        0,
        "and none on the old one"
    );
    let mut p = conn(a);
    for i in 0..consumers {
        let _: () = p.rpush(key, format!("e{i}")).unwrap();
    }
    let got: BTreeSet<String> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .expect("consumer panicked")
                .expect("an element, not a timeout")
        })
        .collect();
    assert_eq!(
        got.len(),
        consumers,
        "each element popped by exactly one client"
    );
    let left: i64 = p.llen(key).unwrap();
    assert_eq!(left, 0);
}

/// Issue 29: a blocking command sent again to its slot's new owner keeps what is left of its
/// timeout, as Redis counts it (from when it started waiting), instead of starting it again.
#[test]
fn a_blocked_command_sent_to_the_new_owner_keeps_only_what_is_left_of_its_timeout() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let key = "moving:timeout";
    let s = slot(key.as_bytes());
    // Everything the new owner is sent, as its own MONITOR shows it.
    let mut monitor = cp.servers[1].raw();
    assert_eq!(monitor.cmd(&["MONITOR"]).text().as_deref(), Some("OK"));
    let addr = cp.proxies[0].addr();
    let waiter = thread::spawn(move || {
        let mut c = conn(addr);
        let r: Option<(String, String)> = c.blpop(key, 30.0).unwrap();
        r
    });
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        &cp.servers[0]
    ) == 1));
    // Blocked for a while on the old owner before its slot moves.
    thread::sleep(Duration::from_secs(2));
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    assert!(
        wait_until(Duration::from_secs(30), || blocked_clients(&cp.servers[1])
            == 1),
        "the command waits on the new owner"
    );
    let mut timeout = None;
    for _ in 0..1000 {
        let line = monitor.read_frame().text().unwrap_or_default();
        if let Some(rest) = line.split(r#""BLPOP" "moving:timeout" ""#).nth(1) {
            timeout = rest.trim_end_matches('"').parse::<f64>().ok();
            break;
        }
    }
    let timeout = timeout.expect("the new owner was sent the BLPOP");
    assert!(
        timeout > 0.0 && timeout <= 28.0,
        "sent again with {timeout} s of its 30 s left after waiting 2 s or more"
    );
    let mut p = conn(addr);
    let _: () = p.rpush(key, "e").unwrap();
    let got = waiter.join().expect("the waiter panicked");
    assert_eq!(got, Some((key.to_string(), "e".to_string())));
}

/// Two groups of one server each and one proxy, every slot on group 1, the proxy at that
/// table.
fn two_groups_all_slots_on_1() -> ControlPlane {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    let epoch = cp.assign(0, 1023, 1);
    assert!(wait_until(Duration::from_secs(10), || cp.proxies[0]
        .epoch()
        >= epoch));
    cp
}

/// A blocking command that arrives while its slot is held for a move's handoff waits in the
/// proxy for the next table; that wait counts against its timeout too, as it would on a
/// server, so the new owner is sent only what is left.
#[test]
fn a_blocking_command_held_for_a_handoff_keeps_only_what_is_left_of_its_timeout() {
    use tessera_wire::topology::{GroupId, Topology};
    let cp = two_groups_all_slots_on_1();
    let proxy = &cp.proxies[0];
    let key = "held:timeout";
    let s = slot(key.as_bytes()) as usize;
    let admin = proxy.admin();
    let push = |t: &Topology| {
        let body = serde_json::to_vec(t).expect("a topology serializes");
        admin
            .request("PUT", "/api/proxy/topology", Some(&body))
            .ok();
    };
    let at_rest: Topology = admin.get("/api/proxy/topology").ok_as();
    assert_eq!(at_rest.slots[s].group, Some(GroupId(1)));
    // The first phase of a move's barrier, as a dashboard pushes it: the slot is held.
    let mut held = at_rest.clone();
    held.epoch += 1;
    held.slots[s].blocked = true;
    push(&held);
    let mut monitor = cp.servers[1].raw();
    assert_eq!(monitor.cmd(&["MONITOR"]).text().as_deref(), Some("OK"));
    let addr = proxy.addr();
    let waiter = thread::spawn(move || {
        let mut c = conn(addr);
        let r: Option<(String, String)> = c.blpop(key, 6.0).unwrap();
        r
    });
    // Held in the proxy for 2 s or more: neither server has it.
    thread::sleep(Duration::from_secs(2));
    assert_eq!(blocked_clients(&cp.servers[0]), 0);
    assert_eq!(blocked_clients(&cp.servers[1]), 0);
    // The handoff: the slot is group 2's.
    let mut moved = at_rest.clone();
    moved.epoch += 2;
    moved.slots[s].group = Some(GroupId(2));
    push(&moved);
    let mut timeout = None;
    for _ in 0..1000 {
        let line = monitor.read_frame().text().unwrap_or_default();
        if let Some(rest) = line.split(r#""BLPOP" "held:timeout" ""#).nth(1) {
            timeout = rest.trim_end_matches('"').parse::<f64>().ok();
            break;
        }
    }
    let timeout = timeout.expect("the new owner was sent the BLPOP");
    assert!(
        timeout > 0.0 && timeout <= 4.0,
        "sent with {timeout} s of its 6 s left after being held 2 s or more"
    );
    let mut p = conn(addr);
    let _: () = p.rpush(key, "e").unwrap();
    let got = waiter.join().expect("the waiter panicked");
    assert_eq!(got, Some((key.to_string(), "e".to_string())));
}

/// Clients of `server` inside MULTI (flag `x` in `CLIENT LIST`).
fn in_multi(server: &crate::support::RedisServer) -> usize {
    flagged(server, 'x')
}

/// Connections to `server` whose `CLIENT LIST` flags hold `flag`.
fn flagged(server: &crate::support::RedisServer, flag: char) -> usize {
    let list = server
        .raw()
        .cmd(&["CLIENT", "LIST"])
        .text()
        .expect("CLIENT LIST");
    list.lines()
        .filter(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("flags="))
                .is_some_and(|f| f.contains(flag))
        })
        .count()
}

#[test]
fn a_transaction_is_queued_on_its_server_so_what_it_refuses_is_refused_at_queue_time() {
    let cluster = Cluster::start();
    let key = format!("{{{}}}k", tag_on(0));
    let owner = cluster.owner_of(&key);
    let mut c = cluster.proxy.raw();
    let mut d = owner.raw();
    // What the server refuses while queuing (OOM once maxmemory is reached: any command in
    // MULTI) it refuses then, in its words, and its EXEC aborts: as direct.
    let maxmemory = |bytes: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(bytes)
            .query(&mut owner.client())
            .unwrap();
    };
    maxmemory("1");
    let run = |r: &mut RawClient| {
        (
            r.cmd(&["MULTI"]),
            r.cmd(&["SET", &key, "v"]),
            r.cmd(&["EXEC"]),
        )
    };
    let (through, direct) = (run(&mut c), run(&mut d));
    assert!(
        through.1.error().is_some_and(|e| e.starts_with("OOM")),
        "{through:?}"
    );
    assert!(
        through
            .2
            .error()
            .is_some_and(|e| e.starts_with("EXECABORT")),
        "{through:?}"
    );
    assert_eq!(through, direct);
    maxmemory("0");
    assert!(!owner.has(&key), "nothing of it ran");

    // Commands queued before the slot is known are queued on the server after MULTI.
    let run = |r: &mut RawClient| {
        let mut replies = vec![r.cmd(&["MULTI"])];
        for cmd in [
            &["PING"][..],
            &["ECHO", "e"],
            &["SET", &key, "v"],
            &["GET", &key],
        ] {
            replies.push(r.cmd(cmd));
        }
        replies.push(r.cmd(&["EXEC"]));
        replies
    };
    let through = run(&mut c);
    assert_eq!(through, run(&mut d));
    assert_eq!(
        through.last(),
        Some(&Frame::Array(vec![
            Frame::Simple("PONG".into()),
            Frame::bulk("e"),
            Frame::Simple("OK".into()),
            Frame::bulk("v"),
        ]))
    );

    // A refusal of the proxy's own (CROSSSLOT) discards the server's transaction: EXECABORT.
    let other = format!("{{{}}}o", tag_on(1));
    c.cmd(&["MULTI"]);
    assert_eq!(c.cmd(&["SET", &key, "x"]).text().as_deref(), Some("QUEUED"));
    assert!(
        c.cmd(&["SET", &other, "x"])
            .error()
            .unwrap()
            .starts_with("CROSSSLOT")
    );
    assert!(c.cmd(&["EXEC"]).error().unwrap().starts_with("EXECABORT"));
    // DISCARD, RESET and a client gone each end it on the server.
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", &key, "y"]);
    assert_eq!(c.cmd(&["DISCARD"]).text().as_deref(), Some("OK"));
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", &key, "z"]);
    assert_eq!(in_multi(owner), 1, "open on the server");
    assert_eq!(c.cmd(&["RESET"]).text().as_deref(), Some("RESET"));
    assert_eq!(
        c.cmd(&["GET", &key]),
        Frame::bulk("v"),
        "nothing of them ran"
    );
    assert!(wait_until(Duration::from_secs(5), || in_multi(owner) == 0));
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", &key, "gone"]);
    assert_eq!(in_multi(owner), 1);
    drop(c);
    assert!(wait_until(Duration::from_secs(5), || in_multi(owner) == 0));
    assert_eq!(d.cmd(&["GET", &key]), Frame::bulk("v"));
}

#[test]
fn a_pipelined_transaction_runs_after_what_came_before_it_and_before_what_comes_after() {
    let cluster = Cluster::start();
    let key = format!("{{{}}}n", tag_on(0));
    let big = format!("{{{}}}big", tag_on(0));
    let value = "x".repeat(2 << 20);
    let mut c = cluster.proxy.raw();
    // The shared connection carries 2 MB before each SET; the transaction's own connection
    // carries a few bytes: EXEC must still see the SET, and the GET after it what EXEC wrote.
    let rounds = 10;
    let mut pipeline = Vec::new();
    for i in 0..rounds {
        let i = i.to_string();
        for cmd in [
            &["SET", &big, &value][..],
            &["SET", &key, &i],
            &["MULTI"],
            &["INCR", &key],
            &["EXEC"],
            &["GET", &key],
        ] {
            pipeline.extend(crate::support::encode(cmd));
        }
    }
    c.send(&pipeline);
    for i in 0..rounds {
        let replies: Vec<Frame> = (0..6).map(|_| c.read_frame()).collect();
        assert_eq!(
            replies[4],
            Frame::Array(vec![Frame::Integer(i + 1)]),
            "round {i}: {replies:?}"
        );
        assert_eq!(replies[5], Frame::bulk(&(i + 1).to_string()), "round {i}");
    }
}

#[test]
fn a_watched_key_changed_before_or_during_the_transaction_fails_its_exec() {
    let cluster = Cluster::start();
    let key = format!("{{{}}}w", tag_on(0));
    let mut c = cluster.proxy.raw();
    let mut other = cluster.proxy.raw();
    other.cmd(&["SET", &key, "0"]);
    // Changed between WATCH and MULTI.
    assert_eq!(c.cmd(&["WATCH", &key]).text().as_deref(), Some("OK"));
    other.cmd(&["SET", &key, "other"]);
    c.cmd(&["MULTI"]);
    assert_eq!(
        c.cmd(&["SET", &key, "mine"]).text().as_deref(),
        Some("QUEUED")
    );
    assert_eq!(c.cmd(&["EXEC"]), Frame::NullArray);
    // Changed while the transaction is queued on the server.
    c.cmd(&["WATCH", &key]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", &key, "mine"]);
    other.cmd(&["SET", &key, "again"]);
    assert_eq!(c.cmd(&["EXEC"]), Frame::NullArray);
    assert_eq!(other.cmd(&["GET", &key]), Frame::bulk("again"));
    // Unchanged: it runs.
    c.cmd(&["WATCH", &key]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", &key, "mine"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![Frame::Simple("OK".into())])
    );
    assert_eq!(other.cmd(&["GET", &key]), Frame::bulk("mine"));
}

#[test]
fn a_transaction_runs_in_the_sessions_database_and_without_dedicated_connections_still_runs() {
    // Client database 2 is the backends' 3 (Tessera's own is 1).
    let cluster = Cluster::start_on(&["--databases", "17"], |b| b);
    let key = format!("{{{}}}db", tag_on(0));
    let owner = cluster.owner_of(&key);
    let mut c = cluster.proxy.raw();
    assert_eq!(c.cmd(&["SELECT", "2"]).text().as_deref(), Some("OK"));
    c.cmd(&["MULTI"]);
    assert_eq!(
        c.cmd(&["SET", &key, "two"]).text().as_deref(),
        Some("QUEUED")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![Frame::Simple("OK".into())])
    );
    let mut d = owner.raw();
    assert_eq!(d.cmd(&["GET", &key]), Frame::NullBulk, "not in database 0");
    d.cmd(&["SELECT", "3"]);
    assert_eq!(d.cmd(&["GET", &key]), Frame::bulk("two"));

    // With no dedicated connection to be had, the proxy queues the transaction itself and
    // sends it whole at EXEC: it still runs, in the session's database.
    let cluster = Cluster::start_on(&["--databases", "17"], |b| {
        b.config("dedicated_connections = 0\n")
    });
    let owner = cluster.owner_of(&key);
    let mut c = cluster.proxy.raw();
    assert_eq!(c.cmd(&["SELECT", "2"]).text().as_deref(), Some("OK"));
    c.cmd(&["MULTI"]);
    assert_eq!(
        c.cmd(&["SET", &key, "fallback"]).text().as_deref(),
        Some("QUEUED")
    );
    assert_eq!(in_multi(owner), 0, "not open on the server");
    assert_eq!(c.cmd(&["GET", &key]).text().as_deref(), Some("QUEUED"));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![Frame::Simple("OK".into()), Frame::bulk("fallback")])
    );
    let mut d = owner.raw();
    d.cmd(&["SELECT", "3"]);
    assert_eq!(d.cmd(&["GET", &key]), Frame::bulk("fallback"));
}

#[test]
fn a_transaction_open_on_a_server_whose_slot_moves_fails_its_exec_whole() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let key = "queued:moving";
    let s = slot(key.as_bytes());
    let mut c = RawClient::connect(cp.proxies[0].addr());
    assert_eq!(c.cmd(&["MULTI"]).text().as_deref(), Some("OK"));
    assert_eq!(c.cmd(&["SET", key, "1"]).text().as_deref(), Some("QUEUED"));
    assert_eq!(in_multi(&cp.servers[0]), 1, "open on the slot's server");
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    assert!(wait_until(Duration::from_secs(30), || {
        owners(&cp)[s as usize] == Some(2) && idle(&cp)
    }));
    let r = c.cmd(&["EXEC"]);
    assert!(
        r.error().is_some_and(|e| e.starts_with("TRYAGAIN")),
        "{r:?}"
    );
    assert!(wait_until(Duration::from_secs(5), || in_multi(
        &cp.servers[0]
    ) == 0));
    assert!(
        !cp.servers[0].has(key) && !cp.servers[1].has(key),
        "nothing of it ran"
    );
    // The next one opens on the new owner.
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", key, "2"]);
    assert_eq!(in_multi(&cp.servers[1]), 1);
    c.cmd(&["EXEC"]);
    assert!(cp.servers[1].has(key));
}

#[test]
fn an_open_watch_on_a_slot_that_moves_fails_its_exec_whole() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let key = "watched";
    let s = slot(key.as_bytes());
    let mut c = RawClient::connect(cp.proxies[0].addr());
    c.cmd(&["SET", key, "1"]);
    assert_eq!(c.cmd(&["WATCH", key]).text().as_deref(), Some("OK"));
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    assert!(wait_until(Duration::from_secs(30), || {
        owners(&cp)[s as usize] == Some(2) && idle(&cp)
    }));
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", key, "2"]);
    let r = c.cmd(&["EXEC"]);
    assert!(
        format!("{r:?}").contains("Nil") || format!("{r:?}").contains("Null"),
        "{r:?}"
    );
    assert_eq!(
        c.cmd(&["GET", key]).text().as_deref(),
        Some("1"),
        "nothing of it ran"
    );
    // Without WATCH the next transaction runs on the new owner.
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", key, "3"]);
    c.cmd(&["EXEC"]);
    assert!(cp.servers[1].has(key));
    assert!(!cp.servers[0].has(key));
}

#[test]
fn scripts_load_on_every_group_by_default_and_wait_counts_replicas() {
    let cluster = Cluster::start();
    let mut c = conn(cluster.proxy.addr());
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return redis.call('INCR', KEYS[1])")
        .query(&mut c)
        .expect("SCRIPT LOAD is allowed without admin_commands");
    for k in [format!("{{{}}}n", tag_on(0)), format!("{{{}}}n", tag_on(1))] {
        let n: i64 = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg(&k)
            .query(&mut c)
            .unwrap();
        assert_eq!(n, 1, "EVALSHA on {k}");
    }
    for b in &cluster.backends {
        let e: Vec<i64> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&sha)
            .query(&mut b.client())
            .unwrap();
        assert_eq!(e, [1], "loaded on {}", b.addr());
    }
    let e: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .arg("0000")
        .query(&mut c)
        .unwrap();
    assert_eq!(e, [1, 0]);
    let flush = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(flush.to_string().contains("admin_commands"), "{flush}");
    // redis-py's Lock and ioredis's defineCommand go through EVALSHA.
    let lib = "#!lua name=tlib\nredis.register_function('tget', function(keys) return redis.call('GET', keys[1]) end)";
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(lib)
        .query(&mut c)
        .unwrap();
    assert_eq!(name, "tlib");
    let _: () = c.set("fkey", "fv").unwrap();
    let v: String = redis::cmd("FCALL")
        .arg("tget")
        .arg(1)
        .arg("fkey")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "fv");
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("tlib")
        .query(&mut c)
        .unwrap();

    // WAIT with no replicas: 0, at once for a timeout.
    let started = Instant::now();
    let n: i64 = redis::cmd("WAIT").arg(0).arg(100).query(&mut c).unwrap();
    assert_eq!(n, 0);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn wait_counts_the_replicas_that_have_every_earlier_write() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0, 1]);
    cp.assign(0, 1023, 1);
    let mut c = conn(cp.proxies[0].addr());
    let synced = wait_until(Duration::from_secs(20), || {
        let _: () = c.set("w", "v").unwrap();
        redis::cmd("WAIT")
            .arg(1)
            .arg(500)
            .query::<i64>(&mut c)
            .unwrap()
            == 1
    });
    assert!(synced, "the replica acknowledges the write");
}

/// A cluster of one group (a second server left for a group added later), a client of its
/// proxy, and the sha of an `INCR` script loaded through it.
fn one_group_with_a_script() -> (ControlPlane, redis::Connection, String) {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.assign(0, 1023, 1);
    let mut c = conn(cp.proxies[0].addr());
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return redis.call('INCR', KEYS[1])")
        .query(&mut c)
        .unwrap();
    (cp, c, sha)
}

#[test]
fn a_script_loaded_through_tessera_never_answers_noscript_on_a_group_added_later() {
    let (cp, mut c, sha) = one_group_with_a_script();
    let lib = "#!lua name=late\nredis.register_function('late_get', function(keys) return redis.call('GET', keys[1]) end)";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(lib)
        .query(&mut c)
        .unwrap();
    // A second group joins and takes the key's slot: its server has never seen the script.
    cp.group(2, &[1]);
    let key = "late:counter";
    let s = slot(key.as_bytes());
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    assert!(wait_until(Duration::from_secs(30), || {
        owners(&cp)[s as usize] == Some(2) && idle(&cp)
    }));
    let e: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .query(&mut cp.servers[1].client())
        .unwrap();
    assert_eq!(e, [0], "the new group's server does not have it yet");
    let n: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg(key)
        .query(&mut c)
        .expect("no NOSCRIPT");
    assert_eq!(n, 1);
    assert!(cp.servers[1].has(key), "it ran on the new owner");
    let _: () = c.set(key, "v").unwrap();
    let v: String = redis::cmd("FCALL")
        .arg("late_get")
        .arg(1)
        .arg(key)
        .query(&mut c)
        .expect("the library follows");
    assert_eq!(v, "v");
    // A server whose script cache was emptied (a restart, a promoted replica) recovers too.
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut cp.servers[1].client())
        .unwrap();
    let _: () = c.del(key).unwrap();
    let n: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg(key)
        .query(&mut c)
        .expect("no NOSCRIPT");
    assert_eq!(n, 1);
    // A sha never loaded through Tessera is still NOSCRIPT.
    let e = redis::cmd("EVALSHA")
        .arg("0123456789abcdef0123456789abcdef01234567")
        .arg(0)
        .query::<redis::Value>(&mut c)
        .unwrap_err();
    assert!(e.to_string().to_uppercase().contains("NOSCRIPT"), "{e}");
}

/// A script call on a key whose slot is moving runs on the source while it is copied (its
/// write copied over like any other), and on the target once the slot is there: a target
/// that has never seen the script (a group added for this move) still answers it.
#[test]
fn a_script_call_on_a_moving_slot_never_answers_noscript_on_the_target() {
    let (cp, mut c, sha) = one_group_with_a_script();
    // Enough keys in the counter's slot for a capped move to take a while.
    let key = "{late}:counter";
    let _: () = c.set(key, 10).unwrap();
    for start in (0..6000).step_by(1000) {
        let pairs: Vec<(String, u32)> = (start..start + 1000)
            .map(|i| (format!("{{late}}:{i}"), i))
            .collect();
        let _: () = c.mset(&pairs).unwrap();
    }
    cp.group(2, &[1]);
    let s = slot(key.as_bytes());
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": s, "to": s, "group": 2, "max_keys_per_sec": 500}),
        )
        .ok();
    assert!(
        wait_until(Duration::from_secs(30), || { status(&cp).keys_moved > 0 }),
        "the move starts"
    );
    let n: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg(key)
        .query(&mut c)
        .expect("no NOSCRIPT on a moving slot");
    assert_eq!(n, 11);
    let moving = !idle(&cp);
    assert!(moving, "the slot was still moving when the script ran");
    let on_source: Option<i64> = cp.servers[0].client().get(key).unwrap();
    assert_eq!(
        on_source,
        Some(11),
        "it ran on the source, which still owns the slot"
    );
    assert!(
        wait_until(Duration::from_secs(60), || status(&cp).slots.is_empty()),
        "the move ends"
    );
    let n: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg(key)
        .query(&mut c)
        .expect("no NOSCRIPT on the target");
    assert_eq!(n, 12, "the script's write during the copy was copied");
    let on_target: Option<i64> = cp.servers[1].client().get(key).unwrap();
    assert_eq!(on_target, Some(12), "it ran on the target");
    assert!(
        !cp.servers[0].has(key),
        "and the source no longer has the key"
    );
}

#[test]
fn two_hundred_blocked_clients_cost_a_bounded_memory_each() {
    let cluster = Cluster::start();
    let owner0 = &cluster.backends[0];
    let owner1 = &cluster.backends[1];
    let mut warm = conn(cluster.proxy.addr());
    let _: () = warm.set("warm", "up").unwrap();
    let before = cluster.proxy.rss();
    let clients = 200;
    let blocked: Vec<RawClient> = (0..clients)
        .map(|i| {
            let mut c = RawClient::connect(cluster.proxy.addr());
            c.send(&crate::support::encode(&[
                "BLPOP",
                &format!("idle:{i}"),
                "0",
            ]));
            c
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(20), || blocked_clients(owner0)
            + blocked_clients(owner1)
            == clients),
        "every client blocks on a server"
    );
    let after = cluster.proxy.rss();
    let each = after.saturating_sub(before) / clients as u64;
    println!("proxy memory per blocked client: {each} bytes ({before} → {after} for {clients})");
    assert!(each < 256 * 1024, "{each} bytes per blocked client");
    // Ordinary clients are served meanwhile.
    let v: String = warm.get("warm").unwrap();
    assert_eq!(v, "up");
    drop(blocked);
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        owner0
    ) + blocked_clients(
        owner1
    ) == 0));
}

#[test]
fn redis_py_locks_transactions_and_queues_work_across_two_proxies() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/redis_py_sessions.py");
    let out = crate::support::run_with_timeout(
        std::process::Command::new("/usr/bin/python3")
            .arg(script)
            .arg(cp.proxies[0].addr().to_string())
            .arg(cp.proxies[1].addr().to_string()),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "redis-py (Debian's python3-redis) through the proxies:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("ok   ").count(), 4, "every check ran");
}

#[test]
fn ioredis_scripts_transactions_and_queues_work_across_two_proxies() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/clients");
    assert!(
        std::path::Path::new(dir)
            .join("node_modules/ioredis")
            .exists(),
        "ioredis is not installed in {dir}: run `npm ci` there (tools/test.sh does)"
    );
    let out = crate::support::run_with_timeout(
        std::process::Command::new("node")
            .current_dir(dir)
            .arg("ioredis_sessions.js")
            .arg(cp.proxies[0].addr().to_string())
            .arg(cp.proxies[1].addr().to_string()),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "ioredis through the proxies:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("ok   ").count(), 4, "every check ran");
}

// === client-side caching ===

fn invalidate(keys: &[&str]) -> crate::support::Frame {
    use crate::support::Frame;
    Frame::Push(vec![
        Frame::bulk("invalidate"),
        Frame::Array(keys.iter().map(|k| Frame::bulk(k)).collect()),
    ])
}

fn resp3(addr: std::net::SocketAddr) -> RawClient {
    let mut c = RawClient::connect(addr);
    let hello = c.cmd(&["HELLO", "3"]);
    assert!(matches!(hello, crate::support::Frame::Map(_)), "{hello:?}");
    c
}

/// The `flags` of a `CLIENT TRACKINGINFO` reply (a RESP3 map or a RESP2 array of pairs).
fn tracking_flags(info: &crate::support::Frame) -> Vec<String> {
    use crate::support::Frame;
    let pairs: Vec<(&Frame, &Frame)> = match info {
        Frame::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Frame::Array(a) => a.chunks(2).map(|p| (&p[0], &p[1])).collect(),
        other => panic!("CLIENT TRACKINGINFO: {other:?}"),
    };
    match pairs
        .iter()
        .find(|(k, _)| k.text().as_deref() == Some("flags"))
    {
        Some((_, Frame::Array(flags) | Frame::Set(flags))) => {
            flags.iter().filter_map(Frame::text).collect()
        }
        _ => panic!("no flags in {info:?}"),
    }
}

/// `NOLOOP` cannot be exact through the proxy (docs/sessions.md): it is refused with its
/// reason in every mode where direct Redis takes it, and a client's tracking stays as it was.
/// A `NOLOOP` client's own writes in `noloop_transcript`: plain, in a transaction, a blocking
/// pop, on both groups (`split_over_two_groups`: `n:a` on the first, `n:l0` and
/// `n:{n:l2}list` on the second).
const OWN_WRITES: &[&[&str]] = &[
    &["SET", "n:a", "1"],
    &["SET", "n:l0", "1"],
    &["MULTI"],
    &["SET", "n:a", "2"],
    &["INCR", "n:{n:a}c"],
    &["EXEC"],
    &["RPUSH", "n:{n:l2}list", "x"],
    &["BLPOP", "n:{n:l2}list", "1"],
    &["DEL", "n:a", "n:l0"],
];

/// What a `NOLOOP` tracking client reads over a script of its own writes (plain, in a
/// transaction, by a script, a blocking pop, on both groups) and others' (through `other`):
/// every frame, the pushes included. An own write is followed by a `PING`, so an invalidation
/// it caused would be read in place of `PONG`.
fn noloop_transcript(tracker: std::net::SocketAddr, other: std::net::SocketAddr) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut w = RawClient::connect(other);
    let mut t = resp3(tracker);
    t.set_read_timeout(Duration::from_secs(5));
    let step = |t: &mut RawClient, args: &[&str], out: &mut Vec<Frame>| {
        out.push(t.cmd(args));
    };
    // BCAST under a prefix: none of its own writes is reported, every other one is.
    step(
        &mut t,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "n:", "NOLOOP",
        ],
        &mut out,
    );
    let info = t.cmd(&["CLIENT", "TRACKINGINFO"]);
    out.push(Frame::Array(
        tracking_flags(&info)
            .iter()
            .map(|f| Frame::bulk(f))
            .collect(),
    ));
    for own in OWN_WRITES {
        step(&mut t, own, &mut out);
    }
    step(&mut t, &["PING"], &mut out);
    // A script's writes are the script's: Redis reports them to the client that ran it.
    step(
        &mut t,
        &["EVAL", "redis.call('SET', KEYS[1], 'x')", "1", "n:l2"],
        &mut out,
    );
    out.push(t.read_frame());
    for key in ["n:a", "n:l0"] {
        w.cmd(&["SET", key, "theirs"]);
        out.push(t.read_frame());
    }
    // Theirs outside the prefix, then its own: still nothing.
    w.cmd(&["SET", "x:1", "theirs"]);
    step(&mut t, &["SET", "n:c", "4"], &mut out);
    step(&mut t, &["PING"], &mut out);
    // Default mode: what it read is invalidated by others' writes, never by its own.
    let mut d = resp3(tracker);
    d.set_read_timeout(Duration::from_secs(5));
    step(&mut d, &["CLIENT", "TRACKING", "ON", "NOLOOP"], &mut out);
    step(&mut d, &["GET", "d:a"], &mut out);
    step(&mut d, &["GET", "d:{n:l0}"], &mut out);
    step(&mut d, &["SET", "d:a", "mine"], &mut out);
    step(&mut d, &["PING"], &mut out);
    w.cmd(&["SET", "d:{n:l0}", "theirs"]);
    out.push(d.read_frame());
    // Its writes still reach a tracking client without NOLOOP.
    let mut plain = resp3(tracker);
    plain.set_read_timeout(Duration::from_secs(5));
    step(
        &mut plain,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "n:"],
        &mut out,
    );
    step(&mut t, &["SET", "n:l0", "5"], &mut out);
    out.push(plain.read_frame());
    step(&mut t, &["PING"], &mut out);
    // Off: nothing was left to report.
    step(&mut t, &["CLIENT", "TRACKING", "OFF"], &mut out);
    step(&mut t, &["PING"], &mut out);
    out
}

/// `noloop_transcript` in RESP2: the tracking clients redirect their invalidations to a
/// client subscribed to `__redis__:invalidate`, which reads them as messages. Another
/// client's write is the marker: had an own write been reported, its message would come first.
fn noloop_transcript_resp2(
    tracker: std::net::SocketAddr,
    other: std::net::SocketAddr,
) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut w = RawClient::connect(other);
    let mut r = RawClient::connect(tracker);
    r.set_read_timeout(Duration::from_secs(5));
    let id = match r.cmd(&["CLIENT", "ID"]) {
        Frame::Integer(id) => id.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    };
    out.push(r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]));
    let mut t = RawClient::connect(tracker);
    t.set_read_timeout(Duration::from_secs(5));
    out.push(t.cmd(&[
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "n:", "NOLOOP", "REDIRECT", &id,
    ]));
    for own in OWN_WRITES {
        out.push(t.cmd(own));
    }
    for key in ["n:a", "n:l0"] {
        w.cmd(&["SET", key, "theirs"]);
        out.push(r.read_frame());
    }
    let mut d = RawClient::connect(tracker);
    for own in [
        vec!["CLIENT", "TRACKING", "ON", "NOLOOP", "REDIRECT", &id],
        vec!["GET", "d:a"],
        vec!["GET", "d:{n:l0}"],
        vec!["SET", "d:a", "mine"],
    ] {
        out.push(d.cmd(&own));
    }
    w.cmd(&["SET", "d:{n:l0}", "theirs"]);
    out.push(r.read_frame());
    out
}

#[test]
fn noloop_leaves_out_exactly_the_clients_own_writes_as_direct_redis_does() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let direct = crate::support::RedisServer::start();
    let want = noloop_transcript(direct.addr(), direct.addr());
    let got = noloop_transcript(cp.proxies[0].addr(), cp.proxies[1].addr());
    assert_eq!(got, want, "through the proxy, then direct");
    // The script's keys are on both groups, so both of the client's own connections wrote.
    assert!(cp.servers[0].has("n:{n:a}c") && cp.servers[1].has("n:l2"));
    assert!(want.contains(&invalidate(&["n:l0"])), "{want:?}");
    assert!(want.contains(&invalidate(&["d:{n:l0}"])), "{want:?}");
    // RESP2: the reports redirected to a client subscribed to __redis__:invalidate.
    let want = noloop_transcript_resp2(direct.addr(), direct.addr());
    let got = noloop_transcript_resp2(cp.proxies[0].addr(), cp.proxies[1].addr());
    assert_eq!(got, want, "RESP2, through the proxy, then direct");
    let message = |key: &str| {
        Frame::Array(vec![
            Frame::bulk("message"),
            Frame::bulk("__redis__:invalidate"),
            Frame::Array(vec![Frame::bulk(key)]),
        ])
    };
    assert!(want.contains(&message("n:l0")), "{want:?}");
    assert!(want.contains(&message("d:{n:l0}")), "{want:?}");
    let mut resp2 = RawClient::connect(cp.proxies[0].addr());
    // Without REDIRECT a RESP2 client hears nothing anyway: taken, as by Redis.
    let r = resp2.cmd(&["CLIENT", "TRACKING", "ON", "NOLOOP"]);
    assert_eq!(r.text().as_deref(), Some("OK"));
}

/// Connections to `server` that track keys (`t` among their `CLIENT LIST` flags).
fn tracking_connections(server: &crate::support::RedisServer) -> usize {
    flagged(server, 't')
}

#[test]
fn noloop_connections_are_bounded_and_a_client_toggling_it_leaves_none_behind() {
    let cluster = Cluster::with_config("dedicated_connections = 2\n");
    let server = &cluster.backends[0];
    // 200 rounds of on and off in one pipeline: each round's connections close behind it.
    let mut t = resp3(cluster.proxy.addr());
    t.set_read_timeout(Duration::from_secs(10));
    let mut pipeline = Vec::new();
    for _ in 0..200 {
        pipeline.extend(crate::support::encode(&[
            "CLIENT", "TRACKING", "ON", "NOLOOP",
        ]));
        pipeline.extend(crate::support::encode(&["CLIENT", "TRACKING", "OFF"]));
    }
    t.send(&pipeline);
    for i in 0..400 {
        let r = t.read_frame();
        assert_eq!(r.text().as_deref(), Some("OK"), "reply {i}: {r:?}");
    }
    assert!(
        wait_until(Duration::from_secs(5), || tracking_connections(server) == 0),
        "{} connections still track",
        tracking_connections(server)
    );
    // Each NOLOOP client holds one dedicated connection per master: two fill the limit, and
    // a third is refused with the limit's error and does not track.
    let mut a = resp3(cluster.proxy.addr());
    let mut b = resp3(cluster.proxy.addr());
    for c in [&mut a, &mut b] {
        let r = c.cmd(&["CLIENT", "TRACKING", "ON", "NOLOOP"]);
        assert_eq!(r.text().as_deref(), Some("OK"), "{r:?}");
    }
    assert!(
        tracking_connections(server) >= 2,
        "each tracks on its own connection"
    );
    let mut third = resp3(cluster.proxy.addr());
    let r = third.cmd(&["CLIENT", "TRACKING", "ON", "NOLOOP"]);
    assert!(
        r.error()
            .is_some_and(|e| e.contains("dedicated_connections")),
        "{r:?}"
    );
    let info = third.cmd(&["CLIENT", "TRACKINGINFO"]);
    assert_eq!(tracking_flags(&info), ["off"], "{info:?}");
    // One goes away: its connections close, and the third client's turn comes.
    drop(a);
    assert!(wait_until(Duration::from_secs(5), || {
        third
            .cmd(&["CLIENT", "TRACKING", "ON", "NOLOOP"])
            .text()
            .as_deref()
            == Some("OK")
    }));
    assert_eq!(b.cmd(&["PING"]).text().as_deref(), Some("PONG"));
}

/// Two servers in two groups, every slot on group 1's, and `key` written through the proxy.
fn every_slot_on_group_1_with(key: &str) -> (ControlPlane, redis::Connection) {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let mut w = conn(cp.proxies[0].addr());
    let _: () = w.set(key, "v").unwrap();
    (cp, w)
}

/// Moves `key`'s slot to group 2, and waits until it is there.
fn move_to_group_2(cp: &ControlPlane, key: &str) {
    let s = slot(key.as_bytes());
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    assert!(wait_until(Duration::from_secs(30), || {
        owners(cp)[s as usize] == Some(2) && idle(cp)
    }));
    assert!(!cp.servers[0].has(key) && cp.servers[1].has(key), "moved");
}

#[test]
fn a_noloop_client_whose_slot_moves_to_a_new_master_still_hears_only_others_writes() {
    let key = "moving:noloop";
    let (cp, mut w) = every_slot_on_group_1_with(key);
    // Tracking starts while group 2's server serves nothing: its own connection there is
    // opened when it first sends there.
    let mut t = resp3(cp.proxies[0].addr());
    let r = t.cmd(&[
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "moving:", "NOLOOP",
    ]);
    assert_eq!(r.text().as_deref(), Some("OK"));
    move_to_group_2(&cp, key);
    // The move's copy and delete are not the client's: reported.
    t.set_read_timeout(Duration::from_secs(5));
    assert_eq!(t.read_frame(), invalidate(&[key]));
    t.set_read_timeout(Duration::from_secs(1));
    while t.try_read_frame().is_ok() {}
    // Its own write at the new owner: no report of the key (its first connection there may
    // drop the whole cache once, with a null invalidation, and nothing else).
    t.set_read_timeout(Duration::from_secs(5));
    let flush = Frame::Push(vec![Frame::bulk("invalidate"), Frame::Null]);
    let reply_past_flushes = |t: &mut RawClient, args: &[&str]| {
        t.send(&crate::support::encode(args));
        let f = t.read_frame();
        if f != flush {
            return f;
        }
        // The flush came ahead of the reply, which follows it.
        let f = t.read_frame();
        assert_ne!(f, flush, "one flush at most");
        f
    };
    assert_eq!(
        reply_past_flushes(&mut t, &["SET", key, "mine"])
            .text()
            .as_deref(),
        Some("OK")
    );
    let pong = reply_past_flushes(&mut t, &["PING"]);
    assert_eq!(pong.text().as_deref(), Some("PONG"), "{pong:?}");
    let _: () = w.set(key, "theirs").unwrap();
    assert_eq!(t.read_frame(), invalidate(&[key]));
    assert_eq!(t.cmd(&["GET", key]), Frame::bulk("theirs"));
}

#[test]
fn a_resp3_redirect_target_gets_invalidate_pushes_and_a_gone_one_is_reported_as_redis_does() {
    let c = Cluster::start();
    let mut target = resp3(c.proxy.addr());
    target.set_read_timeout(Duration::from_secs(5));
    let id = match target.cmd(&["CLIENT", "ID"]) {
        Frame::Integer(id) => id.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    };
    target.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut tracker = RawClient::connect(c.proxy.addr());
    let r = tracker.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    assert_eq!(r.text().as_deref(), Some("OK"));
    tracker.cmd(&["GET", "redir3:k"]);
    let mut writer = RawClient::connect(c.proxy.addr());
    writer.cmd(&["SET", "redir3:k", "v"]);
    assert_eq!(
        target.read_frame(),
        invalidate(&["redir3:k"]),
        "as from Redis"
    );
    writer.cmd(&["PUBLISH", "__redis__:invalidate", "hello"]);
    assert_eq!(
        target.read_frame(),
        Frame::Push(vec![
            Frame::bulk("message"),
            Frame::bulk("__redis__:invalidate"),
            Frame::bulk("hello"),
        ])
    );
    // The target goes: a RESP3 tracking client is told so in place of each invalidation, a
    // RESP2 one hears nothing (as from Redis).
    let mut tracker3 = resp3(c.proxy.addr());
    tracker3.set_read_timeout(Duration::from_secs(5));
    tracker3.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    tracker3.cmd(&["GET", "redir3:k"]);
    tracker.cmd(&["GET", "redir3:k"]);
    drop(target);
    assert!(wait_until(Duration::from_secs(5), || {
        let info = tracker3.cmd(&["CLIENT", "TRACKINGINFO"]);
        tracking_flags(&info).contains(&"broken_redirect".to_string())
    }));
    writer.cmd(&["SET", "redir3:k", "w"]);
    assert_eq!(
        tracker3.read_frame(),
        Frame::Push(vec![
            Frame::bulk("tracking-redir-broken"),
            Frame::Integer(id.parse().unwrap()),
        ])
    );
    assert_eq!(tracker.cmd(&["PING"]).text().as_deref(), Some("PONG"));
}

#[test]
fn tracking_invalidates_what_clients_of_every_proxy_cached() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let (a, b) = (cp.proxies[0].addr(), cp.proxies[1].addr());
    let mut writer = conn(b);
    let _: () = writer.set("cached", "v1").unwrap();

    // Default mode in RESP3: a key read is invalidated once, by a write through the other
    // proxy, as a push between replies.
    let mut reader = resp3(a);
    assert_eq!(
        reader.cmd(&["CLIENT", "TRACKING", "ON"]).text().as_deref(),
        Some("OK")
    );
    assert_eq!(
        reader.cmd(&["GET", "cached"]),
        crate::support::Frame::bulk("v1")
    );
    let _: () = writer.set("cached", "v2").unwrap();
    reader.set_read_timeout(Duration::from_secs(5));
    assert_eq!(reader.read_frame(), invalidate(&["cached"]));
    // Not read again: a second write is not reported.
    let _: () = writer.set("cached", "v3").unwrap();
    assert_eq!(reader.cmd(&["PING"]).text().as_deref(), Some("PONG"));
    assert_eq!(
        reader.cmd(&["CLIENT", "GETREDIR"]),
        crate::support::Frame::Integer(0)
    );

    // BCAST with a prefix: every write under it, read or not, and nothing else.
    let mut bcast = resp3(a);
    let r = bcast.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:"]);
    assert_eq!(r.text().as_deref(), Some("OK"));
    let _: () = writer.set("other:1", "x").unwrap();
    let _: () = writer.set("user:7", "x").unwrap();
    bcast.set_read_timeout(Duration::from_secs(5));
    assert_eq!(bcast.read_frame(), invalidate(&["user:7"]));

    // OPTIN: only the read after CLIENT CACHING yes is tracked.
    let mut optin = resp3(a);
    optin.cmd(&["CLIENT", "TRACKING", "ON", "OPTIN"]);
    optin.cmd(&["GET", "in:1"]);
    assert_eq!(
        optin.cmd(&["CLIENT", "CACHING", "yes"]).text().as_deref(),
        Some("OK")
    );
    optin.cmd(&["GET", "in:2"]);
    let _: () = writer.set("in:1", "x").unwrap();
    let _: () = writer.set("in:2", "x").unwrap();
    optin.set_read_timeout(Duration::from_secs(5));
    assert_eq!(optin.read_frame(), invalidate(&["in:2"]));

    // RESP2: invalidations redirected to a client subscribed to __redis__:invalidate.
    let mut target = RawClient::connect(a);
    let (id, id_number) = match target.cmd(&["CLIENT", "ID"]) {
        crate::support::Frame::Integer(id) => (id.to_string(), id),
        other => panic!("CLIENT ID: {other:?}"),
    };
    target.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut resp2 = RawClient::connect(a);
    let r = resp2.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    assert_eq!(r.text().as_deref(), Some("OK"));
    assert_eq!(
        resp2.cmd(&["CLIENT", "GETREDIR"]),
        crate::support::Frame::Integer(id_number)
    );
    resp2.cmd(&["GET", "redirected"]);
    let _: () = writer.set("redirected", "x").unwrap();
    target.set_read_timeout(Duration::from_secs(5));
    use crate::support::Frame;
    assert_eq!(
        target.read_frame(),
        Frame::Array(vec![
            Frame::bulk("message"),
            Frame::bulk("__redis__:invalidate"),
            Frame::Array(vec![Frame::bulk("redirected")]),
        ])
    );

    // Redis's errors for options that do not go together.
    let e = resp2.cmd(&["CLIENT", "TRACKING", "ON", "PREFIX", "a"]);
    assert_eq!(
        e.error(),
        Some("ERR PREFIX option requires BCAST mode to be enabled")
    );
    let mut many = vec![
        "CLIENT".to_string(),
        "TRACKING".into(),
        "ON".into(),
        "BCAST".into(),
    ];
    for i in 0..2000 {
        many.extend(["PREFIX".to_string(), format!("p{i}:")]);
    }
    let e = resp2.cmd(&many);
    assert!(e.error().unwrap().contains("at most 1024 PREFIX"), "{e:?}");
    let e = resp2.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"]);
    assert_eq!(
        e.error(),
        Some("ERR The client ID you want redirect to does not exist")
    );
    let e = resp2.cmd(&["CLIENT", "CACHING", "yes"]);
    assert!(e.error().unwrap().contains("OPTIN or OPTOUT"), "{e:?}");
    assert_eq!(
        resp2.cmd(&["CLIENT", "TRACKING", "OFF"]).text().as_deref(),
        Some("OK")
    );
    assert_eq!(
        resp2.cmd(&["CLIENT", "GETREDIR"]),
        crate::support::Frame::Integer(-1)
    );
}

#[test]
fn a_cached_key_whose_slot_moves_away_is_invalidated() {
    let key = "moving:cached";
    let (cp, mut w) = every_slot_on_group_1_with(key);
    let mut reader = resp3(cp.proxies[0].addr());
    reader.cmd(&["CLIENT", "TRACKING", "ON"]);
    reader.cmd(&["GET", key]);
    move_to_group_2(&cp, key);
    reader.set_read_timeout(Duration::from_secs(5));
    assert_eq!(
        reader.read_frame(),
        invalidate(&[key]),
        "the move reports the key"
    );
    // Read again from the new owner, written there: invalidated too.
    assert_eq!(reader.cmd(&["GET", key]), crate::support::Frame::bulk("v"));
    let _: () = w.set(key, "v2").unwrap();
    reader.set_read_timeout(Duration::from_secs(5));
    assert_eq!(reader.read_frame(), invalidate(&[key]));
}

#[test]
fn client_unblock_reaches_a_command_blocked_through_the_proxy_and_info_counts_it() {
    let cluster = Cluster::with_config("admin_commands = true\n");
    let mut blocked = RawClient::connect(cluster.proxy.addr());
    let id = match blocked.cmd(&["CLIENT", "ID"]) {
        crate::support::Frame::Integer(id) => id.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    };
    let mut admin = RawClient::connect(cluster.proxy.addr());
    let blocked_count = |admin: &mut RawClient| {
        let info = admin.cmd(&["INFO", "clients"]);
        let text = match info {
            crate::support::Frame::Bulk(b) => String::from_utf8(b).unwrap(),
            other => panic!("INFO: {other:?}"),
        };
        text.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .map(|v| v.trim().to_string())
    };
    for (how, reply) in [("TIMEOUT", "NullArray"), ("ERROR", "UNBLOCKED")] {
        blocked.send(&crate::support::encode(&["BLPOP", "unblock:me", "0"]));
        assert!(wait_until(Duration::from_secs(5), || blocked_count(
            &mut admin
        )
        .as_deref()
            == Some("1")));
        assert_eq!(
            admin.cmd(&["CLIENT", "UNBLOCK", &id, how]),
            crate::support::Frame::Integer(1)
        );
        let r = format!("{:?}", blocked.read_frame());
        assert!(r.contains(reply), "{how}: {r}");
    }
    assert_eq!(blocked_count(&mut admin).as_deref(), Some("0"));
    assert_eq!(
        admin.cmd(&["CLIENT", "UNBLOCK", &id]),
        crate::support::Frame::Integer(0),
        "not blocked"
    );
    // Without admin_commands it is refused, as an admin command.
    let plain = Cluster::start();
    let e = plain.proxy.raw().cmd(&["CLIENT", "UNBLOCK", "1"]);
    assert!(e.error().unwrap().contains("admin_commands"), "{e:?}");
}

#[test]
fn blocked_clients_pop_each_element_once_through_an_aborted_move() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    let (a, b) = (cp.proxies[0].addr(), cp.proxies[1].addr());
    // Enough keys in the moving slots that the move is caught half way.
    let mut c = conn(a);
    for start in (0..40_000).step_by(1000) {
        let pairs: Vec<(String, String)> = (start..start + 1000)
            .map(|i| (format!("fill:{i}"), "x".repeat(32)))
            .collect();
        let _: () = c.mset(&pairs).expect("preload");
    }
    let key = crate::support::keys_on(0, "abortq", 1).remove(0);
    let s = slot(key.as_bytes());
    assert!(s < 512);
    let consumers = 10;
    let handles: Vec<_> = (0..consumers)
        .map(|_| {
            let key = key.clone();
            thread::spawn(move || {
                let mut c = conn(b);
                let r: Option<(String, String)> = c.blpop(&key, 60.0).unwrap();
                r.map(|(_, v)| v)
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        &cp.servers[0]
    ) == consumers as i64));
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": 0, "to": 511, "group": 2}),
        )
        .ok();
    assert!(
        wait_until(Duration::from_secs(60), || { status(&cp).keys_moved > 0 }),
        "the move started"
    );
    let aborted: Aborted = cp.api().post("/api/migrations/abort", &json!({})).ok_as();
    assert!(aborted.aborted > 0, "aborted: {aborted:?}");
    assert!(
        wait_until(Duration::from_secs(120), || { idle(&cp) }),
        "the abort finished"
    );
    assert_eq!(owners(&cp)[s as usize], Some(1), "the slot is back");
    assert!(
        wait_until(Duration::from_secs(5), || blocked_clients(&cp.servers[0])
            == consumers as i64),
        "every client is blocked on the owner again"
    );
    let mut p = conn(a);
    for i in 0..consumers {
        let _: () = p.rpush(&key, format!("e{i}")).unwrap();
    }
    let got: BTreeSet<String> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .expect("consumer panicked")
                .expect("an element, not a timeout")
        })
        .collect();
    assert_eq!(
        got.len(),
        consumers,
        "each element popped by exactly one client"
    );
    let left: i64 = p.llen(&key).unwrap();
    assert_eq!(left, 0);
    assert_eq!(blocked_clients(&cp.servers[1]), 0);
}

#[test]
fn blocked_clients_wait_on_the_promoted_replica_when_their_master_dies() {
    let mut cp = ControlPlane::builder().servers(3).proxies(1).start();
    cp.group(1, &[0, 1]);
    cp.group(2, &[2]);
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2);
    let key = crate::support::keys_on(0, "failq", 1).remove(0);
    let proxy = cp.proxies[0].addr();
    let waiter = {
        let key = key.clone();
        thread::spawn(move || {
            let mut c = conn(proxy);
            let r: Option<(String, String)> = c.blpop(&key, 60.0).unwrap();
            r.map(|(_, v)| v)
        })
    };
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        &cp.servers[0]
    ) == 1));
    let replica = cp.server_addr(1);
    cp.servers[0].kill();
    let down = wait_until(Duration::from_secs(10), || {
        cp.api().get("/api/groups").ok_as::<Vec<GroupView>>()[0].down
    });
    assert!(down, "group 1 is declared down");
    cp.api()
        .post("/api/groups/1/promote", &json!({ "addr": replica }))
        .ok();
    assert!(
        wait_until(Duration::from_secs(10), || blocked_clients(&cp.servers[1])
            == 1),
        "the client waits on the promoted replica"
    );
    let _: () = conn(proxy).rpush(&key, "after-failover").unwrap();
    let got = waiter.join().expect("waiter panicked");
    assert_eq!(got.as_deref(), Some("after-failover"));
}

/// A client blocked on a slot that keeps its owner does not hold a table push: the swap's
/// drain waits for what was routed the old way, and the blocked command counts under the new
/// table as soon as it has looked at it. Before, one consumer blocked in `BLPOP` anywhere on
/// the proxy held every push for the whole drain limit and failed it (`503 … 1 command
/// batches routed with the previous table are still in flight`): 10 s for a one-slot move.
#[test]
fn a_client_blocked_on_a_slot_that_stays_does_not_hold_table_pushes() {
    use tessera_wire::topology::Topology;
    let cp = two_groups_all_slots_on_1();
    let proxy = &cp.proxies[0];
    let key = "stays:queue";
    let s = slot(key.as_bytes()) as usize;
    let other = (s + 1) % 1024;
    let addr = proxy.addr();
    let waiter = thread::spawn(move || {
        let mut c = conn(addr);
        let r: Option<(String, String)> = c.blpop(key, 60.0).unwrap();
        r
    });
    assert!(wait_until(Duration::from_secs(5), || blocked_clients(
        &cp.servers[0]
    ) == 1));
    let admin = proxy.admin();
    let at_rest: Topology = admin.get("/api/proxy/topology").ok_as();
    // A handoff's two pushes for another slot, then a few more back and forth, as quick
    // holds and releases of a move would push them: each is acknowledged (2xx).
    for round in 1..=6u64 {
        let mut t = at_rest.clone();
        t.epoch += round;
        t.slots[other].blocked = round % 2 == 1;
        let body = serde_json::to_vec(&t).expect("a topology serializes");
        let r = admin.request("PUT", "/api/proxy/topology", Some(&body));
        assert!(
            r.status / 100 == 2,
            "push {round} not acknowledged: {} {}",
            r.status,
            r.body
        );
    }
    assert_eq!(
        blocked_clients(&cp.servers[0]),
        1,
        "the blocked command stayed where it was, blocked once"
    );
    let mut p = conn(addr);
    let _: () = p.rpush(key, "e").unwrap();
    let got = waiter.join().expect("the waiter panicked");
    assert_eq!(got, Some((key.to_string(), "e".to_string())));
}
