//! What a proxy measures, as the proxy's admin API and the dashboard's API show it: the command
//! logs, hot keys and the hot-key cache's figures, and per-slot traffic. Proxies produce these
//! (`tessera-proxy`'s telemetry); the dashboard merges them over proxies.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// The three logs, in the order of their index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LogType {
    /// Commands whose reply took at least the threshold to be complete (value: µs).
    Slow = 0,
    /// Commands whose request was at least the threshold in bytes (value: bytes).
    LargeRequest = 1,
    /// Commands whose reply was at least the threshold in bytes (value: bytes).
    LargeReply = 2,
}

impl LogType {
    pub const ALL: [LogType; 3] = [LogType::Slow, LogType::LargeRequest, LogType::LargeReply];

    /// `slow`, `large-request`, `large-reply` (any case), as COMMANDLOG and the API name them.
    pub fn parse(s: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| s.eq_ignore_ascii_case(t.as_str().as_bytes()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogType::Slow => "slow",
            LogType::LargeRequest => "large-request",
            LogType::LargeReply => "large-reply",
        }
    }
}

/// The JSON of one entry (`GET /api/proxy/commandlog`); arguments and names that are not
/// UTF-8 are shown with U+FFFD in place of their invalid bytes.
///
/// ```text
/// {"id": 7, "time": 1733356800, "value": 120345, "args": ["EVAL", "…", "0"],
///  "client_addr": "127.0.0.1:50122", "client_name": "worker-1"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = CommandLogEntry)]
pub struct EntryView {
    pub id: u64,
    pub time: u64,
    pub value: u64,
    pub args: Vec<String>,
    pub client_addr: String,
    pub client_name: String,
}

/// One proxy's log of one type: the body of `GET /api/proxy/commandlog`.
///
/// ```text
/// {"type": "slow", "len": 2, "threshold": 10000, "max_len": 128,
///  "entries": [{"id": 1, …}, {"id": 0, …}]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ProxyCommandLog)]
pub struct ProxyLog {
    #[serde(rename = "type")]
    pub log_type: LogType,
    /// Entries in the proxy's log (`entries` may hold fewer when a count was asked).
    pub len: usize,
    /// What a command must reach to be logged: µs for `slow`, bytes for the others
    /// (proxy.toml's `slowlog_log_slower_than`, `commandlog_*`); `null`: the log is disabled.
    /// Absent from proxies older than the field, read as `null`.
    #[serde(default)]
    #[schema(required = true)]
    pub threshold: Option<u64>,
    /// The most entries the log keeps (0 from proxies older than the field).
    #[serde(default)]
    #[schema(required = true)]
    pub max_len: usize,
    /// Newest first.
    pub entries: Vec<EntryView>,
}

/// An entry of the cluster's log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = ClusterCommandLogEntry)]
pub struct ClusterEntry {
    /// The proxy's token and its RESP address.
    pub proxy: String,
    pub proxy_addr: String,
    #[serde(flatten)]
    pub entry: EntryView,
}

/// Proxies that log with the same settings (`GET /api/commandlog`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = CommandLogSettings)]
pub struct LogSettings {
    /// As [`ProxyLog::threshold`]: µs for `slow`, bytes for the others; `null`: disabled.
    #[schema(required = true)]
    pub threshold: Option<u64>,
    pub max_len: usize,
    /// The RESP addresses of the proxies that use these settings.
    pub proxies: Vec<String>,
}

/// The body of `GET /api/commandlog`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = CommandLog)]
pub struct ClusterLog {
    #[serde(rename = "type")]
    pub log_type: LogType,
    /// Proxies whose log is included.
    pub proxies: usize,
    /// The answering proxies' thresholds and lengths, one item per distinct setting (one
    /// item when every proxy logs alike), most proxies first.
    pub settings: Vec<LogSettings>,
    /// Tokens of registered proxies that did not answer.
    pub unreachable: Vec<String>,
    /// Newest first (by time, then by each proxy's id).
    pub entries: Vec<ClusterEntry>,
}

