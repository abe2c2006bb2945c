//! Memory the proxy holds for its clients, bounded by mechanism: a proxy-wide [`MemoryPool`]
//! each for unfinished requests and for replies not yet written, and per client an
//! [`OutputAccount`] with Redis's `client-output-buffer-limit` semantics (a hard limit, and a
//! soft limit that may be exceeded for a while). A client over a limit is closed; it never
//! makes the proxy grow without bound or slows anyone else down.
//!
//! Below `backend` (a reply is charged to its client's account the moment it arrives from a
//! backend, wherever it then waits) and `session` (which releases it once written).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A proxy-wide budget of bytes, shared by every worker.
#[derive(Debug)]
pub struct MemoryPool {
    limit: usize,
    used: AtomicUsize,
}

impl MemoryPool {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes if the pool has them.
    pub fn try_acquire(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    /// Takes `n` bytes whatever the limit (bytes that already exist); says whether the pool
    /// is now over its limit.
    pub fn force_acquire(&self, n: usize) -> bool {
        self.used.fetch_add(n, Ordering::Relaxed) + n > self.limit
    }

    pub fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Bytes one holder (a session's read buffer) took from a [`MemoryPool`], given back when it
/// is dropped: however its holder ends — a panic or a cancelled task included — the pool
/// gets them back.
#[derive(Debug)]
pub struct Held {
    pool: Arc<MemoryPool>,
    n: usize,
}

impl Held {
    pub fn new(pool: Arc<MemoryPool>) -> Self {
        Self { pool, n: 0 }
    }

    pub fn bytes(&self) -> usize {
        self.n
    }

    /// Holds `n` bytes in all, taking what is missing from the pool if it has it.
    pub fn try_grow_to(&mut self, n: usize) -> bool {
        if n <= self.n {
            return true;
        }
        if !self.pool.try_acquire(n - self.n) {
            return false;
        }
        self.n = n;
        true
    }

    /// Gives back what is held beyond `keep`.
    pub fn shrink_to(&mut self, keep: usize) {
        if self.n > keep {
            self.pool.release(self.n - keep);
            self.n = keep;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.pool.release(self.n);
    }
}

/// The output limits of a client (Redis's `client-output-buffer-limit`).
#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    /// Over this many bytes held for the client, it is closed at once.
    pub hard: usize,
    /// Over this many bytes for longer than `soft_for`, it is closed.
    pub soft: usize,
    pub soft_for: Duration,
}

/// Why a client's output was over its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Hard,
    Soft,
    /// The proxy-wide pool of reply memory was exhausted while this client held replies.
    Pool,
}

/// Bytes of replies a client may hold before the proxy-wide pool counts them: every client
/// holds a little while its replies pass through, and counting that against a shared atomic on
/// every reply would cost each reply a contended update.
pub const UNPOOLED: usize = 64 * 1024;

/// Bytes held for one client's replies: arrived from backends and not yet taken by the
/// session, plus written into its output buffer and not yet sent. Single-threaded (the
/// session and its worker's backend connections share a thread). Below its soft limit and
/// [`UNPOOLED`] an account is two additions per reply: no clock, no atomic.
#[derive(Debug)]
pub struct OutputAccount {
    held: Cell<usize>,
    /// Of `held`, what is taken from the proxy-wide pool (what exceeds `UNPOOLED`).
    pooled: Cell<usize>,
    /// Up to this many bytes held, nothing needs checking.
    quiet: usize,
    limits: OutputLimits,
    pool: Arc<MemoryPool>,
    over_soft_since: Cell<Option<Instant>>,
    overflow: Cell<Option<Overflow>>,
    notify: Notify,
}

impl OutputAccount {
    pub fn new(limits: OutputLimits, pool: Arc<MemoryPool>) -> Rc<Self> {
        Rc::new(Self {
            held: Cell::new(0),
            pooled: Cell::new(0),
            quiet: limits.soft.min(limits.hard).min(UNPOOLED),
            limits,
            pool,
            over_soft_since: Cell::new(None),
            overflow: Cell::new(None),
            notify: Notify::new(),
        })
    }

    pub fn held(&self) -> usize {
        self.held.get()
    }

    /// `n` more bytes are held for the client. Marks the account overflowed (and wakes the
    /// session) when that passes a limit.
    #[inline]
    pub fn charge(&self, n: usize) {
        let held = self.held.get() + n;
        self.held.set(held);
        if held > self.quiet {
            self.charge_past_quiet(held, Instant::now());
        }
    }

    #[cfg(test)]
    fn charge_at(&self, n: usize, now: Instant) {
        let held = self.held.get() + n;
        self.held.set(held);
        if held > self.quiet {
            self.charge_past_quiet(held, now);
        }
    }

    fn charge_past_quiet(&self, held: usize, now: Instant) {
        let pool_over = self.sync_pool(held);
        if self.overflow.get().is_some() {
            return;
        }
        let over = if held > self.limits.hard {
            Some(Overflow::Hard)
        } else if pool_over {
            Some(Overflow::Pool)
        } else {
            self.check_soft(now)
        };
        if let Some(o) = over {
            self.overflow.set(Some(o));
            self.notify.notify_one();
        }
    }

    /// Takes from (or gives back to) the proxy-wide pool what `held` exceeds [`UNPOOLED`] by;
    /// says whether the pool is over its limit.
    fn sync_pool(&self, held: usize) -> bool {
        let want = held.saturating_sub(UNPOOLED);
        let have = self.pooled.get();
        self.pooled.set(want);
        if want > have {
            self.pool.force_acquire(want - have)
        } else {
            self.pool.release(have - want);
            false
        }
    }

    /// `n` bytes are no longer held (written to the client, or dropped).
    #[inline]
    pub fn release(&self, n: usize) {
        let held = self.held.get() - n.min(self.held.get());
        self.held.set(held);
        if self.pooled.get() > 0 {
            self.sync_pool(held);
        }
        if held <= self.limits.soft {
            self.over_soft_since.set(None);
        }
    }

    /// Whether the client went over a limit, and which.
    pub fn overflow(&self) -> Option<Overflow> {
        if self.overflow.get().is_none() && self.held.get() > self.limits.soft {
            self.overflow_at(Instant::now())
        } else {
            self.overflow.get()
        }
    }

    fn overflow_at(&self, now: Instant) -> Option<Overflow> {
        if self.overflow.get().is_none()
            && let Some(o) = self.check_soft(now)
        {
            self.overflow.set(Some(o));
        }
        self.overflow.get()
    }

    /// When the soft limit will have been exceeded for too long, if it is exceeded now.
    pub fn soft_deadline(&self) -> Option<Instant> {
        self.over_soft_since.get().map(|t| t + self.limits.soft_for)
    }

    /// Completes once the account is overflowed.
    pub async fn overflowed(&self) -> Overflow {
        loop {
            if let Some(o) = self.overflow() {
                return o;
            }
            match self.soft_deadline() {
                Some(at) => {
                    tokio::select! {
                        _ = self.notify.notified() => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => self.notify.notified().await,
            }
        }
    }

    fn check_soft(&self, now: Instant) -> Option<Overflow> {
        if self.held.get() <= self.limits.soft {
            self.over_soft_since.set(None);
            return None;
        }
        let since = self.over_soft_since.get().unwrap_or(now);
        self.over_soft_since.set(Some(since));
        (now.duration_since(since) >= self.limits.soft_for).then_some(Overflow::Soft)
    }
}

impl Drop for OutputAccount {
    fn drop(&mut self) {
        self.pool.release(self.pooled.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    /// An account with limits in MiB (so the first `UNPOOLED` bytes are noise).
    fn account(hard: usize, soft: usize, pool: usize) -> (Rc<OutputAccount>, Arc<MemoryPool>) {
        let (hard, soft) = (hard * MB, soft * MB);
        let pool = Arc::new(MemoryPool::new(pool * MB));
        let limits = OutputLimits {
            hard,
            soft,
            soft_for: Duration::from_secs(60),
        };
        (OutputAccount::new(limits, pool.clone()), pool)
    }

    #[test]
    fn held_bytes_go_back_to_the_pool_even_through_a_panic() {
        let pool = Arc::new(MemoryPool::new(16 * MB));
        let mut h = Held::new(pool.clone());
        assert!(h.try_grow_to(3 * MB));
        assert!(!h.try_grow_to(17 * MB), "over the pool");
        h.shrink_to(MB);
        assert_eq!(pool.used(), MB);
        let t = std::thread::spawn(move || {
            let mut h = h;
            assert!(h.try_grow_to(15 * MB));
            panic!("the holder panics");
        });
        assert!(t.join().is_err());
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn pool_refuses_what_would_pass_its_limit() {
        let p = MemoryPool::new(100);
        assert!(p.try_acquire(60));
        assert!(!p.try_acquire(41));
        assert!(p.try_acquire(40));
        p.release(50);
        assert_eq!(p.used(), 50);
    }

    #[test]
    fn hard_limit_overflows_at_once_and_bytes_return_to_the_pool() {
        let (a, pool) = account(100, 50, 1000);
        a.charge(10 * MB);
        assert_eq!(
            pool.used(),
            10 * MB - UNPOOLED,
            "all but the unpooled allowance"
        );
        a.release(10 * MB);
        assert_eq!(pool.used(), 0);
        a.charge(60 * MB);
        assert_eq!(a.overflow(), None);
        a.charge(41 * MB);
        assert_eq!(a.overflow(), Some(Overflow::Hard));
        assert_eq!(pool.used(), 101 * MB - UNPOOLED);
        drop(a);
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn small_replies_touch_neither_the_pool_nor_the_clock() {
        let (a, pool) = account(100, 50, 1000);
        for _ in 0..1000 {
            a.charge(1000);
            a.release(1000);
        }
        a.charge(UNPOOLED);
        assert_eq!(
            (pool.used(), a.soft_deadline(), a.overflow()),
            (0, None, None)
        );
    }

    #[test]
    fn an_exhausted_pool_overflows_the_client_that_charges_it() {
        let (a, _pool) = account(1000, 1000, 100);
        a.charge(101 * MB);
        assert_eq!(a.overflow(), Some(Overflow::Pool));
    }

    #[test]
    fn soft_limit_overflows_only_when_it_lasts() {
        let (a, _pool) = account(1000, 50, 10_000);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        a.charge_at(60 * MB, at(0));
        assert_eq!(a.overflow_at(at(0)), None);
        a.release(20 * MB);
        // Back under the soft limit at 30 s: the clock starts again.
        a.charge_at(20 * MB, at(30));
        assert_eq!(a.overflow_at(at(89)), None);
        assert_eq!(a.soft_deadline(), Some(at(90)));
        assert_eq!(a.overflow_at(at(90)), Some(Overflow::Soft));
    }
}
