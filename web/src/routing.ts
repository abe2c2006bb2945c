import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from 'react';

/** Polls `load` every `intervalMs` (and at once); keeps the last good data next to the error. */
export function usePoll<T>(
  load: (signal: AbortSignal) => Promise<T>,
  intervalMs: number,
  deps: unknown[] = [],
) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const refresh = useCallback(() => setTick((t) => t + 1), []);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let ctl: AbortController | undefined;
    const run = async () => {
      ctl = new AbortController();
      try {
        const v = await loadRef.current(ctl.signal);
        if (!stopped) {
          setData(v);
          setError(null);
        }
      } catch (e) {
        if (!stopped && !(e instanceof DOMException && e.name === 'AbortError')) setError(e as Error);
      }
      if (!stopped && intervalMs > 0) timer = setTimeout(run, intervalMs);
    };
    run();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      ctl?.abort();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [intervalMs, tick, ...deps]);

  return { data, error, refresh, setData };
}

// --- hash routing ---

export type Route =
  | { page: 'login' }
  | { page: 'clusters' }
  | { page: 'audit' }
  | { page: 'cluster'; name: string; tab: ClusterTab };

export const CLUSTER_TABS = ['overview', 'groups', 'slots', 'hotkeys', 'migrations', 'proxies', 'plugins', 'mirror', 'routes', 'slowlog', 'tokens'] as const;
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
