//! The stage clock plugins read (`stage_us`): while the proxy pins a reading of its own (the
//! moment a batch of commands is dispatched, the moment a reply is in), calls on this thread
//! see that reading, so a plugin timing commands costs no clock read of its own on the data
//! path. Unpinned (ticks, closes, anything else), it is the clock itself. (`now_us` is always
//! the clock.)
//!
//! Each pin is a fresh reading, held only by synchronous code (never across an `.await`), so
//! what a plugin sees on a worker thread never goes back.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static PINNED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// While alive, `stage()` on this thread is `at`. Not `Send`: it stays on its thread.
pub struct Pinned {
    before: Option<Instant>,
    _thread: std::marker::PhantomData<*const ()>,
}

/// Pins this thread's plugin clock to `at` until the guard is dropped.
pub fn pin(at: Instant) -> Pinned {
    Pinned {
        before: PINNED.replace(Some(at)),
        _thread: std::marker::PhantomData,
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        PINNED.set(self.before);
    }
}

/// The stage's time.
pub(crate) fn stage() -> Instant {
    PINNED.get().unwrap_or_else(Instant::now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_pin_holds_until_dropped_and_nests() {
        let t = Instant::now() - Duration::from_secs(5);
        {
            let _a = pin(t);
            assert_eq!(stage(), t);
            {
                let _b = pin(t + Duration::from_secs(1));
                assert_eq!(stage(), t + Duration::from_secs(1));
            }
            assert_eq!(stage(), t);
        }
        assert!(stage() > t + Duration::from_secs(4));
    }
}
