//! The metrics history: fixed-size rings of every series the dashboard samples each second
//! (`history_sample`), 1 h at 1 s and 24 h at 1 min, each minute point made from its
//! minute's seconds (the mean; the largest for a latency percentile), and the answer of
//! `GET /api/history`. Memory is bounded by the number of series: at most [`MAX_SERIES`],
//! of which at most [`PLUGIN_SERIES_CAP`] are plugins' (the busiest kept) and
//! [`COMMAND_SERIES_CAP`] commands'; each series holds two rings of `f32`
//! (`(SECONDS + MINUTES) × 4` bytes ≈ 20 KiB), so the whole history stays under 6 MiB. A series
//! not sampled for a day is dropped.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tessera_wire::history::{History, HistorySeries, SeriesInfo, SeriesKind, SeriesList};

/// Points of the per-second ring (1 h) and of the per-minute ring (24 h).
pub const SECONDS: usize = 3600;
pub const MINUTES: usize = 1440;
/// The most series kept in all, of plugins, and of commands.
pub const MAX_SERIES: usize = 256;
pub const PLUGIN_SERIES_CAP: usize = 64;
pub const COMMAND_SERIES_CAP: usize = 32;
/// The most series one query may ask for, and the longest `series` parameter.
pub const MAX_QUERY_SERIES: usize = 32;
pub const MAX_QUERY_LEN: usize = 4096;

/// The longest run of seconds without a round that a round's rates fill in (a longer stall
/// of the dashboard leaves the rest unknown).
const MAX_FILLED_GAP: u64 = 60;

/// The series an answer holds when the query names none.
const DEFAULT_SERIES: [&str; 5] = ["ops", "errors", "latency:p50", "latency:p99", "sessions"];

/// How the seconds of a minute make its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agg {
    Mean,
    Max,
}

/// What one sample of one series says: its description and its value now.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    pub id: String,
    pub label: String,
    pub unit: &'static str,
    pub kind: SeriesKind,
    pub group: String,
    pub agg: Agg,
    pub value: f64,
}

impl Point {
    fn is_plugin(&self) -> bool {
        self.id.starts_with("plugin:")
    }
}

struct Series {
    info: SeriesInfo,
    agg: Agg,
    /// Indexed by unix second % SECONDS, and by unix minute % MINUTES; NaN: no sample.
    secs: Box<[f32]>,
    mins: Box<[f32]>,
    /// The last second it was sampled at.
    seen: u64,
}

impl Series {
    fn new(p: &Point) -> Self {
        Self {
            info: SeriesInfo {
                id: p.id.clone(),
                label: p.label.clone(),
                unit: p.unit.to_owned(),
                kind: p.kind,
                group: p.group.clone(),
                recent: None,
            },
            agg: p.agg,
            secs: vec![f32::NAN; SECONDS].into_boxed_slice(),
            mins: vec![f32::NAN; MINUTES].into_boxed_slice(),
            seen: 0,
        }
    }

    /// The values of the seconds `from..to` that the ring still holds.
    fn seconds(&self, times: &[u64], from: u64, to: u64) -> impl Iterator<Item = f32> + '_ {
        let times: Vec<bool> = (from..to)
            .map(|t| times[t as usize % SECONDS] == t)
            .collect();
        (from..to)
            .zip(times)
            .filter(|(_, ok)| *ok)
            .map(|(t, _)| self.secs[t as usize % SECONDS])
            .filter(|v| !v.is_nan())
    }

    /// The point of the minute starting at `start` made from its seconds.
    fn minute(&self, times: &[u64], start: u64) -> f32 {
        let values = self.seconds(times, start, start + 60);
        aggregate(self.agg, values)
    }

    /// Mean over the last minute up to `now`.
    fn recent(&self, times: &[u64], now: u64) -> Option<f64> {
        let v = aggregate(
            Agg::Mean,
            self.seconds(times, now.saturating_sub(59), now + 1),
        );
        (!v.is_nan()).then_some(v as f64)
    }
}