/// One key of a view.
///
/// ```text
/// {"key": "user:\\xff1", "key_len": 6, "truncated": false, "slot": 421, "ops": 1200,
///  "bytes": 48000}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HotKey {
    /// The key (its first `max_key_bytes`), bytes outside printable ASCII as `\xHH`, `\` as `\\`.
    pub key: String,
    /// The key's full length in bytes.
    pub key_len: u64,
    pub truncated: bool,
    /// The key's slot (unknown for a truncated key).
    #[schema(required = true)]
    pub slot: Option<u16>,
    /// Operations and request plus reply bytes over the window (estimates: never under the
    /// true count of a key kept every sub-window, over it by at most the sketch's error).
    pub ops: u64,
    pub bytes: u64,
}

/// The wire shape of `GET /api/proxy/hotkeys`.
///
/// ```text
/// {"enabled": true, "window_secs": 10.0, "sub_window_secs": 2.0, "sample_one_in": 8,
///  "by_ops": [HotKey, …], "by_bytes": [HotKey, …],
///  "memory_bytes": 812000, "memory_limit_bytes": 900000, "max_key_bytes": 128}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HotKeysView {
    pub enabled: bool,
    /// The span the counts cover (shorter just after start).
    pub window_secs: f64,
    pub sub_window_secs: f64,
    pub sample_one_in: u32,
    pub by_ops: Vec<HotKey>,
    pub by_bytes: Vec<HotKey>,
    /// Heap bytes the hot-key counting holds now (sketches and tables at their fixed size,
    /// published sub-windows as they are), and the most it can hold with this configuration.
    pub memory_bytes: u64,
    pub memory_limit_bytes: u64,
    pub max_key_bytes: usize,
    /// The proxy's hot-key cache (`[hot_cache]`): hits, misses, fills, invalidations since
    /// start, entries and bytes now.
    #[serde(default)]
    #[schema(required = true)]
    pub hot_cache: HotCacheFigures,
}

/// The wire shape of the cache's figures (in `GET /api/proxy/hotkeys` and `/api/hotkeys`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HotCacheFigures {
    pub enabled: bool,
    pub hits: u64,
    pub misses: u64,
    pub fills: u64,
    pub invalidations: u64,
    pub entries: u64,
    pub bytes: u64,
}

impl HotCacheFigures {
    /// Adds another proxy's figures.
    pub fn add(&mut self, o: &HotCacheFigures) {
        self.enabled |= o.enabled;
        self.hits += o.hits;
        self.misses += o.misses;
        self.fills += o.fills;
        self.invalidations += o.invalidations;
        self.entries += o.entries;
        self.bytes += o.bytes;
    }
}

/// The wire shape of `GET /api/proxy/slots`: the slots that saw traffic, in parallel arrays.
///
/// ```text
/// {"slots": [12, 700], "ops": [40, 3], "bytes_in": [2000, 90], "bytes_out": [800, 30]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SlotCounts {
    pub slots: Vec<u16>,
    pub ops: Vec<u64>,
    pub bytes_in: Vec<u64>,
    pub bytes_out: Vec<u64>,
}

/// The query of `GET /api/commandlog` and of a proxy's `GET /api/proxy/commandlog`: the log's
/// type (`slow` when absent) and an optional count.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CommandLogQuery {
    /// `slow` (the default), `large-request` or `large-reply`.
    #[serde(rename = "type")]
    pub log_type: Option<String>,
    /// At most this many entries, newest first (absent: all).
    pub count: Option<usize>,
}

impl CommandLogQuery {
    /// The type asked for and the count.
    ///
    /// # Errors
    /// An unknown type, with the valid ones named.
    pub fn parse(&self) -> Result<(LogType, Option<usize>), String> {
        let t = match self.log_type.as_deref() {
            None => LogType::Slow,
            Some(s) => LogType::parse(s.as_bytes()).ok_or_else(|| {
                format!("unknown log type {s:?}: slow, large-request or large-reply")
            })?,
        };
        Ok((t, self.count))
    }
}

// === A proxy's own views (`GET /api/proxy/info`, `/api/proxy/stats`) ===

/// `GET /api/proxy/info`: who and where the proxy is.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyInfo {
    pub token: String,
    pub addr: String,
    pub admin_addr: String,
    pub epoch: u64,
    pub sessions: usize,
    pub version: String,
    pub pid: u32,
    pub uptime_secs: u64,
    /// Version of the users table in force (0: proxy.toml's).
    #[serde(default)]
    #[schema(required = true)]
    pub users_version: u64,
    /// It refuses commands: its registration in the store may have lapsed (docs/migration.md,
    /// "A proxy cut off from the store").
    #[serde(default)]
    #[schema(required = true)]
    pub fenced: bool,
    /// It is shutting down: no new connections, in-flight commands finishing.
    #[serde(default)]
    #[schema(required = true)]
    pub draining: bool,
}

