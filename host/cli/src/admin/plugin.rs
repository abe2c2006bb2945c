//! `tessera admin plugin ...`: the cluster's WebAssembly plugins (docs/plugins.md): upload,
//! configure, enable, order, remove, and their metrics. Only sends the calls and renders the
//! answers; the checks (the module's ABI, the plugin's own `init`) are the dashboard's.

use anyhow::Context;
use clap::Subcommand;
use reqwest::Method;

use super::Reply;
use super::client::{Client, NOTHING, Send};
use super::plugin_view::{duration_text, read_config, render};
use super::table::{Table, grouped};
use tessera_wire::Empty;
use tessera_wire::plugins::{
    Catalog, ListedPlugin, PluginConfigChange, PluginEntry, PluginMetrics, PluginOrder,
};

/// `tessera admin plugin ...`
#[derive(Subcommand, Debug)]
pub enum PluginCmd {
    /// The plugins in chain order, with their state.
    List,
    /// Upload (or replace) a plugin's module; a new plugin starts disabled.
    Upload {
        /// Plugin name (letters, digits, '-', '_').
        name: String,
        /// The .wasm file.
        file: std::path::PathBuf,
    },
    /// Set a plugin's config (checked by the plugin's own init first), fail policy or limits.
    Config {
        name: String,
        /// A JSON file with the config.
        #[arg(long, conflicts_with = "inline")]
        file: Option<std::path::PathBuf>,
        /// The config as inline JSON.
        #[arg(long)]
        inline: Option<String>,
        /// What the plugin's failure does to a command: open (let it through) or closed (error).
        #[arg(long)]
        fail: Option<String>,
        /// CPU time one call may use, in ms.
        #[arg(long)]
        cpu_budget_ms: Option<u64>,
        /// Memory one instance may use, in MiB.
        #[arg(long)]
        memory_mb: Option<usize>,
        /// The largest command or observed reply copied into the plugin, in KiB.
        #[arg(long)]
        max_input_kb: Option<usize>,
    },
    /// Load the plugin into every proxy.
    Enable { name: String },
    /// Unload the plugin from every proxy (it stays in the catalog).
    Disable { name: String },
    /// Set the chain order: every plugin's name, comma-separated.
    Order {
        #[arg(value_delimiter = ',')]
        names: Vec<String>,
    },
    /// Remove the plugin from every proxy and from the catalog.
    Remove { name: String },
    /// The plugin's own metrics, summed over the proxies.
    Metrics { name: String },
    /// A candidate version run by a share of the proxies first: start, status, promote, roll back.
    #[command(subcommand)]
    Canary(super::plugin_canary::CanaryCmd),
}

pub(super) async fn run(c: &Client, cmd: PluginCmd) -> anyhow::Result<Reply> {
    match cmd {
        PluginCmd::List => {
            let v: Vec<ListedPlugin> = c.get(&["api", "plugins"]).await?;
            let list: Vec<&PluginEntry> = v.iter().map(|p| &p.entry).collect();
            Reply::new(&v, render(&list))
        }
        PluginCmd::Upload { name, file } => {
            let wasm =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let path = ["api", "plugins", &name, "module"];
            let v: PluginEntry = c.call(Method::PUT, &path, Send::<()>::Wasm(wasm)).await?;
            Reply::new(&v, render(&[&v]))
        }
        PluginCmd::Config {
            name,
            file,
            inline,
            fail,
            cpu_budget_ms,
            memory_mb,
            max_input_kb,
        } => {
            let config = read_config(file, inline)?;
            let body = PluginConfigChange {
                config,
                fail,
                cpu_budget_ms,
                memory_mb,
                max_input_kb,
            };
            let path = ["api", "plugins", &name, "config"];
            let v: PluginEntry = c.call(Method::PUT, &path, Send::Json(&body)).await?;
            Reply::new(&v, render(&[&v]))
        }
        PluginCmd::Enable { name } => {
            let path = ["api", "plugins", &name, "enable"];
            let v: PluginEntry = c.call(Method::POST, &path, NOTHING).await?;
            Reply::new(&v, render(&[&v]))
        }
        PluginCmd::Disable { name } => {
            let path = ["api", "plugins", &name, "disable"];
            let v: PluginEntry = c.call(Method::POST, &path, NOTHING).await?;
            Reply::new(&v, render(&[&v]))
        }
        PluginCmd::Order { names } => {
            let body = PluginOrder { order: names };
            let v: Catalog = c
                .call(Method::PUT, &["api", "plugins", "order"], Send::Json(&body))
                .await?;
            let list: Vec<&PluginEntry> = v.plugins.iter().collect();
            Reply::new(&v, render(&list))
        }
        PluginCmd::Remove { name } => {
            let v: Empty = c
                .call(Method::DELETE, &["api", "plugins", &name], NOTHING)
                .await?;
            Reply::new(&v, render(&[]))
        }
        PluginCmd::Metrics { name } => {
            let v: PluginMetrics = c.get(&["api", "plugins", &name, "metrics"]).await?;
            Reply::new(&v, render_metrics(&v))
        }
        PluginCmd::Canary(cmd) => super::plugin_canary::run(c, cmd).await,
    }
}

