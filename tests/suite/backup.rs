//! Whole-cluster backup and restore with real processes (docs/backup.md): a two-group cluster
//! (a master and a replica each) loaded with every type and backed up while a client writes
//! through its proxy, restored into a three-group cluster and compared key by key (type-aware,
//! TTLs within a second); a one-instant backup whose write pause is reported and bounded and
//! whose restore is one instant (a client's sequential writes come back as a prefix); damaged
//! backups (a flipped byte, a missing file, a truncated file, a manifest that disagrees, no
//! manifest) refused with the reason and nothing written; a restore refused midway undone; the
//! API's checks of the directory; the backup's settings (a confined user, the filter plugin, a
//! prefix route, the read policy, failover's settings) applied to the new cluster before its
//! keys, a conflicting user or a bad store.json refused before anything is applied.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::import::{fill_every_type, q, snapshot};
use crate::support::{ControlPlane, TOKEN, plugin_wasm, run_with_timeout, tessera_bin, wait_until};

/// A two-group cluster, each group a master and a replica, backups under `root`; its
/// servers have the databases of every client database (`docs/commands.md`).
fn source(root: &Path) -> ControlPlane {
    let root = root.display().to_string();
    let cp = ControlPlane::builder()
        .servers(4)
        .proxies(1)
        .server_args(&["--databases", "17"])
        .dashboard_args(&["--backup-root", &root])
        .start();
    cp.group(1, &[0, 1]);
    cp.group(2, &[2, 3]);
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2);
    cp
}

/// A three-group cluster (one server each), no backup root.
fn target() -> ControlPlane {
    let cp = ControlPlane::builder()
        .servers(3)
        .proxies(1)
        .server_args(&["--databases", "17"])
        .start();
    for g in 1..=3 {
        cp.group(g, &[g as usize - 1]);
    }
    cp.assign(0, 340, 1);
    cp.assign(341, 681, 2);
    cp.assign(682, 1023, 3);
    cp
}

/// Waits until the dashboard sees every replica in sync (so a backup takes it from them).
fn replicas_in_sync(cp: &ControlPlane) {
    let synced = wait_until(Duration::from_secs(60), || {
        let body = cp.api().get("/api/groups").body;
        body.matches("\"master_link\":\"up\"").count() >= 2
    });
    assert!(
        synced,
        "replicas in sync: {}",
        cp.api().get("/api/groups").body
    );
}

/// `tessera admin backup --to <dir> <extra>` on `cp`'s dashboard.
fn backup(cp: &ControlPlane, dir: &str, extra: &[&str]) -> Output {
    let mut args = vec!["backup", "--to", dir];
    args.extend(extra);
    cp.admin_cli(TOKEN, &args)
}

/// `tessera admin restore --from <dir> --to <cp's proxy>`, with cp's dashboard (for the
/// backup's settings).
fn restore(from: &Path, cp: &ControlPlane) -> Output {
    restore_with(from, cp, &[])
}

/// [`restore`] with more arguments.
fn restore_with(from: &Path, cp: &ControlPlane, extra: &[&str]) -> Output {
    run_with_timeout(
        Command::new(tessera_bin())
            .args(["admin", "--dashboard", &cp.dashboard.addr().to_string()])
            .args(["--token", TOKEN, "restore", "--from"])
            .arg(from)
            .args(["--to", &cp.proxies[0].addr().to_string()])
            .args(extra)
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(180),
    )
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A client of `cp`'s proxy.
fn client(cp: &ControlPlane) -> redis::Connection {
    redis::Client::open(format!("redis://{}", cp.proxies[0].addr()))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(10)))
        .expect("connecting to the proxy")
}

fn dbsize(cp: &ControlPlane) -> i64 {
    q(&mut client(cp), &["DBSIZE"])
}

/// The newest job of `GET /api/backups`.
fn last_job(cp: &ControlPlane) -> Value {
    cp.api().get("/api/backups").ok()["backups"][0].clone()
}

