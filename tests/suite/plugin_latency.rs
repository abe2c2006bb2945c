//! The latency of plugin hook calls: a real metrics plugin run by two proxies of a cluster,
//! driven with commands alone and pipelined; each proxy's `/metrics` carries a valid
//! Prometheus histogram per hook (promtool agrees) whose counts match the runtime's call
//! counters and its admin API, and the dashboard merges the proxies' histograms by adding
//! buckets; by default one call in 16 of the hot hooks is timed.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use tessera_wire::plugin_hooks::{BUCKETS, HookLatency};
use tessera_wire::plugins::{PluginMetrics, ProxyPlugins};

use crate::support::{ClusterProxy, ControlPlane, Frame, metric, plugin_wasm, wait_until};

const NAME: &str = "tessera_plugin_hook_duration_seconds";

/// One hook's histogram as `/metrics` renders it.
#[derive(Debug, Default)]
struct Scraped {
    /// `(le, cumulative count)` in the order rendered.
    buckets: Vec<(String, f64)>,
    sum: f64,
    count: f64,
}

/// Every hook's histogram of `plugin` in a scrape, checked for the exposition format on the
/// way: one `# TYPE … histogram`, bounds increasing and ending at `+Inf`, cumulative counts
/// never decreasing, `+Inf` equal to `_count`, and `_sum > 0` for a hook that was called.
fn histograms(text: &str, plugin: &str) -> BTreeMap<String, Scraped> {
    let types: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("# TYPE {NAME} ")))
        .collect();
    assert_eq!(types, [format!("# TYPE {NAME} histogram")], "{text}");
    let prefix = format!("plugin=\"{plugin}\",hook=\"");
    let mut out: BTreeMap<String, Scraped> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with(NAME)) {
        let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let (name, labels) = series.split_once('{').expect("labelled");
        let Some(rest) = labels.strip_prefix(&prefix) else {
            continue;
        };
        let (hook, rest) = rest.split_once('"').expect("hook label closed");
        let h = out.entry(hook.to_owned()).or_default();
        match name.strip_prefix(NAME) {
            Some("_bucket") => {
                let le = rest
                    .strip_prefix(",le=\"")
                    .and_then(|r| r.strip_suffix("\"}"))
                    .unwrap_or_else(|| panic!("le label in {line}"));
                h.buckets.push((le.to_owned(), value));
            }
            Some("_sum") => h.sum = value,
            Some("_count") => h.count = value,
            _ => panic!("unexpected series {line}"),
        }
    }
    for (hook, h) in &out {
        assert_eq!(h.buckets.len(), BUCKETS, "{hook}: {h:?}");
        let (last, inf) = h.buckets.last().unwrap();
        assert_eq!(last, "+Inf", "{hook}: {h:?}");
        assert_eq!(*inf, h.count, "{hook}: +Inf is _count");
        let bounds: Vec<f64> = h.buckets[..BUCKETS - 1]
            .iter()
            .map(|(le, _)| le.parse().unwrap_or_else(|_| panic!("le {le}")))
            .collect();
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{hook}: {bounds:?}");
        assert!(
            h.buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{hook}: cumulative counts decrease: {h:?}"
        );
        assert!(h.count > 0.0 && h.sum > 0.0, "{hook}: {h:?}");
    }
    out
}

fn loaded_hooks(p: &ClusterProxy) -> BTreeMap<String, HookLatency> {
    let loaded: ProxyPlugins = p.admin().get("/api/proxy/plugins").ok_as();
    let plugin = loaded
        .plugins
        .into_iter()
        .find(|l| l.name == "metrics")
        .unwrap_or_else(|| panic!("metrics is loaded"));
    plugin
        .hook_latency
        .into_iter()
        .map(|h| (h.hook.clone(), h))
        .collect()
}

fn count_of(hooks: &BTreeMap<String, HookLatency>, hook: &str) -> u64 {
    hooks.get(hook).map_or(0, |h| h.count)
}

