//! Routing by slot, and the multi-key commands the proxy splits across backends and merges:
//! MGET/MSET/DEL/EXISTS/UNLINK/TOUCH, compared reply by reply with one direct redis-server.

use crate::support::{Cluster, Frame, RedisServer, assert_same_replies, keys_on, slot};

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

#[test]
fn keys_land_on_the_backend_that_owns_their_slot() {
    let cluster = Cluster::start();
    // Whole-key slot on the second backend, but `{}` makes the hash key empty: slot 0.
    let empty_tag = (0..)
        .map(|n| format!("{{}}k{n}"))
        .find(|k| crc32fast::hash(k.as_bytes()) % 1024 >= 512)
        .expect("some key hashes high");
    assert_eq!(slot(empty_tag.as_bytes()), 0);
    let keys = [
        "foo".to_string(),       // slot 289: first backend
        "{a}x".to_string(),      // slot 579: second backend
        "x{foo}{a}".to_string(), // first `{...}` wins: slot 289
        "{a".to_string(),        // no closing brace: the whole key
        "}{a}".to_string(),      // a `}` before the first `{` does not count: slot 579
        keys_on(1, "plain", 1).remove(0),
        empty_tag,
    ];
    let mut raw = cluster.proxy.raw();
    for key in &keys {
        assert_eq!(
            raw.cmd(&["SET", key, "v"]),
            Frame::Simple("OK".into()),
            "SET {key}"
        );
        assert!(
            cluster.owner_of(key).has(key),
            "{key} (slot {}) missing from its owner",
            slot(key.as_bytes())
        );
        assert!(
            !cluster.non_owner_of(key).has(key),
            "{key} also on the other backend"
        );
        assert_eq!(raw.cmd(&["GET", key]), Frame::bulk("v"), "GET {key}");
    }
}

#[test]
fn cross_slot_mset_mget_exists_touch_del_unlink_match_direct_redis() {
    let cluster = Cluster::start();
    let direct = RedisServer::start();
    let keys: Vec<String> = (0..40).map(|i| format!("mk:{i}")).collect();
    let k = |range: std::ops::Range<usize>| keys[range].to_vec();
    let mut mset = vec!["MSET".to_string()];
    for key in &keys[..30] {
        mset.extend([key.clone(), format!("v-{key}")]);
    }
    let (mut proxy, mut direct_raw) = (cluster.proxy.raw(), direct.raw());
    assert_same_replies(&mut proxy, &mut direct_raw, &[mset]);

    // The data really is spread: each key on its owner only, and both owners hold some.
    for key in &keys[..30] {
        assert!(
            cluster.owner_of(key).has(key),
            "{key} missing from its owner"
        );
        assert!(
            !cluster.non_owner_of(key).has(key),
            "{key} on the wrong backend"
        );
    }
    let [a, b] = &cluster.backends;
    assert!(
        a.dbsize() > 0 && b.dbsize() > 0,
        "keys must be on both backends"
    );
    assert_eq!(a.dbsize() + b.dbsize(), 30);

    let with = |name: &str, keys: Vec<String>| [vec![name.to_string()], keys].concat();
    let dup = vec![
        keys[0].clone(),
        keys[0].clone(),
        keys[35].clone(),
        keys[5].clone(),
        keys[12].clone(),
    ];
    let commands = vec![
        with("MGET", k(0..40)),
        with("EXISTS", dup.clone()),
        with("TOUCH", [k(1..3), k(36..37), k(20..21)].concat()),
        with("DEL", [k(0..10), k(38..39)].concat()),
        with("MGET", k(0..40)),
        with("UNLINK", [k(10..20), k(39..40), dup].concat()),
        with("EXISTS", k(0..40)),
        with("MGET", k(0..40)),
        with("DEL", k(0..40)),
    ];
    assert_same_replies(&mut proxy, &mut direct_raw, &commands);
    assert_eq!(a.dbsize() + b.dbsize(), 0);
}

#[test]
fn cross_slot_mget_in_resp3_merges_like_direct_redis() {
    let cluster = Cluster::start();
    let direct = RedisServer::start();
    let (mut proxy, mut direct_raw) = (cluster.proxy.raw(), direct.raw());
    let keys = [keys_on(0, "r3:", 3), keys_on(1, "r3:", 3)].concat();
    let commands = [
        args(&["HELLO", "3"]),
        args(&["MSET", &keys[0], "1", &keys[3], "2", &keys[4], "3"]),
        [vec!["MGET".to_string()], keys.clone()].concat(),
        [vec!["EXISTS".to_string()], keys].concat(),
    ];
    // HELLO replies differ (server name, id): compare only that both are maps.
    let (p, d) = (proxy.cmd(&commands[0]), direct_raw.cmd(&commands[0]));
    assert!(
        matches!((&p, &d), (Frame::Map(_), Frame::Map(_))),
        "{p:?} / {d:?}"
    );
    assert_same_replies(&mut proxy, &mut direct_raw, &commands[1..]);
}
