// One cluster's dashboard API (docs/api.md), relayed by the console under
// /api/clusters/{name}/… (docs/console.md, "Relay"). Each call is typed by its route in the
// generated types, and its answer checked against the route's schema before it is returned.

import { checkAnswer } from './check';
import { fillPath, relayed, type Answer, type Method, type PathParams, type RequestBody, type Route } from './contract';
import type { Transport } from './transport';
import type { PluginLimits } from '../lib/config';
import type { CanaryStart, CommandLogType, Move, ReadPolicy, RebalanceBy, Role } from './shapes';

interface CallArgs<P extends Route, M extends Method> {
  path?: PathParams<P, M>;
  /** `?…`, already encoded. */
  query?: string;
  body?: RequestBody<P, M>;
  raw?: { data: BodyInit; contentType: string };
  signal?: AbortSignal;
}

export class ClusterApi {
  constructor(
    private readonly t: Transport,
    readonly name: string,
  ) {}

  /** Calls `method route` through the relay; the answer once it fits the route's schema. */
  private async call<P extends Route, M extends Method>(method: M, route: P, args: CallArgs<P, M> = {}): Promise<Answer<P, M>> {
    const via = relayed(route);
    const url = fillPath(via, { ...args.path, cluster: this.name }) + (args.query ?? '');
    const r = await this.t.send(method, url, { body: args.body, raw: args.raw, signal: args.signal });
    const m = method.toUpperCase();
    return checkAnswer<Answer<P, M>>(`cluster ${this.name}`, `${m} ${route}`, r.status, r.body, `${m} ${via}`);
  }

