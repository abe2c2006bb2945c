// Why a migration's steps were held, on a timeline from the job's start to its end (while it
// runs, to the latest sighting of a hold):
// one bar per hold from its first to its last sighting, and the list beneath with when, which
// slots and why (a proxy that did not acknowledge is named by its address).

import type { MigrationHold } from '../api/shapes';
import { formatTime } from '../lib/format';
import { placeHolds, spansLabel } from '../lib/migration';

export function HoldTimeline({
  holds,
  startMs,
  endMs: end,
  testid = 'hold-timeline',
}: {
  holds: readonly MigrationHold[];
  startMs: number;
  endMs: number | null;
  testid?: string;
}) {
  if (holds.length === 0) return null;
  const endMs = end ?? Math.max(startMs, ...holds.map((h) => h.last_ms));
  const placed = placeHolds(holds, startMs, endMs);
  return (
    <div className="hold-timeline" data-testid={testid}>
      <div className="small muted">Why steps were held</div>
      <div
        className="hold-track"
        role="img"
        aria-label={`${holds.length} held step(s) between ${formatTime(startMs)} and ${formatTime(endMs)}`}
      >
        {placed.map((p, i) => (
          <span
            key={i}
            className="hold-mark"
            style={{ left: `${p.left}%`, width: `${p.width}%` }}
            title={`${formatTime(p.hold.time_ms)} · slots ${spansLabel(p.hold.slots)}: ${p.hold.reason}`}
          />
        ))}
      </div>
      <ol className="hold-list small">
        {holds.map((h, i) => (
          <li key={i} data-testid="hold">
            <span className="mono">{formatTime(h.time_ms)}</span>
            {h.times > 1 ? (
              <span className="muted">
                {' '}
                ({h.times}× until {formatTime(h.last_ms)})
              </span>
            ) : null}{' '}
            slots {spansLabel(h.slots)}: {h.reason}
          </li>
        ))}
      </ol>
    </div>
  );
}
