//! The control plane of one cluster: the dashboard that owns the topology (groups, servers,
//! slots, migrations, failover, plugins, users, tokens), pushes every change to the proxies
//! behind a barrier, and serves the REST API.
//!
//! - [`dashboard`] — the topology owner: lock, operations, barrier pushes, health, migrations,
//!   per-slot statistics.
//! - [`migrate`] — the mover, migration and rebalance plans (by slots, weight, load or memory).
//! - [`api`] — the dashboard's REST API and its OpenAPI document.
//! - [`error`] — the control plane's own error, which `api` turns into HTTP answers.

pub mod api;
pub mod dashboard;
pub mod error;
pub mod migrate;

pub use error::{Error, Side};
