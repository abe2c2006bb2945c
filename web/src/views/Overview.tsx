// A cluster's overview: live QPS (total and per proxy, the last five minutes), sessions, ops
// and errors, memory and keys per group, and its dashboard.

import { useQuery } from '@tanstack/react-query';
import { useEffect, useSyncExternalStore } from 'react';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { Stats } from '../api/shapes';
import { QpsChart } from '../components/QpsChart';
import { ErrorBox, Stat } from '../components/ui';
import { formatAge, formatBytes, formatNumber } from '../lib/format';
import { QpsSeries } from '../lib/ring';
import { groupColor } from '../lib/slots';

// One series per cluster for the page's life, so leaving the tab and coming back keeps the
// last five minutes.
const seriesByCluster = new Map<string, QpsSeries>();
export function seriesFor(name: string): QpsSeries {
  let s = seriesByCluster.get(name);
  if (!s) {
    s = new QpsSeries();
    seriesByCluster.set(name, s);
  }
  return s;
}

/** Adds one /stats reply to a series; returns whether it was kept. */
export function addStats(series: QpsSeries, st: Stats, tSec: number): boolean {
  const per: Record<string, number> = {};
  for (const p of st.proxies) if ('ops_per_sec' in p) per[p.token] = p.ops_per_sec;
  return series.add({ t: tSec, total: st.ops_per_sec, perProxy: per });
}

export function OverviewView({ c }: { c: ClusterApi }) {
  const series = seriesFor(c.name);
  const stats = useQuery({ ...reads.stats(c), refetchInterval: 1000 });
  const overview = useQuery({ ...reads.overview(c), refetchInterval: 3000 });
  const groups = useQuery({ ...reads.groups(c), refetchInterval: 3000 });

  // One sample per answer: the chart follows the series' version.
  const { data: st, dataUpdatedAt } = stats;
  useEffect(() => {
    if (st) addStats(series, st, dataUpdatedAt / 1000);
  }, [series, st, dataUpdatedAt]);
  const version = useSyncExternalStore(series.subscribe, series.getVersion);

  const o = overview.data;
  const latest = series.latest();
  return (
    <section className="overview">
      <ErrorBox error={overview.error ?? stats.error} />
      <div className="stats-row">
        <Stat label="QPS (now)" value={latest == null ? '—' : formatNumber(latest)} testid="qps-latest" />
        <Stat label="Sessions" value={st ? formatNumber(st.sessions) : '—'} testid="sessions" />
        <Stat label="Ops total" value={st ? formatNumber(st.ops_total) : '—'} />
        <Stat label="Errors total" value={st ? formatNumber(st.errors_total) : '—'} testid="errors-total" />
        <Stat label="Memory" value={o ? formatBytes(o.memory_bytes) : '—'} />
        <Stat label="Keys" value={o ? formatNumber(o.keys) : '—'} testid="keys-total" />
        <Stat label="Epoch" value={o ? o.epoch : '—'} />
      </div>
      <div className="panel">
        <h3>QPS — last 5 minutes</h3>
        <QpsChart series={series} version={version} />
        <span hidden data-testid="qps-samples">
          {series.ring.length}
        </span>
      </div>
      <div className="columns">
        <div className="panel">
          <h3>Ops by command</h3>
          {st && st.commands.length ? (
            <table className="table compact" data-testid="ops-by-command">
              <thead>
                <tr>
                  <th>Command</th>
                  <th className="num">Calls</th>
                  <th className="num">Errors</th>
                </tr>
              </thead>
              <tbody>
                {st.commands.slice(0, 20).map((cmd) => (
                  <tr key={cmd.command}>
                    <td>{cmd.command}</td>
                    <td className="num">{formatNumber(cmd.calls)}</td>
                    <td className={cmd.errors ? 'num error-text' : 'num'}>{formatNumber(cmd.errors)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p className="muted">No command yet.</p>
          )}
          {st && st.proxies.some((p) => 'error' in p) && (
            <div className="error-text small">
              {st.proxies
                .flatMap((p) => ('error' in p ? [`proxy ${p.token.slice(0, 8)}: ${p.error}`] : []))
                .join('; ')}
            </div>
          )}
        </div>
        <div className="panel">
          <h3>Memory and keys per group</h3>
          <ErrorBox error={groups.error} />
          {groups.data && (
            <table className="table compact" data-testid="group-memory">
              <thead>
                <tr>
                  <th>Group</th>
                  <th className="num">Slots</th>
                  <th className="num">Memory (master)</th>
                  <th className="num">Keys (master)</th>
                  <th>State</th>
                </tr>
              </thead>
              <tbody>
                {groups.data.map((g) => {
                  const m = g.servers[0];
                  return (
                    <tr key={g.id}>
                      <td>
                        <span className="swatch" style={{ background: groupColor(g.id) }} /> {g.id}
                      </td>
                      <td className="num">{g.slots}</td>
                      <td className="num">{formatBytes(m?.memory_bytes)}</td>
                      <td className="num">{formatNumber(m?.keys)}</td>
                      <td>{g.down ? <span className="error-text">down</span> : 'up'}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
          {o && (
            <p className="muted small">
              Dashboard {o.dashboard.admin_addr} (pid {o.dashboard.pid} on {o.dashboard.host}, v{o.dashboard.version}, up{' '}
              {formatAge(o.dashboard.start_unix)}); {o.slots_assigned} slots assigned, {o.slots_unassigned} unassigned.
            </p>
          )}
        </div>
      </div>
    </section>
  );
}