/// A client writing `prefix:<n>` = `v<n>` through the proxy, one after another, until stopped.
struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Writer {
    fn start(cp: &ControlPlane, prefix: &'static str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let mut c = client(cp);
        let (s, w) = (stop.clone(), written.clone());
        let handle = thread::spawn(move || {
            let mut n = 0u64;
            while !s.load(Ordering::Relaxed) && n < 1_000_000 {
                let _: () = q(&mut c, &["SET", &format!("{prefix}:{n}"), &format!("v{n}")]);
                n += 1;
                w.store(n, Ordering::Relaxed);
            }
        });
        Writer {
            stop,
            written,
            handle: Some(handle),
        }
    }

    /// Waits until it has written `n` more.
    fn wait_for_more(&self, n: u64) {
        let from = self.written.load(Ordering::Relaxed);
        assert!(
            wait_until(Duration::from_secs(30), || self
                .written
                .load(Ordering::Relaxed)
                >= from + n),
            "the writer writes"
        );
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap();
        self.written.load(Ordering::Relaxed)
    }
}

/// Loads the source: every type (through the proxy), and 3000 strings with TTLs on some.
fn load(cp: &ControlPlane) {
    let mut c = client(cp);
    fill_every_type(&mut c);
    let mut p = redis::pipe();
    for i in 0..3000 {
        p.cmd("SET")
            .arg(format!("pre:{i}"))
            .arg(format!("value-{i}"))
            .ignore();
        if i % 7 == 0 {
            p.cmd("PEXPIRE")
                .arg(format!("pre:{i}"))
                .arg(3_600_000)
                .ignore();
        }
    }
    let _: () = p.query(&mut c).unwrap();
}

/// Every key of `from`'s replicas (the servers the backup was taken from) not starting with
/// `skip` compared with `to`, type-aware, TTLs within a second: the number compared. (A
/// replica is compared, not its master: Redis replicates XREADGROUP in a form that leaves a
/// consumer group's entries-read unknown on the replica, and that is what the backup holds.)
fn compare(from: &ControlPlane, to: &ControlPlane, skip: &str) -> usize {
    let mut dst = client(to);
    let mut n = 0;
    for replica in from.servers.iter().skip(1).step_by(2) {
        let mut src = replica.client();
        for key in replica.keys().iter().filter(|k| !k.starts_with(skip)) {
            let (want, got) = (snapshot(&mut src, key), snapshot(&mut dst, key));
            assert_eq!(want, got, "{key}: source vs restored");
            let (a, b): (i64, i64) = (q(&mut src, &["PTTL", key]), q(&mut dst, &["PTTL", key]));
            assert!(
                (a < 0) == (b < 0) && (a - b).abs() <= 1000,
                "{key}: PTTL source {a}, restored {b}"
            );
            n += 1;
        }
    }
    n
}

/// Of `prefix:0..written`, which the restored cluster holds; every one it holds is whole.
fn restored_of(to: &ControlPlane, prefix: &str, written: u64) -> Vec<u64> {
    let mut c = client(to);
    let mut held = Vec::new();
    for n in 0..written {
        let v: Option<String> = q(&mut c, &["GET", &format!("{prefix}:{n}")]);
        if let Some(v) = v {
            assert_eq!(v, format!("v{n}"), "{prefix}:{n} restored whole");
            held.push(n);
        }
    }
    held
}

