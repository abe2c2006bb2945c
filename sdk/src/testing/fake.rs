//! The fake host: a thread-local stand-in for every import, with the behaviour `sdk/ABI.md`
//! describes (state with TTLs and versions, token buckets on a settable clock, captured metrics
//! and logs, settable client info). Each test thread has its own; [`super::reset`] clears it.

use std::cell::RefCell;
use std::collections::HashMap;

use tessera_plugin_abi::{metric_kind, status, string_list};

use crate::host::types::{ClientInfo, Level};

/// Start of the fake wall clock (2023-11-14), in microseconds.
const EPOCH_US: u64 = 1_700_000_000_000_000;

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    version: u64,
    expires_at_ms: Option<u64>,
}

/// A metric the plugin defined.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricDef {
    /// `metric_kind::*`.
    pub kind: i32,
    /// Name as defined (without the proxy's prefix).
    pub name: String,
    /// Help text.
    pub help: String,
    /// Label names.
    pub labels: Vec<String>,
    /// Histogram bounds (empty: defaults).
    pub buckets: Vec<f64>,
}

#[derive(Debug)]
struct SeriesData {
    metric: usize,
    values: Vec<String>,
    /// Counter or gauge value.
    value: i64,
    /// Histogram observations.
    samples: Vec<f64>,
}

#[derive(Debug)]
pub(crate) struct FakeHost {
    pub(crate) clock_us: u64,
    state: HashMap<Vec<u8>, Entry>,
    next_version: u64,
    buckets: HashMap<Vec<u8>, (f64, u64)>,
    pub(crate) metrics: Vec<MetricDef>,
    series: Vec<SeriesData>,
    pub(crate) logs: Vec<(Level, String)>,
    pub(crate) log_level: Level,
    pub(crate) clients: HashMap<u64, ClientInfo>,
    pub(crate) in_init: bool,
    pub(crate) client_info_calls: u64,
}

impl Default for FakeHost {
    fn default() -> Self {
        Self {
            clock_us: EPOCH_US,
            state: HashMap::new(),
            next_version: 1,
            buckets: HashMap::new(),
            metrics: Vec::new(),
            series: Vec::new(),
            logs: Vec::new(),
            log_level: Level::Info,
            clients: HashMap::new(),
            in_init: false,
            client_info_calls: 0,
        }
    }
}

thread_local! {
    static HOST: RefCell<FakeHost> = RefCell::new(FakeHost::default());
}

/// Runs `f` on this thread's fake host.
pub(crate) fn with<R>(f: impl FnOnce(&mut FakeHost) -> R) -> R {
    HOST.with(|h| f(&mut h.borrow_mut()))
}

impl FakeHost {
    fn now_ms(&self) -> u64 {
        self.clock_us / 1000
    }

    fn live(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let now = self.now_ms();
        if self
            .state
            .get(key)
            .is_some_and(|e| e.expires_at_ms.is_some_and(|t| t <= now))
        {
            self.state.remove(key);
        }
        self.state.get_mut(key)
    }

    fn bump(&mut self) -> u64 {
        self.next_version += 1;
        self.next_version
    }

    /// The value of a counter or gauge series.
    pub(crate) fn value(&self, name: &str, values: &[&str]) -> Option<i64> {
        self.find(name, values).map(|s| s.value)
    }

    /// The observations of a histogram series.
    pub(crate) fn samples(&self, name: &str, values: &[&str]) -> Vec<f64> {
        self.find(name, values)
            .map(|s| s.samples.clone())
            .unwrap_or_default()
    }

    /// Every series of `name`: (label values, value or number of samples).
    pub(crate) fn all_series(&self, name: &str) -> Vec<(Vec<String>, i64)> {
        self.series
            .iter()
            .filter(|s| self.metrics[s.metric].name == name)
            .map(|s| {
                let v = if self.metrics[s.metric].kind == metric_kind::HISTOGRAM {
                    s.samples.len() as i64
                } else {
                    s.value
                };
                (s.values.clone(), v)
            })
            .collect()
    }

