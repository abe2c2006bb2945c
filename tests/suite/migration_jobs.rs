//! Migrations as jobs (docs/migration.md, "History"): a migration started from the CLI with
//! a named token and one aborted half-way show in `GET /api/migrations/history` and
//! `tessera admin migrations --history` with the keys the target really received (counted
//! by SCAN), who started and who aborted them, and how they ended; the history survives a
//! dashboard restart, and a dashboard killed mid-migration has its successor record the
//! job's end. A step held by a proxy frozen with SIGSTOP shows its reason, naming the proxy
//! by address, in the status and in the job.

use std::time::Duration;

use serde_json::json;
use tessera_wire::migration::{JobKind, JobOutcome, MigrationHistory, MigrationJob, SlotSpan};
use tessera_wire::tokens::CreatedToken;

use crate::migration::{idle, owners, preload, status, wait_for};
use crate::support::{ControlPlane, TOKEN};

fn history(cp: &ControlPlane) -> MigrationHistory {
    cp.api().get("/api/migrations/history").ok_as()
}

fn newest(cp: &ControlPlane) -> MigrationJob {
    history(cp)
        .jobs
        .first()
        .cloned()
        .expect("the history has a job")
}

fn cli_ok(cp: &ControlPlane, token: &str, args: &[&str]) -> String {
    let out = cp.admin_cli(token, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "tessera admin {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn token(cp: &ControlPlane, name: &str, role: &str) -> String {
    let t: CreatedToken = cp
        .api()
        .post("/api/tokens", &json!({"name": name, "role": role}))
        .ok_as();
    t.token
}

#[test]
fn migrations_are_jobs_with_true_numbers_their_callers_and_an_end_across_restarts() {
    let mut cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.split_over_two_groups();
    preload(cp.proxies[0].addr(), 6_000);
    let admin_name = cp
        .api()
        .get("/api/whoami")
        .ok()
        .get("token")
        .and_then(|n| n.as_str())
        .expect("whoami names the token")
        .to_owned();
    let ops = token(&cp, "ops-token", "operator");
    assert!(history(&cp).jobs.is_empty());

    // 1. A migration from the CLI, to its end: every key of 400-511 is on the target, and
    //    the job counts exactly those (the target had none of them, nothing was written).
    let on_source = cp.servers[0].keys_in_slots(400..=511);
    assert!(on_source > 0);
    assert_eq!(cp.servers[1].keys_in_slots(400..=511), 0);
    cli_ok(&cp, &ops, &["migrate", "400-511", "2"]);
    wait_for(
        "the CLI's migration to end",
        Duration::from_secs(120),
        || idle(&cp) && newest(&cp).outcome != JobOutcome::Running,
    );
    let moved = cp.servers[1].keys_in_slots(400..=511);
    assert_eq!(moved, on_source);
    let first = newest(&cp);
    assert_eq!(first.outcome, JobOutcome::Finished, "{first:?}");
    assert_eq!(first.kind, JobKind::Migrate);
    assert_eq!(
        first.started_by,
        ["ops-token"],
        "the token's name, never the token"
    );
    assert_eq!(first.slots, [SlotSpan { from: 400, to: 511 }]);
    assert_eq!(
        (first.from_groups[0].0, first.to_groups[0].0),
        (1, 2),
        "{first:?}"
    );
    assert_eq!((first.slots_moved, first.slots_aborted), (112, 0));
    assert_eq!(first.keys_moved, moved, "{first:?}");
    assert!(first.bytes_moved >= moved, "{first:?}");
    let (start, end) = (first.started_unix_ms, first.ended_unix_ms.expect("ended"));
    assert_eq!(first.duration_ms, Some(end - start));
    assert!(first.peak_pause_ms.is_some_and(|p| p > 0.0), "{first:?}");
    assert!(!serde_json::to_string(&first).unwrap().contains(&ops));

    // 2. A slow migration, aborted from the CLI half-way: its slots stay with their
    //    source, and the job says who aborted it.
    assert_eq!(cp.servers[1].keys_in_slots(0..=255), 0);
    let in_range = cp.servers[0].keys_in_slots(0..=255);
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": 0, "to": 255, "group": 2, "max_keys_per_sec": 200}),
        )
        .ok();
    wait_for("keys to move", Duration::from_secs(60), || {
        status(&cp).run_keys_moved > 0
    });
    cli_ok(&cp, &ops, &["abort", "--all"]);
    wait_for("the abort to end the job", Duration::from_secs(120), || {
        idle(&cp) && newest(&cp).outcome != JobOutcome::Running
    });
    let aborted = newest(&cp);
    assert_eq!(aborted.outcome, JobOutcome::Aborted, "{aborted:?}");
    assert_eq!(aborted.aborted_by.as_deref(), Some("ops-token"));
    assert_eq!(aborted.started_by, std::slice::from_ref(&admin_name));
    assert!(aborted.slots_aborted > 0, "{aborted:?}");
    assert!(
        aborted.keys_moved > 0 && aborted.keys_moved <= in_range,
        "{aborted:?}"
    );
    let own = owners(&cp);
    assert_eq!(
        own[..=255].iter().filter(|g| **g == Some(2)).count(),
        aborted.slots_moved,
        "the slots the job counts as moved are the target's"
    );

    // 3. The history is in the store: a restarted dashboard shows the same jobs.
    let kept = history(&cp);
    cp.restart_dashboard();
    assert_eq!(history(&cp).jobs, kept.jobs);
    let out = cli_ok(&cp, &ops, &["migrations", "--history"]);
    assert!(
        out.contains("400-511") && out.contains("ops-token") && out.contains("finished"),
        "{out}"
    );
    assert!(out.contains("aborted by ops-token"), "{out}");

    // 4. A dashboard killed mid-migration: its successor takes the job over and records its
    //    end, with the keys both moved.
    let todo = cp.servers[0].keys_in_slots(600..=1023) + cp.servers[1].keys_in_slots(600..=1023);
    assert!(todo > 0);
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": 600, "to": 1023, "group": 1, "max_keys_per_sec": 400}),
        )
        .ok();
    let running = newest_running(&cp);
    wait_for(
        "the running job to be saved with keys moved",
        Duration::from_secs(60),
        || saved_keys(&cp, &running.id) > 0,
    );
    let saved = saved_keys(&cp, &running.id);
    cp.kill_dashboard();
    cp.restart_dashboard();
    wait_for(
        "the successor to finish the job",
        Duration::from_secs(180),
        || idle(&cp) && newest(&cp).outcome != JobOutcome::Running,
    );
    let taken_over = newest(&cp);
    assert_eq!(taken_over.id, running.id, "the same job, not a new one");
    assert_eq!(taken_over.outcome, JobOutcome::Finished, "{taken_over:?}");
    assert!(taken_over.ended_unix_ms.is_some());
    assert_eq!(taken_over.started_by, [admin_name]);
    assert_eq!(
        taken_over.slots,
        [SlotSpan {
            from: 600,
            to: 1023
        }]
    );
    assert!(taken_over.keys_moved >= saved, "{taken_over:?}");
    assert!(owners(&cp)[600..].iter().all(|g| *g == Some(1)));
    assert_eq!(cp.servers[0].keys_in_slots(600..=1023), todo);
    assert_eq!(history(&cp).jobs.len(), 3);
}

