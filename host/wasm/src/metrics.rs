//! Metrics a plugin defines through its imports, exported on the proxy's `/metrics` as
//! `tessera_plugin_<plugin>_<name>`. Definitions and series are per plugin (shared by every
//! worker's instance and kept across reloads); the hot path is one atomic add on a series
//! found by index.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

/// Series per plugin; a `metric_series` call beyond it fails (label cardinality guard).
pub const MAX_SERIES: usize = 10_000;
/// Series (label sets) per metric, so one metric fed client data cannot take the plugin's
/// whole budget.
pub const MAX_SERIES_PER_METRIC: usize = 1_000;
/// Metrics per plugin.
pub const MAX_METRICS: usize = 256;
/// Labels per metric.
pub const MAX_LABELS: usize = 16;
/// Longest label value, bytes: values often come from clients (command names, tenants), and
/// every one is kept and rendered on each scrape.
pub const MAX_LABEL_VALUE: usize = 128;
/// Longest help text, bytes.
pub const MAX_HELP: usize = 1024;

const DEFAULT_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

/// One sample: metric name, label pairs, value.
pub type Sample = (String, Vec<(String, String)>, f64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

#[derive(Debug)]
struct Def {
    kind: Kind,
    name: String,
    help: String,
    labels: Vec<String>,
    buckets: Vec<f64>,
}

#[derive(Debug)]
pub struct Series {
    metric: u32,
    labels: Vec<String>,
    /// Counter value, gauge value (as i64), or histogram count.
    value: AtomicI64,
    /// Histogram: sum as f64 bits, and one count per bucket.
    sum: AtomicU64,
    buckets: Box<[AtomicU64]>,
    /// The histogram's upper bounds (a copy: observing takes no lock).
    bounds: Box<[f64]>,
}

impl Series {
    pub fn counter_add(&self, delta: u64) {
        self.value.fetch_add(delta as i64, Relaxed);
    }

    pub fn gauge_set(&self, v: i64) {
        self.value.store(v, Relaxed);
    }

    pub fn gauge_add(&self, v: i64) {
        self.value.fetch_add(v, Relaxed);
    }

    pub fn observe(&self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.value.fetch_add(1, Relaxed);
        let mut cur = self.sum.load(Relaxed);
        loop {
            let next = (f64::from_bits(cur) + v).to_bits();
            match self.sum.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                Ok(_) => break,
                Err(c) => cur = c,
            }
        }
    }
}

/// Why a definition or series was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricError {
    BadArgument,
    TooMany,
}

/// One plugin's metrics.
#[derive(Debug, Default)]
pub struct PluginMetrics {
    defs: RwLock<Vec<Def>>,
    series: RwLock<SeriesTable>,
}

#[derive(Debug, Default)]
struct SeriesTable {
    all: Vec<Arc<Series>>,
    index: FxHashMap<(u32, Vec<String>), u32>,
    /// Series per metric id.
    per_metric: FxHashMap<u32, usize>,
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

impl PluginMetrics {
    /// Defines a metric, or returns the id of the same definition made earlier (every
    /// instance defines its metrics in its own `init`).
    pub fn define(
        &self,
        kind: Kind,
        name: &str,
        help: &str,
        labels: Vec<String>,
        buckets: Vec<f64>,
    ) -> Result<u32, MetricError> {
        if !valid_name(name)
            || !labels.iter().all(|l| valid_name(l))
            || labels.len() > MAX_LABELS
            || help.len() > MAX_HELP
        {
            return Err(MetricError::BadArgument);
        }
        let buckets = if kind == Kind::Histogram && buckets.is_empty() {
            DEFAULT_BUCKETS.to_vec()
        } else {
            buckets
        };
        if buckets.windows(2).any(|w| w[0] >= w[1]) || buckets.iter().any(|b| !b.is_finite()) {
            return Err(MetricError::BadArgument);
        }
        let mut defs = self.defs.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = defs.iter().position(|d| d.name == name) {
            let d = &defs[i];
            return if d.kind == kind && d.labels == labels {
                Ok(i as u32)
            } else {
                Err(MetricError::BadArgument)
            };
        }
        if defs.len() >= MAX_METRICS {
            return Err(MetricError::TooMany);
        }
        defs.push(Def {
            kind,
            name: name.to_owned(),
            help: help.to_owned(),
            labels,
            buckets,
        });
        Ok(defs.len() as u32 - 1)
    }

