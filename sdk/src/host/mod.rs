//! Safe wrappers over the host imports: logging, metrics, shared state, rate limits, client
//! facts and clocks. Each is one call into the host (~6 ns); the ones that return data use a
//! stack buffer first and allocate only for large answers.

use std::fmt;

use tessera_plugin_abi::{encode_string_list, metric_kind, status};

use crate::hooks::Conn;

pub(crate) mod sys;
pub(crate) mod types;

pub use types::{ClientInfo, Level};

/// An error code returned by an import (`tessera_plugin_abi::status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostError(pub i64);

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.0 {
            status::NOT_FOUND => "not found",
            status::BAD_ARGUMENT => "bad argument",
            status::BUFFER_TOO_SMALL => "buffer too small",
            status::INVALID_MEMORY => "invalid memory",
            status::NOT_ALLOWED => "not allowed here",
            status::UNIMPLEMENTED => "unimplemented",
            _ => "host error",
        };
        write!(f, "{what} ({})", self.0)
    }
}

impl std::error::Error for HostError {}

// === logging ===

/// Whether a message at `level` would be written (check before formatting).
pub fn log_enabled(level: Level) -> bool {
    sys::log_enabled(level as i32) == 1
}

/// Writes `msg` to the proxy's log (rate-limited per plugin by the host).
pub fn log(level: Level, msg: &str) {
    sys::log(level as i32, msg.as_bytes());
}

/// Logs a formatted message if the level is enabled:
/// `tessera_plugin_sdk::log!(Level::Warn, "bad key {}", k)`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {{
        let level = $level;
        if $crate::host::log_enabled(level) {
            $crate::host::log(level, &::std::format!($($arg)+));
        }
    }};
}

// === metrics ===

/// A metric defined in `init`; exported by the proxy as `tessera_plugin_<plugin>_<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric(i32);

/// One label combination of a [`Metric`]; resolve once and keep it (hot-path calls carry only
/// this integer). [`Series::NONE`] ignores every update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Series(i32);

