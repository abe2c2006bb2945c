// What the console needs of the API that its OpenAPI document (host/control/src/api/openapi.json, kept
// by hand) lacks or gets wrong, checked against the Rust structs that serialize the answers.
// scripts/gen-api.mjs applies it before making the types and validators, and refuses an entry
// the document has caught up with. It goes once the document is derived from the Rust types.
// OpenAPI 3.0 schema objects. A dashboard answer's `required` lists what the console relies
// on, as the document does: fields added to a route later stay optional, since the console
// also shows clusters whose dashboards are older than it. The console's own routes are served
// with the app, by the same binary: there `required` is everything the server sends.

const int = { type: 'integer' };
const num = { type: 'number' };
const str = { type: 'string' };
const bool = { type: 'boolean' };
/** `s` or null (a `$ref` takes no siblings in OpenAPI 3.0, hence the allOf). */
const nullable = (s) => (s.$ref ? { allOf: [s], nullable: true } : { ...s, nullable: true });
const ref = (name) => ({ $ref: `#/components/schemas/${name}` });
const arrayOf = (items) => ({ type: 'array', items });
/** An object whose every property is always sent. */
const always = (properties) => ({ type: 'object', required: Object.keys(properties), properties });

/** Schemas of the document replaced, each because it contradicts the server. */
export const corrections = {
  // api/dashboard.rs SlotView.action (coordinator::model::SlotAction): the document lists
  // only `state` (as any string) and `target`; `source` and `aborting` are always sent too.
  SlotAction: always({
    state: { type: 'string', enum: ['pending', 'preparing', 'prepared', 'migrating', 'finished'] },
    source: int,
    target: int,
    aborting: bool,
  }),
  // dashboard/audit.rs AuditEntry.role is an Option<Role>, sent as null (entries from before
  // tokens had roles); the document does not allow null.
  AuditEntry: {
    type: 'object',
    required: ['time_ms', 'actor', 'token', 'role', 'method', 'path', 'detail', 'status'],
    properties: {
      time_ms: int,
      actor: str,
      token: nullable(str),
      role: nullable(ref('Role')),
      method: str,
      path: str,
      detail: str,
      status: int,
    },
  },
  // dashboard/mirror.rs mirror_view: `config` is MirrorConfig::view, whose `password` is a
  // boolean (whether one is set), not the MirrorConfig of PUT that the document names.
  Mirror: always({
    version: int,
    config: nullable(
      always({
        target: str,
        mode: { type: 'string', enum: ['writes', 'all'] },
        password: bool,
        max_queue: int,
        max_queue_bytes: int,
        max_command_bytes: int,
      }),
    ),
    figures: ref('MirrorFigures'),
    proxies: arrayOf({
      type: 'object',
      // A proxy that did not answer has only these and `error`.
      required: ['token', 'addr'],
      properties: { token: str, addr: str, version: int, on: bool, queue_entries: int, queue_bytes: int, error: str },
    }),
    samples: arrayOf(ref('MirrorSample')),
  }),
  // mirror/stats.rs Figures, summed by dashboard/mirror.rs: every field is always sent; the
  // document makes each optional.
  MirrorFigures: always({
    sent: int,
    compared: int,
    mismatched: int,
    uncompared: int,
    errors: int,
    dropped: { type: 'object', additionalProperties: int },
    queue_entries: int,
    queue_bytes: int,
    commands: arrayOf(always({ command: str, sent: int, compared: int, mismatched: int, uncompared: int })),
  }),
  // mirror/stats.rs Sample, with the token of the proxy that saw it (dashboard/mirror.rs):
  // always sent; the document makes each field optional.
  MirrorSample: always({ command: str, args: arrayOf(str), primary: str, shadow: str, unix_ms: int, proxy: str }),
  // dashboard/routes.rs RoutesView, ProxyRoutes and router/prefix.rs RouteStatus: every field
  // is always sent (null where it is an Option); the document makes each optional.
  RoutesView: always({ routes: arrayOf(ref('PrefixRoute')), clusters: arrayOf(str), proxies: arrayOf(ref('ProxyRoutes')) }),
  ProxyRoutes: always({ addr: str, error: nullable(str), routes: arrayOf(ref('RouteStatus')) }),
  RouteStatus: always({ prefix: str, cluster: str, target: nullable(str), error: nullable(str) }),
  // dashboard/migration.rs MigrationStatus: `write_pause` (PauseStats) is missing from the
  // document. (`required` as the document has it; the server sends every field.)
  MigrationStatus: {
    type: 'object',
    required: ['slots', 'pending', 'in_flight', 'keys_moved', 'keys_per_sec', 'max_slots_in_flight'],
    properties: {
    slots: arrayOf(ref('SlotProgress')),
    pending: int,
    in_flight: int,
    keys_moved: int,
    bytes_moved: int,
    keys_per_sec: num,
    bytes_per_sec: num,
    run_keys_moved: int,
    run_bytes_moved: int,
    keys_left: nullable(int),
    eta_secs: nullable(num),
    throttle: ref('ThrottleLimits'),
    slowest_command: nullable(always({ ms: num, command: str })),
    blocked: nullable(str),
    max_slots_in_flight: int,
    abort_pending: bool,
    write_pause: nullable(
      always({ handoffs: int, slots: int, last_ms: num, p50_ms: num, p99_ms: num, max_ms: num }),
    ),
    },
  },
};

