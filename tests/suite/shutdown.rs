//! Graceful exit: SIGTERM with an open session makes the proxy exit 0 within a bounded time;
//! a blocked client is answered first; a proxy replaced on its own address (SO_REUSEPORT)
//! loses and doubles no write.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{
    Cluster, Frame, Proxy, RawClient, RedisServer, run_with_timeout, tessera_bin,
};

#[test]
fn sigterm_exits_with_status_zero_while_a_session_is_open() {
    let mut cluster = Cluster::start();
    let mut session = cluster.proxy.raw();
    assert_eq!(session.cmd(&["SET", "k", "v"]), Frame::Simple("OK".into()));

    let pid = cluster.proxy.pid().to_string();
    let kill = run_with_timeout(
        Command::new("kill").args(["-TERM", &pid]),
        Duration::from_secs(5),
    );
    assert!(kill.status.success(), "kill -TERM {pid}: {kill:?}");

    let status = cluster.proxy.wait_exit(Duration::from_secs(10));
    let status = status.unwrap_or_else(|| panic!("tessera still running 10 s after SIGTERM"));
    assert!(
        status.success(),
        "tessera exited with {status} after SIGTERM"
    );
    drop(session);
}

/// A client blocked when the proxy stops is answered, not cut off: its command is unblocked on
/// the server and the client gets what the server answered (here the timeout reply, as no
/// element came), then the connection closes; the proxy exits well within its grace period
/// (10 s), though the command would have waited for ever.
#[test]
fn sigterm_answers_a_blocked_client_before_closing_it() {
    let mut cluster = Cluster::start();
    let mut blocked = cluster.proxy.raw();
    blocked.send(&crate::support::encode(&["BLPOP", "stop:queue", "0"]));
    let server = &cluster.backends[crate::support::backend_of("stop:queue", 2)];
    let waiting = crate::support::wait_until(Duration::from_secs(5), || {
        server
            .raw()
            .cmd(&["INFO", "clients"])
            .text()
            .unwrap_or_default()
            .contains("blocked_clients:1")
    });
    assert!(waiting, "the BLPOP waits on its server");

    let pid = cluster.proxy.pid().to_string();
    let kill = run_with_timeout(
        Command::new("kill").args(["-TERM", &pid]),
        Duration::from_secs(5),
    );
    assert!(kill.status.success(), "kill -TERM {pid}: {kill:?}");
    assert_eq!(blocked.read_frame(), Frame::NullArray, "the timeout reply");
    blocked.expect_closed(Duration::from_secs(5));
    let status = cluster.proxy.wait_exit(Duration::from_secs(8));
    let status = status.unwrap_or_else(|| panic!("tessera still running 8 s after SIGTERM"));
    assert!(
        status.success(),
        "tessera exited with {status} after SIGTERM"
    );
    let info = server
        .raw()
        .cmd(&["INFO", "clients"])
        .text()
        .unwrap_or_default();
    assert!(
        info.contains("blocked_clients:0"),
        "nothing left blocked: {info}"
    );
}

