//! The coordinator's `Store` contract, run on `FsStore` (a temp dir) and `EtcdStore` (a real
//! etcd from `support::Etcd`). Each contract is one async fn taking a store URL, so it also
//! covers `coordinator::open`; `contract_tests!` runs it once per store, as
//! `store::fs_store::<contract>` and `store::etcd_store::<contract>`. Store-specific checks
//! (key validation, locking across instances, an etcd outage) follow the contracts.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::json;
use tessera_store::{
    self as coordinator, Cas, FsStore, Holder, Store, StoreError, Versioned, WatchEvent,
    WatchStream,
};

use crate::support::Etcd;

/// How long a watch event, or a node's expiry, may take to show up.
const EVENT_TIMEOUT: Duration = Duration::from_secs(15);

macro_rules! contract_tests {
    ($($contract:ident),* $(,)?) => {
        mod fs_store {
            $(
                #[tokio::test]
                async fn $contract() {
                    let dir = tempfile::tempdir().expect("creating temp dir");
                    super::$contract(&format!("fs://{}", dir.path().display())).await;
                }
            )*
        }
        mod etcd_store {
            $(
                #[tokio::test]
                async fn $contract() {
                    let etcd = crate::support::Etcd::start().await;
                    super::$contract(&etcd.url()).await;
                }
            )*
        }
    };
}

contract_tests!(
    gets_puts_and_deletes_arbitrary_bytes,
    put_many_writes_every_key_and_a_watch_sees_each,
    compare_and_swap_writes_only_at_the_expected_version,
    lists_a_prefix_sorted_by_key,
    children_are_the_names_right_below_a_prefix,
    watch_sees_puts_and_deletes_in_order,
    second_ephemeral_create_is_held_until_release,
    ephemeral_node_outlives_its_ttl_while_its_handle_lives,
    ephemeral_node_of_a_dead_pid_is_taken_over,
    ephemeral_node_disappears_after_its_ttl_when_its_holder_crashes,
    a_confirmed_release_has_removed_the_node_when_it_returns,
    a_crashed_holders_node_goes_silent_and_can_be_expired_at_once,
    an_expired_node_is_lost_to_its_live_holder,
);

// === contracts ===

async fn gets_puts_and_deletes_arbitrary_bytes(url: &str) {
    let store = open(url).await;
    assert_eq!(store.get("/t/a").await.unwrap(), None);

    let bytes = Bytes::from_static(b"{\"x\":1}\n\x00\xff\r\nnot utf-8 or json");
    let v1 = store.put("/t/a", bytes.clone()).await.unwrap();
    assert_eq!(
        store.get("/t/a").await.unwrap(),
        Some(Versioned {
            value: bytes,
            version: v1
        })
    );

    let v2 = store.put("/t/a", b("two")).await.unwrap();
    assert!(v2 > v1, "versions increase: {v1} then {v2}");
    assert_eq!(
        store.get("/t/a").await.unwrap(),
        Some(Versioned {
            value: b("two"),
            version: v2
        })
    );

    assert!(
        store.delete("/t/a").await.unwrap(),
        "delete reports an existing key"
    );
    assert_eq!(store.get("/t/a").await.unwrap(), None);
    assert!(
        !store.delete("/t/a").await.unwrap(),
        "delete reports a missing key"
    );

    let v3 = store.put("/t/a", b("three")).await.unwrap();
    assert!(
        v3 > v2,
        "a recreated key's version is still higher: {v2} then {v3}"
    );
}

async fn put_many_writes_every_key_and_a_watch_sees_each(url: &str) {
    let store = open(url).await;
    store.put("/m/k-0", b("old")).await.unwrap();
    let before = store.get("/m/k-0").await.unwrap().unwrap().version;
    let mut watch = store.watch("/m/").await.unwrap();
    // More than one etcd transaction holds (100 a transaction).
    let entries: Vec<(String, Bytes)> = (0..250)
        .map(|i| (format!("/m/k-{i}"), Bytes::from(format!("v{i}"))))
        .collect();
    store.put_many(entries).await.unwrap();
    let all = store.list("/m/").await.unwrap();
    assert_eq!(all.len(), 250);
    for (key, v) in &all {
        let i = key.strip_prefix("/m/k-").unwrap();
        assert_eq!(v.value, Bytes::from(format!("v{i}")), "{key}");
    }
    let first = store.get("/m/k-0").await.unwrap().unwrap();
    assert!(
        first.version > before,
        "an overwritten key gets a newer version"
    );
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 250 {
        match next_event(&mut watch).await {
            WatchEvent::Put { key, .. } => {
                seen.insert(key);
            }
            other => panic!("only puts: {other:?}"),
        }
    }
    store.put_many(Vec::new()).await.unwrap();
}

