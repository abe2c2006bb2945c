//! The bounds every HTTP server of Tessera shares (`host/src/http_server.rs`) and what stands
//! at their doors (`host/src/auth_throttle.rs`), on real processes: the dashboard, a proxy's
//! admin API and the console each close connections over their cap at once and cut a client
//! that never finishes its headers; a wrong token, proxy secret or session cookie repeated
//! from one address is answered 429 past its burst, and the dashboard audits refusals at a
//! bounded rate.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tessera_wire::audit::AuditEntry;

use crate::support::{Api, Console, ConsoleSetup, ControlPlane, wait_until};

/// `http_server::MAX_CONNECTIONS`.
const MAX_CONNECTIONS: usize = 512;
/// `auth_throttle::BURST`.
const BURST: usize = 20;

/// What a read of a connection the server should have closed gives: `Ok(())` for an end of
/// stream or a reset (or hyper's 408 before closing), the bytes of any other answer.
fn closed(s: &mut TcpStream) -> Result<(), String> {
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => Ok(()),
        Ok(n) if buf[..n].starts_with(b"HTTP/1.1 408") => Ok(()),
        Ok(n) => Err(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(format!("still open: {e}")),
    }
}

/// Holds [`MAX_CONNECTIONS`] connections to the server at `addr`, each having sent part of a
/// request's headers; checks that more are closed at once, that the held ones are closed by
/// the header timeout, and that the server answers again once they are.
fn bounded(what: &str, addr: SocketAddr) {
    let mut held = Vec::with_capacity(MAX_CONNECTIONS);
    for _ in 0..MAX_CONNECTIONS {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").unwrap();
        held.push(s);
    }
    // Accepted in the order they connected: these come after the cap is full.
    for i in 0..5 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        if let Err(e) = closed(&mut s) {
            panic!("{what}: connection {i} over the cap was served: {e}");
        }
    }
    // Each held connection is cut once it has waited out the header timeout (10 s).
    for (i, s) in held.iter_mut().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        if let Err(e) = closed(s) {
            panic!("{what}: held connection {i} was not cut: {e}");
        }
    }
    drop(held);
    let api = Api::new(addr, None);
    assert!(
        wait_until(Duration::from_secs(10), || api.healthy()),
        "{what} does not answer once the slow clients are gone"
    );
}

// Issue 25, item 12: 19,990 connections that never finished their headers made the dashboard
// log "Too many open files"; the three HTTP servers had no header-read timeout and no cap.
#[test]
fn issue_25_every_http_server_closes_connections_over_its_cap_and_cuts_slow_headers() {
    let cp = ControlPlane::builder().servers(1).proxies(1).start();
    let store = tempfile::tempdir().unwrap();
    let console = Console::start(&ConsoleSetup {
        stores: vec![format!("fs://{}", store.path().display())],
        users: vec![("ada".into(), "pw".into())],
        ..ConsoleSetup::default()
    });
    let servers = [
        ("the dashboard", cp.dashboard.addr()),
        ("a proxy's admin API", cp.proxies[0].admin_addr()),
        ("the console", console.addr()),
    ];
    std::thread::scope(|s| {
        for (what, addr) in servers {
            s.spawn(move || bounded(what, addr));
        }
    });
}

// Issue 25, item 12: wrong tokens were checked about 2,000 times a second per connection, and
// 401s were not audited.
#[test]
fn issue_25_refused_credentials_are_throttled_by_address_and_audited_at_a_bounded_rate() {
    let cp = ControlPlane::builder().servers(1).proxies(1).start();
    let wrong = cp.api().with_token("wrong-0123456789abcdef");
    for i in 0..BURST {
        let r = wrong.get("/api/overview");
        assert_eq!(r.status, 401, "refusal {i}: {}", r.body);
    }
    let msg = wrong
        .get("/api/overview")
        .expect_error(429, "too_many_requests");
    assert!(msg.contains("try again in"), "{msg}");
    // The address waits, whatever token it sends now: no check is made for it.
    cp.api()
        .get("/api/overview")
        .expect_error(429, "too_many_requests");
    assert!(
        wait_until(Duration::from_secs(10), || cp
            .api()
            .get("/api/overview")
            .status
            == 200),
        "the address was never let in again"
    );
    // A call without a token costs no check and does not count against the address.
    for _ in 0..BURST * 2 {
        cp.api()
            .without_token()
            .get("/api/overview")
            .expect_error(401, "unauthorized");
    }
    // Over sixty refusals, an entry for the first and at most one per 10 s after it, each
    // counting those since the one before (the test takes seconds, not tens of them).
    let answer = cp.api().get("/api/audit?limit=1000");
    let log: Vec<AuditEntry> = answer.ok_as();
    let refused: Vec<&AuditEntry> = log.iter().filter(|e| e.status == 401).collect();
    assert!(!refused.is_empty() && refused.len() < 4, "{log:?}");
    let first = refused.last().unwrap();
    assert_eq!(first.actor, "unauthenticated");
    assert!(first.token.is_none(), "{log:?}");
    assert!(
        first.detail.starts_with("1 call(s) refused") && first.detail.contains("127.0.0.1"),
        "{log:?}"
    );
    assert!(
        !answer.body.contains("wrong-0123456789abcdef"),
        "{}",
        answer.body
    );

    // A proxy's admin API, for a wrong proxy secret.
    let proxy = cp.proxies[0].admin().with_token("not-the-secret");
    for _ in 0..BURST {
        proxy
            .get("/api/proxy/info")
            .expect_error(401, "unauthorized");
    }
    proxy
        .get("/api/proxy/info")
        .expect_error(429, "too_many_requests");
    assert!(
        wait_until(Duration::from_secs(10), || cp.proxies[0]
            .admin()
            .get("/api/proxy/info")
            .status
            == 200),
        "the proxy never let the dashboard's address in again"
    );

    // The console, for an unknown session cookie.
    let store = tempfile::tempdir().unwrap();
    let console = Console::start(&ConsoleSetup {
        stores: vec![format!("fs://{}", store.path().display())],
        users: vec![("ada".into(), "pw".into())],
        ..ConsoleSetup::default()
    });
    // Without a cookie (a browser before its login) nothing is counted.
    let anon = console.client();
    for _ in 0..BURST * 2 {
        assert_eq!(anon.get("/auth/me").status, 401);
    }
    let mut forged = console.client();
    forged.cookie = Some("tessera_session=forged0123456789".into());
    for _ in 0..BURST {
        assert_eq!(forged.get("/api/clusters").status, 401);
    }
    forged
        .get("/api/clusters")
        .expect_error(429, "too_many_requests");
    // The address waits, with or without a cookie, until it earns a try back.
    assert_eq!(anon.get("/auth/me").status, 429);
    assert!(
        wait_until(Duration::from_secs(10), || anon.get("/auth/me").status
            == 401),
        "the console never let the address in again"
    );
}
