//! The proxy's own writes, as the workers' hot-key caches see them: a counter per stripe of
//! the key space and one for everything, bumped by a session when it sends a write and again
//! when its reply comes in. A cache entry is served only while the counters of its key are
//! where they were when its GET was sent, so a read that starts after a write's reply left
//! any worker of this proxy never sees an older value, whatever the backends' invalidations
//! (which travel on other connections) are doing meanwhile.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use rustc_hash::FxBuildHasher;

/// Stripes of the key space: two keys in one stripe share a counter, so a write of one costs
/// the other's cache entry (a miss, never a stale hit). 32 KiB per proxy.
const STRIPES: usize = 4096;

/// Where a key's writes are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe(u16);

/// The counters a cache entry was read under: its key's stripe and the one for everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    stripe: u64,
    all: u64,
}

/// What one command may write, for the caches (computed when it is sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Written {
    /// Nothing a cache holds.
    #[default]
    Nothing,
    /// Keys under a cached prefix, by stripe.
    Stripes(smallvec::SmallVec<[Stripe; 4]>),
    /// Anything: a write without keys (FLUSHALL), a script, a transaction's EXEC.
    All,
}

impl Written {
    /// Adds `other` to what this command writes (a plugin's rewrite sends several commands).
    pub fn add(&mut self, other: Written) {
        match (&mut *self, other) {
            (_, Written::Nothing) | (Written::All, _) => {}
            (Written::Stripes(a), Written::Stripes(b)) => a.extend(b),
            (me, other) => *me = other,
        }
    }
}

/// The counters, shared by every worker of a proxy.
pub struct Writes {
    stripes: Box<[AtomicU64]>,
    all: AtomicU64,
}

impl Default for Writes {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            all: AtomicU64::new(0),
        }
    }
}

impl Writes {
    pub fn stripe(key: &[u8]) -> Stripe {
        let mut h = FxBuildHasher.build_hasher();
        h.write(key);
        Stripe((h.finish() % STRIPES as u64) as u16)
    }

    /// The counters `key` is read under now.
    pub fn stamp(&self, key: &[u8]) -> Stamp {
        // SeqCst: a bump made on another worker before its client was answered must be seen
        // by a read that client's answer caused (on x86 a SeqCst load is a plain load).
        Stamp {
            stripe: self.stripes[Self::stripe(key).0 as usize].load(SeqCst),
            all: self.all.load(SeqCst),
        }
    }

    /// A write of `w` is sent, or its reply came in.
    pub fn bump(&self, w: &Written) {
        match w {
            Written::Nothing => {}
            Written::Stripes(s) => {
                for stripe in s {
                    self.stripes[stripe.0 as usize].fetch_add(1, SeqCst);
                }
            }
            Written::All => {
                self.all.fetch_add(1, SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_moves_its_key_and_everything_moves_every_key() {
        let w = Writes::default();
        let (a, b) = (w.stamp(b"h:a"), w.stamp(b"h:b"));
        w.bump(&Written::Stripes(
            [Writes::stripe(b"h:a")].into_iter().collect(),
        ));
        assert_ne!(w.stamp(b"h:a"), a);
        if Writes::stripe(b"h:a") != Writes::stripe(b"h:b") {
            assert_eq!(w.stamp(b"h:b"), b);
        }
        let b = w.stamp(b"h:b");
        w.bump(&Written::All);
        assert_ne!(w.stamp(b"h:b"), b);
        let mut x = Written::Nothing;
        x.add(Written::Stripes(
            [Writes::stripe(b"k")].into_iter().collect(),
        ));
        x.add(Written::Nothing);
        assert!(matches!(&x, Written::Stripes(s) if s.len() == 1));
        x.add(Written::All);
        x.add(Written::Stripes(
            [Writes::stripe(b"k")].into_iter().collect(),
        ));
        assert_eq!(x, Written::All);
    }
}
