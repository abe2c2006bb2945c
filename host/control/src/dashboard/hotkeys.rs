//! `GET /api/hotkeys`: the cluster's hot keys. Asks every online proxy for its own top keys
//! (`GET /api/proxy/hotkeys`, a deeper list than asked for, so a key that is warm on each
//! proxy but hot in sum is not lost) and sums them per key, keeping which proxies saw it.

use std::collections::HashMap;
use std::time::Duration;

use super::Dashboard;
use tessera_wire::telemetry::{ClusterHotKey, ClusterHotKeys, HotKey, HotKeysView, SeenBy};

/// How much deeper than the asked-for limit each proxy's list is read.
const DEPTH: usize = 5;
/// The most keys read per proxy and ranking.
const MAX_DEPTH: usize = 1000;

/// The proxies' lists summed per key.
fn merge(reads: Vec<(SeenBy, HotKeysView)>) -> Vec<ClusterHotKey> {
    let mut keys: HashMap<(String, u64), ClusterHotKey> = HashMap::new();
    for (proxy, view) in reads {
        // A key on both of a proxy's lists counts once.
        let mut own: HashMap<(String, u64), HotKey> = HashMap::new();
        for k in view.by_ops.into_iter().chain(view.by_bytes) {
            own.entry((k.key.clone(), k.key_len)).or_insert(k);
        }
        for (id, k) in own {
            let e = keys.entry(id).or_insert_with(|| ClusterHotKey {
                key: k.key.clone(),
                key_len: k.key_len,
                truncated: k.truncated,
                slot: k.slot,
                group: None,
                ops: 0,
                bytes: 0,
                seen_by: Vec::new(),
            });
            e.ops += k.ops;
            e.bytes += k.bytes;
            e.seen_by.push(SeenBy {
                ops: k.ops,
                bytes: k.bytes,
                ..proxy.clone()
            });
        }
    }
    keys.into_values()
        .map(|mut k| {
            k.seen_by
                .sort_by(|a, b| b.ops.cmp(&a.ops).then(a.addr.cmp(&b.addr)));
            k
        })
        .collect()
}

/// The top `limit` of `all` by `f`, ties by key.
fn top(all: &[ClusterHotKey], limit: usize, f: fn(&ClusterHotKey) -> u64) -> Vec<ClusterHotKey> {
    let mut v: Vec<&ClusterHotKey> = all.iter().collect();
    v.sort_by(|a, b| f(b).cmp(&f(a)).then_with(|| a.key.cmp(&b.key)));
    v.into_iter().take(limit).cloned().collect()
}

impl Dashboard {
    /// Every online proxy's hot keys, merged (`limit`: keys per ranking, at least 1).
    pub async fn hotkeys(&self, limit: usize) -> ClusterHotKeys {
        let proxies = self.registered_proxies().await.unwrap_or_default();
        let offline = self
            .state
            .lock()
            .expect("state lock poisoned")
            .offline
            .clone();
        let online: Vec<_> = proxies
            .into_iter()
            .filter(|p| !offline.contains(&p.token))
            .collect();
        let path = format!(
            "/api/proxy/hotkeys?limit={}",
            (limit.max(1) * DEPTH).min(MAX_DEPTH)
        );
        let read = self
            .get_from_proxies::<HotKeysView>(&online, &path, Duration::from_secs(2))
            .await;
        let mut out = ClusterHotKeys {
            proxies: 0,
            unanswered: Vec::new(),
            window_secs: 0.0,
            by_ops: Vec::new(),
            by_bytes: Vec::new(),
            hot_cache: Default::default(),
        };
        let mut reads = Vec::new();
        for (p, view) in online.iter().zip(read) {
            let Ok(view) = view else {
                out.unanswered.push(p.token.clone());
                continue;
            };
            out.proxies += 1;
            out.window_secs = out.window_secs.max(view.window_secs);
            out.hot_cache.add(&view.hot_cache);
            let seen = SeenBy {
                token: p.token.clone(),
                addr: p.addr.clone(),
                ops: 0,
                bytes: 0,
            };
            reads.push((seen, view));
        }
        let mut all = merge(reads);
        {
            let st = self.state.lock().expect("state lock poisoned");
            for k in &mut all {
                k.group = k
                    .slot
                    .and_then(|s| st.slots.get(s as usize))
                    .and_then(|s| s.group.map(|g| g.0));
            }
        }
        out.by_ops = top(&all, limit, |k| k.ops);
        out.by_bytes = top(&all, limit, |k| k.bytes);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, ops: u64) -> HotKey {
        HotKey {
            key: name.into(),
            key_len: name.len() as u64,
            truncated: false,
            slot: Some(1),
            ops,
            bytes: ops * 10,
        }
    }

    fn read(addr: &str, keys: Vec<HotKey>) -> (SeenBy, HotKeysView) {
        let seen = SeenBy {
            token: addr.into(),
            addr: addr.into(),
            ops: 0,
            bytes: 0,
        };
        let view = HotKeysView {
            enabled: true,
            window_secs: 10.0,
            sub_window_secs: 2.0,
            sample_one_in: 1,
            by_ops: keys.clone(),
            by_bytes: keys,
            memory_bytes: 0,
            memory_limit_bytes: 0,
            max_key_bytes: 128,
            hot_cache: Default::default(),
        };
        (seen, view)
    }

    #[test]
    fn a_key_split_over_proxies_ranks_by_its_sum() {
        let a = read("a", vec![key("local:a", 100), key("split", 60)]);
        let b = read("b", vec![key("local:b", 90), key("split", 60)]);
        let all = merge(vec![a, b]);
        let best = top(&all, 1, |k| k.ops);
        assert_eq!(best[0].key, "split");
        assert_eq!((best[0].ops, best[0].bytes), (120, 1200));
        let by: Vec<_> = best[0].seen_by.iter().map(|s| s.addr.as_str()).collect();
        assert_eq!(by, ["a", "b"]);
        assert_eq!(top(&all, 2, |k| k.ops)[1].key, "local:a");
    }
}
