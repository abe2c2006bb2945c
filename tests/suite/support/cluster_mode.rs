//! Cluster-mode guards: `Dashboard` (`tessera dashboard`), `ClusterProxy` (`tessera proxy
//! --cluster`), `Up` (`tessera up`), `Api` (a blocking client of the dashboard's REST API and of
//! a proxy's admin API), and `ControlPlane`, the fixture that puts redis-servers, a dashboard on
//! an fs store (or a given store URL) and proxies together.
//!
//! As everywhere in support/: each process gets free loopback ports and its own temp dir for
//! its log, is ready once a real request answers within a deadline, and is killed (SIGKILL)
//! and reaped on drop, its log printed when the test is failing.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tempfile::TempDir;
use tessera_wire::error::ErrorBody;
use tessera_wire::telemetry::ProxyInfo;

pub(crate) use super::proxy::tessera_bin;
use super::redis_server::answers_ping;
use super::{RawClient, RedisServer, free_port, loopback, run_with_timeout, wait_until};

/// The admin token every fixture dashboard is started with.
pub(crate) const TOKEN: &str = "test-admin-token";

/// The cluster name every fixture uses (each fixture has its own store).
pub(crate) const CLUSTER: &str = "testc";

const START_TIMEOUT: Duration = Duration::from_secs(20);
/// The oldest idle connection a client reuses (see where it is set).
pub(crate) const IDLE_REUSE: Duration = Duration::from_secs(5);
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// HTTP

/// A reply of the dashboard's or a proxy's HTTP API.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) body: String,
    /// `METHOD path`, for messages.
    pub(crate) request: String,
}

impl Reply {
    /// The body as JSON.
    ///
    /// # Panics
    /// If it is not JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: HTTP {} body is not JSON ({e}): {:?}",
                self.request, self.status, self.body
            )
        })
    }

    /// The body as `T`, the `tessera-wire` shape the API documents for it.
    ///
    /// # Panics
    /// If it is not one: a field renamed or retyped fails here, naming the request.
    pub(crate) fn parse<T: DeserializeOwned>(&self) -> T {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: HTTP {} body is not a {} ({e}): {}",
                self.request,
                self.status,
                std::any::type_name::<T>(),
                self.body
            )
        })
    }

    /// Asserts a 2xx status and returns the body as `T` (see [`Self::parse`]).
    pub(crate) fn ok_as<T: DeserializeOwned>(&self) -> T {
        assert!(
            (200..300).contains(&self.status),
            "{}: expected success, got HTTP {}: {}",
            self.request,
            self.status,
            self.body
        );
        self.parse()
    }

    /// Asserts a 2xx status and returns the body as JSON (for the raw shape itself: what an
    /// answer must never hold).
    pub(crate) fn ok(&self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "{}: expected success, got HTTP {}: {}",
            self.request,
            self.status,
            self.body
        );
        self.json()
    }

    /// Asserts an API error: `status`, a JSON content type, and a body that is exactly
    /// `{"error": {"code": code, "message": <non-empty>}}`. Returns the message.
    pub(crate) fn expect_error(&self, status: u16, code: &str) -> String {
        assert_eq!(
            self.status, status,
            "{}: expected HTTP {status} ({code}), got {}: {}",
            self.request, self.status, self.body
        );
        assert!(
            self.content_type.starts_with("application/json"),
            "{}: error body should be JSON, content-type is {:?}: {:?}",
            self.request,
            self.content_type,
            self.body
        );
        let v = self.json();
        let shape_ok = v.as_object().is_some_and(|o| o.len() == 1)
            && v["error"].as_object().is_some_and(|o| o.len() == 2);
        assert!(
            shape_ok,
            "{}: error body should be {{\"error\": {{\"code\", \"message\"}}}}, got {v}",
            self.request
        );
        let e: ErrorBody = self.parse();
        assert_eq!(e.error.code, code, "{}: {v}", self.request);
        let message = e.error.message;
        assert!(
            !message.is_empty(),
            "{}: the error has no message: {v}",
            self.request
        );
        message
    }
}

/// A blocking client of one HTTP API on loopback, with an optional bearer token.
#[derive(Clone)]
pub(crate) struct Api {
    addr: SocketAddr,
    token: Option<String>,
    agent: ureq::Agent,
}

