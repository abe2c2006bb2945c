// Shapes of the console and dashboard replies (docs/console-contract.md, docs/api.md,
// host/src/api/dashboard.rs). Fields the servers may leave out are optional here.

export interface DashboardInfo {
  admin_addr: string;
  pid: number;
  host: string;
  version: string;
  start_unix: number;
}

export interface Overview {
  cluster: string;
  epoch: number;
  dashboard: DashboardInfo;
  groups: number;
  groups_down?: number;
  servers: number;
  servers_down: number;
  proxies: number;
  proxies_online: number;
  slots_assigned: number;
  slots_unassigned: number;
  ops_per_sec: number;
  memory_bytes: number;
  keys: number;
  /** Key prefixes this cluster's proxies send to other clusters (absent on older dashboards). */
  routes?: RouteBrief[];
}

/** A prefix route as the overview lists it. */
export interface RouteBrief {
  prefix: string;
  cluster: string;
}

/** What a dashboard token or a console user may do (docs/api.md, "Tokens and roles"). */
export type Role = 'viewer' | 'operator' | 'admin';

export interface ClusterSummary {
  name: string;
  store: string;
  dashboard: DashboardInfo | null;
  reachable: boolean;
  overview: Overview | null;
  error: string | null;
  has_token?: boolean;
  /** The role of the console's token for this cluster (null: none, or no answer). */
  token_role?: Role | null;
  /** What this user may do there: the lower of its own role and the token's. */
  role?: Role | null;
}

/** An API token of a cluster, never its secret. */
export interface Token {
  name: string;
  role: Role;
  created_unix: number;
  created_by: string;
}

/** POST /tokens: the token and its secret, shown this once. */
export interface CreatedToken extends Token {
  token: string;
}

export interface Server {
  addr: string;
  role: 'master' | 'replica';
  up: boolean;
  role_reported?: string | null;
  master_link?: string | null;
  repl_offset?: number | null;
  lag_bytes?: number | null;
  memory_bytes?: number | null;
  keys?: number | null;
  error?: string | null;
}

export interface Group {
  id: number;
  slots: number;
  down: boolean;
  servers: Server[];
}

/** Where read-only commands go (docs/replica-reads.md). */
export type ReadMode = 'master' | 'prefer-replica' | 'replica-only';

export interface ReadPolicy {
  mode: ReadMode;
  max_lag_ms: number;
}

export interface ReplicaState {
  group: number;
  addr: string;
  up: boolean;
  link?: string | null;
  lag_bytes?: number | null;
}

export interface ReadPolicyView {
  policy: ReadPolicy;
  replicas: ReplicaState[];
}

export type ActionState = 'pending' | 'preparing' | 'prepared' | 'migrating' | 'finished';

export interface SlotAction {
  state: ActionState;
  source: number;
  target: number;
  aborting?: boolean;
}

export interface Slot {
  id: number;
  group: number | null;
  action?: SlotAction | null;
}

export interface Proxy {
  token: string;
  addr: string;
  admin_addr: string;
  pid: number;
  host: string;
  start_unix: number;
  state: 'online' | 'offline';
  up: boolean;
  epoch?: number | null;
  version: string;
  error?: string;
}

export interface CommandCount {
  command: string;
  calls: number;
  errors: number;
}

export interface ProxyStats {
  token: string;
  epoch?: number;
  sessions?: number;
  ops_total?: number;
  errors_total?: number;
  ops_per_sec?: number;
  commands?: CommandCount[];
  uptime_secs?: number;
  error?: string;
}

export interface Stats {
  ops_per_sec: number;
  ops_total: number;
  errors_total: number;
  sessions: number;
  commands: CommandCount[];
  proxies: ProxyStats[];
}

export interface SlotProgress {
  slot: number;
  state: ActionState;
  source: number;
  target: number;
  aborting: boolean;
  keys_moved: number;
}

