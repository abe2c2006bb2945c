//! The console's login under attack (docs/console.md, "Auth"), through real HTTP against the
//! real binary: a flood of random names in bounded memory, parallel attempts that cannot pass
//! the lockout, a stranger who locks out only their own address (clients bind 127.0.0.2, …),
//! sessions kept in the store across restarts, login events apart from the audit log, and
//! the `Secure` cookie flag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures_util::future::join_all;
use serde_json::json;
use tessera_console::auth::{MAX_PER_USER, SESSION_PREFIX};
use tessera_console::logins::KEEP;
use tessera_wire::console::{LoginEvent, LoginOutcome, MergedEntry};
use tessera_wire::error::ErrorBody;

use crate::support::{Answer, Console, ConsoleSetup, ControlPlane, LoginClient, TOKEN};

/// The most resident memory the console may reach in the flood below: about 40 MiB at start
/// (the dummy hash made then included), one 19 MiB argon2 buffer per verification thread (at
/// most 4; 2 on a 2-core machine, which measured 65 MiB in all) and room for 300
/// connections. Before the fix the console reached 5.7 GB: one verification per attempt,
/// all at once.
const FLOOD_PEAK_KIB: u64 = 160 * 1024;

fn user(name: &str, password: &str) -> (String, String) {
    (name.to_owned(), password.to_owned())
}

/// A console over one empty fs store (which also keeps its sessions), users `admin`/`right`
/// and `ops`/`other`, `lockout_failures` as given and `extra` in console.toml.
fn console(lockout_failures: u32, extra: &str) -> (Console, tempfile::TempDir) {
    let store = tempfile::tempdir().expect("temp dir");
    let console = Console::start(&ConsoleSetup {
        stores: vec![format!("fs://{}", store.path().display())],
        users: vec![user("admin", "right"), user("ops", "other")],
        lockout_failures: Some(lockout_failures),
        extra: extra.to_owned(),
        ..ConsoleSetup::default()
    });
    (console, store)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// `(status, error code)` of an answer (`""` for a success).
fn status_and_code(a: &Answer) -> (u16, String) {
    let code = if a.reply.status < 300 {
        String::new()
    } else {
        serde_json::from_str::<ErrorBody>(&a.reply.body)
            .map_or_else(|_| "<no code>".to_owned(), |e| e.error.code)
    };
    (a.reply.status, code)
}

/// How many answers of each `(status, code)`.
fn tally(answers: &[Answer]) -> BTreeMap<(u16, String), usize> {
    let mut t = BTreeMap::new();
    for a in answers {
        *t.entry(status_and_code(a)).or_default() += 1;
    }
    t
}

#[test]
fn a_login_flood_with_random_names_stays_in_bounded_memory() {
    let (console, _store) = console(5, "");
    let rt = runtime();
    let salt = std::process::id();
    let answers = rt.block_on(async {
        // 300 attempts at once from 30 addresses, each with a name never used before.
        let clients: Vec<LoginClient> = (0..30).map(|i| console.login_client(10 + i)).collect();
        join_all((0..300).map(|i| {
            let c = clients[i % clients.len()].clone();
            async move { c.login(&format!("nobody-{salt}-{i}"), "guess").await }
        }))
        .await
    });
    let seen = tally(&answers);
    let allowed = [
        (401, "unauthorized"),
        (429, "too_many_attempts"),
        (503, "busy"),
    ];
    for (status, code) in seen.keys() {
        assert!(
            allowed.contains(&(*status, code.as_str())),
            "an unexpected answer {status} {code}: {seen:?}"
        );
    }
    let peak = console.peak_rss_kib();
    eprintln!(
        "login flood: 300 attempts, answers {seen:?}, console peak RSS {} MiB",
        peak / 1024
    );
    assert!(
        peak < FLOOD_PEAK_KIB,
        "the console's peak RSS reached {} MiB in the flood (bound {} MiB): {seen:?}",
        peak / 1024,
        FLOOD_PEAK_KIB / 1024
    );
    // The admin still gets in, from an address of its own.
    let admin = rt.block_on(console.login_client(2).login("admin", "right"));
    admin.reply.ok();
}

#[test]
fn parallel_attempts_cannot_pass_the_lockout() {
    let (console, _store) = console(3, "");
    let rt = runtime();
    let from = console.login_client(3);
    // Waves of 40 wrong passwords at once, until the pair is locked. Each wave gets at least
    // one attempt checked, so three waves lock it; a fourth only meets the lock.
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.extend(rt.block_on(join_all((0..40).map(|_| from.login("admin", "wrong")))));
    }
    let seen = tally(&answers);
    let wrong = seen
        .get(&(401, "unauthorized".to_owned()))
        .copied()
        .unwrap_or(0);
    // lockout_failures = 3: two failures answer 401, the third 429 and locks.
    assert!(
        wrong <= 2,
        "{wrong} attempts were checked and refused before the lockout (at most 2): {seen:?}"
    );
    for (status, code) in seen.keys() {
        assert!(
            *status == 401
                || (*status == 429 && ["locked_out", "too_many_attempts"].contains(&code.as_str())),
            "an unexpected answer {status} {code}: {seen:?}"
        );
    }
    let right = rt.block_on(from.login("admin", "right"));
    right.reply.expect_error(429, "locked_out");

    // The login log shows at most two failures, and the lockout.
    let ops = console.login("ops", "other");
    let events: Vec<LoginEvent> = ops.get("/api/logins?limit=1000").ok_as();
    let count = |outcome: LoginOutcome| -> u64 {
        events
            .iter()
            .filter(|e| e.user == "admin" && e.outcome == outcome)
            .map(|e| e.count)
            .sum()
    };
    assert!(count(LoginOutcome::Failed) <= 2, "{events:?}");
    assert!(count(LoginOutcome::LockedOut) >= 1, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e.user != "admin" || e.addr == "127.0.0.3"),
        "{events:?}"
    );
}

