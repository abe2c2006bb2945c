// The console's HTTP API (docs/console.md) and the dashboard routes it relays under
// /api/clusters/{name}/… (docs/api.md). The SPA holds no data of its own: every view reads
// through this client, and every mutating call carries the session's CSRF token.

import type {
  AbortReply,
  AssignReply,
  AuditEntry,
  ClusterSummary,
  CommandLog,
  CommandLogType,
  CreatedToken,
  Group,
  LoginEvent,
  MigrateReply,
  MigrationStatus,
  Mirror,
  MirrorChange,
  Move,
  Overview,
  Plugin,
  PluginCatalog,
  PrefixRouteChange,
  PrefixRoutes,
  PluginMetrics,
  Proxy,
  ReadPolicy,
  ReadPolicyView,
  RebalanceBy,
  RebalanceReply,
  SlotStats,
  HotKeys,
  Role,
  Slot,
  Stats,
  Token,
} from './types';

/** An API failure: the `{"error":{"code","message"}}` body when there was one. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Turns a failed response into an ApiError, whatever its body. */
export async function errorFrom(resp: Response): Promise<ApiError> {
  const text = await resp.text().catch(() => '');
  try {
    const v = JSON.parse(text);
    if (v && typeof v === 'object' && v.error && typeof v.error === 'object') {
      return new ApiError(
        resp.status,
        String(v.error.code ?? 'error'),
        String(v.error.message ?? resp.statusText),
      );
    }
  } catch {
    // not JSON: fall through
  }
  const msg = text.trim() || resp.statusText || `HTTP ${resp.status}`;
  return new ApiError(resp.status, `http_${resp.status}`, msg.slice(0, 500));
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body (e.g. a .wasm module) sent as is, with this content type. */
  raw?: { data: BodyInit; contentType: string };
  signal?: AbortSignal;
}

export class Client {
  csrf: string | null = null;
  /** Called on any 401 (the session ended): the app goes back to the login form. */
  onUnauthorized: (() => void) | null = null;
  private readonly fetchImpl: FetchLike;

  constructor(fetchImpl?: FetchLike) {
    this.fetchImpl = fetchImpl ?? ((input, init) => fetch(input, init));
  }

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    let body: BodyInit | undefined;
    if (opts.raw) {
      headers['Content-Type'] = opts.raw.contentType;
      body = opts.raw.data;
    } else if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const m = method.toUpperCase();
    if (MUTATING.has(m) && this.csrf) headers['X-CSRF-Token'] = this.csrf;
    let resp: Response;
    try {
      resp = await this.fetchImpl(path, {
        method: m,
        headers,
        body,
        credentials: 'same-origin',
        signal: opts.signal,
      });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', `cannot reach the console: ${(e as Error).message ?? e}`);
    }
    if (!resp.ok) {
      const err = await errorFrom(resp);
      if (resp.status === 401 && !path.startsWith('/auth/login')) this.onUnauthorized?.();
      throw err;
    }
    const text = await resp.text();
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      return text as unknown as T;
    }
  }

  get<T>(path: string, signal?: AbortSignal) {
    return this.request<T>('GET', path, { signal });
  }
  post<T>(path: string, body?: unknown) {
    return this.request<T>('POST', path, { body });
  }
  put<T>(path: string, body?: unknown) {
    return this.request<T>('PUT', path, { body });
  }
  del<T>(path: string) {
    return this.request<T>('DELETE', path);
  }

  // --- session ---
  async login(user: string, password: string): Promise<{ user: string; csrf: string }> {
    const r = await this.request<{ user: string; csrf: string }>('POST', '/auth/login', {
      body: { user, password },
    });
    this.csrf = r.csrf;
    return r;
  }
  async me(): Promise<{ user: string; csrf: string }> {
    const r = await this.get<{ user: string; csrf: string }>('/auth/me');
    this.csrf = r.csrf;
    return r;
  }
  async logout(): Promise<void> {
    try {
      await this.post('/auth/logout');
    } finally {
      this.csrf = null;
    }
  }

  // --- federation ---
  clusters(signal?: AbortSignal) {
    return this.get<ClusterSummary[]>('/api/clusters', signal);
  }
  audit(limit = 200, signal?: AbortSignal) {
    return this.get<AuditEntry[]>(`/api/audit?limit=${limit}`, signal);
  }
  /** The console's login log, kept apart from the audit of changes. */
  logins(limit = 200, signal?: AbortSignal) {
    return this.get<LoginEvent[]>(`/api/logins?limit=${limit}`, signal);
  }

  /** The dashboard API of one cluster, relayed by the console. */
  cluster(name: string): ClusterApi {
    return new ClusterApi(this, name);
  }
}

const enc = encodeURIComponent;

