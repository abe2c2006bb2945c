//! `RedisServer`: a throwaway redis-server on a random loopback port, in its own temp dir,
//! ready once it answers a real PING, killed on drop. Can be killed and restarted on the same
//! port to play a failed backend.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::{RawClient, bin_from_env, free_port, loopback, wait_until};

const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A redis-server child process; killed (SIGKILL) and reaped on drop.
pub(crate) struct RedisServer {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
    /// Arguments given besides the usual ones (kept for a restart).
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts redis-server on a free port and waits until it answers PING.
    ///
    /// # Panics
    /// If redis-server is missing or never becomes ready (after a few port retries).
    pub(crate) fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts redis-server with `extra` arguments besides the usual ones (`--databases 17`).
    ///
    /// # Panics
    /// As `start`.
    pub(crate) fn start_with(extra: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().expect("creating temp dir");
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        for _attempt in 0..3 {
            let addr = loopback(free_port());
            if let Some(child) = spawn_ready(&dir, addr, &extra) {
                return RedisServer {
                    child,
                    addr,
                    dir,
                    extra,
                };
            }
        }
        panic!("redis-server did not start; log:\n{}", read_log(&dir));
    }

    /// `127.0.0.1:port`.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening port.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A `redis://` URL for this server.
    pub(crate) fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// A direct, synchronous redis crate connection (RESP2), bypassing the proxy.
    pub(crate) fn client(&self) -> redis::Connection {
        super::proxy::connect(&self.url())
    }

    /// A direct raw RESP connection, bypassing the proxy.
    pub(crate) fn raw(&self) -> RawClient {
        RawClient::connect(self.addr)
    }

    /// Number of keys in db 0, asked directly.
    pub(crate) fn dbsize(&self) -> i64 {
        redis::cmd("DBSIZE")
            .query(&mut self.client())
            .expect("DBSIZE")
    }

    /// Whether `key` exists on this server, asked directly.
    pub(crate) fn has(&self, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query::<i64>(&mut self.client())
            .expect("EXISTS")
            == 1
    }

    /// Keys of db 0 (where clients' keys live) whose slot is in `slots`, counted by SCAN,
    /// asked directly.
    pub(crate) fn keys_in_slots(&self, slots: std::ops::RangeInclusive<u32>) -> u64 {
        let mut c = self.client();
        let mut cursor = 0u64;
        let mut n = 0u64;
        // Bounded: 10 000 pages of 1000 are ten million keys, more than any test holds.
        for _ in 0..10_000 {
            let (next, page): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query(&mut c)
                .expect("SCAN");
            n += page
                .iter()
                .filter(|k| slots.contains(&super::slot(k.as_bytes())))
                .count() as u64;
            cursor = next;
            if cursor == 0 {
                return n;
            }
        }
        panic!("SCAN of {} did not end", self.addr);
    }

    /// All keys on this server (`KEYS *`, asked directly), sorted.
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.client())
            .expect("KEYS");
        keys.sort();
        keys
    }

    /// `kill <sig>` of the server (`-STOP` freezes it, `-CONT` wakes it; a frozen server is
    /// still killed on drop).
    pub(crate) fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {sig} of redis-server {}", self.addr);
    }

    /// Kills the server with SIGKILL and reaps it; the port stays reserved for [`Self::restart`].
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a fresh (empty) redis-server on the same port, after [`Self::kill`].
    ///
    /// # Panics
    /// If it does not become ready.
    pub(crate) fn restart(&mut self) {
        self.kill();
        // The old process is reaped, but the port may take a moment to be bindable again.
        let mut child = None;
        let ok = wait_until(START_TIMEOUT, || {
            child = spawn_ready(&self.dir, self.addr, &self.extra);
            child.is_some()
        });
        assert!(
            ok,
            "redis-server did not restart on {}; log:\n{}",
            self.addr,
            read_log(&self.dir)
        );
        self.child = child.expect("child is set when ready");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_path(dir: &TempDir) -> PathBuf {
    dir.path().join("redis.log")
}

fn read_log(dir: &TempDir) -> String {
    std::fs::read_to_string(log_path(dir)).unwrap_or_default()
}

/// Spawns redis-server on `addr` and waits for PING; `None` (child reaped) if it exits or
/// never answers, e.g. because the port was taken meanwhile.
fn spawn_ready(dir: &TempDir, addr: SocketAddr, extra: &[String]) -> Option<Child> {
    let log = File::options()
        .create(true)
        .append(true)
        .open(log_path(dir))
        .expect("opening log");
    let mut child = Command::new(bin_from_env("REDIS_SERVER_BIN", "redis-server"))
        .args(["--bind", "127.0.0.1", "--port", &addr.port().to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .args(extra)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("cloning log handle"))
        .stderr(log)
        .spawn()
        .expect("redis-server not found: install it or set REDIS_SERVER_BIN");
    let mut exited = false;
    let ready = wait_until(START_TIMEOUT, || {
        exited = child.try_wait().expect("try_wait").is_some();
        exited || answers_ping(addr, &[b"+PONG"])
    });
    if ready && !exited {
        return Some(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Whether a fresh connection to `addr` answers PING with a line starting with one of `prefixes`.
pub(crate) fn answers_ping(addr: SocketAddr, prefixes: &[&[u8]]) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut line = Vec::new();
    let _ = BufReader::new(stream).read_until(b'\n', &mut line);
    prefixes.iter().any(|p| line.starts_with(p))
}
