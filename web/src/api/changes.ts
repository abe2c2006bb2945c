// Every change a view can make, as a TanStack Query mutation that reads again, once it has
// settled, each query it touches (keys of ./queries.ts). Settled, not only succeeded: a 502
// `push_incomplete` comes after the change was persisted, so a failed call may have changed
// the cluster too. Every change also touches the audit log, which records it.

import { useMutation, useQueryClient, type QueryKey } from '@tanstack/react-query';
import type { PluginLimits } from '../lib/config';
import type { ClusterApi } from './cluster';
import { clusterKey, consoleKeys } from './queries';
import type { BackupRequest, CanaryStart, Move, PrefixRouteChange, ReadPolicy, RebalanceBy, Role, MirrorChange } from './shapes';

/** A mutation running `run`, after which `touches` (and the audit log) are read again. */
function useChange<V, R>(run: (v: V) => Promise<R>, touches: QueryKey[]) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: run,
    onSettled: () => Promise.all([...touches, consoleKeys.audit].map((queryKey) => qc.invalidateQueries({ queryKey }))),
  });
}

// What each kind of change touches. The clusters list shows every cluster's overview.
const overviewOf = (c: ClusterApi) => [clusterKey(c.name, 'overview'), consoleKeys.clusters];
const groupsOf = (c: ClusterApi) => [clusterKey(c.name, 'groups'), clusterKey(c.name, 'read-policy'), ...overviewOf(c)];
/** Slot ownership: the slot map and its stats, migrations, each group's slot count. */
const slotsOf = (c: ClusterApi) => [clusterKey(c.name, 'slots'), clusterKey(c.name, 'migrations'), ...groupsOf(c)];

// === groups and servers ===

export const useCreateGroup = (c: ClusterApi) => useChange((id?: number) => c.createGroup(id), groupsOf(c));
export const useDeleteGroup = (c: ClusterApi) => useChange((id: number) => c.deleteGroup(id), groupsOf(c));
export const useAddServer = (c: ClusterApi) =>
  useChange((v: { group: number; addr: string }) => c.addServer(v.group, v.addr), groupsOf(c));
export const useRemoveServer = (c: ClusterApi) =>
  useChange((v: { group: number; addr: string }) => c.removeServer(v.group, v.addr), groupsOf(c));
export const usePromote = (c: ClusterApi) => useChange((v: { group: number; addr: string }) => c.promote(v.group, v.addr), groupsOf(c));
export const useSetReadPolicy = (c: ClusterApi) =>
  useChange((p: Partial<ReadPolicy>) => c.setReadPolicy(p), [clusterKey(c.name, 'read-policy')]);

// === slots ===

export const useAssign = (c: ClusterApi) =>
  useChange((v: { from: number; to: number; group: number }) => c.assign(v.from, v.to, v.group), slotsOf(c));
export const useMigrate = (c: ClusterApi) =>
  useChange(
    (v: { from: number; to: number; group: number; maxKeysPerSec?: number }) => c.migrate(v.from, v.to, v.group, v.maxKeysPerSec),
    slotsOf(c),
  );
/** Changes the running migration's speed cap (keys/s; `undefined` lifts it). */
export const useThrottle = (c: ClusterApi) =>
  useChange((maxKeysPerSec: number | undefined) => c.setThrottle(maxKeysPerSec), [clusterKey(c.name, 'migrations')]);
/** Aborts the migration of `slots`, or every one. */
export const useAbort = (c: ClusterApi) => useChange((slots?: number[]) => c.abort(slots), slotsOf(c));
/** A rebalance's plan: a dry run, which changes nothing, so it touches no query. */
export const usePlanRebalance = (c: ClusterApi) =>
  useMutation({
    mutationFn: (v: { weights?: Record<string, number>; by?: RebalanceBy; tolerance?: number }) =>
      c.rebalance(true, v.weights, v.by, v.tolerance),
  });