export class ClusterApi {
  readonly base: string;
  constructor(
    private readonly c: Client,
    readonly name: string,
  ) {
    this.base = `/api/clusters/${enc(name)}`;
  }
  overview(signal?: AbortSignal) {
    return this.c.get<Overview>(`${this.base}/overview`, signal);
  }
  stats(signal?: AbortSignal) {
    return this.c.get<Stats>(`${this.base}/stats`, signal);
  }
  groups(signal?: AbortSignal) {
    return this.c.get<Group[]>(`${this.base}/groups`, signal);
  }
  readPolicy(signal?: AbortSignal) {
    return this.c.get<ReadPolicyView>(`${this.base}/read-policy`, signal);
  }
  setReadPolicy(p: Partial<ReadPolicy>) {
    return this.c.put<ReadPolicyView>(`${this.base}/read-policy`, p);
  }
  createGroup(id?: number) {
    return this.c.post<Group>(`${this.base}/groups`, id === undefined ? {} : { id });
  }
  deleteGroup(id: number) {
    return this.c.del<object>(`${this.base}/groups/${id}`);
  }
  addServer(group: number, addr: string) {
    return this.c.post<Group>(`${this.base}/groups/${group}/servers`, { addr });
  }
  removeServer(group: number, addr: string) {
    return this.c.del<Group>(`${this.base}/groups/${group}/servers/${enc(addr)}`);
  }
  promote(group: number, addr: string) {
    return this.c.post<Group>(`${this.base}/groups/${group}/promote`, { addr });
  }
  slots(signal?: AbortSignal) {
    return this.c.get<Slot[]>(`${this.base}/slots`, signal);
  }
  assign(from: number, to: number, group: number) {
    return this.c.post<AssignReply>(`${this.base}/slots/assign`, { from, to, group });
  }
  proxies(signal?: AbortSignal) {
    return this.c.get<Proxy[]>(`${this.base}/proxies`, signal);
  }
  setProxyOnline(token: string, online: boolean) {
    return this.c.post<Proxy>(`${this.base}/proxies/${enc(token)}/${online ? 'online' : 'offline'}`);
  }
  migrations(signal?: AbortSignal) {
    return this.c.get<MigrationStatus>(`${this.base}/migrations`, signal);
  }
  migrate(from: number, to: number, group: number) {
    return this.c.post<MigrateReply>(`${this.base}/migrations`, { from, to, group });
  }
  abort(slots?: number[]) {
    return this.c.post<AbortReply>(`${this.base}/migrations/abort`, slots ? { slots } : {});
  }
  rebalance(dryRun: boolean, weights?: Record<string, number>, by?: RebalanceBy, tolerance?: number) {
    const body: Record<string, unknown> = { dry_run: dryRun };
    if (weights) body.weights = weights;
    if (by) body.by = by;
    if (tolerance != null) body.tolerance = tolerance;
    return this.c.post<RebalanceReply>(`${this.base}/rebalance`, body);
  }
  /** Queues the moves of a plan shown earlier, exactly (409 if the cluster changed). */
  queueMoves(moves: Move[], by?: RebalanceBy) {
    return this.c.post<RebalanceReply>(`${this.base}/rebalance`, { moves, by });
  }
  slotStats(signal?: AbortSignal) {
    return this.c.get<SlotStats>(`${this.base}/slots/stats`, signal);
  }
  hotKeys(signal?: AbortSignal) {
    return this.c.get<HotKeys>(`${this.base}/hotkeys`, signal);
  }
  plugins(signal?: AbortSignal) {
    return this.c.get<Plugin[]>(`${this.base}/plugins`, signal);
  }
  uploadPlugin(name: string, wasm: ArrayBuffer | Blob) {
    return this.c.request<Plugin>('PUT', `${this.base}/plugins/${enc(name)}/module`, {
      raw: { data: wasm, contentType: 'application/wasm' },
    });
  }
  configurePlugin(name: string, config: unknown, fail?: 'open' | 'closed') {
    const body: Record<string, unknown> = { config };
    if (fail) body.fail = fail;
    return this.c.put<Plugin>(`${this.base}/plugins/${enc(name)}/config`, body);
  }
  setPluginEnabled(name: string, enabled: boolean) {
    return this.c.post<Plugin>(`${this.base}/plugins/${enc(name)}/${enabled ? 'enable' : 'disable'}`);
  }
  orderPlugins(order: string[]) {
    return this.c.put<PluginCatalog>(`${this.base}/plugins/order`, { order });
  }
  deletePlugin(name: string) {
    return this.c.del<object>(`${this.base}/plugins/${enc(name)}`);
  }
  pluginMetrics(name: string, signal?: AbortSignal) {
    return this.c.get<PluginMetrics>(`${this.base}/plugins/${enc(name)}/metrics`, signal);
  }
  mirror(signal?: AbortSignal) {
    return this.c.get<Mirror>(`${this.base}/mirror`, signal);
  }
  setMirror(change: MirrorChange) {
    return this.c.put<Mirror>(`${this.base}/mirror`, change);
  }
  mirrorOff() {
    return this.c.del<Mirror>(`${this.base}/mirror`);
  }
  /** Key prefixes routed to other clusters, and what each proxy does with them now. */
  routes(signal?: AbortSignal) {
    return this.c.get<PrefixRoutes>(`${this.base}/routes`, signal);
  }
  /** Replaces the whole list (admin). */
  setRoutes(routes: PrefixRouteChange[]) {
    return this.c.put<PrefixRoutes>(`${this.base}/routes`, { routes });
  }
  /** Every proxy's command log of `type`, merged newest first (operator role). */
  commandLog(type: CommandLogType, signal?: AbortSignal) {
    return this.c.get<CommandLog>(`${this.base}/commandlog?type=${type}`, signal);
  }
  tokens(signal?: AbortSignal) {
    return this.c.get<Token[]>(`${this.base}/tokens`, signal);
  }
  createToken(name: string, role: Role) {
    return this.c.post<CreatedToken>(`${this.base}/tokens`, { name, role });
  }
  revokeToken(name: string) {
    return this.c.del<object>(`${this.base}/tokens/${enc(name)}`);
  }
}

/** One client for the whole app. */
export const api = new Client();
