// The running migration's progress (GET /api/migrations, polled every second): percent done,
// slots and keys left, keys/s, ETA, the write pause, and Abort.

import { useQuery } from '@tanstack/react-query';
import { useEffect, useState, useSyncExternalStore } from 'react';
import { useAbort } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { MigrationStatus } from '../api/shapes';
import { formatBytes, formatNumber } from '../lib/format';
import { copyRounds, describeThrottle, donePercent, eta, formatDuration, keysPerSecond, ProgressTracker, stateCounts, type KeySample } from '../lib/migration';
import { Samples } from '../lib/ring';
import { ErrorBox, useConfirm, useNotices } from './ui';

// One tracker per cluster for the page's life: the total of the migration being watched.
const trackers = new Map<string, ProgressTracker>();
export function trackerFor(name: string): ProgressTracker {
  let t = trackers.get(name);
  if (!t) {
    t = new ProgressTracker();
    trackers.set(name, t);
  }
  return t;
}

/** Polls the migration status every second; one sample of keys moved per answer gives a client-side keys/s. */
export function useMigrations(c: ClusterApi, intervalMs = 1000) {
  const q = useQuery({ ...reads.migrations(c), refetchInterval: intervalMs });
  const [samples] = useState(() => new Samples<KeySample>(60));
  const { data, dataUpdatedAt } = q;
  useEffect(() => {
    if (data) samples.add({ t: dataUpdatedAt, keys: data.keys_moved });
  }, [samples, data, dataUpdatedAt]);
  return { ...q, samples: useSyncExternalStore(samples.subscribe, samples.getSnapshot) };
}

export function MigrationProgress({
  c,
  status,
  samples,
  error,
}: {
  c: ClusterApi;
  status: MigrationStatus | undefined;
  samples: readonly KeySample[];
  error: unknown;
}) {
  const { run } = useNotices();
  const confirm = useConfirm();
  const abort = useAbort(c);
  const tracker = trackerFor(c.name);
  if (!status) return <ErrorBox error={error} />;
  const active = status.slots.length;
  const p = tracker.observe(active);
  const pct = donePercent(status, p);
  const cap = describeThrottle(status.throttle, formatBytes);
  const rate = status.keys_per_sec > 0 ? status.keys_per_sec : keysPerSecond(samples);
  const etaSecs = status.eta_secs ?? (active ? eta(active, tracker.slotRate(active)) : 0);
  const counts = stateCounts(status);
  const rounds = copyRounds(status);
  const turning = status.slots.some((s) => s.aborting);

  const abortAll = async () => {
    const ok = await confirm(
      'Abort every migration?',
      `${active} slot(s) are moving. Pending ones are dropped; started ones turn around and move their keys back.`,
      'Abort migrations',
    );
    if (!ok) return;
    const r = await run('Abort', () => abort.mutateAsync(undefined), (r) => `${r.aborted} slot migration(s) aborted`);
    if (r) tracker.abortedSome(r.aborted);
  };

  const state = tracker.state(active, turning);
  return (
    <div className="panel migration-progress" data-testid="migration-progress" data-state={state} data-percent={pct}>
      <ErrorBox error={error} />
      <div className="progress-head">
        <h3>Migration progress</h3>
        <span className={`badge ${state === 'complete' ? 'badge-ok' : state === 'idle' ? 'badge-muted' : state === 'aborted' ? 'badge-bad' : 'badge-warn'}`} data-testid="migration-state">
          {state}
        </span>
        <span className="spacer" />
        <button className="danger" onClick={abortAll} disabled={active === 0 || abort.isPending} data-testid="abort-all">
          {abort.isPending ? 'Aborting…' : 'Abort'}
        </button>
      </div>
      <div className="progress-bar" aria-label="migration progress">
        <div className="progress-fill" style={{ width: `${pct}%` }} />
      </div>
      <div className="stats-row">
        <div className="stat">
          <div className="stat-label">Done</div>
          <div className="stat-value" data-testid="migration-percent">
            {p.total || active ? `${pct}%` : '—'}
          </div>
        </div>
        <div className="stat">
          <div className="stat-label">Slots left</div>
          <div className="stat-value" data-testid="migration-remaining">
            {active}
            {p.total ? <span className="muted small"> / {p.total}</span> : null}
          </div>
        </div>
        <div className="stat">
          <div className="stat-label">Keys/s</div>
          <div className="stat-value" data-testid="migration-rate">
            {formatNumber(rate)}
          </div>
        </div>
        <div className="stat">
          <div className="stat-label">ETA</div>
          <div className="stat-value" data-testid="migration-eta">
            {active ? formatDuration(etaSecs) : '—'}
          </div>
        </div>
        <div className="stat" title="By the running migration; its memory as the sources count it (MEMORY USAGE)">
          <div className="stat-label">Keys moved</div>
          <div className="stat-value" data-testid="migration-keys-moved">
            {formatNumber(status.run_keys_moved ?? status.keys_moved)}
            {status.run_bytes_moved != null ? <span className="muted small"> · {formatBytes(status.run_bytes_moved)}</span> : null}
          </div>
        </div>
        <div className="stat" title="Estimated from each source group's keys over the slots it owns">
          <div className="stat-label">Keys left</div>
          <div className="stat-value" data-testid="migration-keys-left">
            {status.keys_left != null ? `~${formatNumber(status.keys_left)}` : '—'}
          </div>
        </div>
        <div className="stat" title="How long a slot serves no one while it is handed over (its commands wait in the proxies), per slot over the last handoffs">
          <div className="stat-label">Write pause p99</div>
          <div className="stat-value" data-testid="migration-pause">
            {status.write_pause ? `${Math.round(status.write_pause.p99_ms)} ms` : '—'}
          </div>
        </div>
      </div>
      <div className="muted small">
        {Object.entries(counts)
          .map(([k, n]) => `${n} ${k}`)
          .join(' · ') || 'no slot moving'}
        {' · '}
        {status.in_flight} in flight, {status.pending} pending (cap {status.max_slots_in_flight} per group)
        {' · '}
        <span data-testid="migration-throttle">speed cap: {cap ?? 'none'}</span>
        {status.slowest_command ? (
          <span title="The slowest command the copy sent: how long it may have blocked a server">
            {' · '}slowest copy command {status.slowest_command.ms.toFixed(1)} ms ({status.slowest_command.command})
          </span>
        ) : null}
      </div>
      {rounds && (
        <div
          className="muted small"
          data-testid="migration-rounds"
          title="While a slot is copied its source keeps serving it; each round copies again the keys written during the one before, and a slot is handed off once a round leaves few enough"
        >
          copy rounds: {rounds.copying} slots copying, round {rounds.round},{' '}
          {formatNumber(rounds.changed)} keys written during the last round, {rounds.converged} converged
        </div>
      )}
      {status.blocked && (
        <div className="error-box" data-testid="migration-blocked">
          Held: {status.blocked}
        </div>
      )}
    </div>
  );
}
