//! `Console`: a running `tessera console` with its own console.toml in a temp dir, on a free
//! loopback port, ready once `/health` answers, killed on drop (and restartable on the same
//! port). `ConsoleClient` speaks to it as a browser would: it keeps the session cookie and
//! sends the CSRF token on mutations (both by hand, through headers). `LoginClient` logs in
//! from a chosen loopback source address (127.0.0.2, …), for the per-address lockout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::cluster_mode::{IDLE_REUSE, read_log, spawn_logged};
use super::{Reply, free_port, loopback, tessera_bin};

const HTTP_TIMEOUT: Duration = Duration::from_secs(40);

/// `tessera console hash-password`, the password on stdin.
pub(crate) fn hash_password(password: &str) -> String {
    let mut child = Command::new(tessera_bin())
        .args(["console", "hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning tessera console hash-password");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(format!("{password}\n").as_bytes())
        .expect("writing the password");
    let out = child.wait_with_output().expect("hash-password output");
    assert!(
        out.status.success(),
        "hash-password failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// What goes into console.toml.
#[derive(Default, Clone)]
pub(crate) struct ConsoleSetup {
    pub(crate) stores: Vec<String>,
    /// (name, password); hashed with `tessera console hash-password`.
    pub(crate) users: Vec<(String, String)>,
    /// (user, role) for users that are not viewers (a user without a role is one).
    pub(crate) roles: Vec<(String, String)>,
    /// (cluster, API token), bound to the first store.
    pub(crate) tokens: Vec<(String, String)>,
    /// (cluster, store, admin token).
    pub(crate) bound_tokens: Vec<(String, String, String)>,
    pub(crate) lockout_failures: Option<u32>,
    /// More top-level console.toml lines, e.g. `secure_cookie = true`.
    pub(crate) extra: String,
}

impl ConsoleSetup {
    fn toml(&self) -> String {
        let mut t = self.extra.clone();
        if !t.is_empty() && !t.ends_with('\n') {
            t.push('\n');
        }
        if let Some(n) = self.lockout_failures {
            writeln!(t, "lockout_failures = {n}\nlockout_secs = 60").unwrap();
        }
        for (name, password) in &self.users {
            let hash = hash_password(password);
            writeln!(
                t,
                "[[users]]\nname = \"{name}\"\npassword_hash = \"{hash}\""
            )
            .unwrap();
            if let Some((_, role)) = self.roles.iter().find(|(u, _)| u == name) {
                writeln!(t, "role = \"{role}\"").unwrap();
            }
        }
        writeln!(t, "[tokens]").unwrap();
        for (cluster, token) in &self.tokens {
            writeln!(t, "{cluster} = \"{token}\"").unwrap();
        }
        for (cluster, store, token) in &self.bound_tokens {
            writeln!(
                t,
                "{cluster} = {{ store = \"{store}\", token = \"{token}\" }}"
            )
            .unwrap();
        }
        t
    }
}

/// A running `tessera console`; killed (SIGKILL) and reaped on drop.
pub(crate) struct Console {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
    stores: Vec<String>,
    command_line: String,
}

impl Console {
    /// Writes console.toml from `setup` and starts the console with `--store` for each store.
    ///
    /// # Panics
    /// If it exits or never answers `/health`, after a few port retries.
    pub(crate) fn start(setup: &ConsoleSetup) -> Console {
        let dir = tempfile::tempdir().expect("creating temp dir");
        let config = dir.path().join("console.toml");
        std::fs::write(&config, setup.toml()).expect("writing console.toml");
        // As `tessera up` writes it: the file holds password hashes and tokens.
        std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod 600 console.toml");
        for _attempt in 0..3 {
            let addr = loopback(free_port());
            if let Some((child, command_line)) = spawn(&dir, &setup.stores, addr) {
                return Console {
                    child,
                    addr,
                    dir,
                    stores: setup.stores.clone(),
                    command_line,
                };
            }
        }
        panic!(
            "tessera console never answered /health\nlog:\n{}",
            read_log(&dir)
        );
    }

    /// Kills the console and starts it again with the same console.toml and stores, on the
    /// same port if it is still free (else another: make clients after this).
    ///
    /// # Panics
    /// If it never answers `/health` again.
    pub(crate) fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for addr in [self.addr, loopback(free_port()), loopback(free_port())] {
            if let Some((child, command_line)) = spawn(&self.dir, &self.stores, addr) {
                self.child = child;
                self.addr = addr;
                self.command_line = command_line;
                return;
            }
        }
        panic!(
            "tessera console never answered /health after a restart\nlog:\n{}",
            read_log(&self.dir)
        );
    }

    /// The console process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The console's peak resident memory so far (`VmHWM` of /proc/<pid>/status), in KiB.
    pub(crate) fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("reading the console's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmHWM in /proc/{}/status", self.pid()))
    }

    /// A client logging in from the loopback source address `127.0.0.<last>`.
    pub(crate) fn login_client(&self, last: u8) -> LoginClient {
        LoginClient::new(self.addr, Ipv4Addr::new(127, 0, 0, last).into())
    }

    /// Its HTTP address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A client without a session.
    pub(crate) fn client(&self) -> ConsoleClient {
        ConsoleClient::new(self.addr)
    }

    /// A client logged in as `user`.
    ///
    /// # Panics
    /// If the login fails.
    pub(crate) fn login(&self, user: &str, password: &str) -> ConsoleClient {
        let mut c = self.client();
        let a = c.login(user, password);
        let _: tessera_wire::console::Session = a.reply.ok_as();
        c
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            super::print_log_after_failure(
                "tessera console",
                &self.command_line,
                &read_log(&self.dir),
            );
        }
    }
}