/// Requests to the backends, and their connections' fortunes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BackendCounters {
    pub requests: u64,
    pub batches: u64,
    pub connects: u64,
    pub connect_failures: u64,
    pub reconnects: u64,
}

/// `GET /api/proxy/stats`: totals, ops per second, per-command counts, backend counters.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyStats {
    pub token: String,
    pub epoch: u64,
    pub sessions: usize,
    pub ops_total: u64,
    pub errors_total: u64,
    pub ops_per_sec: u64,
    pub commands: Vec<CommandCount>,
    pub backend: BackendCounters,
    pub uptime_secs: u64,
    /// Commands answered since start per latency bucket, all commands together: one count
    /// per bound of [`LATENCY_BUCKETS_US`] (at most that long), then those that took longer.
    #[serde(default)]
    #[schema(required = true)]
    pub latency_buckets: Vec<u64>,
}

/// Upper bounds, in µs, of the proxy's latency buckets (`latency_buckets`, and the
/// `tessera_command_duration_seconds` histogram of its `/metrics`).
pub const LATENCY_BUCKETS_US: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 250_000, 1_000_000,
];

/// `?limit=` of the hot-key views (proxy and dashboard): 1 to `MAX_HOTKEYS`, default 20.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HotKeysQuery {
    /// Keys per ranking, 1 to 1000 (default 20).
    pub limit: Option<usize>,
}

/// The most keys a hot-key view lists per ranking.
pub const MAX_HOTKEYS: usize = 1000;

impl HotKeysQuery {
    /// # Errors
    /// A limit of 0 or over `MAX_HOTKEYS` (the API answers 400).
    pub fn limit(&self) -> Result<usize, String> {
        match self.limit.unwrap_or(20) {
            n @ 1..=MAX_HOTKEYS => Ok(n),
            n => Err(format!("limit must be in 1..={MAX_HOTKEYS}, got {n}")),
        }
    }
}

/// One command's totals, for the stats API.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CommandCount {
    pub command: String,
    pub calls: u64,
    pub errors: u64,
}

// === The dashboard's merge of every proxy's hot keys (`GET /api/hotkeys`) ===

/// The wire shape of `GET /api/hotkeys`.
///
/// ```text
/// {"proxies": 2, "unanswered": [], "window_secs": 10.0,
///  "by_ops": [ClusterHotKey, …], "by_bytes": [ClusterHotKey, …]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterHotKeys {
    /// Online proxies that answered, and the tokens of those that did not.
    pub proxies: usize,
    pub unanswered: Vec<String>,
    /// The longest window a proxy reported (each proxy counts over its own).
    pub window_secs: f64,
    pub by_ops: Vec<ClusterHotKey>,
    pub by_bytes: Vec<ClusterHotKey>,
    /// The proxies' hot-key caches, summed.
    #[serde(default)]
    #[schema(required = true)]
    pub hot_cache: HotCacheFigures,
}

/// One key summed over the proxies that listed it.
///
/// ```text
/// {"key": "user:42", "key_len": 7, "truncated": false, "slot": 421, "group": 1,
///  "ops": 5000, "bytes": 210000,
///  "seen_by": [{"token": "…", "addr": "127.0.0.1:19000", "ops": 2600, "bytes": 110000}, …]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterHotKey {
    /// At most `max_key_bytes` of the key, `\xHH` escapes.
    pub key: String,
    pub key_len: u64,
    pub truncated: bool,
    #[schema(required = true)]
    pub slot: Option<u16>,
    /// The group owning the slot now (unknown for a truncated key or an unassigned slot).
    #[schema(required = true)]
    pub group: Option<u32>,
    pub ops: u64,
    pub bytes: u64,
    pub seen_by: Vec<SeenBy>,
}

/// One proxy's counts of a key.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeenBy {
    pub token: String,
    pub addr: String,
    pub ops: u64,
    pub bytes: u64,
}
