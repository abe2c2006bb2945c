//! What this proxy's subscribers add to the servers' counts, for every worker's hub: per
//! channel, pattern and shard channel, how many hubs hold it (each is one subscription on the
//! server, which is what `PUBLISH` and `PUBSUB NUMSUB` count there) and how many clients (what
//! a Redis user expects them to count). `session::pubsub_counts` turns the servers' answers
//! into clients' counts with these, and the other proxies' (`fleet`); docs/pubsub.md.
//!
//! Changed on every subscription and unsubscription a hub makes (not per message), read per
//! `PUBLISH` and `PUBSUB NUMSUB`; one lock for the proxy, held for a map update or, for a
//! `PUBLISH`, a walk of the subscribed patterns (as the server itself walks them).

use std::sync::Mutex;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use super::glob;
use super::wire::Space;
use tessera_wire::pubsub::SubCount;

/// A name's subscriptions through a proxy: its hubs' (the server's own subscriptions, per
/// master it is subscribed on) and its clients'.
pub type Count = SubCount;

/// `a` plus `b`.
pub fn add(a: &mut Count, b: Count) {
    a.hubs = a.hubs.saturating_add(b.hubs);
    a.clients = a.clients.saturating_add(b.clients);
}

/// The proxy's counts (`Shared::sub_counts`).
#[derive(Default)]
pub struct Counts {
    names: Mutex<[FxHashMap<Bytes, Count>; 3]>,
}

impl Counts {
    /// A hub subscribes `name` for a client (`new_hub`: the hub did not hold it yet).
    pub fn subscribed(&self, space: Space, name: &Bytes, new_hub: bool) {
        let mut names = self.names.lock().expect("pub/sub counts lock poisoned");
        let c = names[space.index()].entry(name.clone()).or_default();
        c.clients += 1;
        c.hubs += u64::from(new_hub);
    }

    /// A client's subscription to `name` ends. Its hub's, if this was the last, ends with
    /// [`Counts::hub_left`], once the servers confirm it: until then they still count it.
    pub fn unsubscribed(&self, space: Space, name: &[u8]) {
        self.change(space, name, |c| c.clients = c.clients.saturating_sub(1));
    }

    /// A hub's unsubscription from `name` is done on every server it was subscribed on.
    pub fn hub_left(&self, space: Space, name: &[u8]) {
        self.change(space, name, |c| c.hubs = c.hubs.saturating_sub(1));
    }

    fn change(&self, space: Space, name: &[u8], f: impl FnOnce(&mut Count)) {
        let mut names = self.names.lock().expect("pub/sub counts lock poisoned");
        let map = &mut names[space.index()];
        if let Some(c) = map.get_mut(name) {
            f(c);
            if c.clients == 0 && c.hubs == 0 {
                map.remove(name);
            }
        }
    }

    /// Each name's count in `space`; with `patterns` (plain channels), each plus those of the
    /// patterns it matches, as a server counts the receivers of a `PUBLISH`.
    pub fn of(&self, space: Space, names: &[Bytes], patterns: bool) -> Vec<Count> {
        let all = self.names.lock().expect("pub/sub counts lock poisoned");
        names
            .iter()
            .map(|name| {
                let mut c = all[space.index()].get(name).copied().unwrap_or_default();
                if patterns && space == Space::Channel {
                    for (p, pc) in &all[Space::Pattern.index()] {
                        if glob::matches(p, name) {
                            add(&mut c, *pc);
                        }
                    }
                }
                c
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_subscriptions_and_patterns_add_to_publish_counts() {
        let c = Counts::default();
        let news = Bytes::from_static(b"news");
        let all = Bytes::from_static(b"n*");
        c.subscribed(Space::Channel, &news, true);
        c.subscribed(Space::Channel, &news, false);
        c.subscribed(Space::Channel, &news, true);
        c.subscribed(Space::Pattern, &all, true);
        let got = c.of(Space::Channel, std::slice::from_ref(&news), false);
        assert_eq!(
            got,
            [Count {
                hubs: 2,
                clients: 3
            }]
        );
        let got = c.of(Space::Channel, std::slice::from_ref(&news), true);
        assert_eq!(
            got,
            [Count {
                hubs: 3,
                clients: 4
            }]
        );
        assert_eq!(
            c.of(Space::Shard, std::slice::from_ref(&news), true),
            [Count::default()]
        );
        for _ in 0..3 {
            c.unsubscribed(Space::Channel, b"news");
        }
        // The clients are gone at once; the hubs until the servers confirm.
        assert_eq!(
            c.of(Space::Channel, std::slice::from_ref(&news), false),
            [Count {
                hubs: 2,
                clients: 0
            }]
        );
        c.hub_left(Space::Channel, b"news");
        c.hub_left(Space::Channel, b"news");
        assert_eq!(
            c.of(Space::Channel, std::slice::from_ref(&news), false),
            [Count::default()]
        );
        assert!(c.names.lock().unwrap()[Space::Channel.index()].is_empty());
    }
}