/// One line per sample, as Prometheus writes it: `name{label=value,…} value`.
fn render_metrics(v: &PluginMetrics) -> String {
    let mut human = String::new();
    for s in &v.samples {
        let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // As JSON writes a number (`3.0`), the way this line always showed it.
        let value = serde_json::to_string(&s.value).unwrap_or_else(|_| s.value.to_string());
        human.push_str(&format!("{}{{{}}} {value}\n", s.name, labels.join(",")));
    }
    if !v.hooks.is_empty() {
        // The hook latency histograms, merged over the proxies (docs/plugins.md: a sample of
        // the hot hooks' calls); a percentile is its bucket's upper bound.
        let mut t = Table::new(&["HOOK", "TIMED CALLS", "P50", "P99"]);
        let bound = |s: Option<f64>| s.map_or("> 100 ms".to_owned(), duration_text);
        for h in &v.hooks {
            t.row(vec![
                h.hook.clone(),
                grouped(h.count),
                format!("≤ {}", bound(h.p50_seconds)),
                format!("≤ {}", bound(h.p99_seconds)),
            ]);
        }
        human.push('\n');
        human.push_str(&t.render());
    }
    human
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plugins_render_one_line_each_and_metrics_as_prometheus_writes_them() {
        let e: PluginEntry = serde_json::from_value(json!({
            "name": "filter", "sha256": "0123456789abcdef", "size": 2048,
            "config": {"deny_commands": ["KEYS"]}, "enabled": true, "fail": "closed",
            "updated_unix": 0
        }))
        .unwrap();
        let out = render(&[&e]);
        let line = out.lines().nth(1).unwrap();
        assert!(
            line.starts_with("filter           yes      closed  0123456789ab"),
            "{out}"
        );
        assert!(line.ends_with(r#"{"deny_commands":["KEYS"]}"#), "{out}");
        assert_eq!(render(&[]), "ok\n");
        let m: PluginMetrics = serde_json::from_value(json!({"proxies": 1, "samples": [
            {"name": "calls", "labels": {"command": "get", "tenant": "a"}, "value": 3.0}]}))
        .unwrap();
        assert_eq!(render_metrics(&m), "calls{command=get,tenant=a} 3.0\n");
        let h =
            tessera_wire::plugin_hooks::HookLatency::from_buckets("on_command", &[0, 3, 1], 2e-6);
        let m = PluginMetrics {
            hooks: vec![h],
            ..m
        };
        let out = render_metrics(&m);
        let row = out.lines().find(|l| l.starts_with("on_command")).unwrap();
        assert!(row.contains("≤ 0.5 µs") && row.contains("≤ 1 µs"), "{out}");
    }
}
