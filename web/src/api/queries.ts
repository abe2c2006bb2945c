// What the views read, as TanStack Query options: one key and one loader per resource, the
// keys following the API's paths (a cluster's `/api/slots/stats` is
// ["cluster", name, "slots", "stats"]) so that invalidating a path also reaches what is below
// it. Views poll with `useQuery({ ...reads.x(c), refetchInterval })`; ./changes.ts says which
// keys each change touches.

import { QueryClient, queryOptions, type QueryKey } from '@tanstack/react-query';
import type { Client } from './client';
import type { ClusterApi } from './cluster';
import type { CommandLogType } from './shapes';

/** The key of a cluster's resource at `path` (its dashboard route's segments after /api/). */
export function clusterKey(name: string, ...path: string[]): QueryKey {
  return ['cluster', name, ...path];
}

export const consoleKeys = {
  clusters: ['clusters'] as QueryKey,
  audit: ['audit'] as QueryKey,
  logins: ['logins'] as QueryKey,
};

/** The console's own reads. */
export const consoleReads = {
  clusters: (api: Client) => queryOptions({ queryKey: consoleKeys.clusters, queryFn: ({ signal }) => api.clusters(signal) }),
  audit: (api: Client, limit: number) =>
    queryOptions({ queryKey: [...consoleKeys.audit, limit], queryFn: ({ signal }) => api.audit(limit, signal) }),
  logins: (api: Client, limit: number) =>
    queryOptions({ queryKey: [...consoleKeys.logins, limit], queryFn: ({ signal }) => api.logins(limit, signal) }),
};

/** A cluster's reads. */
export const reads = {
  overview: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'overview'), queryFn: ({ signal }) => c.overview(signal) }),
  stats: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'stats'), queryFn: ({ signal }) => c.stats(signal) }),
  groups: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'groups'), queryFn: ({ signal }) => c.groups(signal) }),
  readPolicy: (c: ClusterApi) =>
    queryOptions({ queryKey: clusterKey(c.name, 'read-policy'), queryFn: ({ signal }) => c.readPolicy(signal) }),
  slots: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'slots'), queryFn: ({ signal }) => c.slots(signal) }),
  slotStats: (c: ClusterApi) =>
    queryOptions({ queryKey: clusterKey(c.name, 'slots', 'stats'), queryFn: ({ signal }) => c.slotStats(signal) }),
  proxies: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'proxies'), queryFn: ({ signal }) => c.proxies(signal) }),
  migrations: (c: ClusterApi) =>
    queryOptions({ queryKey: clusterKey(c.name, 'migrations'), queryFn: ({ signal }) => c.migrations(signal) }),
  migrationHistory: (c: ClusterApi) =>
    queryOptions({
      queryKey: clusterKey(c.name, 'migrations', 'history'),
      queryFn: ({ signal }) => c.migrationHistory(signal),
    }),
  hotKeys: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'hotkeys'), queryFn: ({ signal }) => c.hotKeys(signal) }),
  plugins: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'plugins'), queryFn: ({ signal }) => c.plugins(signal) }),
  pluginMetrics: (c: ClusterApi, plugin: string) =>
    queryOptions({
      queryKey: clusterKey(c.name, 'plugins', plugin, 'metrics'),
      queryFn: ({ signal }) => c.pluginMetrics(plugin, signal),
    }),
  backups: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'backups'), queryFn: ({ signal }) => c.backups(signal) }),
  history: (c: ClusterApi, range: string, series: string[] | null) =>
    queryOptions({
      queryKey: clusterKey(c.name, 'history', range, series?.join(',') ?? ''),
      queryFn: ({ signal }) => c.history(range, series, signal),
    }),
  historySeries: (c: ClusterApi) =>
    queryOptions({ queryKey: clusterKey(c.name, 'history', 'series'), queryFn: ({ signal }) => c.historySeries(signal) }),
  events: (c: ClusterApi, limit: number) =>
    queryOptions({ queryKey: clusterKey(c.name, 'events', String(limit)), queryFn: ({ signal }) => c.events(null, limit, signal) }),
  mirror: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'mirror'), queryFn: ({ signal }) => c.mirror(signal) }),
  routes: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'routes'), queryFn: ({ signal }) => c.routes(signal) }),
  commandLog: (c: ClusterApi, type: CommandLogType) =>
    queryOptions({ queryKey: clusterKey(c.name, 'commandlog', type), queryFn: ({ signal }) => c.commandLog(type, signal) }),
  tokens: (c: ClusterApi) => queryOptions({ queryKey: clusterKey(c.name, 'tokens'), queryFn: ({ signal }) => c.tokens(signal) }),
};

/** The app's query cache. */
export function makeQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        // Every view polls: the next poll is the retry, and a failure shows at once rather
        // than after a backoff.
        retry: false,
      },
    },
  });
}
