//! The conformance suite over every example plugin, as built for the proxy (the Rust ones by
//! cargo, the C and AssemblyScript ones by `sdk/build-languages.sh`; `tools/test.sh` builds
//! both first): each passes every check and its own cases, the same cases file for the same
//! plugin in each language. And the deliberately broken `faulty` plugin fails, with a report
//! that names the fault and the call.

use std::path::PathBuf;

use tessera_conformance::{Cases, Options, Report, Status, run};

/// `target/wasm32-unknown-unknown/release` (or `TESSERA_PLUGIN_DIR`).
fn plugin_dir() -> PathBuf {
    if let Ok(d) = std::env::var("TESSERA_PLUGIN_DIR") {
        return PathBuf::from(d);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var("CARGO_TARGET_DIR")
        .map_or(root.join("target"), PathBuf::from)
        .join("wasm32-unknown-unknown/release")
}

/// The module's bytes; a missing one fails the test (it must be built, not skipped).
fn wasm(name: &str) -> Vec<u8> {
    let path = plugin_dir().join(format!("tessera_plugin_{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}. Build the plugins first: tools/test.sh does (cargo build --release --target wasm32-unknown-unknown -p …, then sdk/build-languages.sh)",
            path.display()
        )
    })
}

fn cases(file: &str) -> Cases {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file);
    Cases::parse(&std::fs::read_to_string(&path).expect("cases file")).expect("valid cases")
}

/// Runs the suite as `tessera-conformance <module> --cases <file>` does.
fn check(module: &str, plugin: &str, cases_file: &str) -> Report {
    let c = cases(cases_file);
    let config = c.config.as_ref().map_or("{}".into(), ToString::to_string);
    let mut opts = Options::new(plugin, config);
    opts.cases = Some(c);
    run(module, &wasm(module), &opts)
}

fn assert_passes(module: &str, plugin: &str, cases_file: &str) {
    let r = check(module, plugin, cases_file);
    assert!(r.passed(), "{r}");
    // Every check that could run for these plugins did run.
    for name in [
        "module loads",
        "hooks called as declared",
        "argv tables read correctly",
        "input limit handled",
        "the plugin's own cases",
        "no call faults",
    ] {
        let c = r
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing:\n{r}"));
        assert_eq!(c.status, Status::Pass, "{name}:\n{r}");
    }
}

#[test]
fn the_filter_passes_in_rust_c_and_assemblyscript() {
    for module in ["filter", "filter_c", "filter_as"] {
        assert_passes(module, "filter", "cases/filter.json");
    }
}

#[test]
fn the_metrics_plugin_passes_in_rust_c_and_assemblyscript() {
    for module in ["metrics", "metrics_c", "metrics_as"] {
        assert_passes(module, "metrics", "cases/metrics.json");
        let r = check(module, "metrics", "cases/metrics.json");
        for name in ["reply tables read correctly", "metrics named as declared"] {
            assert_eq!(
                r.get(name).map(|c| c.status),
                Some(Status::Pass),
                "{module} {name}:\n{r}"
            );
        }
    }
}

#[test]
fn the_templates_pass_in_rust_c_and_assemblyscript() {
    assert_passes(
        "template",
        "template",
        "../../examples/plugin-template-c/cases.json",
    );
    assert_passes(
        "template_c",
        "template",
        "../../examples/plugin-template-c/cases.json",
    );
    assert_passes(
        "template_as",
        "template",
        "../../examples/plugin-template-as/cases.json",
    );
}

#[test]
fn a_plugin_that_breaks_its_cases_fails_with_the_difference() {
    let mut c = cases("cases/filter.json");
    c.cases.truncate(1);
    c.cases[0].expect = tessera_conformance::cases::Expect::Deny {
        deny: "ERR something else".into(),
    };
    let config = c.config.as_ref().expect("config").to_string();
    let mut opts = Options::new("filter", config);
    opts.cases = Some(c);
    let r = run("filter_c", &wasm("filter_c"), &opts);
    assert!(!r.passed(), "{r}");
    let text = r.to_string();
    assert!(
        text.contains("FAIL  the plugin's own cases")
            && text.contains("FLUSHALL: expected Deny { deny: \"ERR something else\" }, got deny \"ERR command 'FLUSHALL' is not allowed\""),
        "{text}"
    );
}

