import { useEffect, useState } from 'react';
import type { ClusterApi } from '../api';
import { QpsChart } from '../components/QpsChart';
import { ErrorBox, Stat } from '../components/ui';
import { usePoll } from '../hooks';
import { formatAge, formatBytes, formatNumber } from '../lib/format';
import { QpsSeries } from '../lib/ring';
import { groupColor } from '../lib/slots';
import type { Stats } from '../types';

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
  for (const p of st.proxies) if (!p.error && typeof p.ops_per_sec === 'number') per[p.token] = p.ops_per_sec;
  return series.add({ t: tSec, total: st.ops_per_sec, perProxy: per });
}

export function OverviewView({ c }: { c: ClusterApi }) {
  const series = seriesFor(c.name);
  const [version, setVersion] = useState(0);
  const stats = usePoll((s) => c.stats(s), 1000, [c.name]);
  const overview = usePoll((s) => c.overview(s), 3000, [c.name]);
  const groups = usePoll((s) => c.groups(s), 3000, [c.name]);

  useEffect(() => {
    if (stats.data && addStats(series, stats.data, Date.now() / 1000)) setVersion((v) => v + 1);
  }, [stats.data, series]);

  const o = overview.data;
  const st = stats.data;
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
          {st && st.proxies.some((p) => p.error) && (
            <div className="error-text small">
              {st.proxies
                .filter((p) => p.error)
                .map((p) => `proxy ${p.token.slice(0, 8)}: ${p.error}`)
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