fn aggregate(agg: Agg, values: impl Iterator<Item = f32>) -> f32 {
    let (mut n, mut sum, mut max) = (0u32, 0f64, f32::NAN);
    for v in values {
        n += 1;
        sum += v as f64;
        max = if max.is_nan() { v } else { max.max(v) };
    }
    match (n, agg) {
        (0, _) => f32::NAN,
        (_, Agg::Mean) => (sum / n as f64) as f32,
        (_, Agg::Max) => max,
    }
}

#[derive(Default)]
struct Inner {
    series: BTreeMap<String, Series>,
    /// The unix second each slot of the per-second rings holds (0: none), and the unix minute
    /// of each slot of the per-minute rings.
    sec_times: Vec<u64>,
    min_times: Vec<u64>,
    last: Option<u64>,
    plugin_dropped: usize,
}

/// The dashboard's metrics history.
pub struct MetricsHistory {
    inner: Mutex<Inner>,
}

impl Default for MetricsHistory {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                sec_times: vec![0; SECONDS],
                min_times: vec![u64::MAX; MINUTES],
                ..Inner::default()
            }),
        }
    }
}

/// A range of `GET /api/history`: its span and its step, in seconds.
pub fn parse_range(range: Option<&str>) -> Result<(&'static str, u64, u64), String> {
    match range.unwrap_or("5m") {
        "5m" => Ok(("5m", 300, 1)),
        "1h" => Ok(("1h", 3600, 1)),
        "6h" => Ok(("6h", 6 * 3600, 60)),
        "24h" => Ok(("24h", 24 * 3600, 60)),
        r => Err(format!(
            "unknown range {:?}: 5m, 1h, 6h or 24h",
            r.chars().take(32).collect::<String>()
        )),
    }
}

impl MetricsHistory {
    /// Records the sample of second `now` (unix). A second already recorded, or one before
    /// the last, is ignored (the clock went back).
    pub(crate) fn record(&self, now: u64, points: Vec<Point>) {
        let mut st = self.inner.lock().expect("history lock poisoned");
        if st.last.is_some_and(|l| now <= l) {
            return;
        }
        let prev = st.last;
        // Seconds no round sampled (a round took over a second): a rate read now is each
        // proxy's mean over them as well (its increase since its last answer, over that
        // time), so they get its value too and a rate's sum over time stays the count.
        // Levels stay unknown there.
        let gap = prev.map_or(now, |l| (l + 1).max(now.saturating_sub(MAX_FILLED_GAP)));
        st.last = Some(now);
        for t in gap..=now {
            st.sec_times[t as usize % SECONDS] = t;
            for s in st.series.values_mut() {
                s.secs[t as usize % SECONDS] = f32::NAN;
            }
        }
        // Series not sampled for a day go; plugins' beyond their cap, the least busy first.
        st.series
            .retain(|_, s| now.saturating_sub(s.seen) < 24 * 3600);
        let (plugins, others): (Vec<Point>, Vec<Point>) =
            points.into_iter().partition(Point::is_plugin);
        let admitted = admit_plugins(&mut st, plugins, now);
        for p in others.into_iter().chain(admitted) {
            if !st.series.contains_key(&p.id) && st.series.len() >= MAX_SERIES {
                continue;
            }
            let s = st
                .series
                .entry(p.id.clone())
                .or_insert_with(|| Series::new(&p));
            let from = if p.kind == SeriesKind::Rate { gap } else { now };
            for t in from..=now {
                s.secs[t as usize % SECONDS] = p.value as f32;
            }
            s.seen = now;
        }
        // The minutes that ended since the last sample get their points (the seconds just
        // filled in included).
        if let Some(last) = prev {
            let (from, to) = (last / 60, now / 60);
            for m in from..to.min(from + MINUTES as u64) {
                let Inner {
                    series,
                    sec_times,
                    min_times,
                    ..
                } = &mut *st;
                min_times[m as usize % MINUTES] = m;
                for s in series.values_mut() {
                    s.mins[m as usize % MINUTES] = s.minute(sec_times, m * 60);
                }
            }
        }
    }

