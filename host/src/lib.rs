//! Tessera: a Redis cluster platform. Stateless RESP proxies route every key by slot
//! (`crc32(hash key) % 1024`) to groups of unmodified Redis servers.
//!
//! # Layout
//!
//! Data path, one way: `resp → command → router → backend`, driven per client by `session`.
//!
//! - [`resp`]: RESP2/RESP3 decoding (requests), reply boundaries, encoding; pure, no I/O.
//! - [`command`]: the command table (generated from Redis's own definitions) and policy.
//! - [`router`]: slots and the atomically swapped slot table.
//! - [`backend`]: per-thread multiplexed, pipelined backend connections.
//! - [`session`]: one client connection; splitting, fan-out and proxy-answered commands.
//! - [`proxy`]: listener, worker threads, shutdown.
//! - [`config`]: `proxy.toml`.
//! - [`up`]: `tessera up`, a local cluster in one command.

pub mod admin;
pub mod api;
pub mod backend;
pub mod command;
pub mod config;
pub mod coordinator;
pub mod dashboard;
pub mod migrate;
pub mod proxy;
pub mod redis_client;
pub mod resp;
pub mod router;
pub mod session;
pub mod telemetry;
pub mod up;