impl Api {
    /// A client of the API at `addr`, sending `Authorization: Bearer <token>` if given.
    pub(crate) fn new(addr: SocketAddr, token: Option<&str>) -> Api {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(HTTP_TIMEOUT))
            .max_redirects(0)
            // The servers close a kept-alive connection idle for 10 s (the header read
            // timeout of `tessera_http::server`); one reused near that age can be closed under
            // the request ("Peer disconnected"), so none older than 5 s is reused.
            .max_idle_age(IDLE_REUSE)
            .build()
            .into();
        Api {
            addr,
            token: token.map(str::to_owned),
            agent,
        }
    }

    /// The same API with another token.
    pub(crate) fn with_token(&self, token: &str) -> Api {
        Api {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    /// The same API without a token.
    pub(crate) fn without_token(&self) -> Api {
        Api {
            token: None,
            ..self.clone()
        }
    }

    /// `GET path`.
    pub(crate) fn get(&self, path: &str) -> Reply {
        self.request("GET", path, None)
    }

    /// `POST path` with `body` as JSON.
    pub(crate) fn post(&self, path: &str, body: &Value) -> Reply {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    /// `PUT path` with `body` as JSON.
    pub(crate) fn put(&self, path: &str, body: &Value) -> Reply {
        self.request("PUT", path, Some(body.to_string().as_bytes()))
    }

    /// `POST path` with `body` sent as it is, labelled `Content-Type: application/json`.
    pub(crate) fn post_raw(&self, path: &str, body: &str) -> Reply {
        self.request("POST", path, Some(body.as_bytes()))
    }

    /// `DELETE path`.
    pub(crate) fn delete(&self, path: &str) -> Reply {
        self.request("DELETE", path, None)
    }

    /// Sends one request.
    ///
    /// # Panics
    /// On a transport error (connection refused, timeout): use [`Self::try_request`] to probe.
    pub(crate) fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
        self.try_request(method, path, body)
            .unwrap_or_else(|e| panic!("{method} http://{}{path}: {e}", self.addr))
    }

    /// Sends one request; a transport error is `Err`.
    pub(crate) fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Reply, ureq::Error> {
        let url = format!("http://{}{path}", self.addr);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let result = match method {
            "GET" | "DELETE" => {
                let mut req = if method == "GET" {
                    self.agent.get(&url)
                } else {
                    self.agent.delete(&url)
                };
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                req.call()
            }
            "POST" | "PUT" => {
                let mut req = if method == "POST" {
                    self.agent.post(&url)
                } else {
                    self.agent.put(&url)
                };
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                match body {
                    Some(b) => req.header("Content-Type", "application/json").send(b),
                    None => req.send_empty(),
                }
            }
            other => panic!("test bug: unsupported method {other}"),
        };
        let mut resp = result?;
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        Ok(Reply {
            status: resp.status().as_u16(),
            content_type,
            body: resp.body_mut().read_to_string()?,
            request: format!("{method} {path}"),
        })
    }

    /// Whether `GET /health` answers 200 now.
    pub(crate) fn healthy(&self) -> bool {
        self.try_request("GET", "/health", None)
            .is_ok_and(|r| r.status == 200)
    }
}

// ---------------------------------------------------------------------------------------------
// Dashboard

/// The settings of a `tessera dashboard`.
#[derive(Debug, Clone)]
pub(crate) struct DashboardOptions {
    pub(crate) cluster: String,
    pub(crate) store: String,
    pub(crate) token: Option<String>,
    /// `--token-key-file`; the dashboard's default (beside an fs store) when `None`.
    pub(crate) token_key_file: Option<PathBuf>,
    pub(crate) health_interval_ms: u64,
    pub(crate) down_after: u32,
    /// More command-line arguments (e.g. `--backend-tls-ca`).
    pub(crate) extra_args: Vec<String>,
}

impl DashboardOptions {
    /// Cluster [`CLUSTER`] in `store`, token [`TOKEN`], fast health checks (every 200 ms,
    /// down after 2 failures).
    pub(crate) fn new(store: &str) -> DashboardOptions {
        DashboardOptions {
            cluster: CLUSTER.to_owned(),
            store: store.to_owned(),
            token: Some(TOKEN.to_owned()),
            token_key_file: None,
            health_interval_ms: 200,
            down_after: 2,
            extra_args: Vec::new(),
        }
    }

    /// The command line of a dashboard listening on `addr`.
    pub(crate) fn command(&self, addr: SocketAddr) -> Command {
        let mut cmd = Command::new(tessera_bin());
        cmd.args(["dashboard", "--cluster", &self.cluster])
            .args(["--store", &self.store])
            .args(["--listen", &addr.to_string()])
            .args(["--health-interval-ms", &self.health_interval_ms.to_string()])
            .args(["--down-after", &self.down_after.to_string()]);
        if let Some(t) = &self.token {
            cmd.args(["--admin-token", t]);
        }
        if let Some(k) = &self.token_key_file {
            cmd.arg("--token-key-file").arg(k);
        }
        cmd.args(&self.extra_args);
        cmd
    }
}

/// A running `tessera dashboard`; killed (SIGKILL) and reaped on drop.
pub(crate) struct Dashboard {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
    command_line: String,
    options: DashboardOptions,
}

impl Dashboard {
    /// Starts a dashboard and waits until `GET /health` answers 200.
    ///
    /// # Panics
    /// If it exits (e.g. the cluster lock is held) or never answers, after a few port retries.
    pub(crate) fn start(options: &DashboardOptions) -> Dashboard {
        let dir = tempfile::tempdir().expect("creating temp dir");
        let mut command_line = String::new();
        for _attempt in 0..3 {
            let addr = loopback(free_port());
            let cmd = options.command(addr);
            command_line = format!("{cmd:?}");
            let probe = Api::new(addr, None);
            if let Some(child) = spawn_logged(cmd, &dir, || probe.healthy()) {
                return Dashboard {
                    child,
                    addr,
                    dir,
                    command_line,
                    options: options.clone(),
                };
            }
        }
        panic!(
            "tessera dashboard never answered /health: {command_line}\nlog:\n{}",
            read_log(&dir)
        );
    }

    /// The API address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The options it was started with.
    pub(crate) fn options(&self) -> &DashboardOptions {
        &self.options
    }

    /// A client of its API with the admin token it was started with.
    pub(crate) fn api(&self) -> Api {
        Api::new(self.addr, self.options.token.as_deref())
    }

    /// Everything it wrote to stdout and stderr so far.
    pub(crate) fn log(&self) -> String {
        read_log(&self.dir)
    }

    /// `kill -9` and reap.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `kill <sig>` of the dashboard (`-STOP` freezes it, `-CONT` wakes it).
    pub(crate) fn signal(&self, sig: &str) {
        signal(self.child.id(), sig);
    }

    /// Waits up to `within` for the process to exit by itself (and reaps it); its status, or
    /// `None`.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        super::wait_exit(&mut self.child, within)
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            super::print_log_after_failure("tessera dashboard", &self.command_line, &self.log());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cluster-mode proxy

/// A running `tessera proxy --cluster`; killed (SIGKILL) and reaped on drop.
pub(crate) struct ClusterProxy {
    child: Child,
    addr: SocketAddr,
    admin_addr: SocketAddr,
    dir: TempDir,
    command_line: String,
    /// The cluster's proxy secret, which its admin API's `/api/proxy/…` routes require.
    secret: String,
}

impl ClusterProxy {
    /// Starts a proxy of `cluster` in `store` and waits until PING answers `+PONG` (it
    /// accepts clients only once its table is loaded from the store).
    ///
    /// # Panics
    /// If it exits or never answers, after a few port retries.
    pub(crate) fn start(cluster: &str, store: &str) -> ClusterProxy {
        Self::start_with_args(cluster, store, &[])
    }

    /// [`ClusterProxy::start`] with more command-line arguments.
    pub(crate) fn start_with_args(cluster: &str, store: &str, extra: &[&str]) -> ClusterProxy {
        let dir = tempfile::tempdir().expect("creating temp dir");
        let mut command_line = String::new();
        for _attempt in 0..3 {
            let (addr, admin_addr) = (loopback(free_port()), loopback(free_port()));
            let mut cmd = Command::new(tessera_bin());
            cmd.args(["proxy", "--cluster", cluster, "--store", store])
                .args(["--listen", &addr.to_string()])
                .args(["--admin-listen", &admin_addr.to_string()])
                .args(extra);
            command_line = format!("{cmd:?}");
            // A proxy that requires AUTH (or refuses everyone) is up when it answers NOAUTH.
            let ready = || answers_ping(addr, &[b"+PONG", b"-NOAUTH"]);
            if let Some(child) = spawn_logged(cmd, &dir, ready) {
                return ClusterProxy {
                    child,
                    addr,
                    admin_addr,
                    dir,
                    command_line,
                    secret: proxy_secret(cluster, store),
                };
            }
        }
        panic!(
            "tessera proxy never answered PING: {command_line}\nlog:\n{}",
            read_log(&dir)
        );
    }

    /// The RESP address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill <sig>` of the proxy (`-STOP` freezes it, `-CONT` wakes it).
    pub(crate) fn signal(&self, sig: &str) {
        signal(self.child.id(), sig);
    }

    /// A raw RESP connection to the proxy.
    pub(crate) fn raw(&self) -> RawClient {
        RawClient::connect(self.addr)
    }

    /// Its admin API's address.
    pub(crate) fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// A client of its admin API, with the proxy secret (`without_token()` for a stranger).
    pub(crate) fn admin(&self) -> Api {
        Api::new(self.admin_addr, Some(&self.secret))
    }

    /// `GET /api/proxy/info`.
    pub(crate) fn info(&self) -> ProxyInfo {
        self.admin().get("/api/proxy/info").ok_as()
    }

    /// The topology epoch in force.
    pub(crate) fn epoch(&self) -> u64 {
        self.info().epoch
    }

    /// `GET /metrics`, as text.
    pub(crate) fn metrics(&self) -> String {
        let r = self.admin().get("/metrics");
        assert_eq!(r.status, 200, "proxy /metrics: {}", r.body);
        r.body
    }

    /// Everything it wrote to stdout and stderr so far.
    pub(crate) fn log(&self) -> String {
        read_log(&self.dir)
    }

    /// `kill -9` and reap.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `within` for the process to exit by itself; its status, or `None`.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        super::wait_exit(&mut self.child, within)
    }
}

impl Drop for ClusterProxy {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            super::print_log_after_failure("tessera proxy", &self.command_line, &self.log());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The fixture

/// Redis-servers, a dashboard and cluster-mode proxies over one store. Groups and slots are
/// left to the test ([`ControlPlane::group`], [`ControlPlane::assign`]).
pub(crate) struct ControlPlane {
    // Dropped in this order: proxies, dashboard, servers, then the store's directory.
    pub(crate) proxies: Vec<ClusterProxy>,
    pub(crate) dashboard: Dashboard,
    pub(crate) servers: Vec<RedisServer>,
    options: DashboardOptions,
    /// The fs store's directory, or for a given store the token key's.
    _store_dir: Option<TempDir>,
}

/// Options for [`ControlPlane`].
#[derive(Default)]
pub(crate) struct ControlPlaneBuilder {
    servers: usize,
    proxies: usize,
    cluster: Option<String>,
    store: Option<String>,
    dashboard_args: Vec<String>,
    proxy_args: Vec<String>,
    server_args: Vec<String>,
}

impl ControlPlaneBuilder {
    /// Starts `n` redis-servers (`ControlPlane::servers`), in no group yet.
    pub(crate) fn servers(mut self, n: usize) -> Self {
        self.servers = n;
        self
    }

    /// More command-line arguments of every redis-server (e.g. `--databases 17`).
    pub(crate) fn server_args(mut self, args: &[&str]) -> Self {
        self.server_args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Starts `n` proxies once the dashboard is up.
    pub(crate) fn proxies(mut self, n: usize) -> Self {
        self.proxies = n;
        self
    }

    /// More command-line arguments of the dashboard (e.g. `--slot-sample-secs 0.5`).
    pub(crate) fn dashboard_args(mut self, args: &[&str]) -> Self {
        self.dashboard_args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// More command-line arguments of every proxy (e.g. `--config FILE`).
    pub(crate) fn proxy_args(mut self, args: &[&str]) -> Self {
        self.proxy_args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Names the cluster `name` instead of [`CLUSTER`] (a second cluster in one store).
    pub(crate) fn cluster(mut self, name: &str) -> Self {
        self.cluster = Some(name.to_owned());
        self
    }

    /// Uses the store at `url` instead of an fs store in a temp dir.
    pub(crate) fn store(mut self, url: &str) -> Self {
        self.store = Some(url.to_owned());
        self
    }

    /// Starts everything; every process is ready when this returns.
    pub(crate) fn start(self) -> ControlPlane {
        let dir = tempfile::tempdir().expect("creating the store's temp dir");
        let given = self.store.is_some();
        let store = self
            .store
            .unwrap_or_else(|| format!("fs://{}", dir.path().join("store").display()));
        let server_args: Vec<&str> = self.server_args.iter().map(String::as_str).collect();
        let servers = (0..self.servers)
            .map(|_| RedisServer::start_with(&server_args))
            .collect();
        let mut options = DashboardOptions::new(&store);
        options.extra_args = self.dashboard_args;
        if let Some(name) = self.cluster {
            options.cluster = name;
        }
        if given {
            // A given store (etcd) has no place beside it for the token key.
            options.token_key_file = Some(dir.path().join("token-key"));
        }
        let dashboard = Dashboard::start(&options);
        let args: Vec<&str> = self.proxy_args.iter().map(String::as_str).collect();
        let proxies = (0..self.proxies)
            .map(|_| ClusterProxy::start_with_args(&options.cluster, &options.store, &args))
            .collect();
        ControlPlane {
            proxies,
            dashboard,
            servers,
            options,
            _store_dir: Some(dir),
        }
    }
}

impl ControlPlane {
    pub(crate) fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder::default()
    }

    /// A client of the dashboard's API, with the admin token.
    pub(crate) fn api(&self) -> Api {
        self.dashboard.api()
    }

    /// The options the dashboard runs with (store URL, cluster, token).
    pub(crate) fn options(&self) -> &DashboardOptions {
        &self.options
    }

    /// `servers[i]`'s address as the API takes it.
    pub(crate) fn server_addr(&self, i: usize) -> String {
        self.servers[i].addr().to_string()
    }

    /// Creates group `id` and adds `servers[i]` for each `i` of `servers` in order (the first
    /// is the master, the others replicate from it).
    pub(crate) fn group(&self, id: u32, servers: &[usize]) {
        let api = self.api();
        api.post("/api/groups", &json!({ "id": id })).ok();
        for &i in servers {
            api.post(
                &format!("/api/groups/{id}/servers"),
                &json!({ "addr": self.server_addr(i) }),
            )
            .ok();
        }
    }

    /// Assigns slots `from..=to` to `group`; returns the new epoch.
    pub(crate) fn assign(&self, from: u32, to: u32, group: u32) -> u64 {
        let v: tessera_wire::cluster::Assigned = self
            .api()
            .post(
                "/api/slots/assign",
                &json!({ "from": from, "to": to, "group": group }),
            )
            .ok_as();
        v.epoch
    }

    /// The usual two-group layout: group 1 of server 0 owns slots 0–511, group 2 of server 1
    /// owns 512–1023.
    pub(crate) fn split_over_two_groups(&self) {
        self.group(1, &[0]);
        self.group(2, &[1]);
        self.assign(0, 511, 1);
        self.assign(512, 1023, 2);
    }

    /// Starts one more proxy; returns its index in `proxies`.
    pub(crate) fn start_proxy(&mut self) -> usize {
        let p = ClusterProxy::start(&self.options.cluster, &self.options.store);
        self.proxies.push(p);
        self.proxies.len() - 1
    }

    /// Runs `tessera admin --dashboard <its dashboard> --token <token> <args>` (bounded).
    pub(crate) fn admin_cli(&self, token: &str, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(tessera_bin());
        cmd.arg("admin")
            .args(["--dashboard", &self.dashboard.addr().to_string()])
            .args(["--token", token])
            .args(args)
            .env("RUST_BACKTRACE", "0");
        run_with_timeout(&mut cmd, Duration::from_secs(30))
    }

    /// Runs `f` on the fixture's store (the same one the dashboard uses).
    pub(crate) fn with_store<T>(&self, f: impl AsyncFnOnce(&dyn tessera_store::Store) -> T) -> T {
        with_store(&self.options.store, f)
    }

    /// The JSON document at `key` of the store.
    pub(crate) fn store_json(&self, key: &str) -> Value {
        store_json(&self.options.store, key)
    }

    /// The proxy secret the dashboard pushes with (a test plays a dashboard with it).
    pub(crate) fn proxy_secret(&self) -> String {
        proxy_secret(&self.options.cluster, &self.options.store)
    }

    /// `kill -9` of the dashboard (its process is reaped; the guard stays until replaced).
    pub(crate) fn kill_dashboard(&mut self) {
        self.dashboard.kill();
    }

    /// Starts a new dashboard with the same options (on a new port) in place of the current
    /// one, which is killed first if it still runs.
    pub(crate) fn restart_dashboard(&mut self) {
        self.dashboard.kill();
        let next = Dashboard::start(&self.options);
        // The old guard is dropped here; its process is already gone.
        self.dashboard = next;
    }
}

// ---------------------------------------------------------------------------------------------
// tessera up

/// A running `tessera up`, in its own process group so that a failing test can take down its
/// children too. Its stdout is read line by line; its stderr goes to a log file.
pub(crate) struct Up {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    lines: Receiver<String>,
    log_dir: TempDir,
}

impl Up {
    /// Runs `tessera up` on `data_dir` (its console on a free port) and waits (up to 90 s)
    /// for it to print `tessera is up`.
    ///
    /// # Panics
    /// If it exits first or never says so.
    pub(crate) fn start(data_dir: &Path, port: u16, dashboard_port: u16, admin_port: u16) -> Up {
        let args = [
            "--port".to_owned(),
            port.to_string(),
            "--dashboard-port".to_owned(),
            dashboard_port.to_string(),
            "--admin-port".to_owned(),
            admin_port.to_string(),
            "--console-port".to_owned(),
            free_port().to_string(),
        ];
        Up::start_with(data_dir, &args)
    }

    /// Runs `tessera up --data-dir data_dir` with `args` (ports and all: the defaults are
    /// fixed ports) and waits (up to 90 s) for it to print `tessera is up`.
    ///
    /// # Panics
    /// If it exits first or never says so.
    pub(crate) fn start_with(data_dir: &Path, args: &[String]) -> Up {
        let mut up = Up::spawn(data_dir, args);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            match up.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.contains("tessera is up") => return up,
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = up.child.wait();
                    panic!(
                        "tessera up exited ({status:?}) before it was up\n{}",
                        up.output()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "tessera up did not print `tessera is up` within 90 s\n{}",
                up.output()
            );
        }
    }

    /// Runs `tessera up --data-dir data_dir` with `args` and returns at once.
    pub(crate) fn spawn(data_dir: &Path, args: &[String]) -> Up {
        let log_dir = tempfile::tempdir().expect("creating temp dir");
        let err = File::create(log_dir.path().join("up.err")).expect("creating up.err");
        let mut child = Command::new(tessera_bin())
            .arg("up")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--plugins-dir")
            .arg(super::plugin_dir())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("spawning tessera up");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let (tx, lines) = mpsc::channel();
        let pipe = child.stdout.take().expect("piped stdout");
        let seen = stdout.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                seen.lock().expect("stdout lock").push(line.clone());
                let _ = tx.send(line);
            }
        });
        Up {
            child,
            stdout,
            lines,
            log_dir,
        }
    }

    /// Its child processes now, with their command lines (from /proc).
    pub(crate) fn children(&self) -> Vec<(u32, String)> {
        let pid = self.child.id();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for t in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
                continue;
            };
            for child in list
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                out.push((child, cmdline));
            }
        }
        out
    }

    /// Sends `sig` (`-HUP` …) to `tessera up` alone (not its group).
    pub(crate) fn signal(&self, sig: &str) {
        signal(self.child.id(), sig);
    }

    /// Sends `sig` (`-INT`, `-TERM`) to `tessera up` alone (not its group) and waits up to
    /// `within` for it to exit.
    pub(crate) fn signal_and_wait(&mut self, sig: &str, within: Duration) -> Option<ExitStatus> {
        signal(self.child.id(), sig);
        self.wait_exit(within)
    }

    /// Waits up to `within` for `tessera up` to exit.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        super::wait_exit(&mut self.child, within)
    }

    /// Waits up to `within` for a line of its stdout matching `pred` (seen before or after
    /// this call) and returns it.
    pub(crate) fn line(&self, within: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        let mut found = None;
        wait_until(within, || {
            found = self
                .stdout
                .lock()
                .expect("stdout lock")
                .iter()
                .find(|l| pred(l))
                .cloned();
            found.is_some()
        });
        found
    }

    /// Its stdout so far and its stderr.
    pub(crate) fn output(&self) -> String {
        format!(
            "--- stdout:\n{}\n--- stderr:\n{}",
            self.stdout.lock().expect("stdout lock").join("\n"),
            std::fs::read_to_string(self.log_dir.path().join("up.err")).unwrap_or_default()
        )
    }

    /// Sends SIGINT (as Ctrl-C would, to this process only) and waits up to `within` for it
    /// to exit; `None` if it is still running.
    pub(crate) fn interrupt(&mut self, within: Duration) -> Option<ExitStatus> {
        self.signal_and_wait("-INT", within)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let pgid = self.child.id();
        if self.child.try_wait().ok().flatten().is_none() {
            // Give it the chance to stop its children itself.
            if self.interrupt(Duration::from_secs(20)).is_none() {
                // Still running, so its pid (the group's id) is still its own: take the
                // whole group down.
                signal_group(pgid, "-KILL");
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        // Interrupted before its signal handler was installed (still starting), `tessera up`
        // dies without stopping its children; they are in its process group (a group id is
        // not reused while the group has members), so sweep it.
        signal_group(pgid, "-KILL");
        if std::thread::panicking() {
            super::print_log_after_failure("tessera up", "", &format!("{}\n", self.output()));
        }
    }
}

/// Two free loopback ports `p` and `p + 1` (`tessera up --port p` takes both).
pub(crate) fn two_consecutive_free_ports() -> u16 {
    super::consecutive_free_ports(2)
}

/// The stdout of a `tessera admin` run that must have succeeded (`what` names it in the panic).
pub(crate) fn cli_stdout(out: &std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "tessera admin {what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether something on loopback `port` answers PING with `+PONG` now.
pub(crate) fn answers_on(port: u16) -> bool {
    answers_ping(loopback(port), &[b"+PONG"])
}

/// `kill <sig> <pid>`.
fn signal(pid: u32, sig: &str) {
    let _ = run_with_timeout(
        Command::new("kill").args([sig, &pid.to_string()]),
        Duration::from_secs(5),
    );
}

/// `kill <sig> -- -<pgid>`: every process of a group this suite created.
fn signal_group(pgid: u32, sig: &str) {
    let _ = run_with_timeout(
        Command::new("kill").args([sig, "--", &format!("-{pgid}")]),
        Duration::from_secs(5),
    );
}

// ---------------------------------------------------------------------------------------------
// Processes

fn log_path(dir: &TempDir) -> PathBuf {
    dir.path().join("tessera.log")
}

pub(super) fn read_log(dir: &TempDir) -> String {
    std::fs::read_to_string(log_path(dir)).unwrap_or_default()
}

/// Spawns `cmd` with stdout and stderr appended to the log in `dir`, and waits for `ready`;
/// `None` (child reaped) if it exits or never becomes ready, e.g. because a port was taken.
/// Runs `f` on the store at `url`.
fn with_store<T>(url: &str, f: impl AsyncFnOnce(&dyn tessera_store::Store) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let store = tessera_store::open(url)
            .await
            .expect("opening the fixture's store");
        f(&*store).await
    })
}

