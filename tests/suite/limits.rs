//! Connection limits: `max_clients` refuses extra connections with an error and a close;
//! `client_idle_timeout_ms` closes sessions that stay silent.

use std::time::Duration;

use crate::support::{Cluster, Frame, Proxy, RawClient, wait_until};

/// Opens a session that answers PING, retrying briefly: the proxy's own readiness probe may
/// still hold a client slot for a moment after it disconnected.
fn admitted_session(proxy: &Proxy) -> RawClient {
    let mut session = None;
    let admitted = wait_until(Duration::from_secs(2), || {
        let mut raw = proxy.raw();
        let ok = raw.cmd(&["PING"]) == Frame::Simple("PONG".into());
        session = ok.then_some(raw);
        ok
    });
    assert!(admitted, "a session under max_clients was not admitted");
    session.expect("set when admitted")
}

#[test]
fn connection_over_max_clients_gets_an_error_and_is_closed() {
    let cluster = Cluster::with_config("max_clients = 2\n");
    let mut first = admitted_session(&cluster.proxy);
    let mut second = admitted_session(&cluster.proxy);

    let mut third = cluster.proxy.raw();
    let reply = third
        .try_read_frame()
        .expect("the third connection gets a reply without asking");
    assert_eq!(
        reply,
        Frame::Error("ERR max number of clients reached".into())
    );
    third.expect_closed(Duration::from_secs(2));

    assert_eq!(first.cmd(&["PING"]), Frame::Simple("PONG".into()));
    assert_eq!(second.cmd(&["SET", "k", "v"]), Frame::Simple("OK".into()));
}

#[test]
fn idle_session_is_closed_after_the_idle_timeout() {
    let cluster = Cluster::with_config("client_idle_timeout_ms = 300\n");
    let mut idle = cluster.proxy.raw();
    assert_eq!(idle.cmd(&["PING"]), Frame::Simple("PONG".into()));
    idle.expect_closed(Duration::from_secs(3));
}

#[test]
fn active_session_outlives_the_idle_timeout() {
    let cluster = Cluster::with_config("client_idle_timeout_ms = 1000\n");
    let mut busy = cluster.proxy.raw();
    // Twenty commands 100 ms apart: two seconds in all, never close to one second silent.
    for i in 0..20 {
        assert_eq!(
            busy.cmd(&["PING"]),
            Frame::Simple("PONG".into()),
            "ping {i}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
