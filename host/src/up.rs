//! `tessera up`: a working local cluster from one command, with nothing installed but
//! `redis-server`. Under a data directory it keeps an `fs` store and the servers' data, and
//! it starts, as child processes: two `redis-server`s per group (master + replica), a
//! dashboard, and two proxies. The first run creates the groups and splits the slots evenly;
//! later runs resume the same cluster. Ctrl-C (or SIGTERM) stops every child.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::coordinator::model::{self, Paths};
use crate::redis_client::RedisClient;
use crate::router::SLOTS;

/// The cluster name `tessera up` uses.
pub const CLUSTER: &str = "local";

/// Options of `tessera up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub data_dir: PathBuf,
    pub groups: usize,
    pub proxy_port: u16,
    pub dashboard_port: u16,
    /// Admin API port of the first proxy; the second gets the next one.
    pub admin_port: u16,
    pub redis_server: String,
    /// The tessera binary, started for the dashboard and the proxies.
    pub exe: PathBuf,
}

/// A child process stopped (SIGTERM, then SIGKILL after 5 s) when dropped.
struct ChildGuard {
    name: String,
    child: Child,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
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
        eprintln!("tessera up: {} did not stop in 5 s; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A value remembered in a file of the data directory (ports, the admin token).
fn remembered(
    file: &Path,
    make: impl FnOnce() -> anyhow::Result<String>,
) -> anyhow::Result<String> {
    if let Ok(text) = std::fs::read_to_string(file)
        && !text.trim().is_empty()
    {
        return Ok(text.trim().to_string());
    }
    let v = make()?;
    let mut f =
        std::fs::File::create(file).with_context(|| format!("writing {}", file.display()))?;
    f.write_all(v.as_bytes())?;
    Ok(v)
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(dir.join(format!("{name}.log")))
        .with_context(|| format!("creating the log of {name}"))
}

fn start_redis(opts: &UpOptions, name: &str) -> anyhow::Result<(ChildGuard, String)> {
    let dir = opts.data_dir.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let port: u16 = remembered(&dir.join("port"), || Ok(free_port()?.to_string()))?.parse()?;
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
    Ok((
        ChildGuard {
            name: name.into(),
            child,
        },
        format!("127.0.0.1:{port}"),
    ))
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while !ok() {
        if Instant::now() > deadline {
            bail!("{what} did not come up within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn answers_ping(addr: &str) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Runs the local cluster until Ctrl-C or SIGTERM.
///
/// # Errors
/// redis-server missing or failing, a port taken, or the dashboard refusing the set-up.
pub fn run(opts: UpOptions) -> anyhow::Result<()> {
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating {}", opts.data_dir.display()))?;
    let data_dir = opts.data_dir.canonicalize()?;
    let opts = UpOptions {
        data_dir: data_dir.clone(),
        ..opts
    };
    let logs = data_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let store_url = format!("fs://{}", data_dir.join("store").display());
    let token = remembered(&data_dir.join("admin-token"), || {
        Ok(crate::proxy::cluster::random_token())
    })?;

    // Children are dropped in reverse order: proxies, dashboard, then servers.
    let mut children: Vec<ChildGuard> = Vec::new();
    let mut servers: Vec<(String, String)> = Vec::new(); // (master, replica)
    for g in 1..=opts.groups {
        let (m, maddr) = start_redis(&opts, &format!("redis-{g}a"))?;
        children.push(m);
        let (r, raddr) = start_redis(&opts, &format!("redis-{g}b"))?;
        children.push(r);
        servers.push((maddr, raddr));
    }
    for (m, r) in &servers {
        for a in [m, r] {
            wait_until(
                &format!("redis-server {a}"),
                Duration::from_secs(10),
                || answers_ping(a),
            )?;
        }
    }

    let dashboard_addr = format!("127.0.0.1:{}", opts.dashboard_port);
    let dashboard = Command::new(&opts.exe)
        .args([
            "dashboard",
            "--cluster",
            CLUSTER,
            "--store",
            &store_url,
            "--listen",
            &dashboard_addr,
        ])
        .args(["--admin-token", &token])
        .stdout(log_file(&logs, "dashboard")?)
        .stderr(log_file(&logs, "dashboard.err")?)
        .spawn()
        .context("starting the dashboard")?;
    children.push(ChildGuard {
        name: "dashboard".into(),
        child: dashboard,
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(set_up(&dashboard_addr, &token, &servers, &store_url))
        .with_context(|| format!("setting up the cluster (logs in {})", logs.display()))?;

    let mut proxies = Vec::new();
    for i in 0..2u16 {
        let listen = format!("127.0.0.1:{}", opts.proxy_port + i);
        let admin = format!("127.0.0.1:{}", opts.admin_port + i);
        let child = Command::new(&opts.exe)
            .args([
                "proxy",
                "--cluster",
                CLUSTER,
                "--store",
                &store_url,
                "--listen",
                &listen,
                "--admin-listen",
                &admin,
            ])
            .stdout(log_file(&logs, &format!("proxy-{i}"))?)
            .stderr(log_file(&logs, &format!("proxy-{i}.err"))?)
            .spawn()
            .context("starting a proxy")?;
        children.push(ChildGuard {
            name: format!("proxy {listen}"),
            child,
        });
        proxies.push((listen, admin));
    }
    for (listen, _) in &proxies {
        wait_until(&format!("proxy {listen}"), Duration::from_secs(15), || {
            answers_ping(listen)
        })?;
    }

    println!(
        "tessera is up: cluster {CLUSTER:?}, {} groups, data in {}",
        opts.groups,
        data_dir.display()
    );
    for (g, (m, r)) in servers.iter().enumerate() {
        println!("  group {}: master {m}, replica {r}", g + 1);
    }
    for (listen, admin) in &proxies {
        println!(
            "  proxy:     redis-cli -h 127.0.0.1 -p {}   (admin http://{admin}/metrics)",
            listen.rsplit(':').next().unwrap_or("")
        );
    }
    println!("  dashboard: http://{dashboard_addr}/api/overview");
    println!("  admin:     tessera admin --dashboard {dashboard_addr} --token {token} overview");
    println!("  logs:      {}", logs.display());
    println!("Ctrl-C stops everything; run again to resume the same cluster.");

    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        anyhow::Ok(())
    })?;
    println!("stopping…");
    while let Some(child) = children.pop() {
        drop(child);
    }
    Ok(())
}

/// First run: create the groups, add the servers, split the slots. Later runs: point each
/// replica at its group's master again (redis-server forgets REPLICAOF across restarts).
async fn set_up(
    dashboard: &str,
    token: &str,
    servers: &[(String, String)],
    store_url: &str,
) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let base = format!("http://{dashboard}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if http
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        if Instant::now() > deadline {
            bail!("the dashboard did not answer on {dashboard}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let call = |method: reqwest::Method, path: &str, body: Value| {
        let path = path.to_string();
        let req = http
            .request(method, format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body);
        async move {
            let resp = req.send().await?;
            let status = resp.status();
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            if !status.is_success() {
                bail!(
                    "{path}: HTTP {status}: {}",
                    v["error"]["message"].as_str().unwrap_or("")
                );
            }
            anyhow::Ok(v)
        }
    };
    let groups = call(reqwest::Method::GET, "/api/groups", Value::Null).await?;
    if groups.as_array().is_some_and(|g| g.is_empty()) {
        let n = servers.len();
        for (i, (m, r)) in servers.iter().enumerate() {
            let id = i as u32 + 1;
            call(reqwest::Method::POST, "/api/groups", json!({"id": id})).await?;
            call(
                reqwest::Method::POST,
                &format!("/api/groups/{id}/servers"),
                json!({"addr": m}),
            )
            .await?;
            call(
                reqwest::Method::POST,
                &format!("/api/groups/{id}/servers"),
                json!({"addr": r}),
            )
            .await?;
            let (from, to) = (i * SLOTS / n, (i + 1) * SLOTS / n - 1);
            call(
                reqwest::Method::POST,
                "/api/slots/assign",
                json!({"from": from, "to": to, "group": id}),
            )
            .await?;
        }
        return Ok(());
    }
    let store = crate::coordinator::open(store_url).await?;
    let (groups, _) = model::load_layout(&*store, &Paths::new(CLUSTER)).await?;
    for g in groups {
        let Some(master) = g.master() else { continue };
        let (h, p) = master.rsplit_once(':').context("bad master address")?;
        for s in g.servers.iter().skip(1) {
            if let Ok(mut c) = RedisClient::connect(&s.addr, Duration::from_secs(2)).await {
                let _ = c.cmd(&["REPLICAOF", h, p]).await;
            }
        }
    }
    Ok(())
}
