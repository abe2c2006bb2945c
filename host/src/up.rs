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

use tessera_model::redis_client::RedisClient;
use tessera_model::router::SLOTS;
use tessera_store::model::{self, Paths};

/// The cluster name `tessera up` uses.
pub(crate) const CLUSTER: &str = "local";

/// Options of `tessera up`.
#[derive(Debug, Clone)]
pub(crate) struct UpOptions {
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

/// A command for a child of `tessera up` that the kernel stops (SIGTERM) if `tessera up`
/// dies without stopping it, even by SIGKILL: it starts as `tessera tied --parent <pid> --
/// <program>`, which asks for a parent-death signal and then becomes `program` (the death
/// signal survives exec; it fires when the thread that spawned the child ends, and `up`
/// spawns every child from its main thread). Add the program's arguments to the result.
fn tied(exe: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["tied", "--parent", &std::process::id().to_string(), "--"])
        .arg(program);
    cmd
}

/// `tessera tied`: asks the kernel for SIGTERM when `parent` dies, then replaces this
/// process with `program` (same pid: `tessera up` checks the pid a server reports). Returns
/// only on failure.
pub(crate) fn exec_tied(parent: u32, program: &[std::ffi::OsString]) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
    {
        return anyhow::anyhow!("asking for a parent-death signal: {e}");
    }
    // `parent` may have died before the request above: then nothing would stop us.
    let ppid = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if u32::try_from(ppid).ok() != Some(parent) {
        return anyhow::anyhow!("tessera up (pid {parent}) is gone; not starting");
    }
    let Some((prog, args)) = program.split_first() else {
        return anyhow::anyhow!("tessera tied: no program to run");
    };
    let e = Command::new(prog).args(args).exec();
    anyhow::anyhow!("starting {}: {e}", prog.to_string_lossy())
}

/// A child process stopped (SIGTERM, then SIGKILL after 5 s) when dropped.
struct ChildGuard {
    name: String,
    child: Child,
}

impl ChildGuard {
    /// Starts `cmd` as a child of `tessera up`.
    fn spawn(name: impl Into<String>, cmd: &mut Command) -> std::io::Result<ChildGuard> {
        Ok(ChildGuard {
            name: name.into(),
            child: cmd.spawn()?,
        })
    }

    /// SIGTERM, then up to `within` for it to exit (a proxy drains its clients first); past
    /// that, dropping it kills it.
    fn stop(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Fails if the child has exited (it could not bind its port, or crashed).
    fn alive(&mut self, logs: &Path) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => bail!(
                "{} exited ({status}) while starting: see its log in {}",
                self.name,
                logs.display()
            ),
            Err(e) => bail!("checking on {}: {e}", self.name),
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
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

/// Every child started so far; stopped newest first (console, proxies, dashboards, then the
/// servers) whichever way `run` returns.
#[derive(Default)]
struct Children(Vec<ChildGuard>);

impl Drop for Children {
    fn drop(&mut self) {
        while let Some(child) = self.0.pop() {
            drop(child);
        }
    }
}

/// SIGINT and SIGTERM, watched from `run`'s first line on a runtime thread of their own, so
/// that a signal during the set-up (a blocking wait, a call to a dashboard) is not lost.
#[derive(Clone)]
struct Stop(tokio::sync::watch::Receiver<bool>);

/// What `tessera up` says when a signal ends its set-up.
const INTERRUPTED: &str = "interrupted: stopping everything started so far";

impl Stop {
    fn install(rt: &tokio::runtime::Runtime) -> anyhow::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        let _guard = rt.enter();
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let (tx, rx) = tokio::sync::watch::channel(false);
        rt.spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = tx.send(true);
        });
        Ok(Stop(rx))
    }

    fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Fails once a signal has come.
    fn check(&self) -> anyhow::Result<()> {
        if self.requested() {
            bail!(INTERRUPTED);
        }
        Ok(())
    }

    /// Until a signal comes.
    async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// `work`, or an error as soon as a signal comes.
    fn run<T>(
        &self,
        rt: &tokio::runtime::Runtime,
        work: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        rt.block_on(async {
            tokio::select! {
                r = work => r,
                () = self.wait() => Err(anyhow::anyhow!(INTERRUPTED)),
            }
        })
    }
}

