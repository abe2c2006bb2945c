//! `tessera up`: a working local cluster from one command, with nothing installed but
//! `redis-server`. Under a data directory it keeps an `fs` store and the servers' data, and
//! it starts, as child processes: two `redis-server`s per group (master + replica), a
//! dashboard, and two proxies per cluster (`--clusters 2` adds `local2` on the next ports), and
//! the console over them all. The first run creates the groups and splits the slots evenly,
//! loads the example plugins (`metrics`, `filter`) when their wasm32 builds are found, and
//! makes the console user `admin` with a password printed once; later runs resume the same
//! clusters, plugins and user. Ctrl-C (or SIGTERM) stops every child.

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
    /// How many clusters: `local`, then `local2`, … (each on the next ports).
    pub clusters: usize,
    /// The console's port.
    pub console_port: u16,
    /// Give the console's user `admin` a new password (printed).
    pub reset_password: bool,
    /// Where the example plugins' `.wasm` files are; `None`: `<target>/wasm32-unknown-unknown/
    /// release` of the binary's target directory.
    pub plugins_dir: Option<PathBuf>,
}

/// The example plugins loaded on a cluster's first start, in chain order: name, file in the
/// plugins directory, config, fail policy. The metrics plugin observes, so it fails open; the
/// filter refuses what it must, so it fails closed.
const EXAMPLE_PLUGINS: &[(&str, &str, &str, &str)] = &[
    ("metrics", "tessera_plugin_metrics.wasm", "{}", "open"),
    (
        "filter",
        "tessera_plugin_filter.wasm",
        r#"{"deny_commands": ["FLUSHALL", "FLUSHDB"]}"#,
        "closed",
    ),
];

/// The proxies' config, written on the first start (edit it and restart to change them).
const PROXY_CONFIG: &str = "\
# The proxies of `tessera up` (flags on their command line override this file).
# Cluster-wide admin commands (KEYS, SCAN, CONFIG GET, FLUSHALL …) are allowed; the example
# filter plugin refuses FLUSHALL and FLUSHDB.
admin_commands = true
";

/// How to build example plugins (`-p tessera-plugin-<name>` follows), for the output.
const BUILD_PLUGINS: &str = "cargo build --release --target wasm32-unknown-unknown";

