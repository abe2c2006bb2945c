//! What the metrics history samples each second, and how counters become rates: every
//! proxy's stats (`stats`: commands, errors, sessions, latency buckets), every enabled
//! plugin's samples, and the servers' memory and replication offsets the health checks read.
//! Counters are followed per proxy: a rate is a proxy's increase over the time since its
//! last answer, so a proxy that missed some seconds adds its mean over them (no spike when it
//! answers again), and one whose counter went back (restarted, a plugin reloaded) adds its
//! count since that start over its uptime (never a negative rate).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_model::clock::now_ms;
use tessera_wire::cluster::ProxyStatsEntry;
use tessera_wire::history::SeriesKind;
use tessera_wire::telemetry::LATENCY_BUCKETS_US;

use super::Dashboard;
use super::history::{Agg, COMMAND_SERIES_CAP, Point};

/// A proxy not heard from for this long is forgotten (its counters start over if it returns).
const FORGET_AFTER: Duration = Duration::from_secs(300);
/// How often the catalog is read again for the plugins to sample.
const CATALOG_EVERY: Duration = Duration::from_secs(10);

/// A proxy's counters at its last answer.
struct Seen {
    at: Instant,
    values: HashMap<String, f64>,
}

/// The sampler's memory of each proxy's counters, by token.
#[derive(Default)]
pub(crate) struct Counters {
    proxies: Mutex<HashMap<String, Seen>>,
}

/// A proxy's answer of one second: its counters by series id and its uptime.
struct Reading<'a> {
    token: &'a str,
    uptime_secs: u64,
    counters: Vec<(String, f64)>,
}

impl Counters {
    /// Each counter's rate (per second) summed over the proxies read now.
    fn rates(&self, now: Instant, readings: Vec<Reading<'_>>) -> BTreeMap<String, f64> {
        let mut st = self.proxies.lock().expect("counters lock poisoned");
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        for r in readings {
            let prev = st.get(r.token);
            let mut values = HashMap::with_capacity(r.counters.len());
            for (id, v) in r.counters {
                let rate = prev.map(|p| {
                    // A proxy lists a command once it was called: one it did not list at its
                    // last answer had been called 0 times. A plugin's series may have been
                    // counting before its plugin was sampled: it has no rate yet.
                    let last = p.values.get(&id).copied();
                    let last = last.or((!id.starts_with("plugin:")).then_some(0.0));
                    rate(last, v, now - p.at, r.uptime_secs)
                });
                *out.entry(id.clone()).or_default() += rate.unwrap_or(0.0);
                values.insert(id, v);
            }
            st.insert(r.token.to_owned(), Seen { at: now, values });
        }
        st.retain(|_, s| now - s.at < FORGET_AFTER);
        out
    }
}

/// The rate of a counter read `now` after `prev` (`elapsed` before): its increase over the
/// time; a counter that went back counts from its new start over the proxy's uptime; one
/// without an earlier reading has no rate yet (0).
fn rate(prev: Option<f64>, now: f64, elapsed: Duration, uptime_secs: u64) -> f64 {
    let secs = elapsed.as_secs_f64().max(0.001);
    match prev {
        Some(p) if now >= p => (now - p) / secs,
        // Went back: restarted (or reloaded) since; its mean since then, never negative.
        Some(_) => now.max(0.0) / secs.max(uptime_secs as f64),
        None => 0.0,
    }
}

/// The latency below which fraction `q` of the commands counted in `buckets` (one per
/// bound of `LATENCY_BUCKETS_US`, then over the last) fell, in seconds, interpolated within
/// its bucket; `None` for no commands.
pub(crate) fn percentile(buckets: &[f64], q: f64) -> Option<f64> {
    let total: f64 = buckets.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut below = 0.0;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0.0 && below + n >= rank {
            let lo = if i == 0 { 0 } else { LATENCY_BUCKETS_US[i - 1] };
            let Some(&hi) = LATENCY_BUCKETS_US.get(i) else {
                // Over the last bound: the bound is all that is known.
                return Some(*LATENCY_BUCKETS_US.last()? as f64 / 1e6);
            };
            let within = ((rank - below) / n).clamp(0.0, 1.0);
            return Some((lo as f64 + within * (hi - lo) as f64) / 1e6);
        }
        below += n;
    }
    Some(*LATENCY_BUCKETS_US.last()? as f64 / 1e6)
}

