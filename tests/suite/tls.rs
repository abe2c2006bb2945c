//! TLS (docs/tls.md): the proxy's TLS listener beside its plain one, through redis-cli
//! `--tls`, redis-py and the redis crate; certificate reload without a restart (and a bad new
//! certificate that keeps the old one); client certificates required and optional; hostile
//! sockets on the TLS port (a stalled handshake, plain RESP, garbage); TLS-only backends in
//! static mode and in a cluster (proxy, dashboard admin connections, health checks, the
//! mover); the dashboard and the console over HTTPS, the console's cookie `Secure`.
//!
//! Certificates come from the `openssl` CLI: one test CA, leaf certificates for 127.0.0.1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;
use tessera_wire::cluster::{GroupView, SlotView};
use tessera_wire::migration::MigrationStatus;
use tessera_wire::topology::GroupId;

use crate::support::{
    ClusterProxy, Dashboard, DashboardOptions, Proxy, RedisServer, TOKEN, free_port, loopback,
    run_with_timeout, tessera_bin, wait_until,
};

const CMD_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Certificates

/// A test CA in a temp dir, issuing leaf certificates (IP SAN 127.0.0.1) with chosen serials.
struct Pki {
    dir: TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = Pki { dir };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=tessera-test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &pki.s("ca.key"),
            "-out",
            &pki.s("ca.crt"),
        ]);
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn s(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    fn ca(&self) -> String {
        self.s("ca.crt")
    }

    /// Issues `<name>.crt` and `<name>.key` (CN = `cn`, serial = `serial` in hex), written
    /// beside and renamed into place, so a watcher never sees half a file.
    fn issue(&self, name: &str, cn: &str, serial: &str) -> (String, String) {
        let ext = self.path(&format!("{name}.ext"));
        std::fs::write(
            &ext,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
        )
        .unwrap();
        let (key_tmp, csr, crt_tmp) = (
            self.s(&format!("{name}.key.new")),
            self.s(&format!("{name}.csr")),
            self.s(&format!("{name}.crt.new")),
        );
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &key_tmp,
            "-out",
            &csr,
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &self.ca(),
            "-CAkey",
            &self.s("ca.key"),
            "-set_serial",
            &format!("0x{serial}"),
            "-days",
            "2",
            "-extfile",
            &ext.display().to_string(),
            "-out",
            &crt_tmp,
        ]);
        let (crt, key) = (
            self.s(&format!("{name}.crt")),
            self.s(&format!("{name}.key")),
        );
        std::fs::rename(&key_tmp, &key).unwrap();
        std::fs::rename(&crt_tmp, &crt).unwrap();
        (crt, key)
    }
}

