//! Login lockout and backoff, per (client address, user name): an attempt reserves its place
//! before its password is checked, so parallel attempts cannot get past the limit, and a
//! stranger's failures lock only the stranger's own address. The table is bounded; the
//! limits of that, and what an attacker with many addresses can still do, are in
//! docs/console.md ("Lockout").

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// (address, name) pairs tracked at most. Above it, entries that are neither locked nor in
/// flight go first, oldest first; then the lock that ends soonest.
const MAX_TRACKED: usize = 10_000;
/// Attempts of one address being checked at once, whatever the names: one address cannot
/// fill the verification queue that every other address shares.
pub(crate) const MAX_IN_FLIGHT_PER_ADDR: u32 = 2;
/// Each lockout of the same pair in a row doubles the next one, up to this many times.
const MAX_DOUBLINGS: u32 = 4;

/// Why an attempt was refused before any password check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// This (address, name) is locked for this much longer.
    Locked(Duration),
    /// Earlier attempts of this (address, name) are still being checked, and they could be
    /// the last ones allowed before the lockout.
    PairBusy,
    /// [`MAX_IN_FLIGHT_PER_ADDR`] attempts of this address are being checked.
    AddrBusy,
}

/// How a checked attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Wrong,
    /// This failure was the last allowed: locked for this long.
    LockedNow(Duration),
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    addr: IpAddr,
    user: String,
}

struct Pair {
    /// Failures since the last lockout or success.
    failures: u32,
    in_flight: u32,
    /// Lockouts in a row (reset by a success): sets the next lockout's length.
    lockouts: u32,
    locked_until: Option<Instant>,
    last: Instant,
}

#[derive(Default)]
struct Table {
    pairs: HashMap<Key, Pair>,
    /// Attempts being checked, per address; an address leaves when it reaches 0.
    in_flight: HashMap<IpAddr, u32>,
}

/// The lockout table.
pub(crate) struct Throttle {
    table: Mutex<Table>,
    limit: u32,
    lockout: Duration,
}

/// An attempt's reserved place: [`Reservation::finish`] it with the check's result. Dropped
/// unfinished (the attempt never got checked, or its client went away), it frees the place
/// and counts nothing.
pub(crate) struct Reservation<'a> {
    throttle: &'a Throttle,
    key: Option<Key>,
}

/// The address attempts are counted under: IPv4 as is, IPv6 by its /64 (one host usually
/// has a whole /64), an IPv4-mapped IPv6 address as the IPv4 address.
pub(crate) fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

impl Throttle {
    /// `limit` failures in a row lock a pair for `lockout`, doubled for each lockout in a row.
    pub(crate) fn new(limit: u32, lockout: Duration) -> Self {
        Self {
            table: Mutex::default(),
            limit: limit.max(1),
            lockout,
        }
    }

