//! Graceful exit: SIGTERM with an open session makes the proxy exit 0 within a bounded time.

use std::process::Command;
use std::time::Duration;

use crate::support::{Cluster, Frame, run_with_timeout};

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