fn define(
    kind: i32,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> Result<Metric, HostError> {
    let mut list = Vec::new();
    encode_string_list(labels.iter().map(|l| l.as_bytes()), &mut list);
    let r = sys::metric_define(kind, name.as_bytes(), help.as_bytes(), &list, buckets);
    if r < 0 {
        return Err(HostError(r));
    }
    Ok(Metric(r as i32))
}

impl Metric {
    /// Defines a counter with these label names. `init` only.
    ///
    /// # Errors
    /// The host's refusal (bad name, outside `init`, …).
    pub fn counter(name: &str, help: &str, labels: &[&str]) -> Result<Metric, HostError> {
        define(metric_kind::COUNTER, name, help, labels, &[])
    }

    /// Defines a gauge. `init` only.
    ///
    /// # Errors
    /// The host's refusal.
    pub fn gauge(name: &str, help: &str, labels: &[&str]) -> Result<Metric, HostError> {
        define(metric_kind::GAUGE, name, help, labels, &[])
    }

    /// Defines a histogram with these bucket bounds (empty: the host's defaults). `init` only.
    ///
    /// # Errors
    /// The host's refusal.
    pub fn histogram(
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: &[f64],
    ) -> Result<Metric, HostError> {
        define(metric_kind::HISTOGRAM, name, help, labels, buckets)
    }

    /// The series for these label values (one per label name, in order).
    ///
    /// # Errors
    /// The host's refusal (wrong number of values, too many series, …).
    pub fn series(&self, values: &[&str]) -> Result<Series, HostError> {
        let mut list = Vec::with_capacity(64);
        encode_string_list(values.iter().map(|v| v.as_bytes()), &mut list);
        let r = sys::metric_series(self.0, &list);
        if r < 0 {
            return Err(HostError(r));
        }
        Ok(Series(r as i32))
    }

    /// The host's metric id.
    pub fn id(&self) -> i32 {
        self.0
    }
}

impl Series {
    /// A series that ignores updates (for when `series` failed).
    pub const NONE: Series = Series(-1);

    /// Counter: adds `delta`.
    pub fn add(self, delta: u64) {
        if self.0 >= 0 {
            sys::counter_add(self.0, delta as i64);
        }
    }

    /// Counter: adds 1.
    pub fn inc(self) {
        self.add(1);
    }

    /// Gauge: sets the value.
    pub fn set(self, v: i64) {
        if self.0 >= 0 {
            sys::gauge_set(self.0, v);
        }
    }

    /// Gauge: adds `delta` (may be negative).
    pub fn gauge_add(self, delta: i64) {
        if self.0 >= 0 {
            sys::gauge_add(self.0, delta);
        }
    }

    /// Histogram: records one observation.
    pub fn observe(self, v: f64) {
        if self.0 >= 0 {
            sys::histogram_observe(self.0, v);
        }
    }

    /// The host's series id (-1 for [`Series::NONE`]).
    pub fn id(self) -> i32 {
        self.0
    }
}

// === shared state ===

/// The plugin's key-value namespace in the host: shared by every worker's instance, kept across
/// hot reloads, local to one proxy process.
pub mod state {
    use super::{HostError, sys};

    fn ttl(ttl_ms: Option<u64>) -> i64 {
        ttl_ms.map_or(0, |t| t.min(i64::MAX as u64) as i64)
    }

    /// The value of `key`, if any.
    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        let mut buf = [0u8; 256];
        let n = sys::state_get(key, &mut buf);
        if n < 0 {
            return None;
        }
        let n = n as usize;
        if n <= buf.len() {
            return Some(buf[..n].to_vec());
        }
        let mut big = vec![0u8; n];
        // The value may have changed size in between: retry until it fits.
        loop {
            let m = sys::state_get(key, &mut big);
            if m < 0 {
                return None;
            }
            if m as usize <= big.len() {
                big.truncate(m as usize);
                return Some(big);
            }
            big.resize(m as usize, 0);
        }
    }

    /// Copies the value of `key` into `dst` if it fits; returns its length (compare with
    /// `dst.len()`), or `None` if the key is missing. Allocates nothing.
    pub fn get_into(key: &[u8], dst: &mut [u8]) -> Option<usize> {
        let n = sys::state_get(key, dst);
        (n >= 0).then_some(n as usize)
    }

    /// Sets `key`; `ttl_ms: None` keeps it until deleted.
    ///
    /// # Errors
    /// The host's refusal (e.g. the namespace is full).
    pub fn set(key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> Result<(), HostError> {
        match sys::state_set(key, value, ttl(ttl_ms)) {
            r if r < 0 => Err(HostError(r.into())),
            _ => Ok(()),
        }
    }

    /// Deletes `key`; whether it existed.
    pub fn delete(key: &[u8]) -> bool {
        sys::state_delete(key) == 1
    }

    /// Adds `delta` to the integer at `key` (missing counts as 0; `ttl_ms` applies when it is
    /// created) and returns the new value.
    pub fn incr(key: &[u8], delta: i64, ttl_ms: Option<u64>) -> i64 {
        sys::state_incr(key, delta, ttl(ttl_ms))
    }

    /// The value of `key` with its version, for [`set_if_version`].
    pub fn get_versioned(key: &[u8]) -> Option<(Vec<u8>, u64)> {
        let mut buf = vec![0u8; 256];
        loop {
            let mut version = 0u64;
            let n = sys::state_get_versioned(key, &mut buf, &mut version);
            if n < 0 {
                return None;
            }
            if n as usize <= buf.len() {
                buf.truncate(n as usize);
                return Some((buf, version));
            }
            buf.resize(n as usize, 0);
        }
    }

    /// Sets `key` only if its version is still `version` (0: only if absent). Whether it was
    /// set: on `false`, read again and retry.
    pub fn set_if_version(key: &[u8], value: &[u8], version: u64) -> bool {
        sys::state_set_if_version(key, value, version) == 1
    }
}

/// Takes `cost` tokens from the host's token bucket `bucket` (refilled at `per_second`, holding
/// at most `burst`); whether they were taken. Shared by all workers of the proxy.
pub fn ratelimit_acquire(bucket: &[u8], cost: u32, per_second: u32, burst: u32) -> bool {
    sys::ratelimit_acquire(bucket, cost, per_second, burst) == 1
}

// === client and clocks ===

/// Facts about the client on `conn`; `None` if the host does not know the connection.
pub fn client_info(conn: Conn) -> Option<ClientInfo> {
    let mut buf = [0u8; 256];
    let n = sys::client_info(conn.0, &mut buf);
    if n < 0 {
        return None;
    }
    if n as usize <= buf.len() {
        return ClientInfo::decode(&buf[..n as usize]);
    }
    let mut big = vec![0u8; n as usize];
    let m = sys::client_info(conn.0, &mut big);
    if m < 0 || m as usize > big.len() {
        return None;
    }
    ClientInfo::decode(&big[..m as usize])
}

/// Wall clock, Unix milliseconds.
pub fn now_ms() -> u64 {
    sys::now_ms().max(0) as u64
}

/// Monotonic microseconds (for latencies).
pub fn now_us() -> u64 {
    sys::now_us().max(0) as u64
}

/// The proxy's own reading of the stage being run, on `now_us`'s scale: in `on_command` the
/// moment the command's batch was dispatched, in `on_reply` the moment its reply was in.
/// It costs the plugin no clock read (the proxy reads the clock there anyway) and does not
/// move within one call; elsewhere (ticks, closes) it is `now_us`. For a latency measured
/// as the proxy measures it.
pub fn stage_us() -> u64 {
    sys::stage_us().max(0) as u64
}
