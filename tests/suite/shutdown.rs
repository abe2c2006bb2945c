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