    /// Reserves a place for one attempt of `user` from `addr` (already [`client_key`]ed).
    ///
    /// # Errors
    /// The pair is locked, its earlier attempts could use up what is left, or the address has
    /// too many attempts being checked.
    pub(crate) fn reserve(&self, addr: IpAddr, user: &str) -> Result<Reservation<'_>, Refusal> {
        let now = Instant::now();
        let mut guard = self.table.lock().expect("throttle lock poisoned");
        let t = &mut *guard;
        // Checked before anything is inserted, so refused attempts cost no table space.
        if t.in_flight.get(&addr).copied().unwrap_or(0) >= MAX_IN_FLIGHT_PER_ADDR {
            return Err(Refusal::AddrBusy);
        }
        let key = Key {
            addr,
            user: user.to_owned(),
        };
        if let Some(pair) = t.pairs.get_mut(&key) {
            if let Some(until) = pair.locked_until {
                if until > now {
                    return Err(Refusal::Locked(until - now));
                }
                pair.locked_until = None;
            }
            if pair.failures + pair.in_flight >= self.limit {
                return Err(Refusal::PairBusy);
            }
        } else if t.pairs.len() >= MAX_TRACKED {
            t.evict(now);
        }
        let pair = t.pairs.entry(key.clone()).or_insert(Pair {
            failures: 0,
            in_flight: 0,
            lockouts: 0,
            locked_until: None,
            last: now,
        });
        pair.in_flight += 1;
        pair.last = now;
        *t.in_flight.entry(addr).or_default() += 1;
        Ok(Reservation {
            throttle: self,
            key: Some(key),
        })
    }

    /// Pairs tracked now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.table
            .lock()
            .expect("throttle lock poisoned")
            .pairs
            .len()
    }

    /// The length of the `n`-th lockout in a row (1-based).
    fn lockout_for(&self, n: u32) -> Duration {
        self.lockout * (1u32 << n.saturating_sub(1).min(MAX_DOUBLINGS))
    }

    /// Frees `key`'s place; on a checked attempt, counts its result.
    fn release(&self, key: &Key, checked: Option<bool>) -> Verdict {
        let now = Instant::now();
        let mut guard = self.table.lock().expect("throttle lock poisoned");
        let t = &mut *guard;
        if let MapEntry::Occupied(mut n) = t.in_flight.entry(key.addr) {
            *n.get_mut() -= 1;
            if *n.get() == 0 {
                n.remove();
            }
        }
        let MapEntry::Occupied(mut slot) = t.pairs.entry(key.clone()) else {
            // Evicted meanwhile (only when every other entry was locked or in flight).
            return if checked == Some(true) {
                Verdict::Ok
            } else {
                Verdict::Wrong
            };
        };
        let pair = slot.get_mut();
        pair.in_flight = pair.in_flight.saturating_sub(1);
        pair.last = now;
        match checked {
            None => {
                // Nothing learned: a pair that holds nothing else goes, so attempts refused
                // later (a full queue) leave no trace in the table.
                let pristine = pair.in_flight == 0
                    && pair.failures == 0
                    && pair.lockouts == 0
                    && pair.locked_until.is_none();
                if pristine {
                    slot.remove();
                }
                Verdict::Wrong
            }
            Some(true) => {
                if pair.in_flight == 0 {
                    slot.remove();
                } else {
                    pair.failures = 0;
                    pair.lockouts = 0;
                }
                Verdict::Ok
            }
            Some(false) => {
                pair.failures += 1;
                if pair.failures < self.limit {
                    return Verdict::Wrong;
                }
                pair.failures = 0;
                pair.lockouts = pair.lockouts.saturating_add(1);
                let length = self.lockout_for(pair.lockouts);
                pair.locked_until = Some(now + length);
                Verdict::LockedNow(length)
            }
        }
    }
}

// === impl Table ===

impl Table {
    /// Makes room for one pair (see [`MAX_TRACKED`]).
    fn evict(&mut self, now: Instant) {
        let idle = |p: &Pair| p.in_flight == 0 && p.locked_until.is_none_or(|t| t <= now);
        let victim = self
            .pairs
            .iter()
            .filter(|(_, p)| idle(p))
            .min_by_key(|(_, p)| p.last)
            .or_else(|| {
                self.pairs
                    .iter()
                    .filter(|(_, p)| p.in_flight == 0)
                    .min_by_key(|(_, p)| p.locked_until)
            })
            .map(|(k, _)| k.clone());
        if let Some(k) = victim {
            self.pairs.remove(&k);
        }
    }
}

// === impl Reservation ===