fn openssl(args: &[&str]) {
    let out = run_with_timeout(Command::new("openssl").args(args), CMD_TIMEOUT);
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The serial (hex, as openssl prints it) of the certificate served on `port`.
fn served_serial(port: u16, ca: &str) -> String {
    let script = format!(
        "openssl s_client -connect 127.0.0.1:{port} -CAfile {ca} </dev/null 2>/dev/null \
         | openssl x509 -noout -serial"
    );
    let out = run_with_timeout(Command::new("sh").args(["-c", &script]), CMD_TIMEOUT);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("serial=")
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Clients and processes

/// `redis-cli --tls --cacert <ca> -p <port> <extra…> <cmd…>`.
fn cli_tls(port: u16, ca: &str, extra: &[&str], cmd: &[&str]) -> Output {
    run_with_timeout(
        Command::new("redis-cli")
            .args([
                "--tls",
                "--cacert",
                ca,
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .args(extra)
            .args(cmd),
        CMD_TIMEOUT,
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// A redis crate connection over TLS, the server verified against `ca`.
fn redis_tls(
    port: u16,
    ca: &str,
    client: Option<(&str, &str)>,
) -> redis::RedisResult<redis::Connection> {
    let certs = redis::TlsCertificates {
        client_tls: client.map(|(c, k)| redis::ClientTlsConfig {
            client_cert: std::fs::read(c).unwrap(),
            client_key: std::fs::read(k).unwrap(),
        }),
        root_cert: Some(std::fs::read(ca).unwrap()),
    };
    let client = redis::Client::build_with_tls(format!("rediss://127.0.0.1:{port}/"), certs)?;
    let c = client.get_connection_with_timeout(Duration::from_secs(10))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(c)
}

/// A proxy in front of `backends` with a TLS listener on a free port; `toml` adds settings.
/// Returns it and the TLS port.
fn tls_proxy(backends: &[&RedisServer], cert: &(String, String), toml: &str) -> (Proxy, u16) {
    let port = free_port();
    let config = format!(
        "tls_listen = \"127.0.0.1:{port}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n{toml}",
        cert.0, cert.1
    );
    (Proxy::builder(backends).config(&config).start(), port)
}

/// A child process killed on drop (its log printed if the test is failing).
struct Guard {
    child: Child,
    log: PathBuf,
    _dir: TempDir,
}

impl Guard {
    fn spawn(cmd: &mut Command) -> Guard {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let f = std::fs::File::create(&log).unwrap();
        let child = cmd
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        Guard {
            child,
            log,
            _dir: dir,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

/// A redis-server that speaks TLS only (`--port 0`), clients not asked for certificates;
/// server-to-server traffic (MIGRATE, replication) over TLS as well.
struct TlsRedis {
    _guard: Guard,
    port: u16,
}

impl TlsRedis {
    fn start(pki: &Pki, cert: &(String, String)) -> TlsRedis {
        let port = free_port();
        let guard = Guard::spawn(
            Command::new(crate::support::bin_from_env(
                "REDIS_SERVER_BIN",
                "redis-server",
            ))
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--tls-port", &port.to_string()])
            .args(["--tls-cert-file", &cert.0, "--tls-key-file", &cert.1])
            .args(["--tls-ca-cert-file", &pki.ca(), "--tls-auth-clients", "no"])
            // MIGRATE (the mover) and replication between servers use TLS too.
            .args(["--tls-cluster", "yes", "--tls-replication", "yes"]),
        );
        let ca = pki.ca();
        assert!(
            wait_until(Duration::from_secs(10), || stdout(&cli_tls(
                port,
                &ca,
                &[],
                &["PING"]
            )) == "PONG"),
            "TLS redis-server on {port} never answered"
        );
        TlsRedis {
            _guard: guard,
            port,
        }
    }

    fn addr(&self) -> SocketAddr {
        loopback(self.port)
    }
}

/// `curl` over HTTPS (verified against `ca`), with headers in the output.
fn curl(ca: &str, args: &[&str]) -> Output {
    run_with_timeout(
        Command::new("curl")
            .args(["-sS", "-i", "--max-time", "20", "--cacert", ca])
            .args(args),
        CMD_TIMEOUT,
    )
}

/// Reads until the peer closes (or `within` passes: `false`).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true, // reset
        }
    }
    false
}

// ---------------------------------------------------------------------------------------------
// The proxy's client port

#[test]
fn redis_cli_over_tls_while_the_plain_port_keeps_working() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1001");
    let r = RedisServer::start();
    let (proxy, port) = tls_proxy(&[&r], &cert, "");
    let set = cli_tls(port, &pki.ca(), &[], &["SET", "tls:k", "over-tls"]);
    assert_eq!(stdout(&set), "OK", "{set:?}");
    // The plain listener serves the same data, at the same time.
    let mut plain = crate::support::connect(&format!("redis://{}/", proxy.addr()));
    let v: String = redis::cmd("GET").arg("tls:k").query(&mut plain).unwrap();
    assert_eq!(v, "over-tls");
    let _: () = redis::cmd("SET")
        .arg("tls:p")
        .arg("plain")
        .query(&mut plain)
        .unwrap();
    assert_eq!(
        stdout(&cli_tls(port, &pki.ca(), &[], &["GET", "tls:p"])),
        "plain"
    );
    // Certificate verification is real: against another CA, redis-cli refuses the proxy.
    let other = Pki::new();
    let refused = cli_tls(port, &other.ca(), &[], &["PING"]);
    assert_ne!(stdout(&refused), "PONG", "{refused:?}");
}

#[test]
fn redis_py_over_tls() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1002");
    let (r1, r2) = (RedisServer::start(), RedisServer::start());
    let (_proxy, port) = tls_proxy(&[&r1, &r2], &cert, "");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/redis_py_tls.py");
    let out = run_with_timeout(
        Command::new("/usr/bin/python3")
            .arg(script)
            .arg(format!("127.0.0.1:{port}"))
            .arg(pki.ca()),
        Duration::from_secs(60),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "redis-py over TLS:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.matches("ok   ").count(), 6, "every check ran:\n{text}");
}

#[test]
fn redis_crate_over_tls() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1003");
    let (r1, r2) = (RedisServer::start(), RedisServer::start());
    // This one is set up with the command-line flags rather than proxy.toml.
    let port = free_port();
    let _proxy = Proxy::builder(&[&r1, &r2])
        .args(&["--tls-listen", &format!("127.0.0.1:{port}")])
        .args(&["--tls-cert", &cert.0, "--tls-key", &cert.1])
        .start();
    let mut c = redis_tls(port, &pki.ca(), None).expect("TLS connection");
    let big = "x".repeat(300_000);
    let _: () = redis::cmd("SET")
        .arg("{a}big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let got: String = redis::cmd("GET").arg("{a}big").query(&mut c).unwrap();
    assert_eq!(got.len(), big.len());
    // A pipeline spread over both backends, replies in order.
    let mut p = redis::pipe();
    for i in 0..500 {
        p.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let keys: Vec<String> = (0..500).map(|i| format!("k{i}")).collect();
    p.cmd("MGET").arg(&keys);
    let (vals,): (Vec<i64>,) = p.query(&mut c).unwrap();
    assert_eq!(vals, (0..500).collect::<Vec<i64>>());
    assert!(r1.dbsize() > 0 && r2.dbsize() > 0, "keys on both backends");
}

#[test]
fn certificate_reload_serves_the_new_certificate_and_keeps_old_connections() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-a", "a001");
    let r = RedisServer::start();
    let (_proxy, port) = tls_proxy(&[&r], &cert, "");
    assert_eq!(served_serial(port, &pki.ca()), "A001");
    let mut old = redis_tls(port, &pki.ca(), None).unwrap();
    let _: () = redis::cmd("SET")
        .arg("reload")
        .arg("1")
        .query(&mut old)
        .unwrap();

    let renewed = pki.issue("proxy", "tessera-b", "b002");
    assert_eq!(renewed, cert, "same paths");
    assert!(
        wait_until(Duration::from_secs(15), || served_serial(port, &pki.ca())
            == "B002"),
        "the new certificate was never served: {}",
        served_serial(port, &pki.ca())
    );
    // The connection made before the reload keeps its session.
    let v: String = redis::cmd("GET").arg("reload").query(&mut old).unwrap();
    assert_eq!(v, "1");

    // A broken certificate file is not loaded: the proxy keeps serving the last good one.
    std::fs::write(&cert.0, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
    std::thread::sleep(Duration::from_secs(5)); // two reload polls
    assert_eq!(served_serial(port, &pki.ca()), "B002");
    let mut fresh = redis_tls(port, &pki.ca(), None).expect("new connections still served");
    let v: String = redis::cmd("GET").arg("reload").query(&mut fresh).unwrap();
    assert_eq!(v, "1");
}

#[test]
fn tls_client_certificate_required_refuses_clients_without_one() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1004");
    let client = pki.issue("client", "app-1", "c001");
    let r = RedisServer::start();
    let (_proxy, port) = tls_proxy(&[&r], &cert, &format!("tls_client_ca = \"{}\"\n", pki.ca()));
    let without = cli_tls(port, &pki.ca(), &[], &["PING"]);
    assert_ne!(
        stdout(&without),
        "PONG",
        "served without a certificate: {without:?}"
    );
    assert!(
        redis_tls(port, &pki.ca(), None)
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_err(),
        "the redis crate was served without a client certificate"
    );
    // A certificate from another CA is refused too.
    let stranger = Pki::new();
    let foreign = stranger.issue("client", "intruder", "d001");
    let out = cli_tls(
        port,
        &pki.ca(),
        &["--cert", &foreign.0, "--key", &foreign.1],
        &["PING"],
    );
    assert_ne!(
        stdout(&out),
        "PONG",
        "served with a foreign certificate: {out:?}"
    );

    let with = cli_tls(
        port,
        &pki.ca(),
        &["--cert", &client.0, "--key", &client.1],
        &["PING"],
    );
    assert_eq!(stdout(&with), "PONG", "{with:?}");
    let mut c = redis_tls(port, &pki.ca(), Some((&client.0, &client.1))).unwrap();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn tls_client_certificate_optional_serves_clients_without_one() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1005");
    let client = pki.issue("client", "app-1", "c002");
    let r = RedisServer::start();
    let toml = format!(
        "tls_client_ca = \"{}\"\ntls_client_auth = \"optional\"\n",
        pki.ca()
    );
    let (_proxy, port) = tls_proxy(&[&r], &cert, &toml);
    assert_eq!(stdout(&cli_tls(port, &pki.ca(), &[], &["PING"])), "PONG");
    let with = cli_tls(
        port,
        &pki.ca(),
        &["--cert", &client.0, "--key", &client.1],
        &["PING"],
    );
    assert_eq!(stdout(&with), "PONG");
    // A certificate that is sent is still verified.
    let stranger = Pki::new();
    let foreign = stranger.issue("client", "intruder", "d002");
    let out = cli_tls(
        port,
        &pki.ca(),
        &["--cert", &foreign.0, "--key", &foreign.1],
        &["PING"],
    );
    assert_ne!(
        stdout(&out),
        "PONG",
        "served with a foreign certificate: {out:?}"
    );
}

#[test]
fn tls_stalled_handshake_is_closed_after_the_timeout_and_frees_its_slot() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1006");
    let r = RedisServer::start();
    let toml = "max_clients = 2\ntls_handshake_timeout_ms = 1500\n";
    let (proxy, port) = tls_proxy(&[&r], &cert, toml);
    // Let the start-up probes' sessions end.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(loopback(port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // Both slots are held by sockets that never said a word: a third client is refused.
    let mut third = TcpStream::connect(proxy.addr()).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    third.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut line = [0u8; 64];
    let n = third.read(&mut line).unwrap_or(0);
    assert!(
        String::from_utf8_lossy(&line[..n]).contains("max number of clients"),
        "{:?}",
        String::from_utf8_lossy(&line[..n])
    );
    for s in &mut stalled {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "a stalled handshake stayed open"
        );
    }
    let held = started.elapsed();
    assert!(
        held >= Duration::from_millis(1400),
        "closed before the timeout: {held:?}"
    );
    // The slots are free again.
    assert!(wait_until(Duration::from_secs(5), || {
        crate::support::RawClient::connect(proxy.addr())
            .cmd(&["PING"])
            .text()
            .as_deref()
            == Some("PONG")
    }));
}

#[test]
fn tls_port_closes_plain_resp_and_garbage_and_keeps_serving() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1007");
    let r = RedisServer::start();
    let (proxy, port) = tls_proxy(&[&r], &cert, "");
    let mut plain = TcpStream::connect(loopback(port)).unwrap();
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = plain.read_to_end(&mut got);
    assert!(!String::from_utf8_lossy(&got).contains("PONG"));
    assert!(
        closed_within(&mut plain, Duration::from_secs(5)),
        "plain RESP left open"
    );
    // A TLS record header announcing a huge record, then bytes of every value.
    let mut garbage = TcpStream::connect(loopback(port)).unwrap();
    let mut bytes = vec![0x16, 0x03, 0x01, 0xff, 0xff];
    bytes.extend((0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let _ = garbage.write_all(&bytes);
    assert!(
        closed_within(&mut garbage, Duration::from_secs(5)),
        "garbage left open"
    );
    // Half a ClientHello, then the client goes away.
    let mut half = TcpStream::connect(loopback(port)).unwrap();
    let _ = half.write_all(&[0x16, 0x03, 0x01, 0x00, 0x80, 0x01]);
    drop(half);
    assert_eq!(stdout(&cli_tls(port, &pki.ca(), &[], &["PING"])), "PONG");
    let pong = crate::support::RawClient::connect(proxy.addr()).cmd(&["PING"]);
    assert_eq!(pong.text().as_deref(), Some("PONG"));
    // INFO counts the three sockets that never finished a handshake.
    let failures = || -> u64 {
        let mut c = crate::support::connect(&format!("redis://{}/", proxy.addr()));
        let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("proxy_tls_handshake_failures:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no proxy_tls_handshake_failures in INFO:\n{info}"))
    };
    assert!(
        wait_until(Duration::from_secs(5), || failures() == 3),
        "{}",
        failures()
    );
}

#[test]
fn tls_client_blocked_reads_what_came_meanwhile_and_is_noticed_gone_after_its_close_notify() {
    let pki = Pki::new();
    let cert = pki.issue("proxy", "tessera-proxy", "1008");
    let r = RedisServer::start();
    let (_proxy, port) = tls_proxy(&[&r], &cert, "");
    // A polite TLS client: BLPOP for ever, then close_notify (SSL_shutdown), then FIN.
    let script = format!(
        r#"
import socket, ssl, time
ctx = ssl.create_default_context(cafile="{ca}")
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", {port})), server_hostname="127.0.0.1")
# A command sent while one is blocked waits its turn, and is read once the first is answered.
s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$6\r\ntls:bp\r\n$1\r\n1\r\n")
time.sleep(0.3)
s.sendall(b"*1\r\n$4\r\nPING\r\n")
s.settimeout(10.0)
buf = b""
while b"+PONG" not in buf:
    d = s.recv(100)
    if not d:
        break
    buf += d
assert buf == b"*-1\r\n+PONG\r\n", buf
s.settimeout(None)
s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$6\r\ntls:bq\r\n$1\r\n0\r\n")
time.sleep(1.0)
s.settimeout(1.0)
try:
    s.unwrap()
except Exception:
    pass
print("closed", flush=True)
"#,
        ca = pki.ca()
    );
    let blocked = || {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query(&mut r.client())
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap()
    };
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || blocked() == 1),
        "BLPOP never reached Redis"
    );
    let out = child.wait().unwrap();
    assert!(out.success());
    assert!(
        wait_until(Duration::from_secs(5), || blocked() == 0),
        "the proxy still holds a BLPOP for a client that closed"
    );
}

// ---------------------------------------------------------------------------------------------
// Backends

#[test]
fn tls_only_backends_are_served_through_a_static_proxy() {
    let pki = Pki::new();
    let server_cert = pki.issue("redis", "redis-1", "2001");
    let b = TlsRedis::start(&pki, &server_cert);
    // It really is TLS-only: no plain port answers.
    let mut raw = TcpStream::connect(b.addr()).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    assert!(
        closed_within(&mut raw, Duration::from_secs(5)) || {
            let mut buf = [0u8; 16];
            raw.read(&mut buf)
                .map_or(true, |n| !buf[..n].starts_with(b"+PONG"))
        }
    );
    let toml = format!("backend_tls = true\nbackend_tls_ca = \"{}\"\n", pki.ca());
    let proxy = Proxy::builder(&[])
        .backend_addr(b.addr())
        .config(&toml)
        .start();
    let mut c = crate::support::connect(&format!("redis://{}/", proxy.addr()));
    let _: () = redis::cmd("SET")
        .arg("tls:backend")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    let v: String = redis::cmd("GET").arg("tls:backend").query(&mut c).unwrap();
    assert_eq!(v, "yes");
    // Blocking commands use dedicated connections, pub/sub the hub's: both through TLS.
    let popped: Option<(String, String)> = redis::cmd("BLPOP")
        .arg("tls:nothing")
        .arg("0.2")
        .query(&mut c)
        .unwrap();
    assert_eq!(popped, None);
    let direct = cli_tls(b.port, &pki.ca(), &[], &["GET", "tls:backend"]);
    assert_eq!(stdout(&direct), "yes", "the key is on the TLS server");
}

#[test]
fn tls_group_in_a_cluster_is_checked_served_and_migrated_over_tls() {
    let pki = Pki::new();
    let (c1, c2) = (
        pki.issue("redis1", "redis-1", "3001"),
        pki.issue("redis2", "redis-2", "3002"),
    );
    let (s1, s2) = (TlsRedis::start(&pki, &c1), TlsRedis::start(&pki, &c2));
    let store_dir = tempfile::tempdir().unwrap();
    let store = format!("fs://{}", store_dir.path().join("store").display());
    let mut opts = DashboardOptions::new(&store);
    opts.extra_args = vec!["--backend-tls-ca".into(), pki.ca()];
    let dashboard = Dashboard::start(&opts);
    let api = dashboard.api();
    for (id, s) in [(1, &s1), (2, &s2)] {
        let g: GroupView = api
            .post("/api/groups", &json!({ "id": id, "tls": true }))
            .ok_as();
        assert!(g.tls, "{g:?}");
        // The dashboard provisions its admin user on it: a TLS connection.
        api.post(
            &format!("/api/groups/{id}/servers"),
            &json!({ "addr": s.addr().to_string() }),
        )
        .ok();
    }
    api.post(
        "/api/slots/assign",
        &json!({"from": 0, "to": 511, "group": 1}),
    )
    .ok();
    api.post(
        "/api/slots/assign",
        &json!({"from": 512, "to": 1023, "group": 2}),
    )
    .ok();
    let proxy =
        ClusterProxy::start_with_args(&opts.cluster, &store, &["--backend-tls-ca", &pki.ca()]);
    let mut c = crate::support::connect(&format!("redis://{}/", proxy.addr()));
    let keys: Vec<String> = (0..200).map(|i| format!("m:{i}")).collect();
    for k in &keys {
        let _: () = redis::cmd("SET").arg(k).arg(k).query(&mut c).unwrap();
    }
    // Health checks reach the servers over TLS: both masters are up, none down.
    assert!(
        wait_until(Duration::from_secs(30), || {
            poll::<Vec<GroupView>>(&api, "/api/groups")
                .is_some_and(|gs| gs.iter().all(|g| !g.down && g.servers[0].up))
        }),
        "health: {}",
        api.get("/api/groups").body
    );
    // The mover moves group 1's keys to group 2 over TLS.
    api.post(
        "/api/migrations",
        &json!({"from": 0, "to": 511, "group": 2}),
    )
    .ok();
    assert!(
        wait_until(Duration::from_secs(90), || {
            poll::<MigrationStatus>(&api, "/api/migrations").is_some_and(|m| m.slots.is_empty())
                && poll::<Vec<SlotView>>(&api, "/api/slots")
                    .is_some_and(|s| s.iter().all(|s| s.group == Some(GroupId(2))))
        }),
        "migration did not finish: {:?}",
        api.get("/api/migrations")
            .ok_as::<MigrationStatus>()
            .blocked
    );
    assert_eq!(stdout(&cli_tls(s1.port, &pki.ca(), &[], &["DBSIZE"])), "0");
    assert_eq!(
        stdout(&cli_tls(s2.port, &pki.ca(), &[], &["DBSIZE"])),
        "200"
    );
    for k in &keys {
        let v: String = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert_eq!(&v, k);
    }
}

/// A GET while polling: a request that fails or times out on a loaded machine is "not yet"
/// (`None`); an answer is read as `T`.
fn poll<T: serde::de::DeserializeOwned>(api: &crate::support::Api, path: &str) -> Option<T> {
    api.try_request("GET", path, None)
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.parse())
}

