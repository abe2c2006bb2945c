//! A proxy's fence: a cluster-mode proxy serves only while it is sure its registration in the
//! store is alive. A proxy cut off from the store cannot renew it; once it has lapsed, the
//! dashboard may move slots without this proxy in its barrier, and a write routed with this
//! proxy's old table could land on a slot's old owner after the keys moved. So the proxy
//! stops routing some time *before* the registration can expire (`FENCE_MARGIN` before the
//! end of its last confirmed renewal), and serves again only once it is registered afresh and
//! has its table from the store (`proxy::cluster`).
//!
//! The check is one clock read per batch of a session, made when the batch is read: a
//! proxy that was frozen (SIGSTOP, a stalled VM) and wakes up refuses what its clients sent
//! meanwhile before any task has had the time to notice. Each backend connection makes it
//! again in the same poll as each write to its socket (`backend::conn`): commands read and
//! routed just before the freeze, and not yet written when it began, fail rather than reach a
//! slot's old owner. A freeze that falls between that check and its write syscall is the one
//! window a clock cannot close; the dashboard closes it at the servers, by killing a lapsed
//! proxy's named connections before it moves on without it ([`backend_connection_name`]).
//! The clock is the kernel's coarse monotonic one (a few ms of resolution, against margins of
//! seconds): 7 ns a read on this project's test machine, where `Instant::now` costs 55–60 ns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::time::{ClockId, clock_gettime};

/// How long before its registration could expire a proxy stops serving; the dashboard also
/// waits this long after a proxy's registration is gone before it moves on without it.
pub const FENCE_MARGIN: Duration = Duration::from_secs(3);

/// What a cluster-mode proxy names its backend connections (`CLIENT SETNAME`): `token` is
/// its registration's. The clock alone cannot fence a proxy frozen between its check and its
/// write, so once the dashboard moves on without a proxy whose registration lapsed it closes
/// that proxy's connections on every master ([`proxy_named_in`] reads the name back), and what
/// the proxy writes when it wakes reaches no server.
pub fn backend_connection_name(token: &str) -> String {
    format!("{BACKEND_NAME_PREFIX}{token}")
}

const BACKEND_NAME_PREFIX: &str = "tessera-proxy-";

/// The registration token in a backend connection's name, if a proxy named it.
pub fn proxy_named_in(name: &str) -> Option<&str> {
    name.strip_prefix(BACKEND_NAME_PREFIX)
        .filter(|t| !t.is_empty())
}

/// Until when the proxy may route commands (a static proxy: always).
#[derive(Debug)]
pub struct Fence {
    /// On the coarse monotonic clock, in milliseconds; `u64::MAX`: never fenced.
    serve_until_ms: AtomicU64,
}

impl Default for Fence {
    fn default() -> Self {
        Self {
            serve_until_ms: AtomicU64::new(u64::MAX),
        }
    }
}

/// The coarse monotonic clock, in milliseconds.
#[inline]
fn coarse_ms() -> u64 {
    let t = clock_gettime(ClockId::MonotonicCoarse);
    (t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000
}

impl Fence {
    /// Serve until `at`, and no longer.
    pub fn serve_until(&self, at: Instant) {
        let left = at.saturating_duration_since(Instant::now());
        let ms = coarse_ms().saturating_add(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
        self.serve_until_ms
            .store(ms.min(u64::MAX - 1), Ordering::Release);
    }

    /// Stop serving now.
    pub fn close(&self) {
        self.serve_until_ms.store(0, Ordering::Release);
    }

    /// Whether commands may be routed now.
    #[inline]
    pub fn serving(&self) -> bool {
        match self.serve_until_ms.load(Ordering::Acquire) {
            u64::MAX => true,
            until => coarse_ms() < until,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_serves_until_its_time_and_not_after() {
        let f = Fence::default();
        assert!(f.serving(), "a static proxy is never fenced");
        f.serve_until(Instant::now() + Duration::from_secs(60));
        assert!(f.serving());
        f.serve_until(Instant::now() - Duration::from_millis(1));
        assert!(!f.serving());
        f.serve_until(Instant::now() + Duration::from_secs(60));
        f.close();
        assert!(!f.serving());
    }

    #[test]
    fn a_backend_connection_name_gives_its_proxy_back() {
        let name = backend_connection_name("ab12");
        assert_eq!(proxy_named_in(&name), Some("ab12"));
        assert_eq!(proxy_named_in("tessera-proxy-"), None);
        assert_eq!(proxy_named_in("app-worker-3"), None);
    }
}
