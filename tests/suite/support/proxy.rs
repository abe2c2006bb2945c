//! `Proxy`: the tessera binary in static mode in front of given backends, on a random loopback
//! port, with an optional config file in its own temp dir. Ready once PING answers; killed on
//! drop, printing its log if the test is failing.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use tempfile::TempDir;

use super::cluster_mode::spawn_logged;
use super::redis_server::answers_ping;
use super::{REPLY_TIMEOUT, RawClient, RedisServer, free_port, loopback};

/// A running `tessera proxy`; killed (SIGKILL) and reaped on drop.
pub(crate) struct Proxy {
    child: Child,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    dir: TempDir,
    command_line: String,
}

/// Options for [`Proxy`]; `listen` and `backends` go on the command line unless
/// [`ProxyBuilder::addresses_in_config`] is set.
#[derive(Default)]
pub(crate) struct ProxyBuilder {
    backends: Vec<SocketAddr>,
    config: Option<String>,
    threads: Option<usize>,
    addresses_in_config: bool,
    admin: bool,
    args: Vec<String>,
    /// A given address rather than a free port ([`ProxyBuilder::beside`]).
    at: Option<SocketAddr>,
}

impl ProxyBuilder {
    /// Writes `toml` to `proxy.toml` in the proxy's temp dir and passes `--config`.
    pub(crate) fn config(mut self, toml: &str) -> ProxyBuilder {
        self.config = Some(toml.to_owned());
        self
    }

    /// Adds a backend by address (one that is not a [`RedisServer`], e.g. TLS-only).
    pub(crate) fn backend_addr(mut self, addr: SocketAddr) -> ProxyBuilder {
        self.backends.push(addr);
        self
    }

    /// More command-line arguments, after the others (flags override the config file).
    pub(crate) fn args(mut self, args: &[&str]) -> ProxyBuilder {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Passes `--threads n`.
    pub(crate) fn threads(mut self, n: usize) -> ProxyBuilder {
        self.threads = Some(n);
        self
    }

    /// Serves the admin API (`/metrics`, plugin routes) on a free port ([`Proxy::admin`]).
    pub(crate) fn admin(mut self) -> ProxyBuilder {
        self.admin = true;
        self
    }

    /// Writes `listen` and `backends` into the config file instead of passing the flags.
    pub(crate) fn addresses_in_config(mut self) -> ProxyBuilder {
        self.addresses_in_config = true;
        self
    }

    /// Binds the address of `other`, a proxy running with `reuse_port`, with `--reuse-port`:
    /// ready once its log says it listens (PING would be answered by either).
    pub(crate) fn beside(mut self, other: &Proxy) -> ProxyBuilder {
        self.at = Some(other.addr);
        self.args.push("--reuse-port".into());
        self
    }

    /// Spawns the proxy and waits until it answers PING (`+PONG`, or `-NOAUTH` when a
    /// session password is configured).
    ///
    /// # Panics
    /// If the binary is missing, exits early, or never answers (after a few port retries).
    pub(crate) fn start(self) -> Proxy {
        let dir = tempfile::tempdir().expect("creating temp dir");
        let bin = tessera_bin();
        let mut last_command_line = String::new();
        if let Some(addr) = self.at {
            let mut cmd = self.command(&bin, addr, &dir);
            let admin = self.admin.then(|| loopback(free_port()));
            if let Some(a) = admin {
                cmd.args(["--admin-listen", &a.to_string()]);
            }
            let command_line = format!("{cmd:?}");
            let listening = || {
                std::fs::read_to_string(log_path(&dir)).is_ok_and(|l| l.contains("proxy listening"))
            };
            let child = spawn_logged(cmd, &dir, listening).unwrap_or_else(|| {
                panic!(
                    "{command_line} did not listen:\n{}",
                    std::fs::read_to_string(log_path(&dir)).unwrap_or_default()
                )
            });
            return Proxy {
                child,
                addr,
                admin,
                dir,
                command_line,
            };
        }
        for _attempt in 0..3 {
            let addr = loopback(free_port());
            let admin = self.admin.then(|| loopback(free_port()));
            let mut cmd = self.command(&bin, addr, &dir);
            if let Some(a) = admin {
                cmd.args(["--admin-listen", &a.to_string()]);
            }
            last_command_line = format!("{cmd:?}");
            if let Some(child) = spawn_ready(cmd, addr, &dir) {
                return Proxy {
                    child,
                    addr,
                    admin,
                    dir,
                    command_line: last_command_line,
                };
            }
        }
        panic!(
            "tessera never answered PING: {last_command_line}\nconfig: {:?}\nlog:\n{}",
            self.config,
            std::fs::read_to_string(log_path(&dir)).unwrap_or_default()
        );
    }

    /// The command line for a proxy on `addr`, writing the config file into `dir` if needed.
    fn command(&self, bin: &Path, addr: SocketAddr, dir: &TempDir) -> Command {
        let backends: Vec<String> = self.backends.iter().map(ToString::to_string).collect();
        let mut cmd = Command::new(bin);
        cmd.arg("proxy");
        let mut config = self.config.clone();
        if self.addresses_in_config {
            let quoted: Vec<String> = backends.iter().map(|b| format!("{b:?}")).collect();
            let addresses = format!("listen = \"{addr}\"\nbackends = [{}]\n", quoted.join(", "));
            config = Some(addresses + config.as_deref().unwrap_or(""));
        } else {
            cmd.args([
                "--listen",
                &addr.to_string(),
                "--backends",
                &backends.join(","),
            ]);
        }
        if let Some(n) = self.threads {
            cmd.args(["--threads", &n.to_string()]);
        }
        cmd.args(&self.args);
        if let Some(toml) = config {
            let path = dir.path().join("proxy.toml");
            std::fs::write(&path, toml).expect("writing proxy.toml");
            cmd.arg("--config").arg(path);
        }
        cmd
    }
}

/// Spawns `cmd` with its output appended to the log in `dir`, and waits for PING on `addr`;
/// `None` (child reaped) if it exits or never answers, e.g. because the port was taken.
fn spawn_ready(cmd: Command, addr: SocketAddr, dir: &TempDir) -> Option<Child> {
    spawn_logged(cmd, dir, || answers_ping(addr, &[b"+PONG", b"-NOAUTH"]))
}

impl Proxy {
    /// A builder for a proxy in front of `backends`, slots split evenly in this order.
    pub(crate) fn builder(backends: &[&RedisServer]) -> ProxyBuilder {
        ProxyBuilder {
            backends: backends.iter().map(|b| b.addr()).collect(),
            ..Default::default()
        }
    }