/// `<target>/wasm32-unknown-unknown/release` for a binary in `<target>/{debug,release}/`.
fn default_plugins_dir(exe: &Path) -> Option<PathBuf> {
    Some(
        exe.parent()?
            .parent()?
            .join("wasm32-unknown-unknown")
            .join("release"),
    )
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

fn start_redis(opts: &UpOptions, base: &Path, name: &str) -> anyhow::Result<(ChildGuard, String)> {
    let dir = base.join(name);
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

/// One cluster of `tessera up`: its name, where its servers keep their data, its ports.
struct Plan {
    name: String,
    /// Its servers' directories and its admin token file live here.
    dir: PathBuf,
    dashboard_addr: String,
    /// (RESP, admin API) of each of its two proxies.
    proxies: [(String, String); 2],
}

impl Plan {
    /// Cluster `i` (0-based): `local`, `local2`, …; ports offset by `i` (dashboard) and `2i`
    /// (proxies). The first keeps the data directory's top level, as before `--clusters`.
    fn new(opts: &UpOptions, i: usize) -> Self {
        let (name, dir) = if i == 0 {
            (CLUSTER.to_string(), opts.data_dir.clone())
        } else {
            let name = format!("{CLUSTER}{}", i + 1);
            let dir = opts.data_dir.join(&name);
            (name, dir)
        };
        let i = i as u16;
        let proxy = |k: u16| {
            (
                format!("127.0.0.1:{}", opts.proxy_port + 2 * i + k),
                format!("127.0.0.1:{}", opts.admin_port + 2 * i + k),
            )
        };
        Self {
            name,
            dir,
            dashboard_addr: format!("127.0.0.1:{}", opts.dashboard_port + i),
            proxies: [proxy(0), proxy(1)],
        }
    }

    /// A log file name, prefixed with the cluster's name but for the first cluster.
    fn log_name(&self, what: &str) -> String {
        if self.name == CLUSTER {
            what.to_string()
        } else {
            format!("{}-{what}", self.name)
        }
    }
}

/// Runs the local cluster(s) and the console until Ctrl-C or SIGTERM.
///
/// # Errors
/// redis-server missing or failing, a port taken, or the dashboard refusing the set-up.
pub fn run(opts: UpOptions) -> anyhow::Result<()> {
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating {}", opts.data_dir.display()))?;
    let data_dir = opts.data_dir.canonicalize()?;
    let opts = UpOptions {
        data_dir: data_dir.clone(),
        clusters: opts.clusters.max(1),
        ..opts
    };
    let logs = data_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let store_url = format!("fs://{}", data_dir.join("store").display());
    let plans: Vec<Plan> = (0..opts.clusters).map(|i| Plan::new(&opts, i)).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    // Children are dropped in reverse order: console, proxies, dashboards, then servers.
    let mut children: Vec<ChildGuard> = Vec::new();
    let mut servers: Vec<Vec<(String, String)>> = Vec::new(); // per cluster: (master, replica)
    for plan in &plans {
        std::fs::create_dir_all(&plan.dir)?;
        let mut pairs = Vec::new();
        for g in 1..=opts.groups {
            let (m, maddr) = start_redis(&opts, &plan.dir, &format!("redis-{g}a"))?;
            children.push(m);
            let (r, raddr) = start_redis(&opts, &plan.dir, &format!("redis-{g}b"))?;
            children.push(r);
            pairs.push((maddr, raddr));
        }
        servers.push(pairs);
    }
    for a in servers.iter().flatten().flat_map(|(m, r)| [m, r]) {
        wait_until(
            &format!("redis-server {a}"),
            Duration::from_secs(10),
            || answers_ping(a),
        )?;
    }

    let plugins_dir = opts
        .plugins_dir
        .clone()
        .or_else(|| default_plugins_dir(&opts.exe));
    let mut plugin_lines = Vec::new();
    let mut tokens = std::collections::BTreeMap::new();
    for (plan, pairs) in plans.iter().zip(&servers) {
        let token = remembered(&plan.dir.join("admin-token"), || {
            Ok(crate::secret::random_token())
        })?;
        let dashboard = Command::new(&opts.exe)
            .args(["dashboard", "--cluster", &plan.name, "--store", &store_url])
            .args(["--listen", &plan.dashboard_addr])
            .args(["--admin-token", &token])
            .stdout(log_file(&logs, &plan.log_name("dashboard"))?)
            .stderr(log_file(&logs, &plan.log_name("dashboard.err"))?)
            .spawn()
            .context("starting the dashboard")?;
        children.push(ChildGuard {
            name: format!("dashboard of {}", plan.name),
            child: dashboard,
        });
        let first = rt
            .block_on(set_up(
                &plan.name,
                &plan.dashboard_addr,
                &token,
                pairs,
                &store_url,
            ))
            .with_context(|| {
                format!(
                    "setting up cluster {} (logs in {})",
                    plan.name,
                    logs.display()
                )
            })?;
        // Loaded before the proxies start: they read the catalog before accepting clients.
        plugin_lines.push(rt.block_on(plugins(
            &plan.dashboard_addr,
            &token,
            plugins_dir.as_deref(),
            first,
        )));
        tokens.insert(plan.name.clone(), token);
    }

    // A local cluster is a development cluster: the cluster-wide admin commands (KEYS, SCAN,
    // CONFIG GET …) are on, and the example filter keeps FLUSHALL and FLUSHDB off.
    let proxy_config = data_dir.join("proxy.toml");
    if !proxy_config.exists() {
        std::fs::write(&proxy_config, PROXY_CONFIG)
            .with_context(|| format!("writing {}", proxy_config.display()))?;
    }
    for plan in &plans {
        for (i, (listen, admin)) in plan.proxies.iter().enumerate() {
            let child = Command::new(&opts.exe)
                .args(["proxy", "--cluster", &plan.name, "--store", &store_url])
                .arg("--config")
                .arg(&proxy_config)
                .args(["--listen", listen, "--admin-listen", admin])
                .stdout(log_file(&logs, &plan.log_name(&format!("proxy-{i}")))?)
                .stderr(log_file(&logs, &plan.log_name(&format!("proxy-{i}.err")))?)
                .spawn()
                .context("starting a proxy")?;
            children.push(ChildGuard {
                name: format!("proxy {listen}"),
                child,
            });
        }
    }
    for (listen, _) in plans.iter().flat_map(|p| &p.proxies) {
        // Each proxy compiles the catalog's plugins before it accepts clients: seconds in a
        // debug build, more when several start at once on a small machine.
        wait_until(&format!("proxy {listen}"), Duration::from_secs(90), || {
            answers_ping(listen)
        })?;
    }

    let console_config = data_dir.join("console.toml");
    let password = console_user(&console_config, &tokens, opts.reset_password)?;
    let console_addr = format!("127.0.0.1:{}", opts.console_port);
    let console = Command::new(&opts.exe)
        .arg("console")
        .arg("--config")
        .arg(&console_config)
        .args(["--store", &store_url, "--listen", &console_addr])
        .stdout(log_file(&logs, "console")?)
        .stderr(log_file(&logs, "console.err")?)
        .spawn()
        .context("starting the console")?;
    children.push(ChildGuard {
        name: "console".into(),
        child: console,
    });
    wait_until(
        &format!("the console on {console_addr}"),
        Duration::from_secs(15),
        || answers_http(&console_addr),
    )?;

    let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
    println!(
        "tessera is up: cluster{} {}, {} group{} each, data in {}",
        if plans.len() > 1 { "s" } else { "" },
        names.join(", "),
        opts.groups,
        if opts.groups == 1 { "" } else { "s" },
        data_dir.display()
    );
    for (((plan, pairs), token), plugins) in plans
        .iter()
        .zip(&servers)
        .zip(tokens.values())
        .zip(&plugin_lines)
    {
        println!("cluster {}:", plan.name);
        for (g, (m, r)) in pairs.iter().enumerate() {
            println!("  group {}: master {m}, replica {r}", g + 1);
        }
        for (listen, admin) in &plan.proxies {
            println!(
                "  proxy:     redis-cli -h 127.0.0.1 -p {}   (admin http://{admin}/metrics)",
                listen.rsplit(':').next().unwrap_or("")
            );
        }
        println!("  dashboard: http://{}/api/overview", plan.dashboard_addr);
        println!(
            "  admin:     tessera admin --dashboard {} --token {token} overview",
            plan.dashboard_addr
        );
        println!("  plugins:   {plugins}");
    }
    match &password {
        Some(pw) => println!(
            "console:     http://{console_addr}/   user: admin   password: {pw}\n  \
             (shown this once; only its hash is kept, in {})",
            console_config.display()
        ),
        None => println!(
            "console:     http://{console_addr}/   user: admin\n  \
             (its password was printed when it was created; `tessera up --reset-password` \
             prints a new one)"
        ),
    }
    println!("logs:        {}", logs.display());
    println!("Ctrl-C stops everything; run again to resume the same clusters.");

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

/// Makes sure `console.toml` has the user `admin` (role admin) and the clusters' tokens.
/// Returns the admin's password when it was created now (first start, or `reset`); otherwise
/// the user and its hash stay as they are.
fn console_user(
    path: &Path,
    tokens: &std::collections::BTreeMap<String, String>,
    reset: bool,
) -> anyhow::Result<Option<String>> {
    let mut config = if path.exists() {
        crate::console::ConsoleConfig::from_file(path)?
    } else {
        crate::console::ConsoleConfig::default()
    };
    let has_admin = config.users.iter().any(|u| u.name == "admin");
    let password = (reset || !has_admin).then(crate::secret::random_token);
    if let Some(pw) = &password {
        let hash = crate::console::hash_password(pw)?;
        config.users.retain(|u| u.name != "admin");
        config.users.insert(
            0,
            crate::console::User {
                name: "admin".into(),
                password_hash: hash,
                role: None,
            },
        );
    }
    // `up`'s own user manages the clusters `up` runs, also in a console.toml written before
    // users had roles (which would make it a viewer).
    for u in config.users.iter_mut().filter(|u| u.name == "admin") {
        u.role = Some(crate::access::Role::Admin);
    }
    config
        .tokens
        .extend(tokens.iter().map(|(k, v)| (k.clone(), v.clone())));
    config.save(path)?;
    Ok(password)
}

/// Whether `GET /health` on `addr` answers 200 now.
fn answers_http(addr: &str) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 12];
    s.write_all(b"GET /health HTTP/1.0\r\n\r\n").is_ok()
        && s.read_exact(&mut buf).is_ok()
        && buf.ends_with(b" 200")
}

/// First run: create the groups, add the servers, split the slots. Later runs: point each
/// replica at its group's master again (redis-server forgets REPLICAOF across restarts).
async fn set_up(
    cluster: &str,
    dashboard: &str,
    token: &str,
    servers: &[(String, String)],
    store_url: &str,
) -> anyhow::Result<bool> {
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
            .header(crate::api::ACTOR_HEADER, "cli:tessera-up")
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
        return Ok(true);
    }
    let store = crate::coordinator::open(store_url).await?;
    let (groups, _) = model::load_layout(&*store, &Paths::new(cluster)).await?;
    for g in groups {
        let Some(master) = g.master() else { continue };
        let (h, p) = master.rsplit_once(':').context("bad master address")?;
        for s in g.servers.iter().skip(1) {
            if let Ok(mut c) = RedisClient::connect(&s.addr, Duration::from_secs(2)).await {
                let _ = c.cmd(&["REPLICAOF", h, p]).await;
            }
        }
    }
    Ok(false)
}