/// The JSON document at `key` of the store at `url`.
fn store_json(url: &str, key: &str) -> Value {
    let raw = with_store(url, async |s| s.get(key).await.expect("store get"))
        .unwrap_or_else(|| panic!("{key} is not in the store"));
    serde_json::from_slice(&raw.value).expect("a JSON document")
}

/// The proxy secret of `cluster` in the store at `url`.
fn proxy_secret(cluster: &str, url: &str) -> String {
    store_json(url, &format!("/tessera/{cluster}/meta"))["proxy_secret"]
        .as_str()
        .expect("meta has a proxy secret")
        .to_owned()
}

pub(super) fn spawn_logged(
    mut cmd: Command,
    dir: &TempDir,
    mut ready: impl FnMut() -> bool,
) -> Option<Child> {
    let log = File::options()
        .create(true)
        .append(true)
        .open(log_path(dir))
        .expect("opening log");
    let mut child = cmd
        .current_dir(dir.path())
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("cloning log handle"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let mut exited = false;
    let ok = wait_until(START_TIMEOUT, || {
        exited = child.try_wait().expect("try_wait").is_some();
        exited || ready()
    });
    if ok && !exited {
        return Some(child);
    }
    let _ = child.kill();
    let status = child.wait();
    eprintln!("{cmd:?} did not become ready (exit: {status:?})");
    None
}
