//! `tessera admin` as an operator reads it, against a real dashboard, proxy and console:
//! slots given as `A-B` everywhere, `migrations` summarised by range with grouped numbers
//! and no placeholders, proxies named by address (and taken by address), the console told
//! apart from a dashboard, and refusals printed without a backtrace even with
//! `RUST_BACKTRACE=1`.

use std::process::Command;
use std::time::Duration;

use crate::migration::{conn, idle, wait_for};
use crate::support::{
    Console, ConsoleSetup, ControlPlane, TOKEN, cli_stdout, run_with_timeout, slot, tessera_bin,
};

/// `tessera admin --dashboard <addr> --token <token> <args>` with backtraces asked for.
fn admin_bt(dashboard: &str, token: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(tessera_bin());
    cmd.arg("admin")
        .args(["--dashboard", dashboard, "--token", token])
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1");
    run_with_timeout(&mut cmd, Duration::from_secs(30))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn no_backtrace(out: &std::process::Output, what: &str) {
    let e = stderr(out);
    assert!(!out.status.success(), "{what} must fail: {e}");
    assert!(
        !e.contains("backtrace") && !e.contains("Backtrace") && e.lines().count() <= 4,
        "{what}: a short message, no backtrace:\n{e}"
    );
}

#[test]
fn the_admin_cli_takes_ranges_names_proxies_by_address_and_prints_refusals_plainly() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    let dash = cp.dashboard.addr().to_string();
    let run = |args: &[&str]| cp.admin_cli(TOKEN, args);

    // Slots as `A-B`, and the three-word form still.
    cli_stdout(
        &run(&["slots", "assign", "0-511", "1"]),
        "slots assign 0-511 1",
    );
    let out = cli_stdout(&run(&["slots", "assign", "512", "1023", "2"]), "assign");
    assert!(out.contains("(512-1023)"), "{out}");
    let bad = run(&["slots", "assign", "511-400", "1"]);
    assert!(stderr(&bad).contains("runs backwards"), "{}", stderr(&bad));

    // 1200 keys in 400-511, so the summary has thousands to group.
    {
        let mut c = conn(cp.proxies[0].addr());
        let keys: Vec<(String, &str)> = (0..)
            .map(|i| format!("k:{i}"))
            .filter(|k| (400..=511).contains(&slot(k.as_bytes())))
            .take(1200)
            .map(|k| (k, "v"))
            .collect();
        let _: () = redis::cmd("MSET").arg(&keys).query(&mut c).expect("MSET");
    }
    let out = cli_stdout(&run(&["migrate", "400-511", "2"]), "migrate 400-511 2");
    assert!(out.contains("queued 112 slots of 400-511"), "{out}");
    // While it runs or once done, the summary is by range, never one line per slot, and has
    // no placeholder for an unknown number.
    let during = cli_stdout(&run(&["migrations"]), "migrations");
    assert!(!during.contains("~-") && !during.contains("~"), "{during}");
    let slot_lines = during
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u16>().is_ok())
        })
        .count();
    assert!(slot_lines <= 2, "one line per range:\n{during}");
    wait_for("the migration to end", Duration::from_secs(60), || {
        idle(&cp)
    });
    let after = cli_stdout(&run(&["migrations"]), "migrations");
    assert!(
        after.starts_with("no migration running; the last moved 112 slots and 1,200 keys"),
        "{after}"
    );

    // A migration that moves nothing: refused, with the reason, and no backtrace.
    let again = admin_bt(&dash, TOKEN, &["migrate", "400-511", "2"]);
    no_backtrace(&again, "a migration of nothing");
    assert!(
        stderr(&again).contains("nothing to move") && stderr(&again).contains("409"),
        "{}",
        stderr(&again)
    );
    no_backtrace(
        &admin_bt(&dash, "not-the-token", &["overview"]),
        "a wrong token",
    );

    // Proxies are named by the address clients use, and taken by it.
    let addr = cp.proxies[0].addr().to_string();
    let list = cli_stdout(&run(&["proxy", "list"]), "proxy list");
    let mut lines = list.lines();
    assert!(
        lines.next().is_some_and(|h| h.starts_with("ADDR")),
        "{list}"
    );
    assert!(lines.next().is_some_and(|l| l.starts_with(&addr)), "{list}");
    let off = cli_stdout(&run(&["proxy", "offline", &addr]), "proxy offline ADDR");
    assert!(
        off.starts_with(&format!("proxy {addr} is now offline")),
        "{off}"
    );
    let on = cli_stdout(&run(&["proxy", "online", &addr]), "proxy online ADDR");
    assert!(
        on.starts_with(&format!("proxy {addr} is now online")),
        "{on}"
    );

    // Pointed at the console, the CLI says so instead of a login error.
    let console = Console::start(&ConsoleSetup {
        stores: vec![cp.options().store.clone()],
        users: vec![("ada".into(), "a long enough password".into())],
        ..ConsoleSetup::default()
    });
    let out = admin_bt(&console.addr().to_string(), TOKEN, &["overview"]);
    no_backtrace(&out, "the console as a dashboard");
    assert!(
        stderr(&out).contains("is the Tessera console"),
        "{}",
        stderr(&out)
    );
}

