//! The shipped Prometheus alert rules (ops/prometheus/tessera-alerts.yml): promtool checks them
//! and runs their unit tests on synthetic series, and every metric they name is one that a
//! real dashboard or proxy exports.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::migration::{idle, owners};
use crate::support::{ControlPlane, Proxy, RedisServer, plugin_toml, run_with_timeout, wait_until};

fn rules_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../ops/prometheus"))
}

/// `promtool` (or `PROMTOOL_BIN`).
///
/// # Panics
/// If it is not installed: these tests must not pass without it.
fn promtool() -> String {
    let bin = std::env::var("PROMTOOL_BIN").unwrap_or_else(|_| "promtool".into());
    let found = Command::new(&bin).arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "{bin} not found: install Debian's prometheus package (tools/test.sh does) or set PROMTOOL_BIN"
    );
    bin
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    let bin = promtool();
    for args in [
        ["check", "rules", "tessera-alerts.yml"],
        ["test", "rules", "tessera-alerts.test.yml"],
    ] {
        let out = run_with_timeout(
            Command::new(&bin).args(args).current_dir(rules_dir()),
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every metric name in the rules' `expr`s (a block runs from `expr:` to the next line
/// indented no deeper than it).
fn names_in_rules() -> BTreeSet<String> {
    let text = std::fs::read_to_string(rules_dir().join("tessera-alerts.yml")).unwrap();
    let mut names = BTreeSet::new();
    let mut expr_indent: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let body = match expr_indent {
            Some(i) if indent > i && !line.trim().is_empty() => line,
            _ => {
                expr_indent = None;
                match line.trim_start().strip_prefix("expr:") {
                    Some(rest) => {
                        expr_indent = Some(indent);
                        rest
                    }
                    None => continue,
                }
            }
        };
        let mut rest = body;
        while let Some(at) = rest.find("tessera_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.insert(name);
        }
    }
    names
}

/// The metric families `text` (Prometheus exposition) has: `# TYPE` lines and sample names.
fn families(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let name = match line.strip_prefix("# TYPE ") {
            Some(rest) => rest.split(' ').next(),
            None if line.starts_with('#') => None,
            None => line.split(['{', ' ']).next(),
        };
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            out.insert(n.to_owned());
        }
    }
    out
}

/// A cluster that exports every metric the shipped rules and dashboard name: it has handed
/// off a slot (the write-pause gauges exist from the first one) and taken a backup (the last
/// good one's time exists from the first), and a proxy beside it has a plugin loaded (the
/// plugin series exist only with one). Dropped, it stops them all.
pub(crate) struct Exporting {
    pub(crate) cp: ControlPlane,
    pub(crate) with_plugin: Proxy,
    _backend: RedisServer,
    _backups: tempfile::TempDir,
}

pub(crate) fn a_cluster_exporting_everything() -> Exporting {
    let backups = tempfile::tempdir().unwrap();
    let root = backups.path().display().to_string();
    let cp = ControlPlane::builder()
        .servers(2)
        .proxies(1)
        .dashboard_args(&["--backup-root", &root])
        .start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    cp.api()
        .post("/api/migrations", &json!({"from": 0, "to": 0, "group": 2}))
        .ok();
    assert!(
        wait_until(Duration::from_secs(60), || owners(&cp)[0] == Some(2)
            && idle(&cp)),
        "slot 0 moved to group 2: {}",
        cp.api().get("/api/migrations").body
    );
    cp.api()
        .post("/api/backups", &json!({"dir": "alerts"}))
        .ok();
    assert!(
        wait_until(Duration::from_secs(60), || cp
            .api()
            .get("/api/backups")
            .ok()["backups"][0]["state"]
            == "done"),
        "the backup finished: {}",
        cp.api().get("/api/backups").body
    );
    let backend = RedisServer::start();
    let with_plugin = Proxy::builder(&[&backend])
        .config(&plugin_toml(
            "filter",
            &json!({"deny_commands": ["FLUSHALL"]}),
            "",
        ))
        .admin()
        .start();
    Exporting {
        cp,
        with_plugin,
        _backend: backend,
        _backups: backups,
    }
}

#[test]
fn every_metric_the_alert_rules_name_is_exported_by_a_real_dashboard_or_proxy() {
    let names = names_in_rules();
    assert!(names.len() >= 15, "the rules name metrics: {names:?}");
    let Exporting {
        cp, with_plugin, ..
    } = &a_cluster_exporting_everything();
    let mut exported = families(&cp.api().get("/metrics").body);
    exported.extend(families(&cp.proxies[0].metrics()));
    exported.extend(families(&with_plugin.metrics()));
    let missing: Vec<&String> = names.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the alert rules name metrics no dashboard or proxy exports: {missing:?}\nexported: {exported:?}"
    );
}
