//! `tessera up`: a working local cluster from one command. Spawns `redis-server` children on
//! free ports under a data directory and serves a proxy in front of them; Ctrl-C stops every
//! child. Run again with the same data directory, it reuses the same ports and data.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::config::ProxyConfig;
use crate::proxy::Proxy;

/// Options of `tessera up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub data_dir: PathBuf,
    pub groups: usize,
    pub proxy_port: u16,
    pub redis_server: String,
}

/// A redis-server child, stopped on drop.
struct RedisChild {
    child: Child,
    addr: String,
}

impl Drop for RedisChild {
    fn drop(&mut self) {
        // SIGTERM lets redis-server write its AOF cleanly; kill only if it does not stop.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The port a group's server used last time, or a new free one (remembered in its folder).
fn group_port(dir: &Path) -> anyhow::Result<u16> {
    let file = dir.join("port");
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Ok(port) = text.trim().parse()
    {
        return Ok(port);
    }
    let port = free_port()?;
    std::fs::write(&file, port.to_string())?;
    Ok(port)
}

fn start_redis(opts: &UpOptions, name: &str) -> anyhow::Result<RedisChild> {
    let dir = opts.data_dir.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let port = group_port(&dir)?;
    let child = Command::new(&opts.redis_server)
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--appendonly",
            "yes",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "starting {}: install it (Debian: sudo apt-get install redis-server)",
                opts.redis_server
            )
        })?;
    let addr = format!("127.0.0.1:{port}");
    let server = RedisChild { child, addr };
    wait_for_ping(&server.addr, Duration::from_secs(10)).with_context(|| {
        format!(
            "redis-server on {} did not answer; see {}/redis.log",
            server.addr,
            dir.display()
        )
    })?;
    Ok(server)
}

fn wait_for_ping(addr: &str, limit: Duration) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(addr) {
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 7];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read_exact(&mut buf).is_ok()
                && &buf == b"+PONG\r\n"
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("no PONG from {addr} within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the local cluster until Ctrl-C or SIGTERM.
///
/// # Errors
/// redis-server missing or failing to start, or the proxy port taken.
pub fn run(opts: UpOptions, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating {}", opts.data_dir.display()))?;
    let mut servers = Vec::new();
    for g in 1..=opts.groups {
        servers.push(start_redis(&opts, &format!("group-{g}"))?);
    }
    let backends: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();
    let config = ProxyConfig {
        listen: format!("127.0.0.1:{}", opts.proxy_port),
        backends: backends.clone(),
        ..ProxyConfig::default()
    };
    let proxy = Proxy::bind(config)?;
    println!(
        "tessera is up ({} groups, data in {})",
        opts.groups,
        opts.data_dir.display()
    );
    for (i, b) in backends.iter().enumerate() {
        println!("  group {}: redis-server {b}", i + 1);
    }
    println!("  proxy:   redis-cli -p {}", proxy.local_addr().port());
    println!("Ctrl-C stops everything; run again to resume with the same data.");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(proxy.run(shutdown));
    drop(servers);
    result
}
