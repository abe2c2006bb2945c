//! Failed credential checks per client address, for every HTTP API: a wrong or revoked API
//! token (dashboard), a wrong proxy secret (a proxy's admin API), an unknown console session.
//! Each address has a bucket of [`BURST`] failures that refills at one per [`REFILL`]; while
//! its bucket is empty, the address is answered 429 before any credential of it is checked.
//! A valid credential costs nothing, and a request that presents none is not a failed check
//! (it costs nothing to refuse), so a client with a good token is throttled only when its
//! address also sends bad ones. Refusals are logged at most every [`LOG_INTERVAL`], with how
//! many since the last line.
//!
//! The table holds at most [`MAX_ADDRESSES`] addresses (an IPv6 address counts by its /64,
//! what one host is usually given): when it is full, addresses whose bucket is full again
//! leave first, then the one that owes least. An attacker with more addresses than that gets
//! [`BURST`] tries per address it brings back, never unbounded memory.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use tracing::warn;

use crate::error::{ApiError, refuse_unread};

/// Failures an address may make in a row (a browser with an expired session sends a few
/// calls at once before it shows the login).
pub const BURST: u32 = 20;
/// One more failure is allowed per this long.
pub const REFILL: Duration = Duration::from_secs(1);
/// Addresses tracked at most.
pub const MAX_ADDRESSES: usize = 4096;
/// Refused credentials are logged at most this often.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

struct Bucket {
    /// Failures still allowed, as of `at` (fractional: refills are continuous).
    left: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() / REFILL.as_secs_f64();
        self.left = (self.left + gained).min(f64::from(BURST));
        self.at = now;
    }

    fn full(&self) -> bool {
        self.left >= f64::from(BURST)
    }
}

/// The throttle of one server.
pub struct AuthThrottle {
    /// What is checked, for the log: "API token", "proxy secret", "console session".
    what: &'static str,
    table: Mutex<HashMap<IpAddr, Bucket>>,
    log: Mutex<RefusalLog>,
}

#[derive(Default)]
struct RefusalLog {
    logged: Option<Instant>,
    since: u64,
}

impl AuthThrottle {
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            table: Mutex::new(HashMap::new()),
            log: Mutex::default(),
        }
    }

    /// Before a credential of `addr` is checked: `Err(wait)` while the address must wait
    /// that long before it may try again.
    ///
    /// # Errors
    /// The address used up its failures.
    pub fn check(&self, addr: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let Some(b) = table.get_mut(&key(addr)) else {
            return Ok(());
        };
        b.refill(now);
        if b.left >= 1.0 {
            return Ok(());
        }
        Err(REFILL.mul_f64(1.0 - b.left))
    }

    /// A credential of `addr` was refused.
    pub fn failed(&self, addr: IpAddr) {
        let now = Instant::now();
        let k = key(addr);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if !table.contains_key(&k) && table.len() >= MAX_ADDRESSES {
            make_room(&mut table, now);
        }
        let b = table.entry(k).or_insert(Bucket {
            left: f64::from(BURST),
            at: now,
        });
        b.refill(now);
        b.left = (b.left - 1.0).max(0.0);
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether `addr` is tracked with failures it has not yet earned back.
    #[cfg(test)]
    fn owes(&self, addr: IpAddr) -> bool {
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        table.get(&key(addr)).is_some_and(|b| !b.full())
    }

    /// Before checking the credential `req` presents: its peer's address, or the 429 to
    /// answer (`Retry-After` set) while that address is throttled. A request without a peer
    /// address (served other than by `http_server`) is not throttled.
    ///
    /// # Errors
    /// The response refusing the request (boxed: it is the rare path, and large).
    pub fn admit(&self, req: &Request) -> Result<Option<IpAddr>, Box<Response>> {
        let Some(ip) = peer_ip(req) else {
            return Ok(None);
        };
        let Err(wait) = self.check(ip) else {
            return Ok(Some(ip));
        };
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let err = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_requests",
            format!(
                "too many refused credentials from {ip}: try again in {secs} s (at most {BURST} \
                 in a row, then one a second)"
            ),
        );
        let mut resp = refuse_unread(req, err);
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        Err(Box::new(resp))
    }

    /// The credential a request of `ip` presented was refused: counts it against the address
    /// and logs (at most every [`LOG_INTERVAL`]).
    pub fn refused(&self, ip: Option<IpAddr>) {
        if let Some(ip) = ip {
            self.failed(ip);
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.since += 1;
        if log.logged.is_some_and(|t| t.elapsed() < LOG_INTERVAL) {
            return;
        }
        warn!(
            peer = ?ip,
            refused = log.since,
            what = self.what,
            "refused credentials (count since the last such line)"
        );
        log.logged = Some(Instant::now());
        log.since = 0;
    }
}

/// The peer address `http_server` put in the request.
pub fn peer_ip(req: &Request) -> Option<IpAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip())
}

/// The address an entry is kept under: IPv6 by its /64.
fn key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut s = v6.segments();
                s[4..].fill(0);
                IpAddr::V6(Ipv6Addr::from(s))
            }
        },
    }
}

/// Frees places: addresses at rest (bucket full again) all leave; if that frees none, the
/// eighth of the table that owes least. In bulk, so that a flood of new addresses costs one
/// pass over the table per [`MAX_ADDRESSES`] / 8 of them, not one per address.
fn make_room(table: &mut HashMap<IpAddr, Bucket>, now: Instant) {
    for b in table.values_mut() {
        b.refill(now);
    }
    table.retain(|_, b| !b.full());
    if table.len() < MAX_ADDRESSES {
        return;
    }
    let mut by_left: Vec<(f64, IpAddr)> = table.iter().map(|(k, b)| (b.left, *k)).collect();
    by_left.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
    for (_, k) in by_left.into_iter().take(MAX_ADDRESSES / 8) {
        table.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_gets_its_burst_then_waits_and_others_are_not_concerned() {
        let t = AuthThrottle::new("test");
        let a = ip("10.0.0.1");
        for _ in 0..BURST {
            assert_eq!(t.check(a), Ok(()));
            t.failed(a);
        }
        let wait = t.check(a).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= REFILL, "{wait:?}");
        assert_eq!(t.check(ip("10.0.0.2")), Ok(()));
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let t = AuthThrottle::new("test");
        for i in 0..BURST {
            t.failed(ip(&format!("2001:db8:1:2::{i:x}")));
        }
        assert!(t.check(ip("2001:db8:1:2:ffff::1")).is_err());
        assert_eq!(t.check(ip("2001:db8:1:3::1")), Ok(()));
        for _ in 0..BURST {
            t.failed(ip("::ffff:192.0.2.7"));
        }
        assert!(t.check(ip("192.0.2.7")).is_err());
    }

    #[test]
    fn the_table_is_bounded_and_keeps_the_addresses_that_owe_most() {
        let t = AuthThrottle::new("test");
        let blocked = ip("192.0.2.1");
        for _ in 0..BURST {
            t.failed(blocked);
        }
        for i in 0..(MAX_ADDRESSES as u32 * 2) {
            t.failed(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
        }
        assert!(t.tracked() <= MAX_ADDRESSES, "{}", t.tracked());
        // (Its bucket may have refilled a little meanwhile: the loop takes time.)
        assert!(t.owes(blocked), "the address that owes most was evicted");
    }
}
