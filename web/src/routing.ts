// Hash routing (#/clusters, #/clusters/<name>/<tab>, #/audit): the route as a value, and
// the hook that follows the location's hash.

import { useSyncExternalStore } from 'react';

export type Route =
  | { page: 'login' }
  | { page: 'clusters' }
  | { page: 'audit' }
  | { page: 'cluster'; name: string; tab: ClusterTab };

export const CLUSTER_TABS = ['overview', 'groups', 'slots', 'hotkeys', 'migrations', 'proxies', 'plugins', 'mirror', 'routes', 'backups', 'slowlog', 'events', 'tokens'] as const;
export type ClusterTab = (typeof CLUSTER_TABS)[number];

export function parseHash(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'login') return { page: 'login' };
  if (parts[0] === 'audit') return { page: 'audit' };
  if (parts[0] === 'clusters' && parts[1]) {
    const tab = (CLUSTER_TABS as readonly string[]).includes(parts[2]) ? (parts[2] as ClusterTab) : 'overview';
    return { page: 'cluster', name: parts[1], tab };
  }
  return { page: 'clusters' };
}

export function hrefFor(r: Route): string {
  switch (r.page) {
    case 'login':
      return '#/login';
    case 'audit':
      return '#/audit';
    case 'clusters':
      return '#/clusters';
    case 'cluster':
      return `#/clusters/${encodeURIComponent(r.name)}/${r.tab}`;
  }
}

function subscribeHash(cb: () => void) {
  window.addEventListener('hashchange', cb);
  return () => window.removeEventListener('hashchange', cb);
}

export function useRoute(): Route {
  const hash = useSyncExternalStore(subscribeHash, () => window.location.hash);
  return parseHash(hash);
}

export function navigate(r: Route) {
  window.location.hash = hrefFor(r);
}
