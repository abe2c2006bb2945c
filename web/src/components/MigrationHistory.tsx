// The last migrations and rebalances as jobs (GET /api/migrations/history, newest first):
// when, what, from and to which groups, how long, what moved, the longest write pause, who
// started it and how it ended; a job's held steps open beneath it as a timeline.

import { useQuery } from '@tanstack/react-query';
import { Fragment, useState } from 'react';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import { formatBytes, formatNumber, formatTime } from '../lib/format';
import { formatDuration, jobOutcome, spansLabel } from '../lib/migration';
import { HoldTimeline } from './HoldTimeline';
import { ErrorBox } from './ui';

export function MigrationHistory({ c }: { c: ClusterApi }) {
  const history = useQuery({ ...reads.migrationHistory(c), refetchInterval: 5000 });
  const [open, setOpen] = useState<string | null>(null);
  const jobs = history.data?.jobs ?? [];
  return (
    <div className="panel" data-testid="migration-history">
      <h3>History</h3>
      <ErrorBox error={history.error} />
      {jobs.length === 0 ? (
        <p className="muted">No migration or rebalance yet.</p>
      ) : (
        <table className="table compact">
          <thead>
            <tr>
              <th>Started</th>
              <th>Kind</th>
              <th>Slots</th>
              <th>Groups</th>
              <th className="num">Took</th>
              <th className="num">Slots moved</th>
              <th className="num">Keys</th>
              <th className="num">Bytes</th>
              <th className="num">Peak pause</th>
              <th>By</th>
              <th>Outcome</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((j) => {
              const o = jobOutcome(j);
              return (
                <Fragment key={j.id}>
                  <tr data-testid="history-job" data-outcome={j.outcome}>
                    <td className="mono">{formatTime(j.started_unix_ms)}</td>
                    <td>{j.kind}</td>
                    <td>{spansLabel(j.slots)}</td>
                    <td>
                      {j.from_groups.join(', ')} → {j.to_groups.join(', ')}
                    </td>
                    <td className="num">{j.duration_ms != null ? formatDuration(j.duration_ms / 1000) : '—'}</td>
                    <td className="num">{formatNumber(j.slots_moved)}</td>
                    <td className="num" data-testid="history-keys">
                      {formatNumber(j.keys_moved)}
                    </td>
                    <td className="num">{formatBytes(j.bytes_moved)}</td>
                    <td className="num">{j.peak_pause_ms != null ? `${Math.round(j.peak_pause_ms)} ms` : '—'}</td>
                    <td data-testid="history-by">{j.started_by.join(', ') || '—'}</td>
                    <td>
                      <span className={`badge badge-${o.tone}`} data-testid="history-outcome">
                        {o.text}
                      </span>
                      {j.outcome !== 'failed' && j.reason ? <div className="muted small">{j.reason}</div> : null}
                    </td>
                    <td>
                      {j.holds.length > 0 && (
                        <button
                          className="link"
                          aria-expanded={open === j.id}
                          onClick={() => setOpen(open === j.id ? null : j.id)}
                          data-testid="history-holds"
                        >
                          {j.holds.length} hold{j.holds.length === 1 ? '' : 's'}
                        </button>
                      )}
                    </td>
                  </tr>
                  {open === j.id && (
                    <tr>
                      <td colSpan={12}>
                        <HoldTimeline holds={j.holds} startMs={j.started_unix_ms} endMs={j.ended_unix_ms} testid="history-timeline" />
                      </td>
                    </tr>
                  )}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}