/// `tessera admin` with no user in its environment (a container, a cron job), as `token`.
fn admin_as(cp: &ControlPlane, token: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(tessera_bin());
    cmd.arg("admin")
        .args([
            "--dashboard",
            &cp.dashboard.addr().to_string(),
            "--token",
            token,
        ])
        .args(args)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env("RUST_BACKTRACE", "0");
    run_with_timeout(&mut cmd, Duration::from_secs(30))
}

#[test]
fn the_audit_names_the_cli_by_its_token_and_reads_as_sentences_with_refusals_and_their_reasons() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.split_over_two_groups();
    let created: tessera_wire::tokens::CreatedToken = cp
        .api()
        .post(
            "/api/tokens",
            &serde_json::json!({"name": "ops-token", "role": "operator"}),
        )
        .ok_as();
    let ops = created.token;
    cli_stdout(
        &admin_as(&cp, &ops, &["migrate", "400-511", "2"]),
        "migrate",
    );
    wait_for("the migration to end", Duration::from_secs(120), || {
        idle(&cp)
    });
    // Again: nothing to move, refused (409) with its reason.
    let refused = admin_as(&cp, &ops, &["migrate", "400-511", "2"]);
    assert!(!refused.status.success());
    let log: Vec<tessera_wire::audit::AuditEntry> = cp.api().get("/api/audit?limit=2").ok_as();
    let (newest, moved) = (&log[0], &log[1]);
    assert_eq!(moved.actor, "cli:ops-token", "{moved:?}");
    assert_eq!(moved.token.as_deref(), Some("ops-token"));
    assert_eq!(moved.status, 200);
    assert_eq!(
        moved.summary, "ops-token moved slots 400-511 to group 2",
        "{moved:?}"
    );
    assert_eq!(newest.status, 409, "{newest:?}");
    assert_eq!(newest.actor, "cli:ops-token");
    let reason = newest.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("nothing to move"), "{newest:?}");
    assert_eq!(
        newest.summary,
        format!("ops-token tried to move slots 400-511 to group 2: refused (409), {reason}")
    );
    // A 400 carries its reason too.
    let bad = cp.api().with_token(&ops).put(
        "/api/migrations/throttle",
        &serde_json::json!({"max_keys_per_sec": 0}),
    );
    bad.expect_error(400, "bad_request");
    let log: Vec<tessera_wire::audit::AuditEntry> = cp.api().get("/api/audit?limit=1").ok_as();
    assert_eq!(log[0].status, 400);
    assert!(
        log[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("max_keys_per_sec must be at least 1")),
        "{:?}",
        log[0]
    );
    assert!(log[0].summary.contains("refused (400)"), "{:?}", log[0]);
}
