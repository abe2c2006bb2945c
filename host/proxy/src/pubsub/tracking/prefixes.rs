//! The BCAST sessions of a worker, indexed by prefix, so that the sinks a written key concerns
//! are found in time that depends on the key, not on how many sessions track or how many
//! prefixes they named: one hash lookup per distinct prefix length up to the key's length
//! (clients' prefixes are at most `MAX_PREFIX_LEN` bytes, so at most that many lookups).
//! Adding or removing one sink's prefixes costs its own prefixes only.

use std::collections::BTreeMap;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use crate::pubsub::SinkId;
use crate::pubsub::sinks::Sinks;

/// Every BCAST sink's prefixes.
#[derive(Default)]
pub(super) struct Prefixes {
    /// Sinks without a prefix: every key concerns them.
    everything: Sinks,
    by_prefix: FxHashMap<Bytes, Sinks>,
    /// The distinct lengths of `by_prefix`'s keys, each with how many prefixes have it.
    lengths: BTreeMap<usize, usize>,
    of_sink: FxHashMap<SinkId, Vec<Bytes>>,
}

impl Prefixes {
    /// `sink` hears of keys under `prefixes` (none: of every key).
    pub(super) fn add(&mut self, sink: SinkId, prefixes: Vec<Bytes>) {
        self.remove(sink);
        if prefixes.is_empty() {
            self.everything.insert(sink);
        }
        for p in &prefixes {
            if self.by_prefix.entry(p.clone()).or_default().insert(sink) {
                *self.lengths.entry(p.len()).or_default() += 1;
            }
        }
        self.of_sink.insert(sink, prefixes);
    }

    /// `sink` no longer tracks.
    pub(super) fn remove(&mut self, sink: SinkId) {
        let Some(prefixes) = self.of_sink.remove(&sink) else {
            return;
        };
        if prefixes.is_empty() {
            self.everything.remove(sink);
        }
        for p in prefixes {
            let Some(sinks) = self.by_prefix.get_mut(&p) else {
                continue;
            };
            sinks.remove(sink);
            if sinks.is_empty() {
                self.by_prefix.remove(&p);
            }
            if let Some(n) = self.lengths.get_mut(&p.len()) {
                *n -= 1;
                if *n == 0 {
                    self.lengths.remove(&p.len());
                }
            }
        }
    }

    /// Calls `f` for each sink `key` concerns: once per sink whose prefixes do not overlap
    /// (sessions refuse overlapping prefixes, as Redis does).
    /// With each, the length of the prefix `key` is under (0: a sink without prefixes).
    pub(super) fn matching_under(&self, key: &[u8], mut f: impl FnMut(SinkId, usize)) {
        self.everything.iter().for_each(|s| f(s, 0));
        for &len in self.lengths.range(..=key.len()).map(|(len, _)| len) {
            if let Some(sinks) = self.by_prefix.get(&key[..len]) {
                sinks.iter().for_each(|s| f(s, len));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matching(p: &Prefixes, key: &[u8]) -> Vec<SinkId> {
        let mut v = Vec::new();
        p.matching_under(key, |s, _| v.push(s));
        v.sort();
        v
    }

    #[test]
    fn a_key_finds_the_sinks_of_its_prefixes_and_no_others() {
        let mut p = Prefixes::default();
        p.add(1, vec![Bytes::from("user:"), Bytes::from("job:")]);
        p.add(2, vec![Bytes::from("user:1")]);
        p.add(3, vec![]);
        p.add(4, vec![Bytes::from("user:")]);
        assert_eq!(matching(&p, b"user:17"), [1, 2, 3, 4]);
        assert_eq!(matching(&p, b"user:2"), [1, 3, 4]);
        assert_eq!(matching(&p, b"job:x"), [1, 3]);
        assert_eq!(matching(&p, b"us"), [3]);
        p.remove(1);
        assert_eq!(matching(&p, b"job:x"), [3]);
        assert_eq!(matching(&p, b"user:17"), [2, 3, 4]);
        p.remove(3);
        p.remove(2);
        p.remove(4);
        assert!(p.by_prefix.is_empty() && p.lengths.is_empty() && p.everything.is_empty());
    }
}
