//! `tessera admin plugin canary ...`: a candidate version of a plugin run by a share of the
//! proxies first (docs/plugins.md, "Canary rollout"): start or change it, see stable and
//! canary side by side, promote or roll back. Only sends the calls and renders the answers.

use clap::Subcommand;
use reqwest::Method;

use super::Reply;
use super::client::{Client, NOTHING, Send};
use super::plugin_view::{duration_text, read_config, render};
use super::table::{Table, grouped};
use tessera_wire::plugin_canary::{CANARY, CanaryStart, STABLE};
use tessera_wire::plugins::TrackMetrics;
use tessera_wire::plugins::{ListedPlugin, PluginEntry, PluginMetrics};

/// `tessera admin plugin canary ...`
#[derive(Subcommand, Debug)]
pub enum CanaryCmd {
    /// Start a canary, or change the running one: a candidate module and/or config, and the
    /// share of proxies that run it.
    Start {
        name: String,
        /// The candidate's .wasm file (left out: the running canary's, or the stable module).
        #[arg(long)]
        module: Option<std::path::PathBuf>,
        /// The share of proxies that run the candidate, 0-100 (by a hash of each proxy's address).
        #[arg(long)]
        percent: Option<u32>,
        /// Proxies (client addresses) that run the candidate whatever the percentage; repeat or comma-separate.
        #[arg(long = "proxy", value_delimiter = ',')]
        proxies: Option<Vec<String>>,
        /// A JSON file with the candidate's config.
        #[arg(long, conflicts_with = "inline")]
        file: Option<std::path::PathBuf>,
        /// The candidate's config as inline JSON.
        #[arg(long)]
        inline: Option<String>,
        /// The candidate's fail policy: open or closed.
        #[arg(long)]
        fail: Option<String>,
        #[arg(long)]
        cpu_budget_ms: Option<u64>,
        #[arg(long)]
        memory_mb: Option<usize>,
        #[arg(long)]
        max_input_kb: Option<usize>,
    },
    /// The canary and the plugin's metrics, stable and canary side by side.
    Status { name: String },
    /// Make the candidate the plugin's version on every proxy.
    Promote { name: String },
    /// Clear the canary: every proxy runs the stable version again.
    Rollback { name: String },
}

/// `tessera admin plugin canary status`'s answer.
#[derive(serde::Serialize)]
struct Status {
    plugin: PluginEntry,
    metrics: PluginMetrics,
}

pub(super) async fn run(c: &Client, cmd: CanaryCmd) -> anyhow::Result<Reply> {
    match cmd {
        CanaryCmd::Start {
            name,
            module,
            percent,
            proxies,
            file,
            inline,
            fail,
            cpu_budget_ms,
            memory_mb,
            max_input_kb,
        } => {
            let body = CanaryStart {
                config: read_config(file, inline)?,
                fail,
                cpu_budget_ms,
                memory_mb,
                max_input_kb,
                percent,
                proxies,
            };
            if let Some(f) = &module {
                let wasm = std::fs::read(f)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", f.display()))?;
                let path = ["api", "plugins", &name, "canary", "module"];
                let _: PluginEntry = c.call(Method::PUT, &path, Send::<()>::Wasm(wasm)).await?;
            }
            let path = ["api", "plugins", &name, "canary"];
            let v: PluginEntry = c.call(Method::POST, &path, Send::Json(&body)).await?;
            Reply::new(&v, render_entry(&v))
        }
        CanaryCmd::Status { name } => {
            let list: Vec<ListedPlugin> = c.get(&["api", "plugins"]).await?;
            let Some(plugin) = list.into_iter().map(|l| l.entry).find(|e| e.name == name) else {
                anyhow::bail!("no plugin named {name} in this cluster");
            };
            let metrics: PluginMetrics = c.get(&["api", "plugins", &name, "metrics"]).await?;
            let human = format!(
                "{}\n{}",
                render_entry(&plugin),
                side_by_side(&metrics.tracks)
            );
            Reply::new(&Status { plugin, metrics }, human)
        }
        CanaryCmd::Promote { name } => {
            let path = ["api", "plugins", &name, "canary", "promote"];
            let v: PluginEntry = c.call(Method::POST, &path, NOTHING).await?;
            Reply::new(&v, render_entry(&v))
        }
        CanaryCmd::Rollback { name } => {
            let path = ["api", "plugins", &name, "canary", "rollback"];
            let v: PluginEntry = c.call(Method::POST, &path, NOTHING).await?;
            Reply::new(&v, render_entry(&v))
        }
    }
}