async fn compare_and_swap_writes_only_at_the_expected_version(url: &str) {
    let store = open(url).await;
    let Cas::Written(v1) = store
        .compare_and_swap("/t/k", None, b("one"))
        .await
        .unwrap()
    else {
        panic!("CAS with None on a missing key writes");
    };
    let one = Versioned {
        value: b("one"),
        version: v1,
    };
    assert_eq!(
        store
            .compare_and_swap("/t/k", None, b("again"))
            .await
            .unwrap(),
        Cas::Conflict(Some(one.clone())),
        "CAS with None on an existing key conflicts with the current value"
    );

    let Cas::Written(v2) = store
        .compare_and_swap("/t/k", Some(v1), b("two"))
        .await
        .unwrap()
    else {
        panic!("CAS at the current version writes");
    };
    assert!(v2 > v1);
    let two = Versioned {
        value: b("two"),
        version: v2,
    };
    assert_eq!(
        store
            .compare_and_swap("/t/k", Some(v1), b("stale"))
            .await
            .unwrap(),
        Cas::Conflict(Some(two.clone())),
        "CAS at a stale version conflicts"
    );
    assert_eq!(store.get("/t/k").await.unwrap(), Some(two));

    store.delete("/t/k").await.unwrap();
    assert_eq!(
        store
            .compare_and_swap("/t/k", Some(v2), b("gone"))
            .await
            .unwrap(),
        Cas::Conflict(None),
        "CAS at a version of a deleted key conflicts with nothing"
    );
}

async fn lists_a_prefix_sorted_by_key(url: &str) {
    let store = open(url).await;
    for key in [
        "/t/list/b",
        "/t/list/a",
        "/t/list/c/deep",
        "/t/listing",
        "/t/other/x",
    ] {
        store.put(key, Bytes::from(key.to_owned())).await.unwrap();
    }
    let listed = store.list("/t/list/").await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["/t/list/a", "/t/list/b", "/t/list/c/deep"]);
    for (key, versioned) in &listed {
        assert_eq!(versioned.value, key.as_bytes());
        assert_eq!(store.get(key).await.unwrap().as_ref(), Some(versioned));
    }
    assert!(store.list("/t/none/").await.unwrap().is_empty());
}

async fn children_are_the_names_right_below_a_prefix(url: &str) {
    let store = open(url).await;
    for key in ["/t/kids/b/deep", "/t/kids/a", "/t/kids/b/x", "/t/kidsnot/y"] {
        store.put(key, b("v")).await.unwrap();
    }
    assert_eq!(store.children("/t/kids/").await.unwrap(), ["a", "b"]);
    assert_eq!(store.children("/t/").await.unwrap(), ["kids", "kidsnot"]);
    assert!(store.children("/t/none/").await.unwrap().is_empty());
}

async fn watch_sees_puts_and_deletes_in_order(url: &str) {
    let store = open(url).await;
    store.put("/t/w/before", b("old")).await.unwrap();
    let mut watch = store.watch("/t/w/").await.unwrap();

    store.put("/t/w/a", b("1")).await.unwrap();
    assert_eq!(
        next_event(&mut watch).await,
        put("/t/w/a", "1"),
        "not the earlier write"
    );
    store.put("/t/x/outside", b("x")).await.unwrap();
    store.put("/t/w/b", b("2")).await.unwrap();
    store.put("/t/w/a", b("3")).await.unwrap();
    assert_eq!(
        next_event(&mut watch).await,
        put("/t/w/b", "2"),
        "not the other prefix"
    );
    assert_eq!(next_event(&mut watch).await, put("/t/w/a", "3"));
    store.delete("/t/w/a").await.unwrap();
    assert_eq!(
        next_event(&mut watch).await,
        WatchEvent::Delete {
            key: "/t/w/a".into()
        }
    );
}

