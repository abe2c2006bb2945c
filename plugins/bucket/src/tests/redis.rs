//! A throwaway `redis-server` on a free loopback port (killed on drop) and a blocking RESP
//! client, so the plugin's merged replies are compared with what Redis answers for one key.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tessera_plugin_sdk::resp;

/// A redis-server for one test.
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl RedisServer {
    /// Starts one.
    ///
    /// # Panics
    /// When `redis-server` cannot be run, with what to do: the tests that need it must fail
    /// rather than pass without checking anything.
    pub(crate) fn start() -> Self {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("free port");
            let dir =
                std::env::temp_dir().join(format!("tessera-bucket-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let child = Command::new(&bin)
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no"])
                .current_dir(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = match child {
                Ok(c) => c,
                Err(e) => panic!(
                    "cannot run {bin:?} ({e}): these tests compare the plugin with a real Redis. \
                     Install it (tools/test.sh does: apt-get install redis-server) or set \
                     REDIS_SERVER_BIN to its path, then run cargo test -p tessera-plugin-bucket again"
                ),
            };
            let mut server = RedisServer {
                child,
                port,
                _dir: TempDir(dir),
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                // Ours only if it reports our child's pid: another test's server may have
                // taken the port between the pick and this one's bind.
                let pid = format!("process_id:{}\r\n", server.child.id());
                if let Some(mut c) = server.try_client()
                    && let Some(info) = c.try_call(&[b"INFO".to_vec(), b"server".to_vec()])
                    && info.windows(pid.len()).any(|w| w == pid.as_bytes())
                {
                    return server;
                }
                if server.child.try_wait().ok().flatten().is_some() {
                    break; // port taken: try another
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-server did not start");
    }

    fn try_client(&self) -> Option<Client> {
        let s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        Some(Client { s, buf: Vec::new() })
    }

    pub(crate) fn client(&self) -> Client {
        self.try_client().expect("connect to redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection, one command at a time.
pub(crate) struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Sends a command and returns its raw RESP2 reply.
    pub(crate) fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        match self.exchange(args) {
            Ok(reply) => reply,
            Err(e) => panic!("redis call failed: {e}"),
        }
    }

    /// As [`Self::call`], `None` on a failed or closed connection (probing a starting server).
    fn try_call(&mut self, args: &[Vec<u8>]) -> Option<Vec<u8>> {
        self.exchange(args).ok()
    }

    fn exchange(&mut self, args: &[Vec<u8>]) -> std::io::Result<Vec<u8>> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.s.write_all(&req)?;
        loop {
            if let Ok(end) = resp::value_end(&self.buf, 0) {
                return Ok(self.buf.drain(..end).collect());
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub(crate) fn call_str(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.call(&args)
    }
}