#[test]
fn a_two_group_cluster_backed_up_under_writes_restores_into_three_groups() {
    let root = tempfile::tempdir().unwrap();
    let src = source(root.path());
    replicas_in_sync(&src);
    load(&src);
    // Numbered databases: the same names as database 0's in 15, others in 2.
    let mut c = client(&src);
    let _: () = q(&mut c, &["SELECT", "15"]);
    for i in 0..100 {
        let _: () = q(
            &mut c,
            &["SET", &format!("pre:{i}"), &format!("fifteen-{i}")],
        );
    }
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: () = q(&mut c, &["HSET", "two:h", "f", "v"]);
    let _: () = q(&mut c, &["SET", "two:s", "v", "EX", "3600"]);
    drop(c);
    let writer = Writer::start(&src, "during");
    writer.wait_for_more(100);
    // Answered before the backup was asked for: each must be restored.
    let before = writer.written.load(Ordering::Relaxed);
    let out = backup(&src, "nightly/one", &[]);
    assert!(out.status.success(), "backup: {}", text(&out));
    let written = writer.stop();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("backup 1 to nightly/one: Done"), "{said}");
    let listed = src.admin_cli(TOKEN, &["backups"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("nightly/one") && listed.contains("done"),
        "{listed}"
    );
    let job = last_job(&src);
    assert_eq!(job["state"], "done", "{job}");
    // The events stream says so too.
    let events = src.api().get("/api/events?limit=1000").ok();
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "backup-taken"
                && e["detail"].as_str().unwrap_or("").contains("nightly/one")),
        "{events}"
    );
    for g in job["groups"].as_array().unwrap() {
        assert_eq!(
            g["source_role"], "replica",
            "taken from the replica in sync: {g}"
        );
        assert!(g["bytes"].as_u64().unwrap() > 0, "{g}");
    }
    let metrics = src.api().get("/metrics").body;
    assert!(
        metrics.contains("tessera_backup_last_success_timestamp_seconds{"),
        "{metrics}"
    );
    let dir = root.path().join("nightly/one");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["format"], 1);
    assert_eq!(manifest["groups"].as_array().unwrap().len(), 2);
    let store = std::fs::read_to_string(dir.join("store.json")).unwrap();
    assert!(
        store.contains("\"key\": \"users\"") || store.contains("group/group-0001"),
        "{store:.400}"
    );
    assert!(
        !store.contains("proxy_secret"),
        "the meta's secrets stay out of a backup"
    );

    let dst = target();
    let out = restore(&dir, &dst);
    assert!(out.status.success(), "restore: {}", text(&out));
    let n = compare(&src, &dst, "during:");
    assert!(n >= 3000 + 15, "compared {n} keys");
    // Each numbered database into the same one, none into another.
    let mut c = client(&dst);
    let _: () = q(&mut c, &["SELECT", "15"]);
    for i in 0..100 {
        let v: String = q(&mut c, &["GET", &format!("pre:{i}")]);
        assert_eq!(v, format!("fifteen-{i}"));
    }
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 100, "database 15 holds its own keys only");
    let _: () = q(&mut c, &["SELECT", "2"]);
    let f: String = q(&mut c, &["HGET", "two:h", "f"]);
    assert_eq!(f, "v");
    let ttl: i64 = q(&mut c, &["TTL", "two:s"]);
    assert!((3000..=3600).contains(&ttl), "{ttl}");
    for db in ["1", "3"] {
        let _: () = q(&mut c, &["SELECT", db]);
        let n: i64 = q(&mut c, &["DBSIZE"]);
        assert_eq!(n, 0, "database {db} is empty");
    }
    // Written before the backup: all there (the replicas' snapshots are completed up to
    // their masters' offsets when it started); during it: any may be there, each whole.
    let held = restored_of(&dst, "during", written);
    assert!(
        held.len() as u64 >= before,
        "{} of {before} restored",
        held.len()
    );
    assert_eq!(
        held[..before as usize],
        (0..before).collect::<Vec<_>>(),
        "every write answered before the backup started is restored"
    );

    // A second restore into the now full cluster is refused, and writes nothing.
    let before = dbsize(&dst);
    let out = restore(&dir, &dst);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("holds") && text(&out).contains("nothing was written"),
        "{}",
        text(&out)
    );
    assert_eq!(dbsize(&dst), before);
}

