// A cluster's overview: its metrics history (throughput total and per proxy, latency,
// errors, the busiest commands, memory and replication lag per group) over the range
// picked, with one crosshair across the charts; sessions, ops and errors now; the recent
// events; memory and keys per group, and its dashboard.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import { useDashboardDown } from '../components/DashboardDown';
import { HistoryChart, RangePicker } from '../components/HistoryChart';
import { ErrorBox, Stat } from '../components/ui';
import { formatAge, formatBytes, formatNumber } from '../lib/format';
import { busiest, idsOf, type Range } from '../lib/history';
import { groupColor } from '../lib/slots';
import { EventList } from './Events';

/** Commands charted: the busiest. */
const COMMAND_LINES = 6;

export function OverviewView({ c }: { c: ClusterApi }) {
  const stats = useQuery({ ...reads.stats(c), refetchInterval: 1000 });
  const overview = useQuery({ ...reads.overview(c), refetchInterval: 3000 });
  const groups = useQuery({ ...reads.groups(c), refetchInterval: 3000 });
  const list = useQuery({ ...reads.historySeries(c), refetchInterval: 5000 });
  const events = useQuery({ ...reads.events(c, 5), refetchInterval: 3000 });
  const [range, setRange] = useState<Range>('5m');
  const { down } = useDashboardDown();

  const st = stats.data;
  const o = overview.data;
  const all = list.data?.series ?? [];
  // Only series the history keeps are asked for (an unknown one is refused).
  const kept = (ids: string[]) => (list.data ? ids.filter((id) => all.some((s) => s.id === id)) : []);
  const sync = `overview-${c.name}`;
  const chart = (title: string, ids: string[], testid: string) => (
    <HistoryChart c={c} ids={kept(ids)} range={range} title={title} sync={sync} testid={testid} />
  );
  return (
    <section className="overview">
      <ErrorBox error={overview.error ?? stats.error} />
      <div className="stats-row">
        <Stat label="QPS (now)" value={st ? formatNumber(st.ops_per_sec) : '—'} testid="qps-latest" />
        <Stat label="Sessions" value={st ? formatNumber(st.sessions) : '—'} testid="sessions" />
        <Stat label="Ops total" value={st ? formatNumber(st.ops_total) : '—'} />
        <Stat label="Errors total" value={st ? formatNumber(st.errors_total) : '—'} testid="errors-total" />
        <Stat label="Memory" value={o ? formatBytes(o.memory_bytes) : '—'} />
        <Stat label="Keys" value={o ? formatNumber(o.keys) : '—'} testid="keys-total" />
        <Stat label="Epoch" value={o ? o.epoch : '—'} />
      </div>
      <div className="panel">
        <div className="chart-controls">
          <h3>Metrics history</h3>
          <RangePicker range={range} onChange={setRange} />
        </div>
        <ErrorBox error={list.error} testid="history-error" />
        {/* Without the list of series the charts would each say there is none; the page's
            banner says why nothing is read. */}
        {down && !list.data ? (
          <p className="muted" data-testid="history-down">
            No history while the dashboard is down.
          </p>
        ) : (
          <div className="chart-grid">
            {chart('Throughput', ['ops', ...idsOf(all, 'proxies')], 'qps-chart')}
            {chart('Latency', ['latency:p50', 'latency:p99', 'latency:p99.9'], 'latency-chart')}
            {chart('Busiest commands', busiest(all, 'commands', COMMAND_LINES), 'commands-chart')}
            {chart('Errors', ['errors'], 'errors-chart')}
            {chart('Memory per group (master)', idsOf(all, 'memory'), 'memory-chart')}
            {chart('Replication lag per group', idsOf(all, 'lag'), 'lag-chart')}
          </div>
        )}
      </div>
      <div className="panel">
        <h3>
          Recent events <a href={`#/clusters/${encodeURIComponent(c.name)}/events`}>all events</a>
        </h3>
        <ErrorBox error={events.error} testid="recent-events-error" />
        {events.data && <EventList events={[...events.data.events].reverse()} testid="recent-events" />}
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