/** Schemas the document does not have. */
export const additions = {
  // === answers the document gives only an example of ===

  // dashboard/slot_stats.rs SlotStatsView: per-slot arrays (index = slot; group 0 unassigned).
  // A group's keys_scanned, dbsize and keys_at_unix are sent too; the console shows none.
  SlotStats: always({
    window_secs: num,
    sample_secs: num,
    keys_every_secs: num,
    proxies: int,
    slots: always({
      group: arrayOf(int),
      ops_per_sec: arrayOf(num),
      bytes_per_sec: arrayOf(num),
      keys: arrayOf(num),
      memory: arrayOf(num),
    }),
    groups: arrayOf(
      always({
        group: int,
        slots: int,
        ops_per_sec: num,
        bytes_per_sec: num,
        keys: num,
        memory: num,
        keys_exact: nullable(bool),
      }),
    ),
  }),
  // dashboard/hotkeys.rs ClusterHotKey (and SeenBy).
  HotKey: always({
    key: str,
    key_len: int,
    truncated: bool,
    slot: nullable(int),
    group: nullable(int),
    ops: int,
    bytes: int,
    seen_by: arrayOf(always({ token: str, addr: str, ops: int, bytes: int })),
  }),
  // hotcache/mod.rs HotCacheFigures.
  HotCacheFigures: always({
    enabled: bool,
    hits: int,
    misses: int,
    fills: int,
    invalidations: int,
    entries: int,
    bytes: int,
  }),
  // dashboard/hotkeys.rs ClusterHotKeys (`hot_cache` came later).
  HotKeys: {
    type: 'object',
    required: ['proxies', 'unanswered', 'window_secs', 'by_ops', 'by_bytes'],
    properties: {
      proxies: int,
      unanswered: arrayOf(str),
      window_secs: num,
      by_ops: arrayOf(ref('HotKey')),
      by_bytes: arrayOf(ref('HotKey')),
      hot_cache: ref('HotCacheFigures'),
    },
  },
  // telemetry/commandlog.rs LogType.
  CommandLogType: { type: 'string', enum: ['slow', 'large-request', 'large-reply'] },
  // dashboard/commandlog.rs ClusterEntry (EntryView flattened): `value` is µs for `slow`,
  // bytes otherwise; `time` Unix seconds.
  CommandLogEntry: always({
    proxy: str,
    proxy_addr: str,
    id: int,
    time: int,
    value: int,
    args: arrayOf(str),
    client_addr: str,
    client_name: str,
  }),
  // dashboard/commandlog.rs ClusterLog.
  CommandLog: always({
    type: ref('CommandLogType'),
    proxies: int,
    unreachable: arrayOf(str),
    entries: arrayOf(ref('CommandLogEntry')),
  }),
  // api/dashboard.rs migrate: {"queued", "throttle"} (the console reads only `queued`).
  MigrateResult: { type: 'object', required: ['queued'], properties: { queued: int, throttle: ref('ThrottleLimits') } },
  // api/dashboard.rs abort: {"aborted"}.
  AbortResult: always({ aborted: int }),
  // api/dashboard.rs rebalance: a plan (dashboard/rebalance.rs RebalancePlan, with dry_run,
  // slots and the tolerance in percent), or for moves queued as given only dry_run, by (null
  // when the call named none), moves and slots. (`by` is always sent: null or a measure.)
  RebalanceResult: {
    type: 'object',
    required: ['dry_run', 'moves', 'slots'],
    properties: {
      dry_run: bool,
      by: nullable({ type: 'string', enum: ['slots', 'weight', 'load', 'memory'] }),
      tolerance: nullable(num),
      moves: arrayOf(ref('Move')),
      slots: int,
      before: { type: 'object', additionalProperties: num },
      after: { type: 'object', additionalProperties: num },
      notes: arrayOf(str),
    },
  },

  // === the console's own routes (host/console/src/, docs/console.md), in no document ===

  // console/auth.rs login and me: {"user", "csrf"}.
  ConsoleSession: always({ user: str, csrf: str }),
  // console/relay.rs ClusterView, an entry of GET /api/clusters. `overview` is the
  // dashboard's answer as it came (checked on its own, see src/api/console.ts).
  ConsoleCluster: always({
    name: str,
    store: str,
    dashboard: nullable(always({ admin_addr: str, pid: int, host: str, version: str, start_unix: int })),
    reachable: bool,
    overview: nullable({}),
    error: nullable(str),
    has_token: bool,
    token_role: nullable(ref('Role')),
    role: nullable(ref('Role')),
  }),
  ConsoleClusters: arrayOf(ref('ConsoleCluster')),
  // console/audit.rs MergedEntry: a dashboard's entry and its cluster.
  ConsoleAuditEntry: { allOf: [ref('AuditEntry'), always({ cluster: str })] },
  ConsoleAudit: arrayOf(ref('ConsoleAuditEntry')),
  // console/logins.rs LoginEvent.
  ConsoleLoginEvent: always({
    time_ms: int,
    user: str,
    addr: str,
    outcome: { type: 'string', enum: ['login', 'failed', 'locked_out', 'too_many_attempts', 'busy', 'logout'] },
    status: int,
    detail: str,
    count: int,
  }),
  ConsoleLogins: arrayOf(ref('ConsoleLoginEvent')),
};

/** Routes whose JSON answer the document shows by example only: "METHOD /path" → schema. */
export const missingAnswers = {
  'GET /api/slots/stats': 'SlotStats',
  'GET /api/hotkeys': 'HotKeys',
  'GET /api/commandlog': 'CommandLog',
  'POST /api/migrations': 'MigrateResult',
  'POST /api/migrations/abort': 'AbortResult',
  'POST /api/rebalance': 'RebalanceResult',
};