#[test]
fn a_one_instant_backup_pauses_writes_within_its_bound_and_restores_one_instant() {
    let root = tempfile::tempdir().unwrap();
    let src = source(root.path());
    replicas_in_sync(&src);
    let writer = Writer::start(&src, "seq");
    writer.wait_for_more(200);
    let out = backup(
        &src,
        "instant",
        &["--one-instant", "--max-pause-ms", "2000"],
    );
    assert!(out.status.success(), "backup: {}", text(&out));
    // Writes go on after the pause.
    writer.wait_for_more(100);
    let written = writer.stop();
    let job = last_job(&src);
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(job["one_instant"], true);
    let pause = job["pause_ms"].as_f64().expect("the pause is reported");
    assert!(
        pause > 0.0 && pause < 2000.0,
        "pause {pause} ms within its bound"
    );
    let metrics = src.api().get("/metrics").body;
    assert!(
        metrics.contains("tessera_backup_write_pause_last_seconds{"),
        "{metrics}"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.path().join("instant/manifest.json")).unwrap())
            .unwrap();
    for g in manifest["groups"].as_array().unwrap() {
        assert!(
            g["tail_end_offset"].as_u64().unwrap() >= g["offset"].as_u64().unwrap(),
            "{g}"
        );
    }

    let dst = target();
    let out = restore(&root.path().join("instant"), &dst);
    assert!(out.status.success(), "restore: {}", text(&out));
    // One client's writes one after another, over both groups: at one instant they are a
    // prefix of what it wrote.
    let held = restored_of(&dst, "seq", written);
    assert!(
        held.len() >= 200,
        "the writes before the backup: {}",
        held.len()
    );
    let k = held.len() as u64;
    assert_eq!(held, (0..k).collect::<Vec<_>>(), "a prefix of the writes");
}

