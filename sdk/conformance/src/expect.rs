//! The checks against a plugin's own declarations: its exports against its manifest, the
//! manifest stable across instances, the metrics it defines against those it declares, and the
//! cases of its cases file.

use std::collections::BTreeSet;

use tessera_wasm::{CmdOutcome, Hooks};

use crate::calls::reply_word;
use crate::cases::{Cases, Expect, ReplyExpect};
use crate::corpus::Described;
use crate::host::{Host, describe};
use crate::report::Report;

/// What the manifest says, in a line.
pub fn summary(h: &Hooks) -> String {
    let mut parts = Vec::new();
    if h.all {
        parts.push("every command".to_owned());
    }
    let names = h.command_names();
    if !names.is_empty() {
        parts.push(format!("commands {}", names.join(" ")));
    }
    if h.classes != 0 {
        let classes: Vec<&str> = tessera_plugin_abi::class::NAMES
            .iter()
            .filter(|(_, b)| h.classes & b != 0)
            .map(|(n, _)| *n)
            .collect();
        parts.push(format!("classes {}", classes.join(" ")));
    }
    if !h.prefixes.is_empty() {
        let p: Vec<String> = h
            .prefixes
            .iter()
            .map(|p| format!("{:?}", String::from_utf8_lossy(p)))
            .collect();
        parts.push(format!("keys under {}", p.join(" ")));
    }
    if parts.is_empty() {
        parts.push("nothing".into());
    }
    format!("hooks {}", parts.join("; "))
}

/// The module exports what its manifest relies on: `tp_on_close` when it asks for closes,
/// `tp_on_tick` when it asks for ticks (the host would otherwise never call them).
pub fn exports(h: &Host, wasm: &[u8], r: &mut Report) {
    let names: BTreeSet<String> = match wasmtime::Module::new(h.runtime.engine(), wasm) {
        Ok(m) => m.exports().map(|e| e.name().to_owned()).collect(),
        Err(e) => {
            r.check("exports match the manifest", vec![format!("{e:#}")], vec![]);
            return;
        }
    };
    let hooks = h.hooks();
    let mut problems = Vec::new();
    let export = tessera_plugin_abi::export::ON_CLOSE;
    if hooks.want_close && !names.contains(export) {
        problems.push(format!(
            "the manifest asks for on_close but {export} is not exported"
        ));
    }
    let export = tessera_plugin_abi::export::ON_TICK;
    if hooks.tick_ms > 0 && !names.contains(export) {
        problems.push(format!(
            "the manifest asks for a tick but {export} is not exported"
        ));
    }
    let batch = names.contains(tessera_plugin_abi::export::ON_COMMANDS);
    r.check(
        "exports match the manifest",
        problems,
        vec![format!(
            "tp_on_commands (batches): {}",
            if batch {
                "exported"
            } else {
                "absent (one call per command)"
            }
        )],
    );
}

/// `init` gives the same manifest every time: each worker's instance runs its own `init`, and
/// the proxy compiles the hooks once, from the first.
pub fn stable_manifest(
    h: &Host,
    wasm: &[u8],
    config: &[u8],
    l: &crate::host::Limits,
    r: &mut Report,
) {
    let name = h.generation.name().to_owned();
    let problems = match Host::load(&name, wasm, config, l) {
        Ok(again) if again.hooks() == h.hooks() => vec![],
        Ok(again) => vec![format!(
            "first {}; then {}",
            summary(h.hooks()),
            summary(again.hooks())
        )],
        Err(e) => vec![format!("a second load failed: {e}")],
    };
    r.check("manifest is the same on every load", problems, vec![]);
}

/// The metrics the plugin defined, as `(name, kind)` from its Prometheus text.
fn defined(h: &Host) -> BTreeSet<(String, String)> {
    let mut text = String::new();
    let plugin = h.generation.name();
    h.generation.shared.metrics.render(plugin, &mut text);
    let prefix = format!("# TYPE tessera_plugin_{}_", plugin.replace('-', "_"));
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, k)| (n.to_owned(), k.to_owned()))
        .collect()
}