/// The job the status is running now, from the history.
fn newest_running(cp: &ControlPlane) -> MigrationJob {
    let mut found = None;
    wait_for("the job to start", Duration::from_secs(30), || {
        found = history(cp)
            .jobs
            .into_iter()
            .find(|j| j.outcome == JobOutcome::Running);
        found.is_some()
    });
    found.expect("waited for it")
}

/// The keys the store holds for job `id` (what a successor starts from).
fn saved_keys(cp: &ControlPlane, id: &str) -> u64 {
    let doc = cp.store_json(&format!("/tessera/{}/migration-jobs", cp.options().cluster));
    doc["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|j| j["id"] == id)
        .and_then(|j| j["keys_moved"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_step_held_by_a_frozen_proxy_names_it_in_the_status_and_the_job() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.split_over_two_groups();
    preload(cp.proxies[0].addr(), 500);
    let frozen = &cp.proxies[1];
    let admin = frozen.admin_addr().to_string();
    frozen.signal("-STOP");
    struct Thaw<'a>(&'a crate::support::ClusterProxy);
    impl Drop for Thaw<'_> {
        fn drop(&mut self) {
            self.0.signal("-CONT");
        }
    }
    let thaw = Thaw(frozen);
    cp.api()
        .post("/api/migrations", &json!({"from": 0, "to": 9, "group": 2}))
        .ok();
    wait_for(
        "the held step to be in the status",
        Duration::from_secs(60),
        || status(&cp).holds.iter().any(|h| h.reason.contains(&admin)),
    );
    let st = status(&cp);
    let hold = st
        .holds
        .iter()
        .find(|h| h.reason.contains(&admin))
        .expect("found above");
    assert!(!hold.slots.is_empty(), "{hold:?}");
    assert!(
        hold.slots.iter().all(|s| s.to <= 9),
        "only the moving slots are held: {hold:?}"
    );
    let out = cli_ok(&cp, TOKEN, &["migrations"]);
    assert!(
        out.contains("why steps were held") && out.contains(&admin),
        "{out}"
    );
    drop(thaw);
    wait_for("the migration to finish", Duration::from_secs(120), || {
        idle(&cp) && newest(&cp).outcome == JobOutcome::Finished
    });
    let job = newest(&cp);
    assert!(
        job.holds.iter().any(|h| h.reason.contains(&admin)),
        "{job:?}"
    );
    let out = cli_ok(&cp, TOKEN, &["migrations", "--history"]);
    assert!(out.contains("held:") && out.contains(&admin), "{out}");
}

/// The first migration from a fresh source: the capture joins with a full resync, and the
/// source streams to it only once it acknowledges after the RDB. No handoff is tried before
/// the stream flows, so none is given up for a capture that has read nothing ("the capture
/// was at offset 0, … short"); before, each was, every 40 ms, for up to a second.
#[test]
fn a_first_move_from_a_fresh_source_hands_off_without_waiting_for_its_stream() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    cp.api()
        .post("/api/migrations", &json!({"from": 7, "to": 7, "group": 2}))
        .ok();
    wait_for("the slot to move", Duration::from_secs(30), || {
        owners(&cp)[7] == Some(2) && idle(&cp)
    });
    let job = newest(&cp);
    assert_eq!(job.outcome, JobOutcome::Finished, "{job:?}");
    let unstarted: Vec<_> = job
        .holds
        .iter()
        .filter(|h| h.reason.contains("the capture was at offset"))
        .collect();
    assert!(
        unstarted.is_empty(),
        "handoffs given up while the capture waited for its stream: {unstarted:?}"
    );
}