// ---------------------------------------------------------------------------------------------
// HTTPS

#[test]
fn tls_dashboard_serves_its_api_over_https() {
    let pki = Pki::new();
    let cert = pki.issue("dash", "dashboard", "4001");
    let store_dir = tempfile::tempdir().unwrap();
    let store = format!("fs://{}", store_dir.path().join("store").display());
    let port = free_port();
    let _d = Guard::spawn(
        Command::new(tessera_bin())
            .args(["dashboard", "--cluster", "tlsc", "--store", &store])
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--admin-token",
                TOKEN,
            ])
            .args(["--tls-cert", &cert.0, "--tls-key", &cert.1]),
    );
    let url = format!("https://127.0.0.1:{port}/api/groups");
    let auth = format!("Authorization: Bearer {TOKEN}");
    assert!(
        wait_until(Duration::from_secs(20), || stdout(&curl(
            &pki.ca(),
            &["-H", &auth, &url]
        ))
        .starts_with("HTTP/1.1 200")),
        "{:?}",
        curl(&pki.ca(), &["-H", &auth, &url])
    );
    // Plain HTTP on the HTTPS port gets no API answer.
    let plain = curl(
        &pki.ca(),
        &["-H", &auth, &format!("http://127.0.0.1:{port}/api/groups")],
    );
    assert!(!stdout(&plain).contains("200 OK"), "{plain:?}");
}