  overview(signal?: AbortSignal) {
    return this.call('get', '/api/overview', { signal });
  }
  stats(signal?: AbortSignal) {
    return this.call('get', '/api/stats', { signal });
  }
  groups(signal?: AbortSignal) {
    return this.call('get', '/api/groups', { signal });
  }
  readPolicy(signal?: AbortSignal) {
    return this.call('get', '/api/read-policy', { signal });
  }
  setReadPolicy(p: Partial<ReadPolicy>) {
    return this.call('put', '/api/read-policy', { body: p });
  }
  createGroup(id?: number) {
    return this.call('post', '/api/groups', { body: id === undefined ? {} : { id } });
  }
  deleteGroup(id: number) {
    return this.call('delete', '/api/groups/{id}', { path: { id } });
  }
  addServer(group: number, addr: string) {
    return this.call('post', '/api/groups/{id}/servers', { path: { id: group }, body: { addr } });
  }
  removeServer(group: number, addr: string) {
    return this.call('delete', '/api/groups/{id}/servers/{addr}', { path: { id: group, addr } });
  }
  promote(group: number, addr: string) {
    return this.call('post', '/api/groups/{id}/promote', { path: { id: group }, body: { addr } });
  }
  slots(signal?: AbortSignal) {
    return this.call('get', '/api/slots', { signal });
  }
  assign(from: number, to: number, group: number) {
    return this.call('post', '/api/slots/assign', { body: { from, to, group } });
  }
  proxies(signal?: AbortSignal) {
    return this.call('get', '/api/proxies', { signal });
  }
  /** Removes a lost proxy from the list (one that answers is refused, 409). */
  removeProxy(token: string) {
    return this.call('delete', '/api/proxies/{token}', { path: { token } });
  }
  setProxyOnline(token: string, online: boolean) {
    return online
      ? this.call('post', '/api/proxies/{token}/online', { path: { token } })
      : this.call('post', '/api/proxies/{token}/offline', { path: { token } });
  }
  migrations(signal?: AbortSignal) {
    return this.call('get', '/api/migrations', { signal });
  }
  /** Moves slots `from..=to` to `group`, under a speed cap of `maxKeysPerSec` if given. */
  migrate(from: number, to: number, group: number, maxKeysPerSec?: number) {
    const body = maxKeysPerSec == null ? { from, to, group } : { from, to, group, max_keys_per_sec: maxKeysPerSec };
    return this.call('post', '/api/migrations', { body });
  }
  /** The last migrations and rebalances as jobs, newest first. */
  migrationHistory(signal?: AbortSignal) {
    return this.call('get', '/api/migrations/history', { signal });
  }
  /** Changes the running migration's speed cap; `undefined` lifts it. 409 with nothing running. */
  setThrottle(maxKeysPerSec?: number) {
    const body = maxKeysPerSec == null ? {} : { max_keys_per_sec: maxKeysPerSec };
    return this.call('put', '/api/migrations/throttle', { body });
  }
  abort(slots?: number[]) {
    return this.call('post', '/api/migrations/abort', { body: slots ? { slots } : {} });
  }
  /** Plans a rebalance (`dryRun`) or queues one planned anew. */
  rebalance(dryRun: boolean, weights?: Record<string, number>, by?: RebalanceBy, tolerance?: number) {
    const body: RequestBody<'/api/rebalance', 'post'> = { dry_run: dryRun };
    if (weights) body.weights = weights;
    if (by) body.by = by;
    if (tolerance != null) body.tolerance = tolerance;
    return this.call('post', '/api/rebalance', { body });
  }
  /** Queues the moves of a plan shown earlier, exactly (409 if the cluster changed). */
  queueMoves(moves: Move[], by?: RebalanceBy) {
    return this.call('post', '/api/rebalance', { body: { moves, by } });
  }
  slotStats(signal?: AbortSignal) {
    return this.call('get', '/api/slots/stats', { signal });
  }
  hotKeys(signal?: AbortSignal) {
    return this.call('get', '/api/hotkeys', { signal });
  }
  plugins(signal?: AbortSignal) {
    return this.call('get', '/api/plugins', { signal });
  }
  uploadPlugin(name: string, wasm: ArrayBuffer | Blob) {
    return this.call('put', '/api/plugins/{name}/module', { path: { name }, raw: { data: wasm, contentType: 'application/wasm' } });
  }
  /** Sets a plugin's config, and its fail policy and resource limits when given. */
  configurePlugin(name: string, config: unknown, fail?: 'open' | 'closed', limits: PluginLimits = {}) {
    return this.call('put', '/api/plugins/{name}/config', { path: { name }, body: fail ? { config, fail, ...limits } : { config, ...limits } });
  }
  setPluginEnabled(name: string, enabled: boolean) {
    return enabled
      ? this.call('post', '/api/plugins/{name}/enable', { path: { name } })
      : this.call('post', '/api/plugins/{name}/disable', { path: { name } });
  }
  orderPlugins(order: string[]) {
    return this.call('put', '/api/plugins/order', { body: { order } });
  }
  /** Stores a candidate module for the plugin's canary (the stable version is unchanged). */
  uploadCanaryModule(name: string, wasm: ArrayBuffer | Blob) {
    return this.call('put', '/api/plugins/{name}/canary/module', { path: { name }, raw: { data: wasm, contentType: 'application/wasm' } });
  }
  /** Starts the plugin's canary, or changes its candidate config or share. */
  startCanary(name: string, body: CanaryStart) {
    return this.call('post', '/api/plugins/{name}/canary', { path: { name }, body });
  }
  promoteCanary(name: string) {
    return this.call('post', '/api/plugins/{name}/canary/promote', { path: { name } });
  }
  rollbackCanary(name: string) {
    return this.call('post', '/api/plugins/{name}/canary/rollback', { path: { name } });
  }
  deletePlugin(name: string) {
    return this.call('delete', '/api/plugins/{name}', { path: { name } });
  }
  /** The metrics history of `series` (the cluster's totals when null) over `range`. */
  history(range: string, series: string[] | null, signal?: AbortSignal) {
    const q = new URLSearchParams({ range });
    if (series) q.set('series', series.join(','));
    return this.call('get', '/api/history', { query: `?${q.toString()}`, signal });
  }
  historySeries(signal?: AbortSignal) {
    return this.call('get', '/api/history/series', { signal });
  }
  /** The newest `limit` events, or those after `after`. */
  events(after: number | null, limit: number, signal?: AbortSignal) {
    const q = new URLSearchParams({ limit: String(limit) });
    if (after != null) q.set('after', String(after));
    return this.call('get', '/api/events', { query: `?${q.toString()}`, signal });
  }
  pluginMetrics(name: string, signal?: AbortSignal) {
    return this.call('get', '/api/plugins/{name}/metrics', { path: { name }, signal });
  }
  /** The recent backup jobs and their progress (docs/backup.md). */
  backups(signal?: AbortSignal) {
    return this.call('get', '/api/backups', { signal });
  }
  startBackup(req: RequestBody<'/api/backups', 'post'>) {
    return this.call('post', '/api/backups', { body: req });
  }
  mirror(signal?: AbortSignal) {
    return this.call('get', '/api/mirror', { signal });
  }
  setMirror(change: RequestBody<'/api/mirror', 'put'>) {
    return this.call('put', '/api/mirror', { body: change });
  }
  mirrorOff() {
    return this.call('delete', '/api/mirror');
  }
  /** Key prefixes routed to other clusters, and what each proxy does with them now. */
  routes(signal?: AbortSignal) {
    return this.call('get', '/api/routes', { signal });
  }
  /** Replaces the whole list (admin). */
  setRoutes(routes: RequestBody<'/api/routes', 'put'>['routes']) {
    return this.call('put', '/api/routes', { body: { routes } });
  }
  /** Every proxy's command log of `type`, merged newest first (operator role). */
  commandLog(type: CommandLogType, signal?: AbortSignal) {
    return this.call('get', '/api/commandlog', { query: `?type=${encodeURIComponent(type)}`, signal });
  }
  tokens(signal?: AbortSignal) {
    return this.call('get', '/api/tokens', { signal });
  }
  createToken(name: string, role: Role) {
    return this.call('post', '/api/tokens', { body: { name, role } });
  }
  revokeToken(name: string) {
    return this.call('delete', '/api/tokens/{name}', { path: { name } });
  }
}