fn gauge(id: String, label: String, unit: &'static str, group: &str, value: f64) -> Point {
    Point {
        id,
        label,
        unit,
        kind: SeriesKind::Gauge,
        group: group.into(),
        agg: Agg::Mean,
        value,
    }
}

fn rate_point(id: String, label: String, unit: &'static str, group: &str, value: f64) -> Point {
    Point {
        kind: SeriesKind::Rate,
        ..gauge(id, label, unit, group, value)
    }
}

/// Whether a plugin's sample counts up (Prometheus' names: a counter's `_total`, a
/// histogram's `_count` and `_sum`); the others are levels.
fn is_counter(name: &str) -> bool {
    name.ends_with("_total") || name.ends_with("_count") || name.ends_with("_sum")
}

/// A plugin sample's series id part: its name and labels, `name{k=v,…}`.
fn sample_key(name: &str, labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return name.to_owned();
    }
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name}{{{}}}", l.join(","))
}

/// A plugin series' id: `plugin:<name>:<key>`, `%` and `,` escaped (`?series=` is
/// comma-separated).
fn series_id(plugin: &str, key: &str) -> String {
    format!(
        "plugin:{plugin}:{}",
        key.replace('%', "%25").replace(',', "%2C")
    )
}

impl Dashboard {
    /// One second's points.
    async fn sample_history(&self, plugins: &[String]) -> Vec<Point> {
        let mut points = Vec::new();
        let stats = self.fresh_stats().await.ok();
        let plugin_samples =
            futures_util::future::join_all(plugins.iter().map(|n| self.plugin_samples(n))).await;
        let now = Instant::now();
        let addr_of: HashMap<String, String> = {
            let st = self.state.lock().expect("state lock poisoned");
            st.known
                .values()
                .map(|p| (p.token.clone(), p.addr.clone()))
                .collect()
        };
        let mut readings: HashMap<&str, Reading<'_>> = HashMap::new();
        let mut sessions = 0.0;
        // The busiest commands get a series each.
        let top: Vec<&str> = stats
            .iter()
            .flat_map(|s| s.commands.iter().take(COMMAND_SERIES_CAP))
            .map(|c| c.command.as_str())
            .collect();
        if let Some(stats) = &stats {
            for p in &stats.proxies {
                let ProxyStatsEntry::Answered(s) = p else {
                    continue;
                };
                sessions += s.sessions as f64;
                let mut c = vec![
                    ("ops".to_owned(), s.ops_total as f64),
                    ("errors".to_owned(), s.errors_total as f64),
                ];
                // Named by its address (once the health round has remembered it), never by token.
                if let Some(addr) = addr_of.get(&s.token) {
                    c.push((format!("proxy:{addr}"), s.ops_total as f64));
                }
                // Every command is followed (one entering the busiest keeps its rate right);
                // only the busiest get a series.
                for cmd in &s.commands {
                    c.push((format!("cmd:{}", cmd.command), cmd.calls as f64));
                }
                for (i, n) in s.latency_buckets.iter().enumerate() {
                    c.push((format!("lat:{i}"), *n as f64));
                }
                readings.insert(
                    &s.token,
                    Reading {
                        token: &s.token,
                        uptime_secs: s.uptime_secs,
                        counters: c,
                    },
                );
            }
        }
        // Plugins' counters are followed per proxy too; their levels are summed.
        let mut levels: BTreeMap<String, (String, String, f64)> = BTreeMap::new();
        for (name, per_proxy) in plugins.iter().zip(&plugin_samples) {
            for (token, samples) in per_proxy.iter().flatten() {
                for s in samples {
                    let key = sample_key(&s.name, &s.labels);
                    // `?series=` is comma-separated: an id holds no comma.
                    let id = series_id(name, &key);
                    if is_counter(&s.name) {
                        if let Some(r) = readings.get_mut(token.as_str()) {
                            r.counters.push((id, s.value));
                        }
                    } else {
                        levels
                            .entry(id)
                            .or_insert_with(|| (format!("plugin:{name}"), key, 0.0))
                            .2 += s.value;
                    }
                }
            }
        }
        let rates = self
            .history_counters
            .rates(now, readings.into_values().collect());
        let mut buckets = vec![0.0; LATENCY_BUCKETS_US.len() + 1];
        for (id, r) in rates {
            if let Some(i) = id
                .strip_prefix("lat:")
                .and_then(|i| i.parse::<usize>().ok())
            {
                if let Some(b) = buckets.get_mut(i) {
                    *b = r;
                }
            } else if id == "ops" {
                points.push(rate_point(id, "all commands".into(), "ops/s", "ops", r));
            } else if id == "errors" {
                points.push(rate_point(id, "errors".into(), "errors/s", "errors", r));
            } else if let Some(cmd) = id.strip_prefix("cmd:")
                && top.contains(&cmd)
            {
                let label = cmd.to_ascii_uppercase();
                points.push(rate_point(id.clone(), label, "ops/s", "commands", r));
            } else if let Some(addr) = id.strip_prefix("proxy:") {
                let label = format!("proxy {addr}");
                points.push(rate_point(id.clone(), label, "ops/s", "proxies", r));
            } else if let Some(rest) = id.strip_prefix("plugin:") {
                let (name, key) = rest.split_once(':').unwrap_or((rest, ""));
                let group = format!("plugin:{name}");
                let label = key.replace("%2C", ",").replace("%25", "%");
                points.push(rate_point(id.clone(), label, "/s", &group, r));
            }
        }
        for (q, name) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")] {
            if let Some(v) = percentile(&buckets, q) {
                let p = Point {
                    agg: Agg::Max,
                    ..gauge(format!("latency:{name}"), name.into(), "s", "latency", v)
                };
                points.push(p);
            }
        }
        if stats.is_some() {
            points.push(gauge(
                "sessions".into(),
                "client sessions".into(),
                "sessions",
                "sessions",
                sessions,
            ));
        }
        for (id, (group, key, v)) in levels {
            points.push(gauge(id, key, "", &group, v));
        }
        points.extend(self.server_points());
        points
    }

    /// Each group's memory (its master's) and replication lag (its furthest replica's bytes
    /// behind the master), from the last health round.
    fn server_points(&self) -> Vec<Point> {
        let st = self.state.lock().expect("state lock poisoned");
        let mut out = Vec::new();
        for g in st.groups.values() {
            let Some(master) = g.master() else { continue };
            let Some(mh) = st.servers.get(master).filter(|h| h.up) else {
                continue;
            };
            if let Some(bytes) = mh.memory_bytes {
                out.push(gauge(
                    format!("memory:{}", g.id),
                    format!("group {}", g.id),
                    "bytes",
                    "memory",
                    bytes as f64,
                ));
            }
            let lag = g
                .servers
                .iter()
                .filter(|s| s.addr != master)
                .filter_map(|s| st.servers.get(&s.addr)?.repl_offset)
                .filter_map(|o| Some(super::views::lag_of((mh.repl_offset?, o))))
                .max();
            if let Some(lag) = lag {
                out.push(gauge(
                    format!("lag:{}", g.id),
                    format!("group {}", g.id),
                    "bytes",
                    "lag",
                    lag as f64,
                ));
            }
        }
        out
    }
}

