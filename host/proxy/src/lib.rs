//! The proxy: Tessera's data path. A client's bytes are decoded, classified, passed through
//! the plugins, planned against the slot table and sent to the backends; replies come back in
//! order (docs/architecture.md).
//!
//! - [`server`] — the listener, worker threads, shutdown; cluster mode (registration, pushes),
//!   the replica probes, the route keeper.
//! - [`session`] — one client connection through the stages.
//! - [`stages`] — the pure stages: classify, plan, merge.
//! - [`backend`] — per-thread multiplexed, pipelined backend connections.
//! - [`worker`] — what a proxy's worker threads share and own.
//! - [`acl`] — the backend ACL users clients' commands run as.
//! - [`plugins`] — the plugin host over `tessera-wasm`.
//! - [`pubsub`] — a worker's pub/sub hub and client-side caching's invalidations.
//! - [`hotcache`] — a worker's cache of hot keys.
//! - [`mirror`] — a copy of client commands to a shadow target, its replies compared.
//! - [`telemetry`] — per-command and per-slot counters, hot keys, the command logs.
//! - [`clients`] — the client list (CLIENT LIST, CLIENT INFO).
//! - [`config`] — `proxy.toml`.
//! - [`admin`] — the proxy's admin HTTP API.

pub mod acl;
pub mod admin;
pub mod backend;
pub mod buffers;
pub mod clients;
pub mod config;
pub mod hotcache;
pub mod mirror;
pub mod peers;
pub mod plugins;
pub mod pubsub;
pub mod server;
pub mod session;
pub mod stages;
pub mod telemetry;
pub mod worker;