/// Starts `tessera console` on `addr` with the console.toml in `dir`; `None` if it exits or
/// never answers `/health` (the port was taken).
fn spawn(dir: &TempDir, stores: &[String], addr: SocketAddr) -> Option<(Child, String)> {
    let mut cmd = Command::new(tessera_bin());
    cmd.arg("console")
        .arg("--config")
        .arg(dir.path().join("console.toml"));
    for s in stores {
        cmd.args(["--store", s]);
    }
    cmd.args(["--listen", &addr.to_string()]);
    let command_line = format!("{cmd:?}");
    let probe = ConsoleClient::new(addr);
    spawn_logged(cmd, dir, || {
        probe
            .try_request("GET", "/health", None)
            .is_ok_and(|a| a.reply.status == 200)
    })
    .map(|child| (child, command_line))
}

/// Logs in through real HTTP from a chosen source address (async, for parallel attempts).
#[derive(Clone)]
pub(crate) struct LoginClient {
    http: reqwest::Client,
    url: String,
}

impl LoginClient {
    fn new(console: SocketAddr, from: IpAddr) -> LoginClient {
        let http = reqwest::Client::builder()
            .local_address(from)
            .timeout(HTTP_TIMEOUT)
            .build()
            .expect("building an HTTP client");
        LoginClient {
            http,
            url: format!("http://{console}/auth/login"),
        }
    }

    /// `POST /auth/login`.
    ///
    /// # Panics
    /// On a transport error.
    pub(crate) async fn login(&self, user: &str, password: &str) -> Answer {
        let body = serde_json::json!({"user": user, "password": password});
        let resp = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {} as {user:?}: {e}", self.url));
        let status = resp.status().as_u16();
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = resp.text().await.expect("reading the login answer");
        Answer {
            reply: Reply {
                status,
                content_type,
                body,
                request: format!("POST /auth/login as {user:?}"),
            },
            headers,
        }
    }
}

/// A reply and its headers.
pub(crate) struct Answer {
    pub(crate) reply: Reply,
    pub(crate) headers: Vec<(String, String)>,
}

impl Answer {
    /// The first header `name` (lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A browser-like client: the session cookie and the CSRF token, kept by hand.
#[derive(Clone)]
pub(crate) struct ConsoleClient {
    addr: SocketAddr,
    agent: ureq::Agent,
    pub(crate) cookie: Option<String>,
    pub(crate) csrf: Option<String>,
}

impl ConsoleClient {
    /// A client of a console on loopback `port` (one this suite did not start, e.g. `tessera up`'s).
    pub(crate) fn for_port(port: u16) -> ConsoleClient {
        ConsoleClient::new(loopback(port))
    }

    fn new(addr: SocketAddr) -> ConsoleClient {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(HTTP_TIMEOUT))
            .max_redirects(0)
            .max_idle_age(IDLE_REUSE)
            .build()
            .into();
        ConsoleClient {
            addr,
            agent,
            cookie: None,
            csrf: None,
        }
    }

    /// `POST /auth/login`; on success keeps the cookie and the CSRF token.
    pub(crate) fn login(&mut self, user: &str, password: &str) -> Answer {
        let body = serde_json::json!({"user": user, "password": password});
        let a = self.request("POST", "/auth/login", Some(&body));
        if a.reply.status == 200 {
            let cookie = a.header("set-cookie").expect("a login sets a cookie");
            let pair = cookie.split(';').next().unwrap().trim().to_owned();
            self.cookie = Some(pair);
            let session: tessera_wire::console::Session = a.reply.parse();
            self.csrf = Some(session.csrf);
        }
        a
    }

    /// The same session without the CSRF token.
    pub(crate) fn without_csrf(&self) -> ConsoleClient {
        ConsoleClient {
            csrf: None,
            ..self.clone()
        }
    }

    pub(crate) fn get(&self, path: &str) -> Reply {
        self.request("GET", path, None).reply
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Reply {
        self.request("POST", path, Some(body)).reply
    }

    pub(crate) fn delete(&self, path: &str) -> Reply {
        self.request("DELETE", path, None).reply
    }

    /// Sends one request with the cookie and, if kept, the CSRF token.
    ///
    /// # Panics
    /// On a transport error.
    pub(crate) fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Answer {
        let body = body.map(|b| b.to_string().into_bytes());
        self.try_request(method, path, body.as_deref())
            .unwrap_or_else(|e| panic!("{method} http://{}{path}: {e}", self.addr))
    }

    /// Sends one request with a raw body; a transport error is `Err`.
    pub(crate) fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Answer, ureq::Error> {
        let url = format!("http://{}{path}", self.addr);
        let mut headers: Vec<(&str, String)> = Vec::new();
        if let Some(c) = &self.cookie {
            headers.push(("Cookie", c.clone()));
        }
        if let Some(t) = &self.csrf {
            headers.push(("X-CSRF-Token", t.clone()));
        }
        let result = match method {
            "GET" | "DELETE" => {
                let mut req = if method == "GET" {
                    self.agent.get(&url)
                } else {
                    self.agent.delete(&url)
                };
                for (k, v) in &headers {
                    req = req.header(*k, v);
                }
                req.call()
            }
            "POST" | "PUT" => {
                let mut req = if method == "POST" {
                    self.agent.post(&url)
                } else {
                    self.agent.put(&url)
                };
                for (k, v) in &headers {
                    req = req.header(*k, v);
                }
                match body {
                    Some(b) => req.header("Content-Type", "application/json").send(b),
                    None => req.send_empty(),
                }
            }
            other => panic!("test bug: unsupported method {other}"),
        };
        let mut resp = result?;
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        Ok(Answer {
            reply: Reply {
                status: resp.status().as_u16(),
                content_type,
                body: resp.body_mut().read_to_string()?,
                request: format!("{method} {path}"),
            },
            headers,
        })
    }
}