/// How long after each whole second the sample is taken: half a second either way before a
/// round that starts late or early lands in another second.
const PHASE_MS: u64 = 500;

/// How long until the next sampling time (`PHASE_MS` past a whole unix second).
fn until_next(now_ms: u64) -> Duration {
    let into = (now_ms + 1000 - PHASE_MS) % 1000;
    Duration::from_millis(1000 - into)
}

/// The sampling loop: a point per unix second, taken half-way through it (so a round that
/// starts a little late still lands in its own second; after one that takes over a second,
/// the next round's rates, means over the time since, fill the seconds it skipped:
/// `MetricsHistory::record`).
pub(super) async fn run(d: Arc<Dashboard>) {
    let mut plugins: Vec<String> = Vec::new();
    let mut catalog_read: Option<Instant> = None;
    loop {
        tokio::time::sleep(until_next(now_ms())).await;
        if catalog_read.is_none_or(|t| t.elapsed() >= CATALOG_EVERY) {
            if let Ok(cat) = d.plugins().await {
                plugins = cat
                    .plugins
                    .into_iter()
                    .filter(|e| e.enabled)
                    .map(|e| e.name)
                    .collect();
            }
            catalog_read = Some(Instant::now());
        }
        // The second the round started in (its answers may arrive in the next).
        let second = now_ms() / 1000;
        let points = d.sample_history(&plugins).await;
        d.history.record(second, points);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_taken_half_way_through_each_second() {
        assert_eq!(until_next(10_000), Duration::from_millis(500));
        assert_eq!(until_next(10_499), Duration::from_millis(1));
        assert_eq!(until_next(10_500), Duration::from_millis(1000));
        assert_eq!(until_next(10_900), Duration::from_millis(600));
    }

    #[test]
    fn a_rate_is_never_negative_and_a_restart_does_not_spike() {
        let s = Duration::from_secs(1);
        assert_eq!(rate(Some(100.0), 150.0, s, 1000), 50.0);
        // Restarted 10 s ago with 40 counted since: its mean, not 40 in a second nor -60.
        assert_eq!(rate(Some(100.0), 40.0, s, 10), 4.0);
        // Missed 10 s: the mean over them.
        assert_eq!(
            rate(Some(0.0), 1000.0, Duration::from_secs(10), 1000),
            100.0
        );
        assert_eq!(rate(None, 5000.0, s, 1000), 0.0);
    }

    #[test]
    fn counters_of_a_proxy_that_restarts_give_no_negative_rate() {
        let c = Counters::default();
        let t0 = Instant::now();
        let read = |v: f64, up: u64| {
            vec![Reading {
                token: "a",
                uptime_secs: up,
                counters: vec![("ops".into(), v)],
            }]
        };
        c.rates(t0, read(1000.0, 100));
        let r = c.rates(t0 + Duration::from_secs(1), read(1100.0, 101));
        assert_eq!(r["ops"], 100.0);
        let r = c.rates(t0 + Duration::from_secs(2), read(3.0, 1));
        assert!(r["ops"] >= 0.0 && r["ops"] <= 3.0, "{}", r["ops"]);
        // A command first called since the last answer: all its calls are in this second.
        let r = c.rates(
            t0 + Duration::from_secs(3),
            vec![Reading {
                token: "a",
                uptime_secs: 2,
                counters: vec![("ops".into(), 10.0), ("cmd:get".into(), 7.0)],
            }],
        );
        assert_eq!(r["cmd:get"], 7.0);
    }

    #[test]
    fn a_plugin_series_id_holds_no_comma() {
        let labels: BTreeMap<String, String> = [
            ("command".into(), "get".into()),
            ("tenant".into(), "a,b%".into()),
        ]
        .into();
        let key = sample_key("commands_total", &labels);
        assert_eq!(key, "commands_total{command=get,tenant=a,b%}");
        assert!(!series_id("m", &key).contains(','));
        assert_eq!(
            series_id("m", &key),
            "plugin:m:commands_total{command=get%2Ctenant=a%2Cb%25}"
        );
    }

    #[test]
    fn percentiles_interpolate_within_their_bucket() {
        let mut b = vec![0.0; LATENCY_BUCKETS_US.len() + 1];
        assert_eq!(percentile(&b, 0.5), None);
        // 100 commands between 100 and 250 µs.
        b[2] = 100.0;
        let p50 = percentile(&b, 0.5).unwrap();
        assert!((p50 - 175e-6).abs() < 1e-9, "{p50}");
        b[12] = 1.0;
        assert_eq!(percentile(&b, 0.999), Some(1.0));
    }
}