    fn find(&self, name: &str, values: &[&str]) -> Option<&SeriesData> {
        self.series
            .iter()
            .find(|s| self.metrics[s.metric].name == name && s.values == values)
    }

    pub(crate) fn state_value(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.live(key).map(|e| e.value.clone())
    }
}

fn strings(buf: &[u8]) -> Option<Vec<String>> {
    string_list(buf)
        .map(|s| s.map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect()
}

fn copy_out(value: &[u8], dst: &mut [u8]) -> i64 {
    if value.len() <= dst.len() {
        dst[..value.len()].copy_from_slice(value);
    }
    value.len() as i64
}

/// The import functions, with the signatures of `host/sys.rs`.
pub(crate) mod sys {
    use super::*;

    pub(crate) fn log(level: i32, msg: &[u8]) {
        with(|h| {
            let level = match level {
                0 => Level::Trace,
                1 => Level::Debug,
                2 => Level::Info,
                3 => Level::Warn,
                _ => Level::Error,
            };
            h.logs
                .push((level, String::from_utf8_lossy(msg).into_owned()));
        });
    }

    pub(crate) fn log_enabled(level: i32) -> i32 {
        with(|h| i32::from(level >= h.log_level as i32))
    }

    pub(crate) fn metric_define(
        kind: i32,
        name: &[u8],
        help: &[u8],
        labels: &[u8],
        buckets: &[f64],
    ) -> i64 {
        with(|h| {
            if !h.in_init {
                return status::NOT_ALLOWED;
            }
            let (Ok(name), Ok(help), Some(labels)) = (
                std::str::from_utf8(name),
                std::str::from_utf8(help),
                strings(labels),
            ) else {
                return status::BAD_ARGUMENT;
            };
            if !(0..=2).contains(&kind) || name.is_empty() {
                return status::BAD_ARGUMENT;
            }
            let def = MetricDef {
                kind,
                name: name.to_owned(),
                help: help.to_owned(),
                labels,
                buckets: buckets.to_vec(),
            };
            // Re-defining (every init does) maps onto the same metric, as the host does.
            if let Some(i) = h.metrics.iter().position(|m| m.name == def.name) {
                if h.metrics[i].kind != kind || h.metrics[i].labels != def.labels {
                    return status::BAD_ARGUMENT;
                }
                return i as i64;
            }
            h.metrics.push(def);
            (h.metrics.len() - 1) as i64
        })
    }

    pub(crate) fn metric_series(metric: i32, values: &[u8]) -> i64 {
        with(|h| {
            let Some(def) = usize::try_from(metric).ok().and_then(|m| h.metrics.get(m)) else {
                return status::NOT_FOUND;
            };
            let Some(values) = strings(values) else {
                return status::BAD_ARGUMENT;
            };
            if values.len() != def.labels.len() {
                return status::BAD_ARGUMENT;
            }
            let metric = metric as usize;
            if let Some(i) = h
                .series
                .iter()
                .position(|s| s.metric == metric && s.values == values)
            {
                return i as i64;
            }
            h.series.push(SeriesData {
                metric,
                values,
                value: 0,
                samples: Vec::new(),
            });
            (h.series.len() - 1) as i64
        })
    }

    fn update(series: i32, kinds: &[i32], f: impl FnOnce(&mut SeriesData)) {
        with(|h| {
            let Some(s) = usize::try_from(series)
                .ok()
                .and_then(|i| h.series.get_mut(i))
            else {
                panic!("fake host: update of unknown series {series}");
            };
            let kind = h.metrics[s.metric].kind;
            assert!(
                kinds.contains(&kind),
                "fake host: wrong update for a metric of kind {kind}"
            );
            f(s);
        });
    }

    pub(crate) fn counter_add(series: i32, delta: i64) {
        update(series, &[metric_kind::COUNTER], |s| s.value += delta);
    }

    pub(crate) fn gauge_set(series: i32, v: i64) {
        update(series, &[metric_kind::GAUGE], |s| s.value = v);
    }

    pub(crate) fn gauge_add(series: i32, v: i64) {
        update(series, &[metric_kind::GAUGE], |s| s.value += v);
    }

    pub(crate) fn histogram_observe(series: i32, v: f64) {
        update(series, &[metric_kind::HISTOGRAM], |s| s.samples.push(v));
    }

    pub(crate) fn state_get(key: &[u8], dst: &mut [u8]) -> i64 {
        with(|h| match h.live(key) {
            Some(e) => copy_out(&e.value, dst),
            None => status::NOT_FOUND,
        })
    }

    pub(crate) fn state_set(key: &[u8], value: &[u8], ttl_ms: i64) -> i32 {
        with(|h| {
            let version = h.bump();
            let expires_at_ms = (ttl_ms > 0).then(|| h.now_ms() + ttl_ms as u64);
            h.state.insert(
                key.to_vec(),
                Entry {
                    value: value.to_vec(),
                    version,
                    expires_at_ms,
                },
            );
            0
        })
    }

    pub(crate) fn state_delete(key: &[u8]) -> i32 {
        with(|h| {
            let existed = h.live(key).is_some();
            h.state.remove(key);
            i32::from(existed)
        })
    }

    pub(crate) fn state_incr(key: &[u8], delta: i64, ttl_ms: i64) -> i64 {
        with(|h| {
            let version = h.bump();
            let now = h.now_ms();
            let current = match h.live(key) {
                Some(e) => std::str::from_utf8(&e.value)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok()),
                None => Some(0),
            };
            let Some(current) = current else {
                return status::BAD_ARGUMENT;
            };
            let new = current.wrapping_add(delta);
            let entry = h.state.entry(key.to_vec()).or_insert_with(|| Entry {
                value: Vec::new(),
                version,
                expires_at_ms: (ttl_ms > 0).then(|| now + ttl_ms as u64),
            });
            entry.value = new.to_string().into_bytes();
            entry.version = version;
            new
        })
    }

    pub(crate) fn state_get_versioned(key: &[u8], dst: &mut [u8], version: &mut u64) -> i64 {
        with(|h| match h.live(key) {
            Some(e) => {
                *version = e.version;
                copy_out(&e.value, dst)
            }
            None => {
                *version = 0;
                status::NOT_FOUND
            }
        })
    }

    pub(crate) fn state_set_if_version(key: &[u8], value: &[u8], version: u64) -> i32 {
        with(|h| {
            let current = h.live(key).map_or(0, |e| e.version);
            if current != version {
                return 0;
            }
            let expires_at_ms = h.state.get(key).and_then(|e| e.expires_at_ms);
            let version = h.bump();
            h.state.insert(
                key.to_vec(),
                Entry {
                    value: value.to_vec(),
                    version,
                    expires_at_ms,
                },
            );
            1
        })
    }

    pub(crate) fn ratelimit_acquire(bucket: &[u8], cost: u32, per_second: u32, burst: u32) -> i32 {
        with(|h| {
            let now = h.clock_us;
            let (tokens, last) = h
                .buckets
                .entry(bucket.to_vec())
                .or_insert((f64::from(burst), now));
            let refill = (now.saturating_sub(*last)) as f64 * f64::from(per_second) / 1e6;
            *tokens = (*tokens + refill).min(f64::from(burst));
            *last = now;
            if *tokens >= f64::from(cost) {
                *tokens -= f64::from(cost);
                1
            } else {
                0
            }
        })
    }

    pub(crate) fn client_info(conn: u64, dst: &mut [u8]) -> i32 {
        with(|h| {
            h.client_info_calls += 1;
            match h.clients.get(&conn) {
                Some(c) => copy_out(&c.encode(), dst) as i32,
                None => status::NOT_FOUND as i32,
            }
        })
    }

    pub(crate) fn now_ms() -> i64 {
        with(|h| h.now_ms() as i64)
    }

    pub(crate) fn now_us() -> i64 {
        with(|h| h.clock_us as i64)
    }

    pub(crate) fn stage_us() -> i64 {
        now_us()
    }
}

/// Marks the fake host as inside `tp_init` (where `metric_define` is allowed).
pub(crate) fn set_in_init(v: bool) {
    with(|h| h.in_init = v);
}