    /// `GET /api/history/series`.
    pub fn list(&self) -> SeriesList {
        let st = self.inner.lock().expect("history lock poisoned");
        let now = st.last.unwrap_or(0);
        let mut series: Vec<SeriesInfo> = st
            .series
            .values()
            .map(|s| SeriesInfo {
                recent: s.recent(&st.sec_times, now),
                ..s.info.clone()
            })
            .collect();
        // Plugins' busiest first within each plugin; the others in id order.
        series.sort_by(|a, b| {
            a.group.cmp(&b.group).then_with(|| {
                if a.group.starts_with("plugin:") {
                    let (x, y) = (a.recent.unwrap_or(0.0), b.recent.unwrap_or(0.0));
                    y.total_cmp(&x).then_with(|| a.id.cmp(&b.id))
                } else {
                    a.id.cmp(&b.id)
                }
            })
        });
        SeriesList {
            series,
            plugin_series_cap: PLUGIN_SERIES_CAP,
            plugin_series_dropped: st.plugin_dropped,
            max_series: MAX_SERIES,
        }
    }

    /// `GET /api/history`: the series named (comma-separated ids; the defaults when absent)
    /// over `range`.
    ///
    /// # Errors
    /// A bad range, too many or unknown series, with the reason (400).
    pub fn query(&self, range: Option<&str>, series: Option<&str>) -> Result<History, String> {
        let (range, span, step) = parse_range(range)?;
        let ids: Vec<&str> = match series {
            None => DEFAULT_SERIES.to_vec(),
            Some(s) if s.len() > MAX_QUERY_LEN => {
                return Err(format!(
                    "series is {} bytes long, over the limit of {MAX_QUERY_LEN}",
                    s.len()
                ));
            }
            Some(s) => s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect(),
        };
        if ids.is_empty() {
            return Err("series names no series: see GET /api/history/series".into());
        }
        if ids.len() > MAX_QUERY_SERIES {
            return Err(format!(
                "{} series asked for, over the limit of {MAX_QUERY_SERIES} per query",
                ids.len()
            ));
        }
        let st = self.inner.lock().expect("history lock poisoned");
        let mut chosen = Vec::new();
        for id in &ids {
            match st.series.get(*id) {
                Some(s) => chosen.push(s),
                // A default series not sampled yet (no traffic) is left out, not refused.
                None if series.is_none() => {}
                None => {
                    return Err(format!(
                        "no series {:?} is kept: see GET /api/history/series",
                        id.chars().take(64).collect::<String>()
                    ));
                }
            }
        }
        let Some(now) = st.last else {
            return Ok(History {
                range: range.into(),
                step_secs: step,
                timestamps: vec![],
                series: chosen
                    .iter()
                    .map(|s| HistorySeries {
                        info: s.info.clone(),
                        values: vec![],
                    })
                    .collect(),
                plugin_series_cap: PLUGIN_SERIES_CAP,
                plugin_series_dropped: st.plugin_dropped,
            });
        };
        let times: Vec<u64> = if step == 1 {
            (now + 1 - span.min(now + 1)..=now).collect()
        } else {
            let m = now / 60;
            (m + 1 - (span / 60).min(m + 1)..=m)
                .map(|m| m * 60)
                .collect()
        };
        let value = |s: &Series, t: u64| -> Option<f64> {
            let v = if step == 1 {
                if st.sec_times[t as usize % SECONDS] != t {
                    return None;
                }
                s.secs[t as usize % SECONDS]
            } else if t / 60 == now / 60 {
                // The minute under way, from its seconds so far.
                s.minute(&st.sec_times, t)
            } else {
                if st.min_times[(t / 60) as usize % MINUTES] != t / 60 {
                    return None;
                }
                s.mins[(t / 60) as usize % MINUTES]
            };
            (!v.is_nan()).then_some(v as f64)
        };
        let mut out: Vec<HistorySeries> = chosen
            .iter()
            .map(|s| HistorySeries {
                info: SeriesInfo {
                    recent: s.recent(&st.sec_times, now),
                    ..s.info.clone()
                },
                values: times.iter().map(|&t| value(s, t)).collect(),
            })
            .collect();
        // Points before the first sample of any series asked for are left out.
        let first = (0..times.len())
            .find(|&i| out.iter().any(|s| s.values[i].is_some()))
            .unwrap_or(times.len());
        for s in &mut out {
            s.values.drain(..first);
        }
        Ok(History {
            range: range.into(),
            step_secs: step,
            timestamps: times[first..].to_vec(),
            series: out,
            plugin_series_cap: PLUGIN_SERIES_CAP,
            plugin_series_dropped: st.plugin_dropped,
        })
    }
}

