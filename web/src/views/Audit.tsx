// The audit log: every cluster's changes merged by the console (GET /api/audit), filtered by
// cluster and text, and the console's own login log (GET /api/logins) in a table of its own.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client';
import { consoleReads } from '../api/queries';
import type { AuditEntry, LoginEvent } from '../api/shapes';
import { ErrorBox } from '../components/ui';
import { formatTime } from '../lib/format';

/**
 * A row of the audit table. The console's /api/audit carries dashboard entries only; a console
 * before the login log had one put its own events (`user`, `event`) in it, which these
 * helpers still read.
 */
type AuditRow = Partial<Pick<AuditEntry, 'time_ms' | 'actor' | 'method' | 'path'>> & { user?: string; event?: string };

/** Who did it: the dashboard's actor ("console:admin"), or a console event's user. */
export function auditWho(e: AuditRow): string {
  return e.actor ?? e.user ?? '—';
}

/** What was done, in one line. */
export function auditWhat(e: AuditRow): string {
  if (e.method || e.path) return `${e.method ?? ''} ${e.path ?? ''}`.trim();
  return e.event ?? '—';
}

/** A login event's outcome in words, with how many times in a row. */
export function loginWhat(e: LoginEvent): string {
  const words: Record<LoginEvent['outcome'], string> = {
    login: 'logged in',
    failed: 'failed',
    locked_out: 'locked out',
    too_many_attempts: 'too many attempts',
    busy: 'refused: busy',
    logout: 'logged out',
  };
  const what = words[e.outcome] ?? String(e.outcome);
  return e.count > 1 ? `${what} ×${e.count}` : what;
}

export function Audit() {
  const [filter, setFilter] = useState('');
  const [cluster, setCluster] = useState('');
  const { data, error, refetch } = useQuery({ ...consoleReads.audit(api, 500), refetchInterval: 5000 });
  const logins = useQuery({ ...consoleReads.logins(api, 200), refetchInterval: 5000 });
  const f = filter.trim().toLowerCase();
  const clusters = [...new Set((data ?? []).map((e) => e.cluster))].sort();
  const rows = (data ?? []).filter(
    (e) =>
      (!cluster || e.cluster === cluster) &&
      (!f || `${e.cluster} ${auditWho(e)} ${e.token ?? ''} ${e.summary} ${auditWhat(e)} ${e.detail}`.toLowerCase().includes(f)),
  );
  const loginRows = (logins.data ?? []).filter((e) => !f || `${e.user} ${e.addr} ${loginWhat(e)} ${e.detail}`.toLowerCase().includes(f));
  return (
    <section>
      <div className="toolbar">
        <h2>Audit log</h2>
        <span className="spacer" />
        <select value={cluster} onChange={(e) => setCluster(e.target.value)} aria-label="cluster" data-testid="audit-cluster">
          <option value="">every cluster</option>
          {clusters.map((c) => (
            <option key={c} value={c}>
              {c}
            </option>
          ))}
        </select>
        <input placeholder="filter" value={filter} onChange={(e) => setFilter(e.target.value)} aria-label="filter the entries" data-testid="audit-filter" />
        <button
          onClick={() => {
            void refetch();
            void logins.refetch();
          }}
        >
          Refresh
        </button>
      </div>
      <ErrorBox error={error} />
      {data && (
        <table className="table compact" data-testid="audit-table">
          <thead>
            <tr>
              <th>When</th>
              <th>Cluster</th>
              <th>Who</th>
              <th>What</th>
              <th className="num">Status</th>
              <th>Token</th>
              <th>Detail</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((e, i) => (
              <tr key={`${e.time_ms}-${i}`} data-testid="audit-row" className={e.status >= 400 ? 'row-error' : ''}>
                <td className="nowrap">{formatTime(e.time_ms)}</td>
                <td>{e.cluster}</td>
                <td>{auditWho(e)}</td>
                <td>
                  {e.summary ? <div data-testid="audit-summary">{e.summary}</div> : null}
                  <div className={e.summary ? 'mono small muted' : 'mono'} data-testid="audit-call">
                    {auditWhat(e)}
                  </div>
                </td>
                <td className="num">{e.status}</td>
                <td className="small" data-testid="audit-token">
                  {e.token ? `${e.token}${e.role ? ` (${e.role})` : ''}` : ''}
                </td>
                <td className="mono small detail">{e.detail}</td>
              </tr>
            ))}
            {rows.length === 0 && (
              <tr>
                <td colSpan={7} className="muted">
                  Nothing recorded{f ? ' matches the filter' : ''}.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      <h3 className="logins-head">Console logins</h3>
      <ErrorBox error={logins.error} />
      {logins.data && (
        <table className="table compact" data-testid="logins-table">
          <thead>
            <tr>
              <th>When</th>
              <th>User</th>
              <th>From</th>
              <th>What</th>
              <th className="num">Status</th>
              <th>Detail</th>
            </tr>
          </thead>
          <tbody>
            {loginRows.map((e, i) => (
              <tr key={`${e.time_ms}-${i}`} data-testid="login-row" className={e.status >= 400 ? 'row-error' : ''}>
                <td className="nowrap">{formatTime(e.time_ms)}</td>
                <td>{e.user}</td>
                <td className="mono">{e.addr}</td>
                <td>{loginWhat(e)}</td>
                <td className="num">{e.status}</td>
                <td className="small detail">{e.detail}</td>
              </tr>
            ))}
            {loginRows.length === 0 && (
              <tr>
                <td colSpan={6} className="muted">
                  No logins recorded{f ? ' match the filter' : ''}.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