async fn second_ephemeral_create_is_held_until_release(url: &str) {
    let store = open(url).await;
    let me = holder(std::process::id(), json!({"addr": "127.0.0.1:18080"}));
    let node = store
        .create_ephemeral("/t/lock", &me, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(node.took_over_from, None);
    assert_eq!(holder_of(&*store, "/t/lock").await, Some(me.clone()));

    let rival = holder(std::process::id(), json!("rival"));
    let err = store
        .create_ephemeral("/t/lock", &rival, Duration::from_secs(10))
        .await
        .err();
    match err.expect("a second create of a held node fails") {
        StoreError::Held { key, holder } => {
            assert_eq!(key, "/t/lock");
            let pid = format!("pid {}", me.pid);
            for part in [pid.as_str(), &me.host, "127.0.0.1:18080"] {
                assert!(holder.contains(part), "{holder:?} names {part:?}");
            }
        }
        other => panic!("expected Held, got {other:?}"),
    }

    node.release();
    // etcd revokes the lease from a task, so the key goes away shortly after release().
    assert!(eventually(|| async { store.get("/t/lock").await.unwrap().is_none() }).await);
    let again = store
        .create_ephemeral("/t/lock", &rival, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(again.took_over_from, None);
    assert_eq!(holder_of(&*store, "/t/lock").await, Some(rival));
}

async fn ephemeral_node_outlives_its_ttl_while_its_handle_lives(url: &str) {
    let store = open(url).await;
    // Another host, so only the heartbeat (fs) or lease keep-alive (etcd) keeps it.
    let far = Holder {
        pid: 1,
        host: "elsewhere".into(),
        payload: json!(null),
    };
    let node = store
        .create_ephemeral("/t/alive", &far, Duration::from_secs(2))
        .await
        .unwrap();
    let created = store.get("/t/alive").await.unwrap().expect("created");
    let mut watch = store.watch("/t/alive").await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        store.get("/t/alive").await.unwrap(),
        Some(created),
        "alive and unchanged"
    );
    let quiet = tokio::time::timeout(Duration::from_millis(300), watch.next()).await;
    assert!(
        quiet.is_err(),
        "keeping a node alive is not a change: {quiet:?}"
    );
    drop(node);
}

async fn ephemeral_node_of_a_dead_pid_is_taken_over(url: &str) {
    let store = open(url).await;
    // As if a process of this host had created the node and then died.
    let ghost = holder(dead_pid(), json!("ghost"));
    let stale = store
        .create_ephemeral("/t/lock", &ghost, Duration::from_secs(10))
        .await
        .unwrap();

    let me = holder(std::process::id(), json!("successor"));
    let node = store
        .create_ephemeral("/t/lock", &me, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(node.took_over_from, Some(ghost));
    assert_eq!(holder_of(&*store, "/t/lock").await, Some(me.clone()));

    // The stale handle's release must leave its successor's node alone.
    drop(stale);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(holder_of(&*store, "/t/lock").await, Some(me));
    drop(node);
}

async fn ephemeral_node_disappears_after_its_ttl_when_its_holder_crashes(url: &str) {
    // On another host, so only the TTL can tell that the holder is gone.
    let far = Holder {
        pid: std::process::id(),
        host: "elsewhere".into(),
        payload: json!(null),
    };
    let crashed_url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = coordinator::open(&crashed_url).await.unwrap();
            let node = store
                .create_ephemeral("/t/crash", &far, Duration::from_secs(2))
                .await
                .unwrap();
            // Never released: dropping the runtime below stops the keep-alive task and
            // closes its connections, as a crash would.
            std::mem::forget(node);
        });
    })
    .await
    .unwrap();

    let store = open(url).await;
    let mut watch = store.watch("/t/crash").await.unwrap();
    assert!(
        store.get("/t/crash").await.unwrap().is_some(),
        "alive until its TTL passes"
    );
    let started = Instant::now();
    assert_eq!(
        next_event(&mut watch).await,
        WatchEvent::Delete {
            key: "/t/crash".into()
        }
    );
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "not removed before its TTL"
    );
    assert_eq!(store.get("/t/crash").await.unwrap(), None);
    store
        .create_ephemeral(
            "/t/crash",
            &holder(std::process::id(), json!(null)),
            Duration::from_secs(2),
        )
        .await
        .unwrap();
}