/** Queues a rebalance: a measured plan's moves exactly as previewed, else planned anew. */
export const useRebalance = (c: ClusterApi) =>
  useChange(
    (v: { moves: Move[]; by: RebalanceBy } | { weights?: Record<string, number> }) =>
      'moves' in v ? c.queueMoves(v.moves, v.by) : c.rebalance(false, v.weights),
    slotsOf(c),
  );

// === proxies ===

export const useSetProxyOnline = (c: ClusterApi) =>
  useChange(
    (v: { token: string; online: boolean }) => c.setProxyOnline(v.token, v.online),
    [clusterKey(c.name, 'proxies'), clusterKey(c.name, 'stats'), ...overviewOf(c)],
  );

export const useRemoveProxy = (c: ClusterApi) =>
  useChange((token: string) => c.removeProxy(token), [clusterKey(c.name, 'proxies'), clusterKey(c.name, 'stats'), ...overviewOf(c)]);

// === plugins (a plugin's metrics are below its key: which proxies run it changes too) ===

const pluginsOf = (c: ClusterApi) => [clusterKey(c.name, 'plugins')];
export const useUploadPlugin = (c: ClusterApi) =>
  useChange((v: { name: string; wasm: ArrayBuffer | Blob }) => c.uploadPlugin(v.name, v.wasm), pluginsOf(c));
export const useConfigurePlugin = (c: ClusterApi) =>
  useChange(
    (v: { name: string; config: unknown; fail?: 'open' | 'closed'; limits?: PluginLimits }) =>
      c.configurePlugin(v.name, v.config, v.fail, v.limits),
    pluginsOf(c),
  );
export const useSetPluginEnabled = (c: ClusterApi) =>
  useChange((v: { name: string; enabled: boolean }) => c.setPluginEnabled(v.name, v.enabled), pluginsOf(c));
export const useOrderPlugins = (c: ClusterApi) => useChange((order: string[]) => c.orderPlugins(order), pluginsOf(c));
export const useUploadCanaryModule = (c: ClusterApi) =>
  useChange((v: { name: string; wasm: ArrayBuffer | Blob }) => c.uploadCanaryModule(v.name, v.wasm), pluginsOf(c));
export const useStartCanary = (c: ClusterApi) =>
  useChange((v: { name: string; body: CanaryStart }) => c.startCanary(v.name, v.body), pluginsOf(c));
export const usePromoteCanary = (c: ClusterApi) => useChange((name: string) => c.promoteCanary(name), pluginsOf(c));
export const useRollbackCanary = (c: ClusterApi) => useChange((name: string) => c.rollbackCanary(name), pluginsOf(c));
export const useDeletePlugin = (c: ClusterApi) => useChange((name: string) => c.deletePlugin(name), pluginsOf(c));

// === mirror, routes, tokens, backups ===

export const useStartBackup = (c: ClusterApi) => useChange((r: BackupRequest) => c.startBackup(r), [clusterKey(c.name, 'backups')]);

export const useSetMirror = (c: ClusterApi) => useChange((m: MirrorChange) => c.setMirror(m), [clusterKey(c.name, 'mirror')]);
export const useMirrorOff = (c: ClusterApi) => useChange(() => c.mirrorOff(), [clusterKey(c.name, 'mirror')]);
/** Replaces the whole list of routes; each cluster's overview lists its routes. */
export const useSetRoutes = (c: ClusterApi) =>
  useChange((routes: PrefixRouteChange[]) => c.setRoutes(routes), [clusterKey(c.name, 'routes'), ...overviewOf(c)]);
export const useCreateToken = (c: ClusterApi) =>
  useChange((v: { name: string; role: Role }) => c.createToken(v.name, v.role), [clusterKey(c.name, 'tokens')]);
export const useRevokeToken = (c: ClusterApi) => useChange((name: string) => c.revokeToken(name), [clusterKey(c.name, 'tokens')]);