/// On a cluster's first start, uploads, configures and enables the example plugins found in
/// `dir`; later, lists the catalog. Returns the `plugins:` line of the output. Never fails:
/// a missing build or a refused plugin is only reported (the cluster works without them).
async fn plugins(dashboard: &str, token: &str, dir: Option<&Path>, first: bool) -> String {
    let http = match reqwest::Client::builder()
        // A debug build compiles a module in seconds, and more on a busy machine.
        .timeout(Duration::from_secs(120))
        .build()
    {
        Ok(h) => h,
        Err(e) => return format!("none loaded: {e}"),
    };
    let base = format!("http://{dashboard}/api/plugins");
    if !first {
        let list: Value = match http.get(&base).bearer_auth(token).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(e) => return format!("catalog not read: {e}"),
        };
        let names: Vec<String> = list
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let state = if p["enabled"].as_bool() == Some(true) {
                    "enabled"
                } else {
                    "disabled"
                };
                format!("{} ({state})", p["name"].as_str().unwrap_or("?"))
            })
            .collect();
        return if names.is_empty() {
            "none in the catalog".into()
        } else {
            names.join(", ")
        };
    }
    let Some(dir) = dir.filter(|d| d.is_dir()) else {
        let looked = dir.map_or_else(String::new, |d| format!(" (no directory {})", d.display()));
        return format!(
            "none loaded{looked}; build them with `{BUILD_PLUGINS} \
             -p tessera-plugin-metrics -p tessera-plugin-filter` or give --plugins-dir"
        );
    };
    let mut loaded = Vec::new();
    let mut missing = Vec::new();
    for (name, file, config, fail) in EXAMPLE_PLUGINS {
        let Ok(wasm) = std::fs::read(dir.join(file)) else {
            missing.push(*name);
            continue;
        };
        let call = |req: reqwest::RequestBuilder| async {
            let resp = req
                .bearer_auth(token)
                .header(crate::api::ACTOR_HEADER, "cli:tessera-up")
                .send()
                .await?;
            let status = resp.status();
            if !status.is_success() {
                let v: Value = resp.json().await.unwrap_or(Value::Null);
                bail!(
                    "HTTP {status}: {}",
                    v["error"]["message"].as_str().unwrap_or("")
                );
            }
            anyhow::Ok(())
        };
        let config: Value = serde_json::from_str(config).unwrap_or_else(|_| json!({}));
        let result = async {
            call(
                http.put(format!("{base}/{name}/module"))
                    .header("content-type", "application/wasm")
                    .body(wasm),
            )
            .await?;
            call(
                http.put(format!("{base}/{name}/config"))
                    .json(&json!({"config": config, "fail": fail})),
            )
            .await?;
            call(http.post(format!("{base}/{name}/enable"))).await
        }
        .await;
        match result {
            Ok(()) => loaded.push(format!(
                "{name} (enabled, fail {fail}, config {})",
                serde_json::to_string(&config).unwrap_or_default()
            )),
            Err(e) => loaded.push(format!("{name} NOT loaded ({e})")),
        }
    }
    let mut line = if loaded.is_empty() {
        "none loaded".to_string()
    } else {
        loaded.join("; ")
    };
    if !missing.is_empty() {
        let packages: Vec<String> = missing
            .iter()
            .map(|n| format!(" -p tessera-plugin-{n}"))
            .collect();
        line.push_str(&format!(
            "; not found in {}: {} (build: `{BUILD_PLUGINS}{}`)",
            dir.display(),
            missing.join(", "),
            packages.concat()
        ));
    }
    line
}