async fn a_confirmed_release_has_removed_the_node_when_it_returns(url: &str) {
    let store = open(url).await;
    let node = store
        .create_ephemeral(
            "/t/leaving",
            &holder(std::process::id(), json!(null)),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    node.release_confirmed().await.expect("the store confirms");
    assert_eq!(
        store.get("/t/leaving").await.unwrap(),
        None,
        "gone when release_confirmed returns, not some time after"
    );
    assert_eq!(store.ephemeral_silence("/t/leaving").await.unwrap(), None);
}

async fn a_crashed_holders_node_goes_silent_and_can_be_expired_at_once(url: &str) {
    // On another host with a long TTL: only its silence tells that the holder is gone.
    let far = Holder {
        pid: std::process::id(),
        host: "elsewhere".into(),
        payload: json!(null),
    };
    let crashed_url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = coordinator::open(&crashed_url).await.unwrap();
            let node = store
                .create_ephemeral("/t/killed", &far, Duration::from_secs(60))
                .await
                .unwrap();
            std::mem::forget(node); // as a crash would leave it
        });
    })
    .await
    .unwrap();
    let store = open(url).await;
    let silent = store.ephemeral_silence("/t/killed").await.unwrap();
    assert!(silent.is_some(), "a live node has a silence");
    assert!(
        eventually(|| async {
            store
                .ephemeral_silence("/t/killed")
                .await
                .unwrap()
                .is_some_and(|s| s >= Duration::from_secs(2))
        })
        .await,
        "nothing renews it: its silence grows"
    );
    assert!(
        store.get("/t/killed").await.unwrap().is_some(),
        "its TTL still runs"
    );
    assert!(store.expire_ephemeral("/t/killed").await.unwrap());
    assert_eq!(store.get("/t/killed").await.unwrap(), None);
    assert_eq!(store.ephemeral_silence("/t/killed").await.unwrap(), None);
    assert!(
        !store.expire_ephemeral("/t/killed").await.unwrap(),
        "nothing left to expire"
    );
}

async fn an_expired_node_is_lost_to_its_live_holder(url: &str) {
    let store = open(url).await;
    let far = Holder {
        pid: 1,
        host: "elsewhere".into(),
        payload: json!(null),
    };
    let node = store
        .create_ephemeral("/t/expired", &far, Duration::from_secs(10))
        .await
        .unwrap();
    let clock = node.clock();
    assert!(!clock.lapsed());
    assert!(store.expire_ephemeral("/t/expired").await.unwrap());
    // Its next renewal (a tenth of the TTL) finds it gone: a proxy would fence itself and
    // register again before serving.
    assert!(
        eventually(|| async { clock.lapsed() }).await,
        "the holder learns that its node is gone"
    );
    assert_eq!(store.get("/t/expired").await.unwrap(), None);
    drop(node);
}

// === store-specific ===