/// The plugin's line, then its canary's (or that it has none).
fn render_entry(e: &PluginEntry) -> String {
    let mut out = render(&[e]);
    match &e.canary {
        None => out.push_str("no canary\n"),
        Some(c) => {
            let share = if c.proxies.is_empty() {
                format!("{} % of proxies", c.percent)
            } else {
                format!("{} % of proxies and {}", c.percent, c.proxies.join(", "))
            };
            out.push_str(&format!(
                "canary: module {} on {share}, fail {}, config {}\n",
                &c.sha256[..c.sha256.len().min(12)],
                c.fail,
                c.config
            ));
        }
    }
    out
}

/// One row per measure, one column per track (stable, then canary): proxies, calls, faults,
/// each of the plugin's own series, each hook's p99.
fn side_by_side(tracks: &[TrackMetrics]) -> String {
    let col = |name: &str| tracks.iter().find(|t| t.track == name);
    let (stable, canary) = (col(STABLE), col(CANARY));
    let mut t = Table::new(&["", STABLE, CANARY]);
    let cell =
        |t: Option<&TrackMetrics>, f: &dyn Fn(&TrackMetrics) -> String| t.map_or("-".to_owned(), f);
    t.row(vec![
        "proxies".into(),
        cell(stable, &|t| t.proxies.len().to_string()),
        cell(canary, &|t| t.proxies.len().to_string()),
    ]);
    t.row(vec![
        "module".into(),
        cell(stable, &|t| t.sha256[..t.sha256.len().min(12)].to_owned()),
        cell(canary, &|t| t.sha256[..t.sha256.len().min(12)].to_owned()),
    ]);
    t.row(vec![
        "calls".into(),
        cell(stable, &|t| grouped(t.calls)),
        cell(canary, &|t| grouped(t.calls)),
    ]);
    t.row(vec![
        "denies".into(),
        cell(stable, &|t| grouped(t.denies)),
        cell(canary, &|t| grouped(t.denies)),
    ]);
    t.row(vec![
        "faults".into(),
        cell(stable, &|t| grouped(t.faults)),
        cell(canary, &|t| grouped(t.faults)),
    ]);
    let mut series: Vec<String> = tracks
        .iter()
        .flat_map(|t| t.samples.iter().map(sample_key))
        .collect();
    series.sort();
    series.dedup();
    for key in series {
        let value = |t: &TrackMetrics| {
            t.samples
                .iter()
                .find(|s| sample_key(s) == key)
                .map_or("0".to_owned(), |s| s.value.to_string())
        };
        t.row(vec![
            key.clone(),
            cell(stable, &value),
            cell(canary, &value),
        ]);
    }
    let mut hooks: Vec<&str> = tracks
        .iter()
        .flat_map(|t| t.hooks.iter().map(|h| h.hook.as_str()))
        .collect();
    hooks.sort_unstable();
    hooks.dedup();
    for hook in hooks {
        let p99 = |t: &TrackMetrics| {
            t.hooks
                .iter()
                .find(|h| h.hook == hook)
                .map_or("-".to_owned(), |h| {
                    h.p99_seconds
                        .map_or("> 100 ms".to_owned(), |s| format!("≤ {}", duration_text(s)))
                })
        };
        t.row(vec![
            format!("{hook} p99"),
            cell(stable, &p99),
            cell(canary, &p99),
        ]);
    }
    t.render()
}

/// `name{label=value,…}`, as `plugin metrics` writes a series.
fn sample_key(s: &tessera_wire::plugins::Sample) -> String {
    let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}{{{}}}", s.name, labels.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_shows_stable_and_canary_side_by_side() {
        let tracks: Vec<TrackMetrics> = serde_json::from_value(json!([
            {"track": "stable", "sha256": "aaaaaaaaaaaaaaaa", "proxies": ["p:1", "p:2"], "calls": 10, "denies": 0, "faults": 0,
             "samples": [{"name": "denied_total", "labels": {"command": "keys"}, "value": 0.0}], "hooks": []},
            {"track": "canary", "sha256": "bbbbbbbbbbbbbbbb", "proxies": ["p:3"], "calls": 4, "denies": 3, "faults": 1,
             "samples": [{"name": "denied_total", "labels": {"command": "keys"}, "value": 3.0}], "hooks": []}
        ]))
        .unwrap();
        let out = side_by_side(&tracks);
        let row = |name: &str| {
            out.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} row: {out}"))
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(row("proxies"), ["proxies", "2", "1"]);
        assert_eq!(row("module"), ["module", "aaaaaaaaaaaa", "bbbbbbbbbbbb"]);
        assert_eq!(row("denies"), ["denies", "0", "3"]);
        assert_eq!(row("faults"), ["faults", "0", "1"]);
        assert_eq!(
            row("denied_total"),
            ["denied_total{command=keys}", "0", "3"]
        );
        // Without a canary, its column says so.
        let out = side_by_side(&tracks[..1]);
        assert!(
            out.lines()
                .any(|l| l.starts_with("calls") && l.trim_end().ends_with('-')),
            "{out}"
        );
    }
}