/// The faulty plugin in `mode` (misbehaving on keys under `boom`).
fn faulty(mode: &str) -> Report {
    faulty_with(mode, "", Options::new("faulty", ""))
}

/// `extra`: more config members (`,"fault_prefix":"…"`).
fn faulty_with(mode: &str, extra: &str, mut opts: Options) -> Report {
    opts.config = format!(r#"{{"mode":"{mode}","key_prefix":"boom"{extra}}}"#).into_bytes();
    run("faulty", &wasm("faulty"), &opts)
}

fn failed_with(r: &Report, check: &str, words: &[&str]) {
    let c = r
        .get(check)
        .unwrap_or_else(|| panic!("{check} missing:\n{r}"));
    assert_eq!(c.status, Status::Fail, "{check}:\n{r}");
    let details = c.details.join("\n");
    for w in words {
        assert!(details.contains(w), "{check} should say {w:?}:\n{r}");
    }
    assert!(r.to_string().contains("result: FAIL"), "{r}");
}

#[test]
fn a_trapping_plugin_fails_and_the_report_names_the_call_and_the_containment() {
    let r = faulty("trap");
    failed_with(
        &r,
        "no call faults",
        &[
            "on_command SET boomk v → trap: unreachable (the plugin panicked)",
            "a fresh instance was created for the next call",
        ],
    );
    // The faults show where they happened too.
    failed_with(&r, "hooks called as declared", &["GET boomk: no answer"]);

    // Trapping only on binary keys (`boom\0…`): the commands it answered before are answered
    // the same by the fresh instance after each trap.
    let r = faulty_with(
        "trap",
        r#","fault_prefix":"boom\u0000""#,
        Options::new("faulty", ""),
    );
    failed_with(
        &r,
        "awkward arguments",
        &["GET boom\\x00\\xff: no answer (failed: trap: unreachable"],
    );
    failed_with(
        &r,
        "no call faults",
        &["the next command got a fresh instance, which answered as before"],
    );
    assert_eq!(
        r.get("hooks called as declared").map(|c| c.status),
        Some(Status::Pass),
        "{r}"
    );
}

#[test]
fn a_looping_plugin_fails_on_its_cpu_budget() {
    failed_with(&faulty("loop"), "no call faults", &["CPU budget exceeded"]);
}

#[test]
fn a_memory_hungry_plugin_fails_on_its_memory_limit() {
    // A generous CPU budget: filling 16 MiB chunk by chunk must end at the memory cap.
    let mut opts = Options::new("faulty", "");
    opts.limits.cpu_budget_ms = 2000;
    failed_with(
        &faulty_with("oom", "", opts),
        "no call faults",
        &[
            "on_command SET boomk v → memory limit of 16 MiB exceeded",
            "a fresh instance was created for the next call",
        ],
    );
}

#[test]
fn a_plugin_that_traps_on_replies_fails_the_reply_check() {
    let r = faulty("reply-trap");
    failed_with(&r, "reply tables read correctly", &["no answer"]);
    failed_with(&r, "no call faults", &["on_reply +OK", "unreachable"]);
}

#[test]
fn a_plugin_that_cannot_load_fails_at_once_with_the_runtimes_reason() {
    let r = faulty("refuse");
    failed_with(
        &r,
        "module loads",
        &["refused its config: faulty: refusing this config"],
    );
    assert_eq!(r.checks.len(), 1, "{r}");
    let r = faulty("init-trap");
    failed_with(&r, "module loads", &["failed in init"]);
    let r = run("empty", b"\0asm\x01\0\0\0", &Options::new("empty", "{}"));
    failed_with(&r, "module loads", &["not a Tessera plugin"]);
}

#[test]
fn the_well_behaved_faulty_mode_passes() {
    // The same module in its baseline mode: what fails above is the behaviour, not the module.
    let r = faulty("ok");
    assert!(r.passed(), "{r}");
    assert_eq!(
        r.get("hooks called as declared").map(|c| c.status),
        Some(Status::Pass)
    );
}
