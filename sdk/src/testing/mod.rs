//! Native tests for plugins (feature `testing`, non-wasm targets).
//!
//! * A fake host behind every import ([`reset`], [`set_client`], [`advance_ms`],
//!   [`counter`], [`histogram`], [`logs`], [`state_value`] …), one per test thread.
//! * [`command`] builds a command the way the host describes it (key flags, class, id).
//! * [`Harness`] runs a plugin's hooks through the real ABI path: the command table is encoded
//!   into the arena with `tessera-plugin-abi`, the SDK's export glue runs, and the packed
//!   result and `out` bytes are decoded back into an [`Outcome`]. It applies the manifest like
//!   the host (unhooked commands, key prefixes, elided values), and [`Harness::run`] plays a
//!   whole command against a fake backend, host merges included.
//!
//! ```
//! use tessera_plugin_sdk::testing::{command, Harness, Outcome};
//! # use tessera_plugin_sdk::{cmd, Action, Command, Conn, Manifest, Out, Plugin};
//! # struct NoFlush;
//! # impl Plugin for NoFlush {
//! #     fn init(_: &[u8]) -> Result<(Self, Manifest), String> {
//! #         Ok((NoFlush, Manifest::new().hook(cmd::FLUSHALL)))
//! #     }
//! #     fn on_command(&mut self, _: Conn, _: &Command<'_>, out: Out<'_>) -> Action {
//! #         out.deny("ERR no")
//! #     }
//! # }
//! let mut h = Harness::<NoFlush>::new("{}");
//! assert_eq!(h.on_command(1, &command(&["FLUSHALL"])), Outcome::Deny("ERR no".into()));
//! assert_eq!(h.on_command(1, &command(&["GET", "k"])), Outcome::NotHooked);
//! ```

mod alloc;
mod command;
pub(crate) mod fake;
mod harness;
mod merge;

pub use alloc::{CountingAlloc, allocations};
pub use command::{TestCommand, classes, command, command_bytes, key_positions};
pub use fake::MetricDef;
pub use harness::{Harness, ManifestInfo, Outcome, ReplyOutcome, RewriteOut};
pub use merge::merge;

pub use crate::host::types::{ClientInfo, Level};

/// Clears this thread's fake host (state, buckets, metrics, logs, clients, clock).
pub fn reset() {
    fake::with(|h| *h = fake::FakeHost::default());
}

/// Sets what `client_info(conn)` answers.
pub fn set_client(conn: u64, info: ClientInfo) {
    fake::with(|h| {
        h.clients.insert(conn, info);
    });
}

/// How many times the plugin called `client_info` (to check caching).
pub fn client_info_calls() -> u64 {
    fake::with(|h| h.client_info_calls)
}

/// Advances the clocks (`now_ms`, `now_us`, `stage_us`) by `ms` milliseconds.
pub fn advance_ms(ms: u64) {
    advance_us(ms * 1000);
}

/// Advances both clocks by `us` microseconds.
pub fn advance_us(us: u64) {
    fake::with(|h| h.clock_us += us);
}

/// The fake monotonic clock, µs.
pub fn now_us() -> u64 {
    fake::with(|h| h.clock_us)
}

/// The value of a counter or gauge series (`None` if never resolved).
pub fn counter(name: &str, label_values: &[&str]) -> Option<i64> {
    fake::with(|h| h.value(name, label_values))
}

/// The observations recorded by a histogram series.
pub fn histogram(name: &str, label_values: &[&str]) -> Vec<f64> {
    fake::with(|h| h.samples(name, label_values))
}

/// Every series of a metric: label values and value (histograms: number of observations).
pub fn series(name: &str) -> Vec<(Vec<String>, i64)> {
    fake::with(|h| h.all_series(name))
}

/// The metrics the plugin defined.
pub fn metrics() -> Vec<MetricDef> {
    fake::with(|h| h.metrics.clone())
}

/// The captured log lines.
pub fn logs() -> Vec<(Level, String)> {
    fake::with(|h| h.logs.clone())
}

/// Sets the lowest level `log_enabled` accepts (default `Info`).
pub fn set_log_level(level: Level) {
    fake::with(|h| h.log_level = level);
}

/// The live value of a state key.
pub fn state_value(key: &[u8]) -> Option<Vec<u8>> {
    fake::with(|h| h.state_value(key))
}
