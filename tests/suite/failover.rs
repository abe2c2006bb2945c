//! A group's master dies: once the dashboard's health checks declare it down, the proxies
//! answer that group's slots with a clear error (and keep serving every other slot); after
//! the replica is promoted, the group serves again, with the data it had by replication.

use std::time::Duration;

use serde_json::json;

use crate::support::{ControlPlane, Frame, keys_on, wait_until};

#[test]
fn killed_master_fails_its_slots_with_a_clear_error_and_recovers_after_promote() {
    // Group 1: master server 0, replica server 1. Group 2: master server 2.
    let mut cp = ControlPlane::builder().servers(3).proxies(1).start();
    cp.group(1, &[0, 1]);
    cp.group(2, &[2]);
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2);
    let group1_keys = keys_on(0, "failover:", 5);
    let group2_keys = keys_on(1, "failover:", 2);
    let mut session = cp.proxies[0].raw();
    for key in group1_keys.iter().chain(&group2_keys) {
        assert_eq!(
            session.cmd(&["SET", key, "before"]),
            Frame::Simple("OK".into()),
            "SET {key}"
        );
    }
    let replicated = wait_until(Duration::from_secs(10), || {
        group1_keys.iter().all(|k| cp.servers[1].has(k))
    });
    assert!(replicated, "the replica got group 1's keys within 10 s");

    let dead = cp.server_addr(0);
    let replica = cp.server_addr(1);
    cp.servers[0].kill();

    // Health checks run every 200 ms and declare a master down after 2 failures.
    let expected = format!("ERR group 1 master {dead} is down");
    let mut last = Frame::Null;
    let declared = wait_until(Duration::from_secs(10), || {
        last = session.cmd(&["GET", &group1_keys[0]]);
        last.error() == Some(expected.as_str())
    });
    assert!(
        declared,
        "within 10 s, group 1's slots answer {expected:?}; last reply: {last:?}"
    );
    for key in &group1_keys {
        assert_eq!(
            session.cmd(&["SET", key, "x"]),
            Frame::Error(expected.clone()),
            "SET {key} while group 1 is down"
        );
    }
    for key in &group2_keys {
        assert_eq!(
            session.cmd(&["GET", key]),
            Frame::bulk("before"),
            "group 2 keeps serving {key}"
        );
    }
    let groups = cp.api().get("/api/groups").ok();
    assert_eq!(groups[0]["down"], true, "group 1 is shown down: {groups}");
    assert_eq!(groups[1]["down"], false, "group 2 is up: {groups}");

    let promoted = cp
        .api()
        .post("/api/groups/1/promote", &json!({ "addr": replica }))
        .ok();
    assert_eq!(
        promoted["servers"][0]["addr"],
        replica.as_str(),
        "{promoted}"
    );
    assert_eq!(promoted["servers"][0]["role"], "master", "{promoted}");
    assert_eq!(promoted["down"], false, "{promoted}");

    // The promote returned after the push: no wait.
    for key in &group1_keys {
        assert_eq!(
            session.cmd(&["GET", key]),
            Frame::bulk("before"),
            "{key} is served by the promoted replica with its replicated value"
        );
    }
    let fresh = keys_on(0, "after-promote:", 1).remove(0);
    assert_eq!(
        session.cmd(&["SET", &fresh, "new"]),
        Frame::Simple("OK".into()),
        "group 1 takes writes again"
    );
    assert!(
        cp.servers[1].has(&fresh),
        "the write reached the new master"
    );
    for key in &group2_keys {
        assert_eq!(session.cmd(&["GET", key]), Frame::bulk("before"));
    }
}