/// Metrics named as declared: every metric the plugin defines is exported as
/// `tessera_plugin_<plugin>_<name>`; with declarations (cases file), exactly those, of those
/// kinds; the definitions do not grow with more instances (each instance defines the same).
pub fn metrics(h: &Host, cases: Option<&Cases>, r: &mut Report) {
    const NAME: &str = "metrics named as declared";
    let got = defined(h);
    let mut problems = Vec::new();
    let shown: Vec<String> = got.iter().map(|(n, k)| format!("{n} ({k})")).collect();
    match cases.and_then(|c| c.metrics.as_ref()) {
        Some(declared) => {
            let want: BTreeSet<(String, String)> = declared
                .iter()
                .map(|m| (m.name.clone(), m.kind.clone()))
                .collect();
            for (n, k) in want.difference(&got) {
                problems.push(format!("declared {n} ({k}) is not defined"));
            }
            for (n, k) in got.difference(&want) {
                problems.push(format!("{n} ({k}) is defined but not declared"));
            }
        }
        None if got.is_empty() => {
            r.skip(NAME, "the plugin defines no metric");
            return;
        }
        None => {}
    }
    r.check(
        NAME,
        problems,
        vec![format!(
            "exported as tessera_plugin_{}_<name>: {}",
            h.generation.name(),
            if shown.is_empty() {
                "none".into()
            } else {
                shown.join(", ")
            }
        )],
    );
}

/// The cases file's commands, in order, on one instance of a runtime of their own (so the
/// samples count only them), then its samples.
pub fn cases(h: &mut Host, cases: &Cases, r: &mut Report) {
    const NAME: &str = "the plugin's own cases";
    if cases.cases.is_empty() && cases.samples.is_empty() {
        r.skip(NAME, "the cases file has none");
        return;
    }
    let mut problems = Vec::new();
    for c in &cases.cases {
        let Some(d) = Described::new(&c.command) else {
            problems.push(format!(
                "{:?}: the proxy refuses this command itself",
                c.command
            ));
            continue;
        };
        let got = h.command(c.conn, &d);
        let ok = match (&c.expect, &got) {
            (Expect::Word(w), None) => w == "not-hooked",
            (_, None) => false,
            (_, Some(Err(_))) => false,
            (Expect::Word(w), Some(Ok(o))) => {
                matches!(
                    (w.as_str(), o),
                    ("pass", CmdOutcome::Pass)
                        | ("observe", CmdOutcome::Observe(_))
                        | ("rewrite", CmdOutcome::Rewrite { .. })
                )
            }
            (Expect::Deny { deny }, Some(Ok(CmdOutcome::Deny(t)))) => t == deny.as_bytes(),
            (Expect::Reply { reply }, Some(Ok(CmdOutcome::Reply(b)))) => b == reply.as_bytes(),
            _ => false,
        };
        let shown = match &got {
            None => "not hooked".to_owned(),
            Some(Ok(o)) => describe(o),
            Some(Err(e)) => format!("no answer ({e})"),
        };
        if !ok {
            problems.push(format!(
                "{}: expected {:?}, got {shown}",
                d.label(),
                c.expect
            ));
            continue;
        }
        let Some(Ok(CmdOutcome::Observe(ctx))) = got else {
            continue;
        };
        let reply = c.reply.clone().unwrap_or_else(|| "+OK\r\n".into());
        let answer = h.reply(c.conn, ctx, &[reply.as_bytes()]);
        let Some(want) = &c.then else { continue };
        let fine = match (want, &answer) {
            (ReplyExpect::Word(w), Some(tessera_wasm::ReplyOutcome::Pass)) => w == "pass",
            (ReplyExpect::Replace { replace }, Some(tessera_wasm::ReplyOutcome::Replace(b))) => {
                b == replace.as_bytes()
            }
            (ReplyExpect::Error { error }, Some(tessera_wasm::ReplyOutcome::Error(t))) => {
                t == error.as_bytes()
            }
            _ => false,
        };
        if !fine {
            let shown = answer.as_ref().map_or("no answer".into(), reply_word);
            problems.push(format!(
                "{} → reply: expected {want:?}, got {shown}",
                d.label()
            ));
        }
    }
    let mut text = String::new();
    let plugin = h.generation.name().to_owned();
    h.generation.shared.metrics.render(&plugin, &mut text);
    let prefix = format!("tessera_plugin_{}_", plugin.replace('-', "_"));
    for (series, want) in &cases.samples {
        let line = format!("{prefix}{series} ");
        let got = text
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.trim().parse::<f64>().ok());
        if got != Some(*want) {
            problems.push(format!("{prefix}{series}: expected {want}, got {got:?}"));
        }
    }
    r.check(
        NAME,
        problems,
        vec![format!(
            "{} commands, {} samples",
            cases.cases.len(),
            cases.samples.len()
        )],
    );
}