    /// The series of `metric` with these label values (created on first use).
    pub fn series(&self, metric: u32, values: Vec<String>) -> Result<u32, MetricError> {
        if values.iter().any(|v| v.len() > MAX_LABEL_VALUE) {
            return Err(MetricError::BadArgument);
        }
        let bounds: Box<[f64]> = {
            let defs = self.defs.read().unwrap_or_else(|p| p.into_inner());
            let d = defs.get(metric as usize).ok_or(MetricError::BadArgument)?;
            if d.labels.len() != values.len() {
                return Err(MetricError::BadArgument);
            }
            d.buckets.clone().into()
        };
        let nbuckets = bounds.len();
        let key = (metric, values);
        if let Some(&i) = self
            .series
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .index
            .get(&key)
        {
            return Ok(i);
        }
        let mut t = self.series.write().unwrap_or_else(|p| p.into_inner());
        if let Some(&i) = t.index.get(&key) {
            return Ok(i);
        }
        let in_metric = t.per_metric.get(&metric).copied().unwrap_or(0);
        if t.all.len() >= MAX_SERIES || in_metric >= MAX_SERIES_PER_METRIC {
            return Err(MetricError::TooMany);
        }
        t.per_metric.insert(metric, in_metric + 1);
        let i = t.all.len() as u32;
        t.all.push(Arc::new(Series {
            metric,
            labels: key.1.clone(),
            value: AtomicI64::new(0),
            sum: AtomicU64::new(0f64.to_bits()),
            buckets: (0..nbuckets).map(|_| AtomicU64::new(0)).collect(),
            bounds,
        }));
        t.index.insert(key, i);
        Ok(i)
    }

    /// The series with this id, for the hot path (instances cache the `Arc`).
    pub fn get(&self, series: u32) -> Option<(Arc<Series>, Kind)> {
        let s = self
            .series
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .all
            .get(series as usize)
            .cloned()?;
        let kind = self.defs.read().unwrap_or_else(|p| p.into_inner())[s.metric as usize].kind;
        Some((s, kind))
    }

    /// Appends the Prometheus text of every metric, named `tessera_plugin_<plugin>_<name>`.
    pub fn render(&self, plugin: &str, out: &mut String) {
        let defs = self.defs.read().unwrap_or_else(|p| p.into_inner());
        let series = self.series.read().unwrap_or_else(|p| p.into_inner());
        let prefix: String = plugin
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        for (m, d) in defs.iter().enumerate() {
            let name = format!("tessera_plugin_{prefix}_{}", d.name);
            let kind = match d.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let help = d.help.replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for s in series.all.iter().filter(|s| s.metric as usize == m) {
                let labels = label_text(&d.labels, &s.labels, None);
                match d.kind {
                    Kind::Counter | Kind::Gauge => {
                        let _ = writeln!(out, "{name}{labels} {}", s.value.load(Relaxed));
                    }
                    Kind::Histogram => {
                        let mut cum = 0u64;
                        for (i, b) in d.buckets.iter().enumerate() {
                            cum += s.buckets[i].load(Relaxed);
                            let l = label_text(&d.labels, &s.labels, Some(&b.to_string()));
                            let _ = writeln!(out, "{name}_bucket{l} {cum}");
                        }
                        let count = s.value.load(Relaxed);
                        let l = label_text(&d.labels, &s.labels, Some("+Inf"));
                        let _ = writeln!(out, "{name}_bucket{l} {count}");
                        let sum = f64::from_bits(s.sum.load(Relaxed));
                        let _ = writeln!(out, "{name}_sum{labels} {sum}");
                        let _ = writeln!(out, "{name}_count{labels} {count}");
                    }
                }
            }
        }
    }