/// A cluster of two groups whose proxies (one per config text) run the metrics plugin.
fn with_metrics_plugin(configs: &[&str]) -> (ControlPlane, tempfile::TempDir) {
    let mut cp = ControlPlane::builder().servers(2).proxies(0).start();
    cp.split_over_two_groups();
    let api = cp.api();
    let wasm = std::fs::read(plugin_wasm("metrics")).unwrap();
    api.request("PUT", "/api/plugins/metrics/module", Some(&wasm))
        .ok();
    api.post("/api/plugins/metrics/enable", &json!({})).ok();
    let dir = tempfile::tempdir().unwrap();
    let opts = cp.options();
    let (cluster, store) = (opts.cluster.clone(), opts.store.clone());
    for (i, text) in configs.iter().enumerate() {
        let path = dir.path().join(format!("proxy{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let args = ["--config", path.to_str().unwrap()];
        cp.proxies
            .push(ClusterProxy::start_with_args(&cluster, &store, &args));
    }
    (cp, dir)
}

/// By default one call in 16 of a hot hook is timed, per instance, its first included: on a
/// proxy with one worker (one instance), the histogram of `on_command` holds exactly the
/// calls 1, 17, 33 … of the calls the runtime counted alone.
#[test]
fn by_default_one_hot_hook_call_in_16_is_timed() {
    let (cp, _dir) = with_metrics_plugin(&["threads = 1\n"]);
    let p = &cp.proxies[0];
    let mut c = p.raw();
    for k in 0..200 {
        assert_eq!(
            c.cmd(&["SET", &format!("sample:{k}"), "v"]),
            Frame::Simple("OK".into())
        );
    }
    let text = p.metrics();
    let counter = |name: &str| {
        metric(&text, &format!("{name}{{plugin=\"metrics\"}}"))
            .unwrap_or_else(|| panic!("{name} in {text}"))
    };
    let alone =
        counter("tessera_plugin_calls_total") - counter("tessera_plugin_batched_calls_total");
    assert!(alone >= 200.0, "{text}");
    let timed = histograms(&text, "metrics")["on_command"].count;
    assert_eq!(timed, (alone / 16.0).ceil(), "{alone} calls alone: {text}");
}

#[test]
fn every_hook_call_is_timed_into_a_histogram_on_metrics_the_admin_api_and_the_dashboard() {
    // Every call timed (`plugin_hook_sample = 1`), so the counts can be held to the runtime's.
    let (cp, _dir) = with_metrics_plugin(&["plugin_hook_sample = 1\n"; 2]);
    let api = cp.api();

    const ALONE: usize = 25;
    const PIPELINED: usize = 60;
    for (i, p) in cp.proxies.iter().enumerate() {
        let mut c = p.raw();
        for k in 0..ALONE {
            let key = format!("lat:{i}:{k}");
            assert_eq!(c.cmd(&["SET", &key, "v"]), Frame::Simple("OK".into()));
        }
        let mut bytes = Vec::new();
        for k in 0..PIPELINED {
            bytes.extend(crate::support::encode(&["GET", &format!("lat:{i}:{k}")]));
        }
        c.send(&bytes);
        for _ in 0..PIPELINED {
            assert!(c.read_frame().error().is_none());
        }
        // The connection closes here: `on_close` runs on the proxy's worker.
    }

    let mut per_proxy = Vec::new();
    for p in &cp.proxies {
        let mut scraped = BTreeMap::new();
        assert!(
            wait_until(Duration::from_secs(30), || {
                scraped = histograms(&p.metrics(), "metrics");
                scraped.contains_key("on_close")
            }),
            "on_close was timed: {scraped:?}"
        );
        let text = p.metrics();
        let scraped = histograms(&text, "metrics");
        let out = crate::dashboard_api::promtool_check(&text);
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}\n--- metrics:\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let counter = |name: &str| {
            metric(&text, &format!("{name}{{plugin=\"metrics\"}}"))
                .unwrap_or_else(|| panic!("{name} in {text}"))
        };
        let alone = scraped.get("on_command").map_or(0.0, |h| h.count);
        let batches = scraped.get("on_commands").map_or(0.0, |h| h.count);
        // One observation per guest call: a batch is one, whatever its size.
        assert_eq!(batches, counter("tessera_plugin_batches_total"), "{text}");
        assert!(batches >= 1.0, "the pipeline was batched: {text}");
        assert!(alone >= ALONE as f64, "{text}");
        // Every command reached the plugin alone or in a batch, and the batched ones are
        // counted: per-command cost is derivable.
        let batched = counter("tessera_plugin_batched_calls_total");
        assert_eq!(
            alone + batched,
            counter("tessera_plugin_calls_total"),
            "{text}"
        );
        assert!(
            batched / batches >= 2.0,
            "{batched} commands in {batches} batches"
        );
        assert!(
            scraped["on_reply"].count >= (ALONE + PIPELINED) as f64,
            "{text}"
        );

        // The admin API carries the same counts (no traffic since the scrape but ticks).
        let admin = loaded_hooks(p);
        for hook in ["on_command", "on_commands", "on_reply", "on_close"] {
            let h = &admin[hook];
            assert_eq!(h.count as f64, scraped[hook].count, "{hook}: {h:?}");
            assert_eq!(h.buckets.len(), BUCKETS);
            assert_eq!(h.buckets.iter().sum::<u64>(), h.count, "{hook}: {h:?}");
            let p50 = h.p50_seconds.expect("a p50 under 100 ms");
            let p99 = h.p99_seconds.unwrap_or(f64::INFINITY);
            assert!(p50 > 0.0 && p50 <= p99, "{hook}: {h:?}");
        }
        per_proxy.push(admin);
    }

    // The dashboard adds the proxies' buckets. Only ticks and health checks could add calls
    // meanwhile, so the merged count lies between the sums read before and after.
    let merged: PluginMetrics = api.get("/api/plugins/metrics/metrics").ok_as();
    assert_eq!(merged.proxies, 2);
    let after: Vec<_> = cp.proxies.iter().map(loaded_hooks).collect();
    for hook in ["on_command", "on_commands", "on_reply", "on_close"] {
        let m = merged
            .hooks
            .iter()
            .find(|h| h.hook == hook)
            .unwrap_or_else(|| panic!("{hook} merged: {:?}", merged.hooks));
        let before: u64 = per_proxy.iter().map(|h| count_of(h, hook)).sum();
        let later: u64 = after.iter().map(|h| count_of(h, hook)).sum();
        assert!(
            (before..=later).contains(&m.count),
            "{hook}: merged {} not in {before}..={later}",
            m.count
        );
        assert_eq!(m.buckets.iter().sum::<u64>(), m.count, "{m:?}");
        let sum_before: f64 = per_proxy
            .iter()
            .map(|h| h.get(hook).map_or(0.0, |h| h.sum_seconds))
            .sum();
        // Sums only grow; each JSON round trip of an f64 may round it by an ulp or so.
        assert!(
            m.sum_seconds >= sum_before * (1.0 - 1e-9),
            "{hook}: merged sum {} < {sum_before}",
            m.sum_seconds
        );
    }
}
