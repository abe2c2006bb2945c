//! Tessera's model: what every part of the platform agrees on, with no process of its own.
//!
//! - [`command`] — the command table (generated from Redis's own definitions), key
//!   extraction, and the proxy's policy classes.
//! - [`router`] — slots, the atomically swapped slot table, the pushed topology, the read
//!   policy and the replicas' freshness, key prefixes routed to other clusters.
//! - [`error`] — `DataError`, the only error a client of the proxy sees.
//! - [`users`] — the users clients AUTH as: table, password hashes, lookup.
//! - [`limits`] — memory accounting for clients' requests and replies.
//! - [`fence`] — whether a cluster-mode proxy may route at all (its registration is sure).
//! - [`migration`] — the slot-migration protocol's shared parts (scripts, internal keys).
//! - [`login`] — how a backend connection identifies itself.
//! - [`redis_client`] — a small Redis client for the control plane.
//! - [`tls`] — certificates (reloaded without a restart), the backend connector, HTTPS.
//! - [`secret`] — random tokens, hashes and constant-time comparison.

pub mod clock;
pub mod command;
pub mod databases;
pub mod error;
pub mod fence;
pub mod limits;
pub mod login;
pub mod migration;
pub mod redis_client;
pub mod replica;
pub mod router;
pub mod secret;
pub mod tls;
pub mod users;
pub mod watch;