#[tokio::test]
async fn open_rejects_a_bad_url() {
    for url in ["zk://127.0.0.1:2181", "etcd://", "fs://", "/no/scheme"] {
        match coordinator::open(url).await.err() {
            Some(StoreError::BadUrl { .. }) => {}
            other => panic!("{url}: expected BadUrl, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn fs_store_keeps_a_key_in_the_file_of_its_path_and_rejects_escaping_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&format!("fs://{}", dir.path().display())).await;
    store.put("/tessera/c1/meta", b("{}")).await.unwrap();
    assert!(dir.path().join("tessera/c1/meta").is_file());
    for key in [
        "/a/../b",
        "relative",
        "/a//b",
        "/a/",
        "/.lock",
        "/a/.hidden",
    ] {
        match store.put(key, b("x")).await {
            Err(StoreError::Io { .. }) => {}
            other => panic!("{key}: expected an Io error, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_store_compare_and_swap_is_atomic_across_instances_sharing_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    // Separate instances lock through separate file descriptions, as separate processes do.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let store = FsStore::open(&path).unwrap();
            tokio::spawn(async move {
                for _ in 0..10 {
                    increment(&store, "/t/counter").await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let store = FsStore::open(&path).unwrap();
    assert_eq!(store.get("/t/counter").await.unwrap().unwrap().value, "40");
}

/// A process stopped while it holds the store's write lock (SIGSTOP, a paused VM) stalls every
/// writer, but must not stall heartbeats: an ephemeral node outlives its TTL meanwhile, and
/// is gone within its TTL after its holder stops beating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_store_heartbeats_go_on_while_another_process_holds_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let store = FsStore::open(&path).unwrap();
    // Written once, so the lock file exists for `flock` to hold.
    store.put("/t/plain", b("x")).await.unwrap();
    let far = Holder {
        pid: 1,
        host: "elsewhere".into(),
        payload: json!(null),
    };
    let node = store
        .create_ephemeral("/t/beating", &far, Duration::from_secs(1))
        .await
        .unwrap();
    let mut holder = std::process::Command::new("flock")
        .arg(dir.path().join(".lock"))
        .args(["sleep", "4"])
        .spawn()
        .expect("running flock(1)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let blocked = tokio::time::timeout(Duration::from_millis(500), store.put("/t/plain", b("y")));
    assert!(
        blocked.await.is_err(),
        "a write waits while another process holds the lock"
    );
    // Three TTLs under the held lock.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let silence = store.ephemeral_silence("/t/beating").await.unwrap();
    assert!(
        silence.is_some_and(|s| s < Duration::from_secs(1)),
        "the node kept beating while the lock was held: silent for {silence:?}"
    );
    assert!(
        store.get("/t/beating").await.unwrap().is_some(),
        "the node is alive"
    );
    let _ = holder.wait();

    // A node taken over is not kept alive by its old holder's beats, and a release removes
    // the beat file with the node.
    drop(node);
    let node = store
        .create_ephemeral("/t/beating", &far, Duration::from_secs(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(node);
    assert!(store.get("/t/beating").await.unwrap().is_none(), "released");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("t"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        left,
        vec!["plain".to_owned()],
        "no beat file is left behind"
    );
}

#[tokio::test]
async fn etcd_store_fails_fast_while_etcd_is_down_and_recovers_after_restart() {
    let mut etcd = Etcd::start().await;
    let store = open(&etcd.url()).await;
    store.put("/t/a", b("1")).await.unwrap();
    let mut watch = store.watch("/t/").await.unwrap();

    etcd.stop();
    let started = Instant::now();
    for result in [
        store.get("/t/a").await.map(drop),
        store.put("/t/b", b("2")).await.map(drop),
    ] {
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{result:?}"
        );
    }
    assert!(
        coordinator::open(&etcd.url())
            .await
            .is_err_and(|e| matches!(e, StoreError::Unavailable(_)))
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let ended = tokio::time::timeout(EVENT_TIMEOUT, watch.next())
        .await
        .expect("the watch notices");
    assert!(
        matches!(ended, None | Some(Err(StoreError::Unavailable(_)))),
        "{ended:?}"
    );

    etcd.restart().await;
    assert!(
        eventually(|| async {
            store
                .get("/t/a")
                .await
                .ok()
                .flatten()
                .is_some_and(|v| v.value == "1")
        })
        .await
    );
}

// === helpers ===

async fn open(url: &str) -> Arc<dyn Store> {
    match coordinator::open(url).await {
        Ok(store) => store,
        Err(e) => panic!("opening {url}: {e}"),
    }
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn put(key: &str, value: &'static str) -> WatchEvent {
    WatchEvent::Put {
        key: key.into(),
        value: b(value),
    }
}

fn holder(pid: u32, payload: serde_json::Value) -> Holder {
    Holder {
        pid,
        host: coordinator::hostname(),
        payload,
    }
}

/// The holder recorded in an ephemeral node, if the node exists.
async fn holder_of(store: &dyn Store, key: &str) -> Option<Holder> {
    let value = store.get(key).await.unwrap()?;
    Some(serde_json::from_slice(&value.value).expect("an ephemeral node holds Holder JSON"))
}

/// The pid of a process that existed a moment ago and has exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("sleep")
        .arg("100")
        .spawn()
        .expect("spawning sleep");
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!coordinator::pid_alive(pid));
    pid
}

async fn next_event(watch: &mut WatchStream) -> WatchEvent {
    let next = tokio::time::timeout(EVENT_TIMEOUT, watch.next()).await;
    next.expect("a watch event in time")
        .expect("the watch goes on")
        .expect("a watch event, not an error")
}

/// Polls `check` every 50 ms until it holds or [`EVENT_TIMEOUT`] passes.
async fn eventually<F: Future<Output = bool>>(mut check: impl FnMut() -> F) -> bool {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Adds one to a decimal counter with a CAS loop.
async fn increment(store: &FsStore, key: &str) {
    loop {
        let current = store.get(key).await.unwrap();
        let n: u64 = current.as_ref().map_or(0, |v| {
            std::str::from_utf8(&v.value).unwrap().parse().unwrap()
        });
        let next = Bytes::from((n + 1).to_string());
        if let Cas::Written(_) = store
            .compare_and_swap(key, current.map(|v| v.version), next)
            .await
            .unwrap()
        {
            return;
        }
    }
}