/// Copies `from` to a new directory under `base` named `name`.
fn copy_dir(from: &Path, base: &Path, name: &str) -> PathBuf {
    let to = base.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

/// Sets `file`'s SHA-256 and size in `dir`'s manifest to what it holds now.
fn reseal(dir: &Path, file: &str) {
    use sha2::Digest;
    let path = dir.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let data = std::fs::read(dir.join(file)).unwrap();
    for f in m["files"].as_array_mut().unwrap() {
        if f["name"] == file {
            f["sha256"] = json!(hex::encode(sha2::Sha256::digest(&data)));
            f["bytes"] = json!(data.len());
        }
    }
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
}

#[test]
fn damaged_backups_are_refused_with_the_reason_and_nothing_is_written() {
    let root = tempfile::tempdir().unwrap();
    let src = source(root.path());
    load(&src);
    let out = backup(&src, "good", &[]);
    assert!(out.status.success(), "backup: {}", text(&out));
    let good = root.path().join("good");
    let work = tempfile::tempdir().unwrap();
    let dst = target();
    let rdb = "group-1.rdb";
    let len = std::fs::metadata(good.join(rdb)).unwrap().len() as usize;

    let flipped = copy_dir(&good, work.path(), "flipped");
    let mut data = std::fs::read(flipped.join(rdb)).unwrap();
    data[len / 2] ^= 0x40;
    std::fs::write(flipped.join(rdb), &data).unwrap();
    // The same flip with the manifest resealed: the RDB's own checks find it.
    let parsed = copy_dir(&flipped, work.path(), "flipped-resealed");
    reseal(&parsed, rdb);

    let missing = copy_dir(&good, work.path(), "missing");
    std::fs::remove_file(missing.join(rdb)).unwrap();

    let truncated = copy_dir(&good, work.path(), "truncated");
    std::fs::write(
        truncated.join(rdb),
        &std::fs::read(good.join(rdb)).unwrap()[..len - 100],
    )
    .unwrap();
    let truncated_resealed = copy_dir(&truncated, work.path(), "truncated-resealed");
    reseal(&truncated_resealed, rdb);

    let disagrees = copy_dir(&good, work.path(), "disagrees");
    let path = disagrees.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["files"][0]["sha256"] = json!("00".repeat(32));
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();

    let partial = copy_dir(&good, work.path(), "partial");
    std::fs::remove_file(partial.join("manifest.json")).unwrap();

    let escapes = copy_dir(&good, work.path(), "escapes");
    let path = escapes.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["groups"][0]["rdb"] = json!("../good/group-1.rdb");
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();

    for (dir, reason) in [
        (&flipped, "SHA-256"),
        (&parsed, "group 1"),
        (&missing, "group-1.rdb"),
        (&truncated, "truncated or changed"),
        (&truncated_resealed, "group 1"),
        (&disagrees, "SHA-256"),
        (&partial, "manifest.json"),
        (&escapes, "only plain names"),
    ] {
        let out = restore(dir, &dst);
        let t = text(&out);
        assert!(!out.status.success(), "{}: {t}", dir.display());
        assert!(
            t.contains("nothing was written") && t.contains(reason),
            "{}: wanted {reason:?} in {t}",
            dir.display()
        );
        assert_eq!(dbsize(&dst), 0, "{}: the target stays empty", dir.display());
    }
    // The good one restores; its keys alone need no dashboard.
    let out = run_with_timeout(
        Command::new(tessera_bin())
            .args(["admin", "restore", "--no-settings", "--from"])
            .arg(&good)
            .args(["--to", &dst.proxies[0].addr().to_string()])
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(180),
    );
    assert!(out.status.success(), "restore: {}", text(&out));
    assert!(
        text(&out).contains("restore settings: skipped=--no-settings"),
        "{}",
        text(&out)
    );
    assert!(dbsize(&dst) >= 3000);
}

#[test]
fn the_api_keeps_backups_under_the_root_and_refuses_them_without_one() {
    let root = tempfile::tempdir().unwrap();
    let src = source(root.path());
    let api = src.api();
    for dir in ["../escape", "/abs", "a/../../b", "", "a b"] {
        let msg = api
            .post("/api/backups", &json!({"dir": dir}))
            .expect_error(400, "bad_request");
        assert!(msg.contains("dir"), "{dir:?}: {msg}");
    }
    api.post(
        "/api/backups",
        &json!({"dir": "x", "max_pause_ms": 0, "one_instant": true}),
    )
    .expect_error(400, "bad_request");
    api.post("/api/backups", &json!({"dir": "x", "unknown": 1}))
        .expect_error(400, "bad_request");
    assert!(!root.path().parent().unwrap().join("escape").exists());
    std::fs::create_dir(root.path().join("taken")).unwrap();
    api.post("/api/backups", &json!({"dir": "taken"}))
        .expect_error(409, "conflict");
    // A viewer may look, not start one.
    let other = target();
    let msg = other
        .api()
        .post("/api/backups", &json!({"dir": "x"}))
        .expect_error(400, "bad_request");
    assert!(msg.contains("--backup-root"), "{msg}");
    assert_eq!(other.api().get("/api/backups").ok()["enabled"], false);
}

#[test]
fn a_restore_that_fails_midway_deletes_what_it_wrote() {
    let root = tempfile::tempdir().unwrap();
    let src = source(root.path());
    let mut c = client(&src);
    let mut p = redis::pipe();
    let value = "v".repeat(2000);
    for i in 0..2000 {
        p.cmd("SET").arg(format!("k:{i}")).arg(&value).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let out = backup(&src, "mid", &[]);
    assert!(out.status.success(), "backup: {}", text(&out));
    // Group 3 of the target has room for about 100 of its ~670 keys: its writes are refused
    // (-OOM) partway, after the other groups and it have taken some.
    let dst = target();
    let mut g3 = dst.servers[2].client();
    let info: String = q(&mut g3, &["INFO", "memory"]);
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let _: () = q(
        &mut g3,
        &["CONFIG", "SET", "maxmemory", &(used + 300_000).to_string()],
    );
    let _: () = q(
        &mut g3,
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    );
    let out = restore(&root.path().join("mid"), &dst);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    // The refusal is named (an -OOM reply, as the proxy relays it) and the undo reported.
    assert!(t.contains("failed") && t.contains("deleted again"), "{t}");
    let calls = |cmd: &str| -> u64 {
        dst.servers
            .iter()
            .map(|s| {
                let info: String = q(&mut s.client(), &["INFO", "commandstats"]);
                info.lines()
                    .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
                    .and_then(|r| r.split(',').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum()
    };
    assert!(calls("set") > 0, "keys were written before the refusal");
    assert!(
        calls("del") >= 2000,
        "every key the backup names was deleted"
    );
    let left: i64 = dst.servers.iter().map(|s| s.dbsize()).sum();
    assert_eq!(left, 0, "the target is as empty as it was");
}

/// What the settings test's source sets, and the target must show after the restore.
const FILTER: &str = r#"{"deny_commands":["GETDEL"],"read_only_keys":["ro:*"]}"#;

/// A client of `cp`'s proxy that logs in as `user`: the answer to AUTH, and the connection.
fn login(cp: &ControlPlane, user: &str, password: &str) -> (Result<(), String>, redis::Connection) {
    let mut c = client(cp);
    let r = redis::cmd("AUTH")
        .arg(user)
        .arg(password)
        .query::<()>(&mut c)
        .map_err(|e| e.to_string());
    (r, c)
}

/// `cmd` through `c`: its error, if it failed.
fn refusal(c: &mut redis::Connection, cmd: &[&str]) -> Option<String> {
    let mut r = redis::cmd(cmd[0]);
    for a in &cmd[1..] {
        r.arg(*a);
    }
    r.query::<redis::Value>(c).err().map(|e| e.to_string())
}

/// The settings a restore compares, as the dashboard shows them: users, plugins (name,
/// module, config, enabled), routes, read policy, failover's settings.
fn settings_of(cp: &ControlPlane) -> Value {
    let api = cp.api();
    let plugins: Vec<Value> = api
        .get("/api/plugins")
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            json!({"name": p["name"], "sha256": p["sha256"], "config": p["config"],
                   "enabled": p["enabled"], "fail": p["fail"]})
        })
        .collect();
    json!({
        "users": api.get("/api/users").ok(),
        "plugins": plugins,
        "routes": api.get("/api/routes").ok()["routes"],
        "read_policy": api.get("/api/read-policy").ok()["policy"],
        "failover": api.get("/api/failover").ok()["settings"],
    })
}

#[test]
fn a_restore_applies_the_backups_users_plugins_routes_and_read_policy_before_its_keys() {
    let root = tempfile::tempdir().unwrap();
    let src = source(root.path());
    let store = src.options().store.clone();
    // The cluster the route leads to, and the cluster restored into, in the source's store.
    let _routed = ControlPlane::builder()
        .cluster("routedb")
        .store(&store)
        .start();
    let api = src.api();
    api.put(
        "/api/users/alice",
        &json!({"password": "alice-pw", "commands": ["read", "write"], "key_prefix": "t:"}),
    )
    .ok();
    let wasm = std::fs::read(plugin_wasm("filter")).unwrap();
    api.request("PUT", "/api/plugins/filter/module", Some(&wasm))
        .ok();
    let config: Value = serde_json::from_str(FILTER).unwrap();
    api.put("/api/plugins/filter/config", &json!({ "config": config }))
        .ok();
    api.post("/api/plugins/filter/enable", &json!({})).ok();
    api.put(
        "/api/routes",
        &json!({"routes": [{"prefix": "ext:", "cluster": "routedb", "user": "front",
                             "password": "front-pw"}]}),
    )
    .ok();
    api.put(
        "/api/read-policy",
        &json!({"mode": "prefer-replica", "max_lag_ms": 500}),
    )
    .ok();
    api.put(
        "/api/failover",
        &json!({"max_lag_bytes": 4096, "cooldown_secs": 120}),
    )
    .ok();
    let mut c = client(&src);
    for i in 0..300 {
        let _: () = q(&mut c, &["SET", &format!("t:{i}"), &format!("v{i}")]);
        let _: () = q(&mut c, &["SET", &format!("k:{i}"), &format!("w{i}")]);
    }
    // From now on every client of the source must log in: the restore writes as the target's
    // default user, and applies this entry only after its keys.
    api.put("/api/users/default", &json!({"password": "default-pw"}))
        .ok();
    let out = backup(&src, "settings", &[]);
    assert!(out.status.success(), "backup: {}", text(&out));
    let dir = root.path().join("settings");
    let want = settings_of(&src);

    let dst = ControlPlane::builder()
        .cluster("restored")
        .store(&store)
        .servers(2)
        .proxies(1)
        .start();
    dst.split_over_two_groups();
    let untouched = settings_of(&dst);

    // A store.json with a field no backup writes: refused before anything is applied.
    let work = tempfile::tempdir().unwrap();
    let bad = copy_dir(&dir, work.path(), "bad");
    let mut docs: Value =
        serde_json::from_slice(&std::fs::read(bad.join("store.json")).unwrap()).unwrap();
    for e in docs["entries"].as_array_mut().unwrap() {
        if e["key"] == "users" {
            e["json"]["users"][0]["superuser"] = json!(true);
        }
    }
    std::fs::write(bad.join("store.json"), serde_json::to_vec(&docs).unwrap()).unwrap();
    reseal(&bad, "store.json");
    let out = restore(&bad, &dst);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("store.json") && t.contains("superuser") && t.contains("nothing was written"),
        "{t}"
    );
    assert_eq!(settings_of(&dst), untouched, "nothing applied: {t}");
    assert_eq!(dbsize(&dst), 0);

    // Another cluster's dashboard (here the source's) is refused before anything is read
    // from it or changed.
    let out = run_with_timeout(
        Command::new(tessera_bin())
            .args(["admin", "--dashboard", &src.dashboard.addr().to_string()])
            .args(["--token", TOKEN, "restore", "--from"])
            .arg(&dir)
            .args(["--to", &dst.proxies[0].addr().to_string()])
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(180),
    );
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("is not one of this dashboard's proxies")
            && t.contains("nothing was applied or written"),
        "{t}"
    );
    assert_eq!(settings_of(&src), want, "the source is untouched");
    assert_eq!(settings_of(&dst), untouched);
    assert_eq!(dbsize(&dst), 0);

    // A plugin config its own init refuses (the CLI cannot run a plugin): the settings before
    // it are applied, then the restore stops, says what was applied and what not, and writes
    // no key.
    let refused = copy_dir(&dir, work.path(), "refused");
    let mut docs: Value =
        serde_json::from_slice(&std::fs::read(refused.join("store.json")).unwrap()).unwrap();
    for e in docs["entries"].as_array_mut().unwrap() {
        if e["key"] == "plugin/catalog" {
            e["json"]["plugins"][0]["config"] = json!({"deny_classes": ["admn"]});
        }
    }
    std::fs::write(
        refused.join("store.json"),
        serde_json::to_vec(&docs).unwrap(),
    )
    .unwrap();
    reseal(&refused, "store.json");
    let out = restore(&refused, &dst);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains(
            "applying plugin filter to the target failed; applied: the read policy, failover's \
             settings, the prefix routes, user alice; not applied: plugin filter; no key was \
             written"
        ) && t.contains("setting its config failed")
            && t.contains("admn"),
        "{t}"
    );
    assert_eq!(dbsize(&dst), 0, "no key written: {t}");
    let now = settings_of(&dst);
    assert_eq!(now["read_policy"], want["read_policy"]);
    // alice is set; default's entry, applied only after the keys, is not.
    assert_eq!(now["users"], json!([want["users"][0]]), "{now}");
    assert_eq!(want["users"][1]["name"], "default");
    assert_eq!(now["plugins"][0]["enabled"], false, "{now}");

    // A user of the same name in the target: refused, naming it; nothing applied or written.
    dst.api()
        .put("/api/users/alice", &json!({"password": "other"}))
        .ok();
    let before = settings_of(&dst);
    let out = restore(&dir, &dst);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("user alice exists") && t.contains("nothing was applied or written"),
        "{t}"
    );
    assert_eq!(settings_of(&dst), before, "nothing applied: {t}");
    assert_eq!(dbsize(&dst), 0);

    // Told to replace it, the restore gives alice the backup's password and rules.
    let out = restore_with(&dir, &dst, &["--replace-settings"]);
    let t = text(&out);
    assert!(out.status.success(), "restore: {t}");
    assert!(
        t.contains("restore settings: user=alice") && t.contains("restore settings: plugin=filter"),
        "{t}"
    );
    let (keys_done, default_set) = (
        t.find("restore group: group=2").unwrap(),
        t.find("restore settings: user=default")
            .expect("default applied"),
    );
    assert!(
        keys_done < default_set,
        "default's entry after the keys: {t}"
    );
    assert_eq!(
        settings_of(&dst),
        want,
        "the target's settings are the source's"
    );
    let e = refusal(&mut client(&dst), &["GET", "t:1"]).expect("default needs its password");
    assert!(e.contains("NOAUTH"), "{e}");
    let (r, mut c) = login(&dst, "default", "default-pw");
    assert_eq!(r, Ok(()));
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 600);

    // The user logs in with its own password, and keeps its rules.
    let (r, mut alice) = login(&dst, "alice", "alice-pw");
    assert_eq!(r, Ok(()));
    let v: String = q(&mut alice, &["GET", "t:7"]);
    assert_eq!(v, "v7");
    let _: () = q(&mut alice, &["SET", "t:new", "x"]);
    let e = refusal(&mut alice, &["GET", "k:7"]).expect("outside its prefix");
    assert!(e.contains("NOPERM") || e.contains("no permissions"), "{e}");
    let e = refusal(&mut alice, &["EVAL", "return 1", "0"]).expect("scripting is not its class");
    assert!(e.contains("NOPERM") || e.contains("no permissions"), "{e}");
    let (r, _) = login(&dst, "alice", "wrong");
    assert!(r.unwrap_err().contains("WRONGPASS"));

    // The filter runs in the target's proxy with its config.
    let e = refusal(&mut c, &["GETDEL", "t:1"]).expect("GETDEL is denied");
    assert!(e.contains("is not allowed"), "{e}");
    let e = refusal(&mut c, &["SET", "ro:1", "x"]).expect("ro:* is read-only");
    assert!(e.contains("is read-only"), "{e}");
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 601, "only alice's t:new was added");

    // The restore's user changes are audited like any, the hash never shown; a bad hash is a
    // 400 that does not echo it.
    let audit = dst.api().get("/api/audit?limit=1000").ok();
    let set: Vec<&Value> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "PUT" && e["path"] == "/api/users/alice")
        .collect();
    assert!(!set.is_empty(), "{audit}");
    for e in &set {
        let d = e["detail"].as_str().unwrap();
        assert!(!d.contains("sha256$"), "{e}");
    }
    assert!(
        set.iter().any(|e| e["detail"]
            .as_str()
            .unwrap()
            .contains(r#""password_hash":"<redacted>""#)),
        "{audit}"
    );
    let bad = format!("sha256$00${}", "zz".repeat(32));
    let msg = dst
        .api()
        .put("/api/users/bob", &json!({ "password_hash": bad }))
        .expect_error(400, "bad_request");
    assert!(
        msg.contains("password_hash") && !msg.contains(&bad),
        "{msg}"
    );
}