/// Ports for the servers, picked at random below the kernel's ephemeral range (where no
/// outgoing connection takes its source port), never one handed out before in this run, and
/// free when picked. Another process can still take one before its server binds it; the
/// caller checks that the server answering is its own.
#[derive(Default)]
struct Ports {
    handed_out: std::collections::HashSet<u16>,
}

/// Where the server ports are picked from (the ephemeral range starts above, 32768 by default).
const SERVER_PORTS: std::ops::Range<u16> = 20000..32000;

impl Ports {
    /// Never hands out `own`: the ports this run binds itself (proxies, admin APIs,
    /// dashboards, the console), which may lie in [`SERVER_PORTS`] and are bound only after
    /// the servers start.
    fn excluding(own: impl IntoIterator<Item = u16>) -> Self {
        Self {
            handed_out: own.into_iter().collect(),
        }
    }

    fn pick(&mut self) -> anyhow::Result<u16> {
        let span = u64::from(SERVER_PORTS.end - SERVER_PORTS.start);
        for _ in 0..500 {
            let port = SERVER_PORTS.start + (rand::random::<u64>() % span) as u16;
            if self.handed_out.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue;
            }
            self.handed_out.insert(port);
            return Ok(port);
        }
        bail!("no free port in {SERVER_PORTS:?} on 127.0.0.1")
    }
}

/// A value remembered in a file of the data directory (the admin token), readable by its
/// owner only.
fn remembered(
    file: &Path,
    make: impl FnOnce() -> anyhow::Result<String>,
) -> anyhow::Result<String> {
    if let Ok(text) = std::fs::read_to_string(file)
        && !text.trim().is_empty()
    {
        restrict(file)?;
        return Ok(text.trim().to_string());
    }
    let v = make()?;
    write_private(file, &v)?;
    Ok(v)
}

/// Makes an existing secret file (written by an older `tessera up`) readable by its owner only.
fn restrict(file: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} readable by its owner only", file.display()))
}

/// The log `name` in `dir`, appended to: a process restarted in place (SIGHUP), or in a later
/// run of `tessera up`, goes on with its predecessor's log.
fn log_appended(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))
        .with_context(|| format!("opening the log of {name}"))
}

/// How many times a server is started on a newly picked port when another process turns out
/// to hold the one picked.
const PORT_TRIES: usize = 5;

/// Starts the redis-server `name` under `base` (on the port it had before, or a new one) and
/// waits until it answers as itself: the `process_id` of its INFO is the child's.
fn start_redis(
    opts: &UpOptions,
    base: &Path,
    name: &str,
    ports: &mut Ports,
    stop: &Stop,
) -> anyhow::Result<(ChildGuard, String)> {
    let dir = base.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let port_file = dir.join("port");
    for _ in 0..PORT_TRIES {
        let known = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.trim().parse::<u16>().ok());
        let port = match known {
            Some(p) => p,
            None => {
                let p = ports.pick()?;
                write_private(&port_file, &p.to_string())?;
                p
            }
        };
        let mut child = ChildGuard::spawn(
            format!("redis-server {name} on 127.0.0.1:{port}"),
            tied(&opts.exe, &opts.redis_server)
                .args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                    "--appendonly",
                    "yes",
                    "--save",
                    "",
                    // Redis's 16 client databases and Tessera's own (docs/commands.md).
                    "--databases",
                    "17",
                ])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(dir.join("redis.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .with_context(|| {
            format!(
                "starting {}: install it (Debian: sudo apt-get install redis-server)",
                opts.redis_server
            )
        })?;
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let answer = loop {
            stop.check()?;
            if let Some(pid) = redis_pid(&addr) {
                break Some(pid);
            }
            if child.child.try_wait().ok().flatten().is_some() {
                break None; // it could not bind the port, most likely
            }
            if Instant::now() > deadline {
                bail!(
                    "redis-server {addr} did not come up within 10 s: see {}",
                    dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if answer == Some(child.child.id()) {
            return Ok((child, addr));
        }
        drop(child);
        let holder = answer.map_or_else(
            || "another process".to_owned(),
            |pid| format!("another redis-server (pid {pid})"),
        );
        if known.is_some() {
            bail!(
                "127.0.0.1:{port}, the port of {name} in {}, is taken by {holder}: stop it, or                  delete {} to move {name} to a new port",
                base.display(),
                port_file.display()
            );
        }
        tracing::warn!(port, %holder, "a picked port was taken before its server bound it; picking another");
        let _ = std::fs::remove_file(&port_file);
    }
    bail!("could not start {name}: {PORT_TRIES} picked ports were taken by other processes")
}

/// The `process_id` a redis-server at `addr` reports, if it answers.
fn redis_pid(addr: &str) -> Option<u32> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    // A bulk reply of a few KiB: read until its line with the pid, bounded.
    while text.len() < 64 * 1024 {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
        if let Some(pid) = std::str::from_utf8(&text).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("process_id:"))
                .filter(|_| t.contains("\r\nrun_id:"))
                .and_then(|v| v.trim().parse().ok())
        }) {
            return Some(pid);
        }
    }
    None
}