    /// The listening address.
    /// The admin API's address (the builder's [`ProxyBuilder::admin`]).
    pub(crate) fn admin(&self) -> SocketAddr {
        self.admin
            .expect("start the proxy with .admin() to use its admin API")
    }

    /// `GET /metrics` of the admin API.
    pub(crate) fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin());
        ureq::get(&url)
            .call()
            .and_then(|mut r| r.body_mut().read_to_string())
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening port.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The proxy's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The proxy process's resident memory, in bytes.
    pub(crate) fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("reading the proxy's /proc status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .expect("VmRSS in /proc status");
        kb * 1024
    }

    /// A `redis://` URL for the proxy.
    pub(crate) fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// A synchronous redis crate connection (RESP2) through the proxy.
    pub(crate) fn client(&self) -> redis::Connection {
        connect(&self.url())
    }

    /// A raw RESP connection to the proxy.
    pub(crate) fn raw(&self) -> RawClient {
        RawClient::connect(self.addr)
    }

    /// Everything the proxy wrote to stdout and stderr so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(log_path(&self.dir)).unwrap_or_default()
    }

    /// Waits up to `within` for the process to exit on its own.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        super::wait_exit(&mut self.child, within)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            super::print_log_after_failure("tessera", &self.command_line, &self.log());
        }
    }
}

fn log_path(dir: &TempDir) -> PathBuf {
    dir.path().join("tessera.log")
}

/// The tessera binary: `TESSERA_BIN`, else `tessera` next to the `deps/` dir of this test.
///
/// # Panics
/// If it does not exist.
pub(crate) fn tessera_bin() -> PathBuf {
    if let Ok(path) = std::env::var("TESSERA_BIN") {
        let bin = PathBuf::from(path);
        assert!(bin.exists(), "TESSERA_BIN={} does not exist", bin.display());
        return bin;
    }
    // current_exe is target/<profile>/deps/suite-<hash>; the binary is target/<profile>/tessera.
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join(format!("tessera{}", std::env::consts::EXE_SUFFIX)))
        .expect("test executable lives in target/<profile>/deps");
    assert!(
        bin.exists(),
        "tessera binary not found at {}: build it with `cargo build -p tessera` \
         (or set TESSERA_BIN)",
        bin.display()
    );
    bin
}

/// A synchronous redis crate connection to `url` with bounded connect, read and write times.
pub(crate) fn connect(url: &str) -> redis::Connection {
    let client = redis::Client::open(url).unwrap_or_else(|e| panic!("bad url {url}: {e}"));
    let con = client
        .get_connection_with_timeout(REPLY_TIMEOUT)
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    con.set_read_timeout(Some(REPLY_TIMEOUT))
        .expect("set_read_timeout");
    con.set_write_timeout(Some(REPLY_TIMEOUT))
        .expect("set_write_timeout");
    con
}
