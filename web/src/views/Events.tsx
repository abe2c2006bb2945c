// The cluster's events (GET /api/events): newest first, each with its severity, time and
// sentence, read again every few seconds so that a new one shows while the page is open;
// a filter by severity.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { ClusterEvent } from '../api/shapes';
import { ErrorBox } from '../components/ui';
import { formatTime } from '../lib/format';

const BADGE: Record<ClusterEvent['severity'], string> = {
  info: 'badge badge-muted',
  warning: 'badge badge-warn',
  critical: 'badge badge-bad',
};

/** Events as a table, in the order given. */
export function EventList({ events, testid }: { events: ClusterEvent[]; testid: string }) {
  if (events.length === 0) {
    return (
      <p className="muted" data-testid={`${testid}-none`}>
        No events yet.
      </p>
    );
  }
  return (
    <table className="table compact" data-testid={testid}>
      <thead>
        <tr>
          <th>Time</th>
          <th>Severity</th>
          <th>What happened</th>
        </tr>
      </thead>
      <tbody>
        {events.map((e) => (
          <tr key={e.id} data-testid={`event-${e.id}`} data-kind={e.kind}>
            <td className="nowrap">{formatTime(e.time_ms)}</td>
            <td>
              <span className={BADGE[e.severity]}>{e.severity}</span>
            </td>
            <td className="detail-wide">{e.detail}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Events shown: the newest this many. */
const SHOWN = 500;

export function Events({ c }: { c: ClusterApi }) {
  const q = useQuery({ ...reads.events(c, SHOWN), refetchInterval: 3000 });
  const [least, setLeast] = useState<'info' | 'warning' | 'critical'>('info');
  const order = ['info', 'warning', 'critical'];
  const shown = (q.data?.events ?? []).filter((e) => order.indexOf(e.severity) >= order.indexOf(least)).reverse();
  return (
    <section className="panel" data-testid="events-view">
      <div className="chart-controls">
        <h3>Events</h3>
        <label>
          Severity at least{' '}
          <select value={least} onChange={(e) => setLeast(e.target.value as typeof least)} data-testid="events-severity">
            <option value="info">info</option>
            <option value="warning">warning</option>
            <option value="critical">critical</option>
          </select>
        </label>
      </div>
      <ErrorBox error={q.error} testid="events-error" />
      {q.data && (
        <>
          <p className="muted small">
            The newest {SHOWN} of the {q.data.capacity} the dashboard keeps (its store keeps the newest 500 across restarts), newest first.
          </p>
          <EventList events={shown} testid="events-table" />
        </>
      )}
    </section>
  );
}