/// Writes a file of the data directory readable by its owner only.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Polls `ok` until it holds; fails after `limit`, when a signal comes, or when `child` exits.
fn wait_until(
    what: &str,
    limit: Duration,
    stop: &Stop,
    mut child: Option<(&mut ChildGuard, &Path)>,
    mut ok: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        stop.check()?;
        if let Some((c, logs)) = child.as_mut() {
            c.alive(logs)?;
        }
        if ok() {
            // Answered: by the child itself unless it exits now (its port held by another).
            if let Some((c, logs)) = child.as_mut() {
                std::thread::sleep(Duration::from_millis(100));
                c.alive(logs)?;
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what} did not come up within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
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
pub(crate) fn run(opts: UpOptions) -> anyhow::Result<()> {
    // First: from here on a signal stops whatever has been started, at any step.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let stop = Stop::install(&rt)?;
    // Installed before any child starts: a SIGHUP's default is to end the process.
    let mut hangup = {
        let _guard = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?
    };
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

    let mut children = Children::default();
    let own = plans
        .iter()
        .flat_map(|p| {
            p.proxies
                .iter()
                .flat_map(|(data, admin)| [data, admin])
                .chain([&p.dashboard_addr])
        })
        .filter_map(|addr| addr.rsplit_once(':')?.1.parse().ok())
        .chain([opts.console_port]);
    let mut ports = Ports::excluding(own);
    let mut servers: Vec<Vec<(String, String)>> = Vec::new(); // per cluster: (master, replica)
    for plan in &plans {
        std::fs::create_dir_all(&plan.dir)?;
        let mut pairs = Vec::new();
        for g in 1..=opts.groups {
            let (mut maddr, mut raddr) = (String::new(), String::new());
            for (role, addrs) in [("a", &mut maddr), ("b", &mut raddr)] {
                let name = format!("redis-{g}{role}");
                let (child, addr) = start_redis(&opts, &plan.dir, &name, &mut ports, &stop)?;
                children.0.push(child);
                *addrs = addr;
            }
            pairs.push((maddr, raddr));
        }
        servers.push(pairs);
    }
    let plugins_dir = opts
        .plugins_dir
        .clone()
        .or_else(|| default_plugins_dir(&opts.exe));
    let mut plugin_lines = Vec::new();
    let mut tokens = std::collections::BTreeMap::new();
    // Each cluster's dashboard: its `ChildGuard`'s index in `Children`, and its admin token.
    let mut dashboards: Vec<(usize, String)> = Vec::new();
    for (plan, pairs) in plans.iter().zip(&servers) {
        let token = remembered(&plan.dir.join("admin-token"), || {
            Ok(tessera_model::secret::random_token())
        })?;
        let mut dashboard = spawn_dashboard(&opts, plan, &store_url, &token, &logs)?;
        wait_until(
            &format!("the dashboard on {}", plan.dashboard_addr),
            Duration::from_secs(20),
            &stop,
            Some((&mut dashboard, &logs)),
            || answers_http(&plan.dashboard_addr),
        )?;
        dashboards.push((children.0.len(), token.clone()));
        children.0.push(dashboard);
        let first = stop
            .run(
                &rt,
                set_up(&plan.name, &plan.dashboard_addr, &token, pairs, &store_url),
            )
            .with_context(|| {
                format!(
                    "setting up cluster {} (logs in {})",
                    plan.name,
                    logs.display()
                )
            })?;
        // Loaded before the proxies start: they read the catalog before accepting clients.
        let loaded = plugins(&plan.dashboard_addr, &token, plugins_dir.as_deref(), first);
        plugin_lines.push(stop.run(&rt, async { Ok(loaded.await) })?);
        tokens.insert(plan.name.clone(), token);
    }

    // A local cluster is a development cluster: the cluster-wide admin commands (KEYS, SCAN,
    // CONFIG GET …) are on, and the example filter keeps FLUSHALL and FLUSHDB off.
    let proxy_config = data_dir.join("proxy.toml");
    if !proxy_config.exists() {
        std::fs::write(&proxy_config, PROXY_CONFIG)
            .with_context(|| format!("writing {}", proxy_config.display()))?;
    }
    let mut proxies = Vec::new();
    let mut running: Vec<RunningProxy> = Vec::new();
    for (c, plan) in plans.iter().enumerate() {
        for (i, (listen, admin)) in plan.proxies.iter().enumerate() {
            let p = RunningProxy {
                cluster: c,
                index: i,
                listen: listen.clone(),
                admin: admin.clone(),
                at: 0,
            };
            proxies.push((
                p.spawn(&opts, plan, &store_url, &proxy_config, &logs)?,
                listen,
            ));
            running.push(p);
        }
    }
    for (mut child, listen) in proxies {
        // Each proxy compiles the catalog's plugins before it accepts clients: seconds in a
        // debug build, more when several start at once on a small machine.
        let answered = wait_until(
            &format!("the proxy on {listen}"),
            Duration::from_secs(90),
            &stop,
            Some((&mut child, &logs)),
            || answers_ping(listen),
        );
        if let Some(p) = running.iter_mut().find(|p| &p.listen == listen) {
            p.at = children.0.len();
        }
        children.0.push(child);
        answered?;
    }

    let console_config = data_dir.join("console.toml");
    let password = console_user(&console_config, &tokens, &store_url, opts.reset_password)?;
    let console_addr = format!("127.0.0.1:{}", opts.console_port);
    let spawn_console = || {
        ChildGuard::spawn(
            "the console",
            tied(&opts.exe, &opts.exe)
                .arg("console")
                .arg("--config")
                .arg(&console_config)
                .args(["--store", &store_url, "--listen", &console_addr])
                .stdout(log_appended(&logs, "console")?)
                .stderr(log_appended(&logs, "console.err")?),
        )
        .context("starting the console")
    };
    let mut console = spawn_console()?;
    let answered = wait_until(
        &format!("the console on {console_addr}"),
        Duration::from_secs(15),
        &stop,
        Some((&mut console, &logs)),
        || answers_http(&console_addr),
    );
    let console_at = children.0.len();
    children.0.push(console);
    answered?;

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
    println!(
        "Ctrl-C stops everything; run again to resume the same clusters. SIGHUP (kill -HUP {}) \
         restarts the proxies one at a time, then the dashboards and the console, from {}: \
         clients reconnect to the new proxies.",
        std::process::id(),
        opts.exe.display()
    );

    let mut revivals = Revivals::default();
    loop {
        let event = rt.block_on(async {
            tokio::select! {
                () = stop.wait() => Event::Stop,
                _ = hangup.recv() => Event::Upgrade,
                () = tokio::time::sleep(WATCH_EVERY) => Event::Watch,
            }
        });
        match event {
            Event::Stop => break,
            Event::Watch => {
                // A dashboard, proxy or console that exited by itself is started again.
                for ((at, token), plan) in dashboards.iter().zip(&plans) {
                    revivals.revive(&mut children.0[*at], || {
                        spawn_dashboard(&opts, plan, &store_url, token, &logs)
                    });
                }
                for p in &running {
                    let plan = &plans[p.cluster];
                    revivals.revive(&mut children.0[p.at], || {
                        p.spawn(&opts, plan, &store_url, &proxy_config, &logs)
                    });
                }
                revivals.revive(&mut children.0[console_at], spawn_console);
                continue;
            }
            Event::Upgrade => {}
        }
        let upgraded = upgrade_proxies(
            &stop,
            &mut children,
            &mut running,
            &mut ports,
            (&opts, &plans, &store_url, &proxy_config, &logs),
        )
        .and_then(|()| {
            println!("proxies restarted: {}", running.len());
            restart_dashboards(
                &stop,
                &mut children,
                &dashboards,
                &opts,
                &plans,
                &store_url,
                &logs,
            )
        })
        .and_then(|()| {
            println!("dashboards restarted: {}", dashboards.len());
            // Its users log in again: their sessions lived in the old process.
            let restarted = restart(
                &stop,
                &mut children.0[console_at],
                spawn_console,
                &console_addr,
                &logs,
            );
            restarted.map(|pid| println!("console restarted: pid {pid}"))
        });
        match upgraded {
            Ok(()) => println!("restart done"),
            Err(e) if stop.requested() => {
                eprintln!("tessera up: {e:#}");
                break;
            }
            Err(e) => eprintln!("tessera up: restarting the proxies stopped: {e:#}"),
        }
    }
    println!("stopping…");
    drop(children);
    Ok(())
}

/// What `tessera up` waits for once everything runs.
enum Event {
    Stop,
    Upgrade,
    Watch,
}

/// How often `tessera up` looks for children that exited by themselves.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// A child that exits again within this of being started again waits twice as long as the
/// last time before its next start (from 1 s, at most [`REVIVE_AT_MOST_EVERY`]): a child that
/// cannot start does not spin.
const REVIVE_STABLE_AFTER: Duration = Duration::from_secs(30);
const REVIVE_AT_MOST_EVERY: Duration = Duration::from_secs(60);

/// The children started again after they exited by themselves, by name: when, and how long
/// the next start must wait.
#[derive(Default)]
struct Revivals(std::collections::HashMap<String, (Instant, Duration)>);

impl Revivals {
    /// Starts `child` again with `spawn` if it exited, unless its back-off has not passed;
    /// says so. A dashboard whose lock lapsed in a store outage stops, and a proxy
    /// may crash: `tessera up` is their supervisor (docs/operations.md).
    fn revive(
        &mut self,
        child: &mut ChildGuard,
        spawn: impl FnOnce() -> anyhow::Result<ChildGuard>,
    ) {
        let Ok(Some(status)) = child.child.try_wait() else {
            return;
        };
        let now = Instant::now();
        let (last, waited) = self
            .0
            .get(&child.name)
            .copied()
            .unwrap_or((now - REVIVE_STABLE_AFTER, Duration::ZERO));
        let wait = if now.duration_since(last) < REVIVE_STABLE_AFTER {
            (waited * 2).clamp(Duration::from_secs(1), REVIVE_AT_MOST_EVERY)
        } else {
            Duration::ZERO
        };
        if now < last + wait {
            return;
        }
        match spawn() {
            Ok(new) => {
                println!(
                    "{} (pid {}) exited ({status}); started again: pid {}",
                    child.name,
                    child.child.id(),
                    new.child.id()
                );
                *child = new;
            }
            Err(e) => eprintln!(
                "tessera up: {} exited ({status}); starting it again failed: {e:#}",
                child.name
            ),
        }
        self.0.insert(child.name.clone(), (now, wait));
    }
}

/// One of the proxies `tessera up` runs: where it listens, and its place in `Children`.
struct RunningProxy {
    /// Its cluster's index in the plans, and its own among the cluster's proxies.
    cluster: usize,
    index: usize,
    listen: String,
    /// Its admin API now: a restarted proxy gets a new port (the old one still holds its own
    /// while it drains).
    admin: String,
    /// Its `ChildGuard`'s index in `Children`.
    at: usize,
}

/// What a proxy is started with.
type ProxySetting<'a> = (&'a UpOptions, &'a [Plan], &'a str, &'a Path, &'a Path);

impl RunningProxy {
    /// Starts it, with `SO_REUSEPORT` so that a restart can bind its address beside it.
    fn spawn(
        &self,
        opts: &UpOptions,
        plan: &Plan,
        store_url: &str,
        proxy_config: &Path,
        logs: &Path,
    ) -> anyhow::Result<ChildGuard> {
        let log = |suffix: &str| {
            log_appended(
                logs,
                &plan.log_name(&format!("proxy-{}{suffix}", self.index)),
            )
        };
        ChildGuard::spawn(
            format!("the proxy on {}", self.listen),
            tied(&opts.exe, &opts.exe)
                .args(["proxy", "--cluster", &plan.name, "--store", store_url])
                .arg("--config")
                .arg(proxy_config)
                .args(["--listen", &self.listen, "--admin-listen", &self.admin])
                .arg("--reuse-port")
                .stdout(log("")?)
                .stderr(log(".err")?),
        )
        .context("starting a proxy")
    }
}

/// Restarts every proxy, one at a time, from the binary on disk: the new one binds the old
/// one's address beside it (`--reuse-port`) with a new admin port, and once it has loaded the
/// cluster's table the old one gets SIGTERM and drains (docs/operations.md, "Upgrading a proxy
/// in place").
fn upgrade_proxies(
    stop: &Stop,
    children: &mut Children,
    running: &mut [RunningProxy],
    ports: &mut Ports,
    (opts, plans, store_url, proxy_config, logs): ProxySetting<'_>,
) -> anyhow::Result<()> {
    for p in running.iter_mut() {
        stop.check()?;
        let admin = format!("127.0.0.1:{}", ports.pick()?);
        let old_admin = std::mem::replace(&mut p.admin, admin);
        let plan = &plans[p.cluster];
        let mut new = p.spawn(opts, plan, store_url, proxy_config, logs)?;
        let ready = wait_until(
            &format!("the new proxy on {} (admin {})", p.listen, p.admin),
            Duration::from_secs(90),
            stop,
            Some((&mut new, logs)),
            || table_loaded(&p.admin),
        );
        if let Err(e) = ready {
            p.admin = old_admin;
            return Err(e);
        }
        let mut old = std::mem::replace(&mut children.0[p.at], new);
        let pid = old.child.id();
        match old.stop(Duration::from_secs(30)) {
            Some(status) => println!(
                "proxy on {}: pid {pid} drained ({status}); the new one's admin is http://{}",
                p.listen, p.admin
            ),
            None => eprintln!(
                "tessera up: the old proxy on {} (pid {pid}) did not stop within 30 s; killed",
                p.listen
            ),
        }
    }
    Ok(())
}

/// Starts the dashboard of `plan`.
fn spawn_dashboard(
    opts: &UpOptions,
    plan: &Plan,
    store_url: &str,
    token: &str,
    logs: &Path,
) -> anyhow::Result<ChildGuard> {
    let log = |name: &str| log_appended(logs, &plan.log_name(name));
    ChildGuard::spawn(
        format!("the dashboard of {}", plan.name),
        tied(&opts.exe, &opts.exe)
            .args(["dashboard", "--cluster", &plan.name, "--store", store_url])
            .args(["--listen", &plan.dashboard_addr])
            .args(["--admin-token", token])
            // Backups of the cluster go beside its data (docs/backup.md).
            .arg("--backup-root")
            .arg(plan.dir.join("backups"))
            .stdout(log("dashboard")?)
            .stderr(log("dashboard.err")?),
    )
    .context("starting the dashboard")
}

/// Restarts each cluster's dashboard from the binary on disk: SIGTERM (it lets go of the
/// cluster's lock), then a new one on the same port, which takes the lock and resumes any
/// migration in flight. Clients see nothing: the proxies route on their own meanwhile.
fn restart_dashboards(
    stop: &Stop,
    children: &mut Children,
    dashboards: &[(usize, String)],
    opts: &UpOptions,
    plans: &[Plan],
    store_url: &str,
    logs: &Path,
) -> anyhow::Result<()> {
    for ((at, token), plan) in dashboards.iter().zip(plans) {
        let old = children.0[*at].child.id();
        let pid = restart(
            stop,
            &mut children.0[*at],
            || spawn_dashboard(opts, plan, store_url, token, logs),
            &plan.dashboard_addr,
            logs,
        )?;
        println!(
            "dashboard of {}: pid {old} stopped, pid {pid} serves http://{}",
            plan.name, plan.dashboard_addr
        );
    }
    Ok(())
}

/// Stops `child` (SIGTERM, 30 s at most) and puts `spawn`'s process in its place, waited for
/// until `GET /health` on `addr` answers: the new pid.
fn restart(
    stop: &Stop,
    child: &mut ChildGuard,
    spawn: impl FnOnce() -> anyhow::Result<ChildGuard>,
    addr: &str,
    logs: &Path,
) -> anyhow::Result<u32> {
    stop.check()?;
    if child.stop(Duration::from_secs(30)).is_none() {
        bail!(
            "{} (pid {}) did not stop within 30 s",
            child.name,
            child.child.id()
        );
    }
    let mut new = spawn()?;
    wait_until(
        &format!("the new {} on {addr}", new.name),
        Duration::from_secs(30),
        stop,
        Some((&mut new, logs)),
        || answers_http(addr),
    )?;
    let pid = new.child.id();
    *child = new;
    Ok(pid)
}

/// Whether the proxy whose admin API is at `addr` has loaded a topology (its
/// `tessera_slot_table_epoch` on `/metrics` is above 0): it is about to accept clients.
fn table_loaded(addr: &str) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut text = String::new();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").is_ok()
        && s.read_to_string(&mut text).is_ok()
        && text
            .lines()
            .filter_map(|l| l.strip_prefix("tessera_slot_table_epoch "))
            .any(|v| v.trim().parse::<u64>().is_ok_and(|e| e > 0))
}

