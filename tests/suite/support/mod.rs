//! Shared fixtures: process guards for redis-server and tessera, a raw RESP client, slot math.
//! Every guard owns a temp dir and a free loopback port and is killed on drop, so a panicking
//! test leaves nothing running. Every wait here is bounded by a deadline.

mod cluster;
mod cluster_mode;
mod console;
mod etcd;
mod plugins;
mod proxy;
mod redis_server;
mod resp;
mod slot;

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) use cluster::{Cluster, tag_on};
pub(crate) use cluster_mode::{
    Api, ClusterProxy, ControlPlane, Dashboard, DashboardOptions, Reply, TOKEN, Up, answers_on,
    cli_stdout, tessera_bin, two_consecutive_free_ports,
};
pub(crate) use console::{Answer, Console, ConsoleClient, ConsoleSetup, LoginClient};
pub(crate) use etcd::Etcd;
pub(crate) use plugins::{metric, plugin_dir, plugin_toml, plugin_wasm};
pub(crate) use proxy::{Proxy, ProxyBuilder, connect};
pub(crate) use redis_server::RedisServer;
pub(crate) use resp::{Frame, RawClient, encode, read_frame};
pub(crate) use slot::{backend_of, keys_on, slot};

thread_local! {
    /// This thread's (test's) panic message, once it has panicked.
    static FAILURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Keeps each test's panic message for [`print_log_after_failure`] (the default hook still
/// prints it as usual).
fn remember_failure_messages() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            FAILURE.with(|f| *f.borrow_mut() = Some(info.to_string()));
            default(info);
        }));
    });
}

/// Prints a process's log from its guard's `Drop` while a test fails, then the test's failure
/// message again: the logs run to hundreds of lines after the message, and whoever reads only
/// the output's tail (CI's summary) still sees why the test failed.
pub(crate) fn print_log_after_failure(what: &str, command_line: &str, log: &str) {
    let failure = FAILURE.with(|f| f.borrow().clone()).unwrap_or_default();
    eprintln!(
        "--- {what}: {command_line}\n{log}--- end of {what} log\n--- the test failed: {failure}"
    );
}

/// How long a single reply may take before a test gives up on it.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where [`free_port`] picks from: below the kernel's ephemeral range (32768 and up), so that
/// no outgoing connection of a test takes a picked port as its source port before the process
/// meant to listen there binds it; and apart from 20000–31999, where `tessera up` picks its
/// servers' ports.
const TEST_PORTS: std::ops::Range<u16> = 10000..20000;

/// A loopback port that was free a moment ago, never handed out before by this process.
///
/// Another process can still take it before the test's process binds it; the guards retry
/// with a new port if the spawned process cannot bind it.
pub(crate) fn free_port() -> u16 {
    consecutive_free_ports(1)
}

/// `n` loopback ports `p`, `p + 1`, … that were free a moment ago, never handed out before by
/// this process: the next run of [`TEST_PORTS`] (from a start that differs per process) that
/// binds (`tessera up --clusters 2 --port p` takes four).
pub(crate) fn consecutive_free_ports(n: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Every test that starts a process takes a port first.
    remember_failure_messages();
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(TEST_PORTS.end - TEST_PORTS.start);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % span,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..span {
        let first = NEXT.fetch_add(u32::from(n), Ordering::SeqCst) % span;
        if first + u32::from(n) > span {
            continue; // a run does not wrap around the range's end
        }
        let port = TEST_PORTS.start + first as u16;
        if (port..port + n).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return port;
        }
    }
    panic!("no {n} consecutive free loopback ports in {TEST_PORTS:?}")
}

/// `127.0.0.1:port`.
pub(crate) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Polls `ready` every 20 ms until it returns true or `within` has passed.
///
/// Returns whether it became ready.
pub(crate) fn wait_until(within: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A binary named by env var `var`, else `default` on `PATH`.
pub(crate) fn bin_from_env(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// Runs `cmd` to completion with piped output, killing it and panicking after `within`.
pub(crate) fn run_with_timeout(cmd: &mut Command, within: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    wait_output(child, within, &format!("{cmd:?}"))
}

/// Waits up to `within` for `child` to exit by itself (and reaps it); its status, or `None`.
pub(crate) fn wait_exit(
    child: &mut std::process::Child,
    within: Duration,
) -> Option<std::process::ExitStatus> {
    let mut status = None;
    wait_until(within, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status
}

/// Waits up to `within` for `child` (its output piped; `what` names it) to exit, and
/// collects its output; kills it and panics past that.
pub(crate) fn wait_output(mut child: std::process::Child, within: Duration, what: &str) -> Output {
    let exited = wait_until(within, || child.try_wait().expect("try_wait").is_some());
    if !exited {
        let _ = child.kill();
        let out = child.wait_with_output().expect("collecting output");
        panic!(
            "{what} did not finish within {within:?}; stdout: {:?}, stderr: {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The process has exited, so the (small) pipes hold all its output.
    child.wait_with_output().expect("collecting output")
}

/// Runs `commands` on both connections and asserts that every reply is the same.
pub(crate) fn assert_same_replies(
    proxy: &mut RawClient,
    direct: &mut RawClient,
    commands: &[Vec<String>],
) {
    for cmd in commands {
        let want = direct.cmd(cmd);
        assert!(
            want.error().is_none(),
            "test bug: direct redis refused {cmd:?}: {want:?}"
        );
        assert_eq!(
            proxy.cmd(cmd),
            want,
            "through the proxy vs direct, for {cmd:?}"
        );
    }
}

/// The reply line of a server error as the server sent it, e.g. `ERR backend ... unavailable`.
///
/// The redis crate splits the line into a code and a detail; this joins them back.
pub(crate) fn error_line(err: &redis::RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => format!("<not a server error: {err}>"),
    }
}
