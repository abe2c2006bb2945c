//! The dashboard's metrics history (`GET /api/history`, `GET /api/history/series`): what the
//! dashboard samples from its proxies and servers every second, kept 1 h at 1 s and 24 h at
//! 1 min (docs/api.md, "Metrics history").

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// How a series' values read: a per-second rate of a counter, or a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SeriesKind {
    /// A counter's increase per second (never negative: a counter that went back, a proxy
    /// restarted, counts from its new start).
    Rate,
    /// A level sampled each second (memory, lag, a latency percentile).
    Gauge,
}

/// One series the history keeps.
///
/// ```text
/// {"id": "cmd:get", "label": "GET", "unit": "ops/s", "kind": "rate", "group": "commands"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SeriesInfo {
    /// What `?series=` names it by.
    pub id: String,
    /// What it is, for a legend: a command, a proxy's address, a group, a plugin's metric.
    pub label: String,
    /// `ops/s`, `errors/s`, `s`, `bytes`, `sessions`, or `/s` for a plugin's counter.
    pub unit: String,
    pub kind: SeriesKind,
    /// Which chart it belongs to: `ops`, `commands`, `proxies`, `errors`, `latency`,
    /// `sessions`, `memory`, `lag`, or `plugin:<name>`.
    pub group: String,
    /// Its mean over the last minute (the busiest plugin series are listed first).
    #[schema(required = true)]
    pub recent: Option<f64>,
}

/// `GET /api/history/series`: every series kept, and the bounds that apply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeriesList {
    pub series: Vec<SeriesInfo>,
    /// The most series of plugins kept (the busiest, by their last minute); the rest are
    /// dropped and counted in `plugin_series_dropped`.
    pub plugin_series_cap: usize,
    pub plugin_series_dropped: usize,
    /// The most series kept in all.
    pub max_series: usize,
}

/// The query of `GET /api/history`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// `5m`, `1h` (1 s points), `6h` or `24h` (1 min points); `5m` when absent.
    pub range: Option<String>,
    /// Series ids, comma-separated (at most 32; `GET /api/history/series` lists them).
    /// Absent: the cluster's totals (`ops`, `errors`, latency, sessions).
    pub series: Option<String>,
}

/// One series' points, aligned with the answer's `timestamps` (`null`: no sample then).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HistorySeries {
    #[serde(flatten)]
    pub info: SeriesInfo,
    pub values: Vec<Option<f64>>,
}

/// `GET /api/history`.
///
/// ```text
/// {"range": "5m", "step_secs": 1, "timestamps": [1733356800, …],
///  "series": [{"id": "ops", "label": "all commands", "unit": "ops/s", "kind": "rate",
///              "group": "ops", "recent": 812.0, "values": [800.0, null, …]}],
///  "plugin_series_cap": 64, "plugin_series_dropped": 0}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct History {
    pub range: String,
    /// Seconds between points: 1 (5m, 1h) or 60 (6h, 24h; each point the mean of its
    /// minute's seconds, the largest for a latency percentile).
    pub step_secs: u64,
    /// Unix seconds of each point, oldest first; empty when nothing was sampled yet.
    pub timestamps: Vec<u64>,
    pub series: Vec<HistorySeries>,
    pub plugin_series_cap: usize,
    pub plugin_series_dropped: usize,
}
