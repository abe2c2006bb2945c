// The cluster's command logs (docs/commandlog.md): the slow log and the large-request and
// large-reply logs of every proxy, merged newest first by the dashboard, one tab per type;
// filtered by text and sorted by time or by value here.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import type { ClusterApi } from '../api/cluster';
import { ApiError } from '../api/error';
import { reads } from '../api/queries';
import type { CommandLogEntry, CommandLogSettings, CommandLogType } from '../api/shapes';
import { ErrorBox } from '../components/ui';
import { arrangeEntries, type CommandLogSort } from '../lib/commandlog';
import { formatBytes, formatNumber, formatTime } from '../lib/format';

const TYPES: { type: CommandLogType; label: string; value: string }[] = [
  { type: 'slow', label: 'Slow', value: 'Duration' },
  { type: 'large-request', label: 'Large requests', value: 'Request' },
  { type: 'large-reply', label: 'Large replies', value: 'Reply' },
];

/** A duration (µs, shown as ms from 1 ms on) or a size, as the log's type measures. */
function valueText(type: CommandLogType, v: number): string {
  if (type !== 'slow') return formatBytes(v);
  return v < 1000 ? `${formatNumber(v)} µs` : `${(v / 1000).toFixed(1)} ms`;
}

/** What a proxy logs with these settings, in words: "commands slower than 10.0 ms, the last 128 kept". */
export function settingsText(type: CommandLogType, s: CommandLogSettings): string {
  if (s.threshold == null) return 'this log is disabled (proxy.toml)';
  const what = { slow: 'commands slower than', 'large-request': 'requests of at least', 'large-reply': 'replies of at least' }[type];
  const logged = s.threshold === 0 ? 'every command' : `${what} ${valueText(type, s.threshold)}`;
  return `${logged}, the last ${formatNumber(s.max_len)} kept`;
}

export function SlowLog({ c }: { c: ClusterApi }) {
  const [type, setType] = useState<CommandLogType>('slow');
  const log = useQuery({ ...reads.commandLog(c, type), refetchInterval: 5000 });
  const forbidden = log.error instanceof ApiError && log.error.status === 403;
  const current = TYPES.find((t) => t.type === type) ?? TYPES[0];
  const [sort, setSort] = useState<CommandLogSort>('time');
  const [filter, setFilter] = useState('');
  const rows = log.data ? arrangeEntries(log.data.entries, sort, filter) : [];
  return (
    <section data-testid="slowlog">
      <nav className="tabs" role="tablist">
        {TYPES.map((t) => (
          <button
            key={t.type}
            role="tab"
            aria-selected={t.type === type}
            className={t.type === type ? 'tab active' : 'tab'}
            onClick={() => setType(t.type)}
            data-testid={`slowlog-type-${t.type}`}
          >
            {t.label}
          </button>
        ))}
      </nav>
      {forbidden ? (
        <p className="muted" data-testid="slowlog-forbidden">
          The command log shows clients' keys and values: it needs the operator role.
        </p>
      ) : (
        <ErrorBox error={log.error} />
      )}
      {log.data && (
        <p className="muted small" data-testid="slowlog-summary">
          {log.data.entries.length} {log.data.entries.length === 1 ? 'entry' : 'entries'} from {log.data.proxies}{' '}
          {log.data.proxies === 1 ? 'proxy' : 'proxies'}
          {log.data.unreachable.length > 0 && `; not answering: ${log.data.unreachable.map((t) => t.slice(0, 8)).join(', ')}`}
        </p>
      )}
      {log.data && log.data.settings.length > 0 && (
        <p className="muted small" data-testid="slowlog-threshold">
          {log.data.settings.length === 1
            ? `Logged: ${settingsText(log.data.type, log.data.settings[0])}, on every proxy.`
            : `Logged: ${log.data.settings.map((s) => `on ${s.proxies.join(', ')}: ${settingsText(log.data.type, s)}`).join('; ')}.`}
        </p>
      )}
      {log.data && log.data.entries.length > 0 && (
        <div className="toolbar">
          <label>
            filter{' '}
            <input
              value={filter}
              onChange={(e) => setFilter(e.target.value)}
              placeholder="command, key, client, proxy"
              data-testid="slowlog-filter"
            />
          </label>
          <label>
            sort by{' '}
            <select value={sort} onChange={(e) => setSort(e.target.value as CommandLogSort)} data-testid="slowlog-sort">
              <option value="time">newest first</option>
              <option value="value">{type === 'slow' ? 'slowest first' : 'largest first'}</option>
            </select>
          </label>
          <span className="muted small" data-testid="slowlog-shown">
            {rows.length} of {log.data.entries.length} shown
          </span>
        </div>
      )}
      {log.data && log.data.entries.length > 0 && (
        <table className="table compact" data-testid="slowlog-table">
          <thead>
            <tr>
              <th>Time</th>
              <th>Proxy</th>
              <th className="num">{current.value}</th>
              <th>Command</th>
              <th>Client</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((e) => (
              <Row key={`${e.proxy}-${e.id}`} e={e} type={log.data?.type ?? type} />
            ))}
          </tbody>
        </table>
      )}
      {log.data && log.data.entries.length === 0 && <p className="muted">No entry: nothing passed this log's threshold.</p>}
    </section>
  );
}

function Row({ e, type }: { e: CommandLogEntry; type: CommandLogType }) {
  return (
    <tr data-testid="slowlog-entry">
      <td className="small">{formatTime(e.time * 1000)}</td>
      <td className="mono small" title={e.proxy}>
        {e.proxy_addr}
      </td>
      <td className="num" data-testid="slowlog-value">
        {valueText(type, e.value)}
      </td>
      <td className="mono small" data-testid="slowlog-args">
        {e.args.join(' ')}
      </td>
      <td className="mono small">
        {e.client_addr}
        {e.client_name && <div className="muted">{e.client_name}</div>}
      </td>
    </tr>
  );
}
