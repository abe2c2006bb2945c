//! The sinks of one name: the sessions subscribed to a channel, or that tracked one key or one
//! BCAST prefix. A few inline, a hash set past that, so that adding or removing one sink costs
//! the same however many other sessions want the same name (a session that unsubscribes or
//! stops tracking must not pay for everyone else's).

use rustc_hash::FxHashSet;
use smallvec::SmallVec;

use crate::pubsub::SinkId;

/// Past this many sinks, a list becomes a set (a linear search of 8 is cheaper than hashing).
const INLINE: usize = 8;

/// A set of sinks.
#[derive(Debug)]
pub(crate) enum Sinks {
    Few(SmallVec<[SinkId; 2]>),
    Many(FxHashSet<SinkId>),
}

impl Default for Sinks {
    fn default() -> Self {
        Sinks::Few(SmallVec::new())
    }
}

impl Sinks {
    /// Adds `sink`; whether it was new.
    pub(crate) fn insert(&mut self, sink: SinkId) -> bool {
        match self {
            Sinks::Few(v) if v.contains(&sink) => false,
            Sinks::Few(v) if v.len() < INLINE => {
                v.push(sink);
                true
            }
            Sinks::Few(v) => {
                let mut set: FxHashSet<SinkId> = v.drain(..).collect();
                set.insert(sink);
                *self = Sinks::Many(set);
                true
            }
            Sinks::Many(set) => set.insert(sink),
        }
    }

    /// Removes `sink`; whether it was there.
    pub(crate) fn remove(&mut self, sink: SinkId) -> bool {
        match self {
            Sinks::Few(v) => match v.iter().position(|s| *s == sink) {
                Some(i) => {
                    v.swap_remove(i);
                    true
                }
                None => false,
            },
            Sinks::Many(set) => set.remove(&sink),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Sinks::Few(v) => v.is_empty(),
            Sinks::Many(set) => set.is_empty(),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = SinkId> + '_ {
        let (few, many) = match self {
            Sinks::Few(v) => (Some(v.iter()), None),
            Sinks::Many(set) => (None, Some(set.iter())),
        };
        few.into_iter()
            .flatten()
            .chain(many.into_iter().flatten())
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_grows_into_a_set_and_keeps_its_members() {
        let mut s = Sinks::default();
        for i in 0..20 {
            assert!(s.insert(i));
            assert!(!s.insert(i));
        }
        assert!(matches!(s, Sinks::Many(_)));
        for i in 0..19 {
            s.remove(i);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), [19]);
        s.remove(19);
        assert!(s.is_empty());
    }
}