#[test]
fn a_strangers_failures_lock_out_only_the_strangers_address() {
    let (console, _store) = console(3, "");
    let rt = runtime();
    let stranger = console.login_client(5);
    let admin = console.login_client(6);
    rt.block_on(async {
        let first = stranger.login("admin", "guess").await;
        let refused = first.reply.expect_error(401, "unauthorized");
        stranger
            .login("admin", "guess")
            .await
            .reply
            .expect_error(401, "unauthorized");
        let locked = stranger.login("admin", "guess").await;
        let message = locked.reply.expect_error(429, "locked_out");
        assert!(message.contains("127.0.0.5"), "{message}");
        // Locked out even with the right password, from the stranger's address …
        stranger
            .login("admin", "right")
            .await
            .reply
            .expect_error(429, "locked_out");
        // … while the admin, from another address, gets in.
        admin.login("admin", "right").await.reply.ok();

        // An unknown name is refused with the same answer, and locked alike.
        let ghost = stranger.login("ghost", "guess").await;
        assert_eq!(ghost.reply.expect_error(401, "unauthorized"), refused);
        stranger
            .login("ghost", "guess")
            .await
            .reply
            .expect_error(401, "unauthorized");
        stranger
            .login("ghost", "guess")
            .await
            .reply
            .expect_error(429, "locked_out");
    });
}

/// The session records in an fs store (files not starting with `.`).
fn session_files(store: &Path) -> Vec<PathBuf> {
    let dir = store.join(SESSION_PREFIX.trim_matches('/'));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .map(|e| e.expect("reading the session dir").path())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect()
}

