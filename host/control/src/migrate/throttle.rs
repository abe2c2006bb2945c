//! A migration's speed cap, in keys/s and in bytes/s: a virtual clock shared by every mover
//! pass (passes from several sources run in parallel and share one cap). Each batch a pass
//! moves, and each chunk of a big key, is charged after it is sent; the charge says how long
//! to sleep so that the moves since the cap was set stay under it, with a short burst allowed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The caps; `None` is no cap.
pub use tessera_wire::migration::ThrottleLimits as Limits;

/// Moves may run this far ahead of the cap before a pass sleeps.
const BURST: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
pub struct Throttle {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    limits: Limits,
    /// When the moves charged so far would have finished at the cap.
    free_at: Option<Instant>,
}

impl Throttle {
    pub fn limits(&self) -> Limits {
        self.state.lock().expect("throttle lock poisoned").limits
    }

    /// Sets the caps; moves already charged are forgotten.
    pub fn set(&self, limits: Limits) {
        let mut st = self.state.lock().expect("throttle lock poisoned");
        st.limits = limits;
        st.free_at = None;
    }

    /// Charges `keys` and `bytes` just moved and sleeps as long as the cap asks.
    pub async fn pace(&self, keys: u64, bytes: u64) {
        let wait = self.charge(keys, bytes, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Charges `keys` and `bytes` just moved at `now`; returns how long to sleep before the
    /// next batch.
    pub fn charge(&self, keys: u64, bytes: u64, now: Instant) -> Duration {
        let mut st = self.state.lock().expect("throttle lock poisoned");
        let cost =
            |n: u64, cap: Option<u64>| cap.filter(|c| *c > 0).map_or(0.0, |c| n as f64 / c as f64);
        let secs =
            cost(keys, st.limits.max_keys_per_sec).max(cost(bytes, st.limits.max_bytes_per_sec));
        if secs == 0.0 {
            return Duration::ZERO;
        }
        let start = st.free_at.filter(|t| *t > now).unwrap_or(now);
        let free_at = start + Duration::from_secs_f64(secs.min(3600.0));
        st.free_at = Some(free_at);
        free_at.saturating_duration_since(now + BURST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_cap_never_waits() {
        let t = Throttle::default();
        assert_eq!(t.charge(1_000_000, 1 << 30, Instant::now()), Duration::ZERO);
    }

    #[test]
    fn a_keys_cap_spaces_batches_after_the_burst() {
        let t = Throttle::default();
        t.set(Limits {
            max_keys_per_sec: Some(1000),
            max_bytes_per_sec: None,
        });
        let now = Instant::now();
        // 100 keys = 100 ms at the cap: within the burst.
        assert_eq!(t.charge(100, 0, now), Duration::ZERO);
        // The next 300 keys end 400 ms after `now`: sleep 300 ms (400 − the burst).
        assert_eq!(t.charge(300, 0, now), Duration::from_millis(300));
        // Time passing pays the debt back.
        let later = now + Duration::from_secs(1);
        assert_eq!(t.charge(100, 0, later), Duration::ZERO);
    }

    #[test]
    fn the_tighter_cap_counts_and_setting_caps_forgets_the_debt() {
        let t = Throttle::default();
        t.set(Limits {
            max_keys_per_sec: Some(1_000_000),
            max_bytes_per_sec: Some(1_000_000),
        });
        let now = Instant::now();
        // 10 keys but 2 MB: two seconds at the bytes cap.
        assert_eq!(t.charge(10, 2_000_000, now), Duration::from_millis(1900));
        t.set(Limits::default());
        assert_eq!(t.charge(10, 2_000_000, now), Duration::ZERO);
        assert!(t.limits().is_none());
    }
}
