//! Tessera: a Redis cluster platform. Stateless RESP proxies route every key by slot
//! (`crc32(hash key) % 1024`) to groups of unmodified Redis servers.
//!
//! # Layout
//!
//! Data path, one way: `resp → command → router → backend`, driven per client by `session`.
//! Control: `api → dashboard → coordinator (persist) → push to every proxy → router`.
//!
//! - [`resp`] — RESP2/RESP3 decoding (requests), reply boundaries, encoding; pure, no I/O.
//! - [`command`] — the command table (generated from Redis's own definitions) and policy.
//! - [`router`] — slots, the atomically swapped slot table, the pushed topology.
//! - [`backend`] — per-thread multiplexed, pipelined backend connections.
//! - [`fence`] — whether a cluster-mode proxy may route at all (its registration is sure),
//!   checked when a client's batch is read and again before a backend write.
//! - [`pubsub`] — a worker's pub/sub hub: one subscriber connection per backend, fan-out
//!   to its sessions, subscriptions that follow the slot table.
//! - [`session`] — one client connection; splitting, fan-out, proxy-answered commands, and
//!   moving keys of migrating slots.
//! - [`proxy`] — listener, worker threads, shutdown; cluster mode.
//! - [`config`] — `proxy.toml`.
//! - [`coordinator`] — the `Store` trait (fs, etcd) and the cluster's documents.
//! - [`dashboard`] — the topology owner: lock, operations, barrier pushes, health, migrations,
//!   per-slot statistics.
//! - [`migrate`] — the migration protocol's shared parts, the mover, rebalance planning (by
//!   slots, weight, load or memory).
//! - [`api`] — HTTP APIs (axum) of the dashboard and of each proxy.
//! - [`http_server`] — the one server loop of every HTTP API (connection cap, header-read
//!   timeout); [`auth_throttle`] — failed credential checks per client address.
//! - [`access`] — the roles of API tokens and console users, and which route needs which.
//! - [`console`] — the federation web console: cluster discovery, relay, login, the web app.
//! - [`telemetry`] — per-command and per-slot counters, hot keys, and Prometheus text.
//! - [`redis_client`] — a small client for the control plane.
//! - [`tls`] — certificates (reloaded without a restart), the backend connector, HTTPS.
//! - [`users`] — the users clients AUTH as: table, password hashes, lookup.
//! - [`mirror`] — a copy of client commands to a shadow target, its replies compared.
//! - [`admin`] — the `tessera admin` CLI; [`up`] — `tessera up`.
//! - [`port`] — `tessera port`: import an RDB file or follow a Redis server through a proxy.

pub mod access;
pub mod acl;
pub mod admin;
pub mod api;
pub mod auth_throttle;
pub mod backend;
pub mod clients;
pub mod command;
pub mod config;
pub mod console;
pub mod coordinator;
pub mod dashboard;
pub mod error;
pub mod fence;
pub mod hotcache;
pub mod http_error;
pub mod http_server;
pub mod limits;
pub mod migrate;
pub mod mirror;
pub mod pipeline;
pub mod plugins;
pub mod port;
pub mod proxy;
pub mod pubsub;
pub mod redis_client;
pub mod resp;
pub mod router;
pub mod secret;
pub mod session;
pub mod telemetry;
pub mod tls;
pub mod up;
pub mod users;
pub mod worker;