#[test]
fn sessions_survive_a_console_restart_and_end_at_logout() {
    let (mut console, store) = console(5, "");
    let mut c = console.client();
    c.login("admin", "right").reply.ok();
    let cookie = c.cookie.clone().expect("a session cookie");
    let id = cookie.split_once('=').expect("name=value").1.to_owned();
    let files = session_files(store.path());
    assert_eq!(files.len(), 1, "{files:?}");
    // The store keeps a hash of the id, never the id.
    let stored = std::fs::read_to_string(&files[0]).expect("reading the session record");
    assert!(!stored.contains(&id) && !files[0].to_string_lossy().contains(&id));
    assert!(stored.contains("\"user\":\"admin\""), "{stored}");

    console.restart();
    let mut again = console.client();
    again.cookie = c.cookie.clone();
    again.csrf = c.csrf.clone();
    assert_eq!(
        again.get("/auth/me").ok(),
        json!({"user": "admin", "csrf": c.csrf.clone().unwrap()}),
        "the session outlived the restart"
    );
    again.post("/auth/logout", &json!({})).ok();
    assert_eq!(session_files(store.path()), Vec::<PathBuf>::new());

    console.restart();
    let mut after = console.client();
    after.cookie = Some(cookie);
    after.get("/auth/me").expect_error(401, "unauthorized");
}

#[test]
fn each_user_keeps_a_bounded_number_of_sessions() {
    let (console, store) = console(5, "");
    let clients: Vec<_> = (0..=MAX_PER_USER)
        .map(|_| console.login("ops", "other"))
        .collect();
    assert_eq!(session_files(store.path()).len(), MAX_PER_USER);
    clients[0].get("/auth/me").expect_error(401, "unauthorized");
    for c in &clients[1..] {
        c.get("/auth/me").ok();
    }
    // Other users' sessions do not count against this one's.
    console.login("admin", "right").get("/auth/me").ok();
    clients[1].get("/auth/me").ok();
}

#[test]
fn login_events_do_not_push_changes_out_of_the_audit_log() {
    let cp = ControlPlane::builder().servers(1).start();
    let cluster = cp.options().cluster.clone();
    let console = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![user("ada", "pw")],
        roles: vec![("ada".into(), "admin".into())],
        tokens: vec![(cluster.clone(), TOKEN.to_owned())],
        lockout_failures: Some(3),
        ..ConsoleSetup::default()
    });
    let c = console.login("ada", "pw");
    let created = c.post(
        &format!("/api/clusters/{cluster}/groups"),
        &json!({"id": 1}),
    );
    assert_eq!(created.status, 201, "{}", created.body);

    // More login events than the login log holds, two names taking turns so that no two in
    // a row are alike (a run of alike events is one entry). After three failures each, the
    // rest are answered by the lockout without a password check.
    let mut anon = console.client();
    for i in 0..KEEP + 100 {
        let status = anon.login(["x", "y"][i % 2], "guess").reply.status;
        assert!(status == 401 || status == 429, "{status}");
    }

    let entries: Vec<MergedEntry> = c.get("/api/audit?limit=1000").ok_as();
    assert!(
        entries.iter().any(|e| e.cluster == cluster
            && e.entry.actor == "console:ada"
            && e.entry.method == "POST"
            && e.entry.path == "/api/groups"),
        "the change is still in the audit log; its {} newest entries: {:?}",
        entries.len(),
        &entries[..entries.len().min(3)]
    );
    assert!(
        entries.iter().all(|e| e.cluster == cluster),
        "only the dashboards' changes are in the audit log; its newest entries: {:?}",
        &entries[..entries.len().min(3)]
    );
    let logins: Vec<LoginEvent> = c.get(&format!("/api/logins?limit={KEEP}")).ok_as();
    assert_eq!(logins.len(), KEEP, "the login log is full and bounded");
    let newest = &logins[0];
    assert_eq!(newest.outcome, LoginOutcome::LockedOut, "{newest:?}");
    assert_eq!(newest.status, 429, "{newest:?}");
    assert_eq!(newest.addr, "127.0.0.1", "{newest:?}");
}

#[test]
fn the_cookie_is_secure_when_the_console_is_configured_for_https() {
    let (console, _store) = console(5, "secure_cookie = true");
    let mut c = console.client();
    let ok = c.login("admin", "right");
    ok.reply.ok();
    let cookie = ok.header("set-cookie").expect("a session cookie");
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let out = c.request("POST", "/auth/logout", None);
    out.reply.ok();
    let cleared = out.header("set-cookie").expect("logout clears the cookie");
    assert!(
        cleared.contains("Max-Age=0") && cleared.ends_with("; Secure"),
        "{cleared}"
    );
}