    /// Samples as `(name, labels, value)`, for the admin API.
    pub fn samples(&self) -> Vec<Sample> {
        let defs = self.defs.read().unwrap_or_else(|p| p.into_inner());
        let series = self.series.read().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for s in &series.all {
            let d = &defs[s.metric as usize];
            let labels: Vec<(String, String)> = d
                .labels
                .iter()
                .cloned()
                .zip(s.labels.iter().cloned())
                .collect();
            match d.kind {
                Kind::Counter | Kind::Gauge => {
                    out.push((d.name.clone(), labels, s.value.load(Relaxed) as f64))
                }
                Kind::Histogram => {
                    out.push((
                        format!("{}_count", d.name),
                        labels.clone(),
                        s.value.load(Relaxed) as f64,
                    ));
                    out.push((
                        format!("{}_sum", d.name),
                        labels,
                        f64::from_bits(s.sum.load(Relaxed)),
                    ));
                }
            }
        }
        out
    }
}

/// A series' labels as Prometheus text, values escaped, `le` last when given.
pub(crate) fn label_text(names: &[String], values: &[String], le: Option<&str>) -> String {
    if names.is_empty() && le.is_none() {
        return String::new();
    }
    let mut s = String::from("{");
    for (i, (n, v)) in names.iter().zip(values).enumerate() {
        if i > 0 {
            s.push(',');
        }
        let v = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(s, "{n}=\"{v}\"");
    }
    if let Some(le) = le {
        if !names.is_empty() {
            s.push(',');
        }
        let _ = write!(s, "le=\"{le}\"");
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn define_series_and_render() {
        let m = PluginMetrics::default();
        let c = m
            .define(Kind::Counter, "hits", "Hits.", vec!["cmd".into()], vec![])
            .unwrap();
        assert_eq!(
            m.define(Kind::Counter, "hits", "Hits.", vec!["cmd".into()], vec![]),
            Ok(c)
        );
        assert!(m.define(Kind::Gauge, "hits", "", vec![], vec![]).is_err());
        assert!(
            m.define(Kind::Gauge, "bad-name", "", vec![], vec![])
                .is_err()
        );
        let s = m.series(c, vec!["GET".into()]).unwrap();
        assert_eq!(m.series(c, vec!["GET".into()]), Ok(s));
        assert!(m.series(c, vec![]).is_err());
        m.get(s).unwrap().0.counter_add(3);
        let h = m
            .define(Kind::Histogram, "lat", "Latency.", vec![], vec![0.1, 1.0])
            .unwrap();
        let hs = m.series(h, vec![]).unwrap();
        let (series, _) = m.get(hs).unwrap();
        series.observe(0.05);
        series.observe(5.0);
        let mut out = String::new();
        m.render("my-plugin", &mut out);
        assert!(
            out.contains("tessera_plugin_my_plugin_hits{cmd=\"GET\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("tessera_plugin_my_plugin_lat_bucket{le=\"0.1\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("tessera_plugin_my_plugin_lat_bucket{le=\"+Inf\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("tessera_plugin_my_plugin_lat_count 2\n"),
            "{out}"
        );
    }

    #[test]
    fn label_values_help_and_label_sets_are_bounded() {
        let m = PluginMetrics::default();
        let c = m
            .define(Kind::Counter, "by_key", "Keys.", vec!["key".into()], vec![])
            .unwrap();
        let long = "k".repeat(MAX_LABEL_VALUE + 1);
        assert_eq!(m.series(c, vec![long]), Err(MetricError::BadArgument));
        assert!(m.series(c, vec!["k".repeat(MAX_LABEL_VALUE)]).is_ok());
        let help = "h".repeat(MAX_HELP + 1);
        assert_eq!(
            m.define(Kind::Gauge, "g", &help, vec![], vec![]),
            Err(MetricError::BadArgument)
        );
        // One metric fed client keys stops at its own cap; another metric still gets series.
        for i in 1..MAX_SERIES_PER_METRIC {
            m.series(c, vec![format!("key{i}")]).unwrap();
        }
        assert_eq!(
            m.series(c, vec!["one more".into()]),
            Err(MetricError::TooMany)
        );
        // An existing label set is still found.
        assert!(m.series(c, vec!["key1".into()]).is_ok());
        let other = m
            .define(Kind::Counter, "other", "", vec!["x".into()], vec![])
            .unwrap();
        assert!(m.series(other, vec!["x".into()]).is_ok());
    }
}