impl Reservation<'_> {
    /// Counts the checked attempt: `matched` is whether the password was right for a known
    /// user.
    pub(crate) fn finish(mut self, matched: bool) -> Verdict {
        let key = self.key.take().expect("a reservation is finished once");
        self.throttle.release(&key, Some(matched))
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.throttle.release(&key, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn fail(t: &Throttle, addr: IpAddr, user: &str) -> Result<Verdict, Refusal> {
        t.reserve(addr, user).map(|r| r.finish(false))
    }

    #[test]
    fn failures_lock_the_pair_only_and_a_success_resets() {
        let t = Throttle::new(3, Duration::from_secs(60));
        assert_eq!(fail(&t, A, "admin"), Ok(Verdict::Wrong));
        assert_eq!(
            t.reserve(A, "admin").map(|r| r.finish(true)),
            Ok(Verdict::Ok)
        );
        assert_eq!(fail(&t, A, "admin"), Ok(Verdict::Wrong));
        assert_eq!(fail(&t, A, "admin"), Ok(Verdict::Wrong));
        assert_eq!(
            fail(&t, A, "admin"),
            Ok(Verdict::LockedNow(Duration::from_secs(60)))
        );
        assert!(matches!(t.reserve(A, "admin"), Err(Refusal::Locked(_))));
        // Another address, or another name from the same address, is not locked.
        assert_eq!(
            t.reserve(B, "admin").map(|r| r.finish(true)),
            Ok(Verdict::Ok)
        );
        assert_eq!(fail(&t, A, "ops"), Ok(Verdict::Wrong));
    }

    #[test]
    fn parallel_reservations_stop_at_the_limit() {
        let t = Throttle::new(2, Duration::from_secs(60));
        let first = t.reserve(A, "admin").unwrap();
        let second = t.reserve(A, "admin").unwrap();
        // Two in flight from A: the address is at its cap, even for another name.
        assert_eq!(t.reserve(A, "ops").err(), Some(Refusal::AddrBusy));
        assert_eq!(first.finish(false), Verdict::Wrong);
        // One failure and one in flight make the limit: no third attempt until they end.
        assert_eq!(t.reserve(A, "admin").err(), Some(Refusal::PairBusy));
        assert!(matches!(second.finish(false), Verdict::LockedNow(_)));
        assert!(matches!(t.reserve(A, "admin"), Err(Refusal::Locked(_))));
        assert_eq!(fail(&t, A, "ops"), Ok(Verdict::Wrong));
    }

    #[test]
    fn an_unfinished_reservation_counts_nothing() {
        let t = Throttle::new(1, Duration::from_secs(60));
        drop(t.reserve(A, "admin").unwrap());
        drop(t.reserve(A, "admin").unwrap());
        assert!(matches!(fail(&t, A, "admin"), Ok(Verdict::LockedNow(_))));
    }

    #[test]
    fn lockouts_in_a_row_double_up_to_a_cap() {
        let t = Throttle::new(1, Duration::from_secs(10));
        let lengths: Vec<u64> = (1..=7).map(|n| t.lockout_for(n).as_secs()).collect();
        assert_eq!(lengths, [10, 20, 40, 80, 160, 160, 160]);
        let zero = Throttle::new(1, Duration::ZERO);
        for _ in 0..3 {
            assert!(matches!(fail(&zero, A, "admin"), Ok(Verdict::LockedNow(_))));
        }
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_locks_over_idle_pairs() {
        let t = Throttle::new(2, Duration::from_secs(60));
        assert_eq!(fail(&t, A, "admin"), Ok(Verdict::Wrong));
        assert!(matches!(fail(&t, A, "admin"), Ok(Verdict::LockedNow(_))));
        for i in 0..MAX_TRACKED + 50 {
            let addr = IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + i as u32));
            assert_eq!(fail(&t, addr, "x"), Ok(Verdict::Wrong));
            // A reservation dropped unchecked leaves nothing behind.
            drop(t.reserve(addr, "y").unwrap());
        }
        assert!(t.tracked() <= MAX_TRACKED, "{}", t.tracked());
        assert!(matches!(t.reserve(A, "admin"), Err(Refusal::Locked(_))));
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_eq!(client_key(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(client_key(mapped), A);
    }
}