/// Makes sure `console.toml` has the user `admin` (role admin) and the clusters' tokens.
/// Returns the admin's password when it was created now (first start, or `reset`); otherwise
/// the user and its hash stay as they are.
fn console_user(
    path: &Path,
    tokens: &std::collections::BTreeMap<String, String>,
    store_url: &str,
    reset: bool,
) -> anyhow::Result<Option<String>> {
    let mut config = if path.exists() {
        tessera_console::ConsoleConfig::from_file(path)?
    } else {
        tessera_console::ConsoleConfig::default()
    };
    let has_admin = config.users.iter().any(|u| u.name == "admin");
    let password = (reset || !has_admin).then(tessera_model::secret::random_token);
    if let Some(pw) = &password {
        let hash = tessera_console::hash_password(pw)?;
        config.users.retain(|u| u.name != "admin");
        config.users.insert(
            0,
            tessera_console::User {
                name: "admin".into(),
                password_hash: hash,
                role: None,
            },
        );
    }
    // `up`'s own user manages the clusters `up` runs, also in a console.toml written before
    // users had roles (which would make it a viewer).
    for u in config.users.iter_mut().filter(|u| u.name == "admin") {
        u.role = Some(tessera_wire::access::Role::Admin);
    }
    config.tokens.extend(tokens.iter().map(|(k, v)| {
        let bound = tessera_console::config::ClusterToken::Bound {
            store: store_url.to_owned(),
            token: v.clone(),
        };
        (k.clone(), bound)
    }));
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
            .header(tessera_wire::audit::ACTOR_HEADER, "cli:tessera-up")
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
    let store = tessera_store::open(store_url).await?;
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
                .header(tessera_wire::audit::ACTOR_HEADER, "cli:tessera-up")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that exits at once.
    fn short_lived() -> anyhow::Result<ChildGuard> {
        Ok(ChildGuard::spawn(
            "the test child",
            &mut Command::new("true"),
        )?)
    }

    fn exited(child: &mut ChildGuard) {
        let _ = child.child.wait();
    }

    #[test]
    fn a_child_that_keeps_exiting_is_started_again_ever_less_often() {
        let mut revivals = Revivals::default();
        let mut child = short_lived().unwrap();
        let mut starts = 0;
        let mut revive = |revivals: &mut Revivals, child: &mut ChildGuard| {
            exited(child);
            revivals.revive(child, || {
                starts += 1;
                short_lived()
            });
            starts
        };
        let shift = |revivals: &mut Revivals, by: Duration| {
            revivals.0.get_mut("the test child").unwrap().0 -= by;
        };
        assert_eq!(
            revive(&mut revivals, &mut child),
            1,
            "the first exit: at once"
        );
        assert_eq!(revivals.0["the test child"].1, Duration::ZERO);
        assert_eq!(
            revive(&mut revivals, &mut child),
            1,
            "exited again at once: waits 1 s"
        );
        shift(&mut revivals, Duration::from_secs(1));
        assert_eq!(revive(&mut revivals, &mut child), 2);
        assert_eq!(revivals.0["the test child"].1, Duration::from_secs(1));
        assert_eq!(revive(&mut revivals, &mut child), 2, "then 2 s");
        shift(&mut revivals, Duration::from_secs(2));
        assert_eq!(revive(&mut revivals, &mut child), 3);
        assert_eq!(revivals.0["the test child"].1, Duration::from_secs(2));
        // Once it ran long enough, its next exit is answered at once again.
        shift(&mut revivals, REVIVE_STABLE_AFTER);
        assert_eq!(revive(&mut revivals, &mut child), 4);
        assert_eq!(revivals.0["the test child"].1, Duration::ZERO);
    }
}
