// The clusters the console federates (GET /api/clusters): health, load, size and prefix
// routes of each, with a link to its page.

import { useQuery } from '@tanstack/react-query';
import { api } from '../api/client';
import { consoleReads } from '../api/queries';
import type { ClusterSummary, Overview } from '../api/shapes';
import { Badge, ErrorBox } from '../components/ui';
import { formatBytes, formatNumber } from '../lib/format';
import { hrefFor } from '../routing';

/** Health of a cluster in a word, for the badge. */
export function clusterHealth(c: ClusterSummary): { ok: boolean | null; text: string } {
  if (!c.dashboard) return { ok: false, text: 'no dashboard' };
  if (!c.reachable) return { ok: false, text: 'unreachable' };
  const o = c.overview;
  if (!o) return { ok: null, text: c.error ? 'error' : 'unknown' };
  const problems: string[] = [];
  if (o.groups_down) problems.push(`${o.groups_down} group(s) down`);
  if (o.servers_down) problems.push(`${o.servers_down} server(s) down`);
  // Every proxy the dashboard knows counts, lost ones included (a frozen proxy stays listed).
  if (o.proxies === 0) problems.push('no proxy');
  if (o.proxies_lost) problems.push(`${o.proxies_lost} proxy(ies) lost`);
  if (o.proxies_fenced) problems.push(`${o.proxies_fenced} proxy(ies) fenced`);
  if (o.proxies_draining) problems.push(`${o.proxies_draining} proxy(ies) draining`);
  const offline = o.proxies - o.proxies_online - o.proxies_lost - o.proxies_fenced - o.proxies_draining;
  if (offline > 0) problems.push(`${offline} proxy(ies) offline`);
  if (o.slots_unassigned) problems.push(`${o.slots_unassigned} slots unassigned`);
  return problems.length ? { ok: false, text: problems.join(', ') } : { ok: true, text: 'healthy' };
}

/** A cluster's prefix routes to other clusters, one a line ("user: → b"), or "—". */
function RoutesCell({ o }: { o: Overview | null }) {
  const routes = o?.routes ?? [];
  if (!routes.length) return <>—</>;
  return (
    <>
      {routes.map((r) => (
        <div key={r.prefix} className="nowrap">
          <code>{r.prefix}</code> → {r.cluster}
        </div>
      ))}
    </>
  );
}

export function ClustersTable({ clusters }: { clusters: ClusterSummary[] }) {
  if (!clusters.length) return <p className="muted">No cluster found in the console's stores.</p>;
  return (
    <table className="table" data-testid="clusters-table">
      <thead>
        <tr>
          <th>Cluster</th>
          <th>Health</th>
          <th className="num">Proxies</th>
          <th className="num">Groups</th>
          <th className="num">Servers</th>
          <th className="num">QPS</th>
          <th className="num">Memory</th>
          <th className="num">Keys</th>
          <th>Routes</th>
          <th>Dashboard</th>
        </tr>
      </thead>
      <tbody>
        {clusters.map((c) => {
          const h = clusterHealth(c);
          const o = c.overview;
          return (
            <tr key={c.name} data-testid={`cluster-row-${c.name}`}>
              <td>
                <a href={hrefFor({ page: 'cluster', name: c.name, tab: 'overview' })} data-testid={`cluster-link-${c.name}`}>
                  {c.name}
                </a>
                <div className="muted small">{c.store}</div>
              </td>
              <td>
                <Badge ok={h.ok} testid={`cluster-health-${c.name}`}>
                  {h.text}
                </Badge>
                {c.error && <div className="error-text small">{c.error}</div>}
              </td>
              <td className="num" title="Proxies up and online, of every proxy the dashboard knows (lost ones included)">{o ? `${o.proxies_online}/${o.proxies} up` : '—'}</td>
              <td className="num">{o ? o.groups : '—'}</td>
              <td className="num">{o ? `${o.servers - o.servers_down}/${o.servers}` : '—'}</td>
              <td className="num" data-testid={`cluster-qps-${c.name}`}>
                {o ? formatNumber(o.ops_per_sec) : '—'}
              </td>
              <td className="num">{o ? formatBytes(o.memory_bytes) : '—'}</td>
              <td className="num">{o ? formatNumber(o.keys) : '—'}</td>
              <td className="small" data-testid={`cluster-routes-${c.name}`}>
                <RoutesCell o={o} />
              </td>
              <td className="small">
                {c.dashboard ? (
                  <>
                    {c.dashboard.admin_addr}
                    <div className="muted">v{c.dashboard.version}</div>
                  </>
                ) : (
                  '—'
                )}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

export function Clusters() {
  const { data, error } = useQuery({ ...consoleReads.clusters(api), refetchInterval: 3000 });
  return (
    <section>
      <h2>Clusters</h2>
      <ErrorBox error={error} />
      {data ? <ClustersTable clusters={data} /> : !error && <p className="muted">Loading…</p>}
    </section>
  );
}