/// One client of the upgrade test: INCRs `counter` until `stop`, reconnecting (and sending the
/// same INCR again) when its connection closes without a reply, as clients that retry on
/// connection errors do. Returns (INCRs answered, answered after `old_gone` was set,
/// reconnections, error replies).
pub(crate) fn incr_client(
    url: String,
    stop: Arc<AtomicBool>,
    old_gone: Arc<AtomicBool>,
) -> (u64, u64, u64, Vec<String>) {
    let (mut ok, mut after, mut reconnects, mut errors) = (0, 0, 0, Vec::new());
    let mut conn: Option<redis::Connection> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stop.load(Ordering::Relaxed) {
        assert!(
            Instant::now() < deadline,
            "the client ran past its deadline"
        );
        let c = match &mut conn {
            Some(c) => c,
            None => match redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                }
            },
        };
        match redis::cmd("INCR").arg("upgrade:counter").query::<i64>(c) {
            Ok(_) => {
                ok += 1;
                if old_gone.load(Ordering::Relaxed) {
                    after += 1;
                }
            }
            Err(e)
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() =>
            {
                conn = None;
                reconnects += 1;
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    (ok, after, reconnects, errors)
}

/// An upgrade in place: a second proxy binds the first one's address with SO_REUSEPORT
/// (`reuse_port`), the first is stopped with SIGTERM under a load of INCRs, and clients that
/// reconnect on a closed connection go on through the second. No INCR fails, none is lost
/// and none counts twice: the counter ends equal to the INCRs answered. Without
/// `--reuse-port` a second proxy cannot bind the address and says so.
#[test]
fn a_proxy_replaced_on_its_own_address_loses_and_doubles_no_write() {
    let backend = RedisServer::start();
    let mut old = Proxy::builder(&[&backend])
        .config("reuse_port = true\n")
        .start();
    let refused = run_with_timeout(
        Command::new(tessera_bin()).args([
            "proxy",
            "--listen",
            &old.addr().to_string(),
            "--backends",
            &backend.addr().to_string(),
        ]),
        Duration::from_secs(10),
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains(&format!("binding {}", old.addr())),
        "a proxy without reuse_port on a taken address: {refused:?}"
    );
    let new = Proxy::builder(&[&backend]).beside(&old).start();

    let stop = Arc::new(AtomicBool::new(false));
    let old_gone = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (url, stop, gone) = (old.url(), stop.clone(), old_gone.clone());
            thread::spawn(move || incr_client(url, stop, gone))
        })
        .collect();
    thread::sleep(Duration::from_secs(1));
    let pid = old.pid().to_string();
    let kill = run_with_timeout(
        Command::new("kill").args(["-TERM", &pid]),
        Duration::from_secs(5),
    );
    assert!(kill.status.success(), "kill -TERM {pid}: {kill:?}");
    let status = old
        .wait_exit(Duration::from_secs(15))
        .unwrap_or_else(|| panic!("the old proxy still runs 15 s after SIGTERM"));
    assert!(status.success(), "the old proxy exited with {status}");
    old_gone.store(true, Ordering::Relaxed);
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut after, mut reconnects) = (0, 0, 0);
    for c in clients {
        let (o, a, r, errors) = c.join().expect("a client");
        assert!(errors.is_empty(), "error replies: {errors:?}");
        assert!(
            a > 0,
            "a client was served by the new proxy after the old one exited"
        );
        (ok, after, reconnects) = (ok + o, after + a, reconnects + r);
    }
    let counter: i64 = redis::cmd("GET")
        .arg("upgrade:counter")
        .query(&mut new.client())
        .expect("GET");
    assert_eq!(
        counter as u64, ok,
        "INCRs answered {ok} (after the old proxy exited: {after}; reconnections: {reconnects})"
    );
    eprintln!(
        "upgrade: {ok} INCRs answered, {after} after the old proxy exited, {reconnects} reconnections"
    );
}