export interface MigrationStatus {
  slots: SlotProgress[];
  pending: number;
  in_flight: number;
  keys_moved: number;
  keys_per_sec: number;
  /** Memory of the keys moved (MEMORY USAGE on the sources), since the dashboard started. */
  bytes_moved?: number;
  bytes_per_sec?: number;
  /** Keys and bytes the running migration has moved. */
  run_keys_moved?: number;
  run_bytes_moved?: number;
  /** Keys still to move, estimated per source group; null while nothing moves. */
  keys_left?: number | null;
  /** The running migration's speed cap (null fields: no cap). */
  throttle?: { max_keys_per_sec: number | null; max_bytes_per_sec: number | null };
  /** The slowest command the mover sent: how long it may have blocked a server. */
  slowest_command?: { ms: number; command: string } | null;
  eta_secs: number | null;
  blocked: string | null;
  max_slots_in_flight: number;
  /** An abort was asked for; the driver turns the slots around at its next step. */
  abort_pending?: boolean;
  /** Write pause per slot of the handoffs this dashboard drove (absent before the first). */
  write_pause?: WritePause | null;
}

export interface WritePause {
  handoffs: number;
  slots: number;
  last_ms: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

export interface Move {
  slot: number;
  from: number;
  to: number;
}

export interface MigrateReply {
  queued: number;
}
export interface AbortReply {
  aborted: number;
}
export interface AssignReply {
  epoch: number;
  assigned: number;
}
export type RebalanceBy = 'slots' | 'weight' | 'load' | 'memory';
export interface RebalanceReply {
  dry_run: boolean;
  moves: Move[];
  slots: number;
  by?: RebalanceBy;
  /** Percent of the mean (load and memory). */
  tolerance?: number | null;
  /** Each group's measure before and after the moves (slots, ops/s or bytes). */
  before?: Record<string, number>;
  after?: Record<string, number>;
  notes?: string[];
}

/** GET /api/slots/stats: per-slot arrays (index = slot) and per-group totals. */
export interface SlotStats {
  window_secs: number;
  sample_secs: number;
  keys_every_secs: number;
  proxies: number;
  slots: {
    group: number[];
    ops_per_sec: number[];
    bytes_per_sec: number[];
    keys: number[];
    memory: number[];
  };
  groups: {
    group: number;
    slots: number;
    ops_per_sec: number;
    bytes_per_sec: number;
    keys: number;
    memory: number;
    keys_exact: boolean | null;
  }[];
}

/** One key of GET /api/hotkeys, summed over the proxies that listed it. */
export interface HotKey {
  /** At most the proxies' max_key_bytes; bytes outside printable ASCII as \xHH. */
  key: string;
  key_len: number;
  truncated: boolean;
  slot: number | null;
  group: number | null;
  ops: number;
  bytes: number;
  seen_by: { token: string; addr: string; ops: number; bytes: number }[];
}

/** GET /api/hotkeys: the cluster's top keys by ops and by bytes. */
export interface HotKeys {
  proxies: number;
  unanswered: string[];
  window_secs: number;
  by_ops: HotKey[];
  by_bytes: HotKey[];
  /** The proxies' hot-key caches ([hot_cache]), summed; counters since each proxy started. */
  hot_cache?: HotCacheFigures;
}

/** A hot-key cache's figures (GET /api/proxy/hotkeys, summed in GET /api/hotkeys). */
export interface HotCacheFigures {
  enabled: boolean;
  hits: number;
  misses: number;
  fills: number;
  invalidations: number;
  entries: number;
  bytes: number;
}

/** A catalog entry (GET /plugins adds `order`; the mutating routes return it without). */
export interface Plugin {
  name: string;
  sha256: string;
  size: number;
  config: unknown;
  enabled: boolean;
  order?: number;
  fail: 'open' | 'closed';
  cpu_budget_ms?: number;
  memory_mb?: number;
  max_input_kb?: number;
  updated_unix: number;
}

/** PUT /plugins/order: the whole catalog, in its new order. */
export interface PluginCatalog {
  version: number;
  plugins: Plugin[];
}

/** Samples summed over the `proxies` that answered (a disabled plugin has none). */
export interface PluginMetrics {
  proxies: number;
  samples: { name: string; labels: Record<string, string>; value: number }[];
}

/** One entry of the console's login log (`GET /api/logins`); a run of alike events is one entry. */
export interface LoginEvent {
  time_ms: number;
  user: string;
  /** The client's address (IPv6 as its /64). */
  addr: string;
  outcome: 'login' | 'failed' | 'locked_out' | 'too_many_attempts' | 'busy' | 'logout';
  status: number;
  detail: string;
  count: number;
}

/** A dashboard audit entry, with its cluster set by the console. */
export interface AuditEntry {
  time_ms: number;
  actor?: string;
  /** The name of the token the dashboard call carried. */
  token?: string | null;
  role?: Role | null;
  user?: string;
  method?: string;
  path?: string;
  detail?: unknown;
  status?: number;
  cluster?: string | null;
  event?: string;
  kind?: string;
  [k: string]: unknown;
}

/** GET /api/mirror (docs/mirroring.md). */
export type MirrorMode = 'writes' | 'all';

export interface MirrorSettings {
  target: string;
  mode: MirrorMode;
  /** Whether a password is set (never the password). */
  password: boolean;
  max_queue: number;
  max_queue_bytes: number;
  max_command_bytes: number;
}

export interface MirrorCommand {
  command: string;
  sent: number;
  compared: number;
  mismatched: number;
  uncompared: number;
}

export interface MirrorFigures {
  sent: number;
  compared: number;
  mismatched: number;
  uncompared: number;
  errors: number;
  dropped: Record<string, number>;
  queue_entries: number;
  queue_bytes: number;
  commands: MirrorCommand[];
}

export interface MirrorSample {
  command: string;
  args: string[];
  primary: string;
  shadow: string;
  unix_ms: number;
  proxy?: string;
}

export interface Mirror {
  version: number;
  config: MirrorSettings | null;
  figures: MirrorFigures;
  proxies: { token: string; addr: string; version?: number; on?: boolean; queue_entries?: number; queue_bytes?: number; error?: string }[];
  samples: MirrorSample[];
}

/** PUT /api/mirror. */
export interface MirrorChange {
  target: string;
  mode: MirrorMode;
  password?: string;
}

/** The command logs a proxy keeps (`docs/commandlog.md`). */
export type CommandLogType = 'slow' | 'large-request' | 'large-reply';

/** One entry of the cluster's command log: `value` is µs for `slow`, bytes otherwise. */
export interface CommandLogEntry {
  proxy: string;
  proxy_addr: string;
  id: number;
  /** Unix seconds. */
  time: number;
  value: number;
  args: string[];
  client_addr: string;
  client_name: string;
}

/** `GET /api/commandlog`: every proxy's log of one type, merged newest first. */
export interface CommandLog {
  type: CommandLogType;
  proxies: number;
  unreachable: string[];
  entries: CommandLogEntry[];
}

/** A key prefix whose commands this cluster's proxies forward to a proxy of another cluster. */
export interface PrefixRoute {
  prefix: string;
  /** Another cluster in the same store. */
  cluster: string;
  /** The user the target cluster's proxies are authenticated as; null or absent: no AUTH. Never the password. */
  user?: string | null;
}

/** What one proxy of this cluster does with a prefix right now. */
export interface ProxyPrefixRoute {
  prefix: string;
  cluster: string;
  /** The other cluster's proxy it forwards to; null when none is reachable (then `error`). */
  target: string | null;
  error?: string | null;
}

export interface ProxyRouting {
  addr: string;
  /** Set when the proxy did not answer (then `routes` is empty). */
  error?: string | null;
  routes: ProxyPrefixRoute[];
}

/** GET /api/routes, and the reply of PUT. */
export interface PrefixRoutes {
  routes: PrefixRoute[];
  /** The other clusters of the store a route may name. */
  clusters: string[];
  proxies: ProxyRouting[];
}

/**
 * One route of PUT /api/routes (the whole list). A `user` without `password` keeps the
 * password the server has for that prefix and user; neither: no credential.
 */
export interface PrefixRouteChange {
  prefix: string;
  cluster: string;
  user?: string;
  password?: string;
}
