//! Cross-process suite: real redis-server processes behind the tessera binary, driven over
//! TCP on random loopback ports. One binary, one module per area (as ripgrep's tests/tests.rs).

// Process guards (RedisServer, Proxy, Etcd, Dashboard, ClusterProxy, Up), a raw RESP client,
// an HTTP API client, slot math.
mod support;

// RESP2 and RESP3 replies through the redis crate; HELLO over a raw socket.
mod protocol;
// redis-cli against the proxy; inline commands.
mod cli;
// A long mixed pipeline, compared reply by reply with one direct redis-server.
mod differential;
mod pipeline;
// Routing by slot; MGET/MSET/DEL/EXISTS/UNLINK/TOUCH split across backends.
mod multikey;
// Multi-key commands that need one slot: fine with a shared hash tag, else CROSSSLOT.
mod same_slot;
// Malformed and partial frames over a raw socket.
mod malformed;
// Hostile clients (scripts past the policy, memory announced or never read, busy scripts,
// idle sockets before AUTH, the reserved namespace), each beside a well-behaved client.
mod history_events;
mod hostile;
// A server busy with a script: others get its -BUSY, PING forwarded on request, logins retried.
mod busy;
// The request decoder against a real redis-server: seeded mutations, same parse or refused.
mod decoder_vs_redis;
// Error replies that keep the session; commands the proxy answers itself.
mod local_commands;
// Numbered databases: SELECT, the internal database out of reach, cluster mode's database 0.
mod databases;
// Cluster-wide admin commands: refused by default, fanned out when enabled.
mod admin;
// A killed backend fails only its own slots, and recovers when it comes back.
mod backend_failure;
// The session_password gate.
mod auth;
// Users confined to a key prefix against a hostile tenant: nothing outside the prefix is
// written, read or seen.
mod tenants;
// max_clients and client_idle_timeout_ms.
mod limits;
// The config file, and flags overriding it.
mod config;
// Graceful exit on SIGTERM.
mod shutdown;
// Coordinator stores: one Store contract on FsStore and on EtcdStore (a real etcd).
mod store;
// Cluster mode: barrier pushes, the dashboard lock and its takeover, proxies outliving the
// dashboard and the store, a restarted proxy reloading its table, `tessera up`.
mod control_plane;
// The dashboard's REST API: token, error statuses and shape, `tessera admin`, /metrics.
mod dashboard_api;
// `tessera admin` as operators read it: slot ranges, migrations by range, grouped numbers,
// proxies by address, the console told apart from a dashboard, refusals without backtraces.
mod admin_cli;
// A killed master: its slots fail with a clear error until a replica is promoted.
mod failover;
// Replica reads: the read policy, reads served by fresh replicas only, never older than the
// bound (under writes, a frozen replica), never for a moving slot.
mod replica_reads;
// Pub/sub: byte-exact against direct Redis in RESP2 and RESP3, across two proxies (raw and the
// redis crate), subscribers through a slot move, an abort and a promotion, a subscriber that
// never reads, 1000 idle subscribers.
mod pubsub;
// Slot migration under load: the checker, an abort, crashes; a big key moved in chunks.
mod migration;
// How the mover copies: exact TTLs, a big stream with its groups, keys left in transit.
mod migration_copy;
// Migrations as jobs: the history with true numbers, callers and ends across restarts; why a
// step was held.
mod migration_jobs;
// The migration status against the servers: done %, keys left and ETA while a group is
// drained under writes; a migration that moves nothing refused.
mod migration_progress;
// Copy rounds: a slot written all the time while it moves, a slot moved away and straight
// back, KEYS/SCAN/RANDOMKEY while a slot's keys are on both sides.
mod migration_rounds;
// SLOWLOG and COMMANDLOG from the proxy's own measurements: entries, slow scripts, large
// requests and replies, a hostile client's bounded entries, the dashboard's merge.
mod commandlog;
// Per-slot statistics (traffic through a proxy, keys and memory) and a rebalance by load.
mod slot_stats;
// Hot keys: planted keys ranked per proxy and merged over two; memory bounded.
mod hotkeys;
// Hot-key cache: served hits, invalidation through any proxy or straight to Redis, link down.
mod hot_cache;
// A proxy cut off from the store fences itself; the dashboard moves on only once it has.
mod fencing;
// Proxy health: a frozen proxy lost and back, a lost one kept listed until removed.
mod proxy_health;
// Many proxies on etcd: stopped together or killed, they never hold a change for long.
mod fleet;
// The shipped Prometheus alert rules: promtool's unit tests, and every metric they name exported.
mod alerts;
// The proxies presented as a Redis Cluster to cluster clients (redis-py, ioredis).
mod cluster_clients;
// The shipped Grafana dashboard: every panel's query has data from a real Prometheus.
mod grafana;
// WebAssembly plugins: filter, containment of faulty plugins, the catalog, hot reload.
mod plugins;
// The converter plugin: key namespaces per user and value compression, against plain Redis.
mod converter;
// Plugins written in C and AssemblyScript, run by a proxy: the filter and the metrics plugin.
mod plugin_languages;
// A plugin's canary: a candidate version on a share of the proxies, promoted or rolled back.
mod plugin_canary;
// The latency of plugin hook calls: histograms on /metrics, the admin API, the dashboard.
mod plugin_latency;
// The web console: login, sessions, CSRF, lockout; relaying to dashboards in fs and etcd
// stores; the audit log; `tessera up --clusters 2`.
mod console;
// The console's login under attack: a flood with random names in bounded memory, parallel
// attempts against the lockout, a stranger's lockout from another address, sessions across
// a restart, login events kept out of the audit log.
mod console_login;
// A dashboard frozen until its lock lapses: the console names it as the lock's last holder,
// says it does not answer and does not advise starting another; a console started after its
// dashboard died says none held the lock since.
mod console_lockless;
// The cluster's users table: managed on the dashboard, pushed to and loaded by proxies,
// hashes only, hostile bodies and a corrupt document.
mod users;
// The control plane's own Redis user (tessera-admin) on every server.
mod backend_admin;
// Secrets at rest and forged pushes: the store readable by its owner only, `tessera up`'s
// secret files, a proxy refusing a topology whose epoch jumps.
mod secrets;
// `tessera up` itself: a signal at any step of its set-up stops every child; a server port
// held by another process is named, not mistaken for its own server.
mod up;
// The HTTP servers' shared bounds (connection cap, header-read timeout) on the dashboard, a
// proxy's admin API and the console; refused credentials throttled by address and audited at
// a bounded rate.
mod http_servers;
// API tokens and roles: viewer, operator, admin; made and revoked from the CLI; the audit log
// naming the token; HMACs only in the store; the console's users' roles; the cached fan-out.
mod roles;
// `tessera import`: restore of an RDB with every type through a 2-group cluster, a live sync
// resumed with PSYNC continue, a damaged RDB refused with nothing written.
mod import;
// Whole-cluster backup under writes, restored into more groups; damaged backups refused.
mod backup;
// Stateful sessions: WATCH/MULTI/EXEC within a slot, blocking commands on dedicated
// connections (across proxies, a client gone while blocked, the limit, through a migration),
// WAIT, scripts and functions on every group.
mod sessions;
// TLS: the proxy's TLS listener (redis-cli, redis-py, the redis crate), certificate reload,
// client certificates, hostile sockets on the TLS port, TLS-only backends (static and in a
// cluster: health checks, the mover), the dashboard and console over HTTPS.
mod tls;
// Mirroring with a diff: a shadow redis-server equal to the primary after a mixed write load,
// a planted divergence counted with samples, a stopped shadow within its bound, the CLI on a
// dashboard-managed cluster.
mod mirror;
// Routing by key prefix: a prefix of one cluster routed to another in the same store, every
// kind of command on it, cross-cluster commands refused, writes through the route across the
// other cluster's migration and the loss of its proxy, bad changes and a wrong password.
mod prefix_routes;
// README.md's command lines run as written: the quickstart against `tessera up`, the operator
// tour against etcd, redis-servers and the dashboard and proxy it starts, the plugin authors'
// tour through tools/new-plugin.sh into a proxy; a line nothing runs must be marked.
mod readme;