/// The plugin points kept: those of series already kept, then new ones while there is room
/// under [`PLUGIN_SERIES_CAP`]; a new series busier than the least busy kept one takes its
/// place (one a second, so the set does not churn). Counts those left out.
fn admit_plugins(st: &mut Inner, mut points: Vec<Point>, now: u64) -> Vec<Point> {
    points.sort_by(|a, b| b.value.abs().total_cmp(&a.value.abs()));
    let mut kept = st
        .series
        .keys()
        .filter(|id| id.starts_with("plugin:"))
        .count();
    let mut out = Vec::new();
    let mut dropped = 0;
    let mut swapped = false;
    for p in points {
        if st.series.contains_key(&p.id) {
            out.push(p);
        } else if kept < PLUGIN_SERIES_CAP {
            kept += 1;
            out.push(p);
        } else if !swapped {
            let least = st
                .series
                .values()
                .filter(|s| s.info.id.starts_with("plugin:"))
                .map(|s| {
                    (
                        s.recent(&st.sec_times, now).unwrap_or(0.0),
                        s.info.id.clone(),
                    )
                })
                .min_by(|a, b| a.0.total_cmp(&b.0));
            match least {
                Some((busy, id)) if p.value.abs() > busy.abs() => {
                    st.series.remove(&id);
                    swapped = true;
                    out.push(p);
                    dropped += 1;
                }
                _ => dropped += 1,
            }
        } else {
            dropped += 1;
        }
    }
    st.plugin_dropped = dropped;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(id: &str, value: f64, agg: Agg) -> Point {
        Point {
            id: id.into(),
            label: id.into(),
            unit: "ops/s",
            kind: SeriesKind::Rate,
            group: if id.starts_with("plugin:") {
                "plugin:p".into()
            } else {
                "ops".into()
            },
            agg,
            value,
        }
    }

    #[test]
    fn minute_points_are_made_from_their_seconds() {
        let h = MetricsHistory::default();
        let start = 1_000_020 * 60;
        for t in 0..120 {
            h.record(
                start + t,
                vec![
                    point("ops", t as f64, Agg::Mean),
                    point("latency:p99", t as f64, Agg::Max),
                ],
            );
        }
        let r = h.query(Some("6h"), Some("ops,latency:p99")).unwrap();
        assert_eq!(r.step_secs, 60);
        assert_eq!(r.timestamps, vec![start, start + 60]);
        // The first minute: the mean of 0..60 and its largest; the second, under way.
        assert_eq!(r.series[0].values[0], Some(29.5));
        assert_eq!(r.series[1].values[0], Some(59.0));
        assert_eq!(r.series[0].values[1], Some(89.5));
        let r = h.query(Some("5m"), Some("ops")).unwrap();
        assert_eq!(r.timestamps.len(), 120);
        assert_eq!(r.series[0].values[119], Some(119.0));
    }

    #[test]
    fn seconds_a_late_round_skipped_get_its_rates_and_no_levels() {
        let h = MetricsHistory::default();
        let start = 1_000_020 * 60 + 10;
        let sessions = |v: f64| Point {
            kind: SeriesKind::Gauge,
            ..point("sessions", v, Agg::Mean)
        };
        h.record(start, vec![point("ops", 10.0, Agg::Mean), sessions(5.0)]);
        // The next round came 3 s later: its rate is the mean over the 3 s.
        h.record(
            start + 3,
            vec![point("ops", 30.0, Agg::Mean), sessions(7.0)],
        );
        let r = h.query(Some("5m"), Some("ops,sessions")).unwrap();
        let at = |i: usize, t: u64| {
            let k = r.timestamps.iter().position(|&x| x == t).unwrap();
            r.series[i].values[k]
        };
        assert_eq!(at(0, start), Some(10.0));
        for t in start + 1..=start + 3 {
            assert_eq!(at(0, t), Some(30.0), "ops at {t}");
        }
        let sum: f64 = r.series[0].values.iter().flatten().sum();
        assert_eq!(sum, 100.0);
        assert_eq!(at(1, start + 1), None);
        assert_eq!(at(1, start + 3), Some(7.0));
        // A stall longer than the fill leaves the seconds before it unknown.
        h.record(start + 200, vec![point("ops", 1.0, Agg::Mean)]);
        let r = h.query(Some("5m"), Some("ops")).unwrap();
        let filled = r.series[0].values.iter().rev().take_while(|v| v.is_some());
        assert_eq!(filled.count() as u64, MAX_FILLED_GAP + 1);
    }

    #[test]
    fn hostile_queries_are_refused_with_a_reason() {
        let h = MetricsHistory::default();
        h.record(100, vec![point("ops", 1.0, Agg::Mean)]);
        assert!(
            h.query(Some("1y"), None)
                .unwrap_err()
                .contains("unknown range")
        );
        assert!(
            h.query(None, Some("nope"))
                .unwrap_err()
                .contains("no series")
        );
        assert!(h.query(None, Some(",,")).is_err());
        let many = vec!["ops"; 40].join(",");
        assert!(
            h.query(None, Some(&many))
                .unwrap_err()
                .contains("limit of 32")
        );
        let long = "x".repeat(MAX_QUERY_LEN + 1);
        assert!(
            h.query(None, Some(&long))
                .unwrap_err()
                .contains("bytes long")
        );
        assert!(h.query(None, None).is_ok());
    }

    #[test]
    fn plugin_series_are_capped_keeping_the_busiest() {
        let h = MetricsHistory::default();
        let points: Vec<Point> = (0..PLUGIN_SERIES_CAP + 10)
            .map(|i| point(&format!("plugin:p:m{i}"), i as f64, Agg::Mean))
            .collect();
        h.record(100, points);
        let l = h.list();
        assert_eq!(l.series.len(), PLUGIN_SERIES_CAP);
        assert_eq!(l.plugin_series_dropped, 10);
        // The ten quietest were left out; the busiest is listed first.
        assert!(!l.series.iter().any(|s| s.id == "plugin:p:m0"));
        assert_eq!(
            l.series[0].id,
            format!("plugin:p:m{}", PLUGIN_SERIES_CAP + 9)
        );
    }

    #[test]
    fn a_second_recorded_twice_or_going_back_is_ignored() {
        let h = MetricsHistory::default();
        h.record(100, vec![point("ops", 1.0, Agg::Mean)]);
        h.record(100, vec![point("ops", 5.0, Agg::Mean)]);
        h.record(99, vec![point("ops", 7.0, Agg::Mean)]);
        let r = h.query(Some("5m"), Some("ops")).unwrap();
        assert_eq!(r.series[0].values, vec![Some(1.0)]);
    }
}