/// Maintenance notifications (`CLIENT MAINT_NOTIFICATIONS`, Redis 8): as the proxy starts to
/// drain, a RESP3 client that asked gets a `MOVING` push naming the address it connected to
/// (or none, if it asked for none), and is served on until it leaves, within the grace; a new
/// connection to the address meanwhile lands on the successor. A client that did not ask is
/// closed at once, as before; RESP2 cannot ask (pushes are RESP3).
#[test]
fn a_client_that_asked_for_maintenance_notifications_is_told_moving_and_served_until_it_leaves() {
    let backend = RedisServer::start();
    let mut old = Proxy::builder(&[&backend])
        .config("reuse_port = true\n")
        .admin()
        .start();
    let resp3 = |c: &mut crate::support::RawClient| {
        assert!(matches!(c.cmd(&["HELLO", "3"]), Frame::Map(_)));
    };
    let mut told = old.raw();
    resp3(&mut told);
    assert_eq!(
        told.cmd(&[
            "CLIENT",
            "MAINT_NOTIFICATIONS",
            "ON",
            "moving-endpoint-type",
            "internal-ip"
        ]),
        Frame::Simple("OK".into())
    );
    let mut told_none = old.raw();
    resp3(&mut told_none);
    assert_eq!(
        told_none.cmd(&[
            "client",
            "maint_notifications",
            "on",
            "MOVING-ENDPOINT-TYPE",
            "none"
        ]),
        Frame::Simple("OK".into())
    );
    let mut plain = old.raw();
    let e = plain.cmd(&["CLIENT", "MAINT_NOTIFICATIONS", "ON"]);
    assert!(
        e.error().is_some_and(|e| e.contains("HELLO 3")),
        "RESP2 cannot ask: {e:?}"
    );
    let bad = told.cmd(&[
        "CLIENT",
        "MAINT_NOTIFICATIONS",
        "ON",
        "moving-endpoint-type",
        "far",
    ]);
    assert!(bad.error().is_some(), "{bad:?}");
    assert_eq!(told.cmd(&["INCR", "n"]), Frame::Integer(1));
    let new = Proxy::builder(&[&backend]).beside(&old).start();

    let pid = old.pid().to_string();
    let kill = run_with_timeout(
        Command::new("kill").args(["-TERM", &pid]),
        Duration::from_secs(5),
    );
    assert!(kill.status.success(), "kill -TERM {pid}: {kill:?}");
    let moving = |f: Frame| match f {
        Frame::Push(items) => items,
        other => panic!("expected a MOVING push, got {other:?}"),
    };
    let push = moving(told.read_frame());
    assert_eq!(push[0], Frame::bulk("MOVING"), "{push:?}");
    assert!(matches!(push[1], Frame::Integer(n) if n > 0), "{push:?}");
    assert_eq!(push[2], Frame::Integer(5), "{push:?}");
    assert_eq!(push[3], Frame::bulk(&old.addr().to_string()), "{push:?}");
    let push = moving(told_none.read_frame());
    assert_eq!(push[3], Frame::Null, "{push:?}");
    // The client that did not ask is closed at its command boundary, as before.
    plain.expect_closed(Duration::from_secs(5));
    // Those told are still served by the draining proxy…
    assert_eq!(told.cmd(&["INCR", "n"]), Frame::Integer(2));
    assert_eq!(told_none.cmd(&["PING"]), Frame::Simple("PONG".into()));
    // … while a new connection to the address reaches the successor.
    let mut moved = RawClient::connect(old.addr());
    assert_eq!(moved.cmd(&["INCR", "n"]), Frame::Integer(3));
    let metrics = old.metrics();
    assert_eq!(
        crate::support::metric(&metrics, "tessera_maint_moving_sent_total"),
        Some(2.0),
        "{metrics}"
    );
    // Once they leave, the old proxy exits, well before the grace would have closed them.
    drop(told);
    drop(told_none);
    let status = old
        .wait_exit(Duration::from_secs(8))
        .unwrap_or_else(|| panic!("the old proxy still runs after its told clients left"));
    assert!(status.success(), "the old proxy exited with {status}");
    assert_eq!(moved.cmd(&["INCR", "n"]), Frame::Integer(4));
    drop(new);
}

/// A told client that does not move is closed when the grace (10 s) ends, at a command
/// boundary, and the proxy exits.
#[test]
fn a_told_client_that_stays_is_closed_when_the_grace_ends() {
    let backend = RedisServer::start();
    let mut old = Proxy::builder(&[&backend]).start();
    let mut told = old.raw();
    assert!(matches!(told.cmd(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(
        told.cmd(&["CLIENT", "MAINT_NOTIFICATIONS", "ON"]),
        Frame::Simple("OK".into())
    );
    let pid = old.pid().to_string();
    let sent = Instant::now();
    let kill = run_with_timeout(
        Command::new("kill").args(["-TERM", &pid]),
        Duration::from_secs(5),
    );
    assert!(kill.status.success(), "kill -TERM {pid}: {kill:?}");
    assert!(matches!(told.read_frame(), Frame::Push(_)));
    told.expect_closed(Duration::from_secs(20));
    let after = sent.elapsed();
    assert!(
        after >= Duration::from_secs(9),
        "closed {after:?} after SIGTERM, before the grace ended"
    );
    let status = old
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the proxy still runs after the grace"));
    assert!(status.success(), "exited with {status}");
}