#[test]
fn tls_console_over_https_sets_a_secure_session_cookie() {
    let pki = Pki::new();
    let cert = pki.issue("console", "console", "5001");
    let dir = tempfile::tempdir().unwrap();
    let hash = {
        let mut child = Command::new(tessera_bin())
            .args(["console", "hash-password"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"correct horse battery\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let config = dir.path().join("console.toml");
    // No secure_cookie here: serving HTTPS alone must make the cookie Secure.
    std::fs::write(
        &config,
        format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"\n[[users]]\nname = \"admin\"\n\
             password_hash = \"{hash}\"\nrole = \"admin\"\n",
            cert.0, cert.1
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = free_port();
    let store = format!("fs://{}", dir.path().join("store").display());
    let _c = Guard::spawn(
        Command::new(tessera_bin())
            .args(["console", "--config"])
            .arg(&config)
            .args(["--store", &store, "--listen", &format!("127.0.0.1:{port}")]),
    );
    let base = format!("https://127.0.0.1:{port}");
    assert!(
        wait_until(Duration::from_secs(20), || stdout(&curl(
            &pki.ca(),
            &[&format!("{base}/health")]
        ))
        .starts_with("HTTP/1.1 200")),
        "{:?}",
        curl(&pki.ca(), &[&format!("{base}/health")])
    );
    let login = curl(
        &pki.ca(),
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"user":"admin","password":"correct horse battery"}"#,
            &format!("{base}/auth/login"),
        ],
    );
    let text = stdout(&login);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let cookie = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie: {text}"));
    assert!(cookie.trim_end().ends_with("; Secure"), "{cookie}");
}
