// The running migration's progress (GET /api/migrations, polled every second): percent done,
// slots and keys left, keys/s, ETA, the write pause, and Abort. Every number is the
// dashboard's `run` as it reports it (docs/migration.md, "Progress"); none is estimated here.

import { useQuery } from '@tanstack/react-query';
import { useAbort } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { MigrationStatus } from '../api/shapes';
import { formatBytes, formatNumber } from '../lib/format';
import { barPercent, copyRounds, describeThrottle, formatDuration, runState, stateCounts } from '../lib/migration';
import { HoldTimeline } from './HoldTimeline';
import { ThrottleControl } from './ThrottleControl';
import { ErrorBox, useConfirm, useNotices } from './ui';

/** Polls the migration status every second. */
export function useMigrations(c: ClusterApi, intervalMs = 1000) {
  return useQuery({ ...reads.migrations(c), refetchInterval: intervalMs });
}

export function MigrationProgress({
  c,
  status,
  error,
}: {
  c: ClusterApi;
  status: MigrationStatus | undefined;
  error: unknown;
}) {
  const { run } = useNotices();
  const confirm = useConfirm();
  const abort = useAbort(c);
  if (!status) return <ErrorBox error={error} />;
  const active = status.slots.length;
  const r = status.run;
  const state = runState(status);
  const pct = barPercent(status);
  const cap = describeThrottle(status.throttle, formatBytes);
  const running = r?.running ?? false;
  const counts = stateCounts(status);
  const rounds = copyRounds(status);

  const abortAll = async () => {
    const ok = await confirm(
      'Abort every migration?',
      `${active} slot(s) are moving. Pending ones are dropped; started ones turn around and move their keys back.`,
      'Abort migrations',
    );
    if (!ok) return;
    await run('Abort', () => abort.mutateAsync(undefined), (x) => `${x.aborted} slot migration(s) aborted`);
  };

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
      <div className="progress-bar" role="progressbar" aria-label="migration progress" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}>
        <div className="progress-fill" style={{ width: `${pct}%` }} />
      </div>
      {r && !running && (
        <div className="muted small" data-testid="migration-last">
          Last migration: {formatNumber(r.slots_done)} slot(s) moved
          {r.slots_aborted ? `, ${formatNumber(r.slots_aborted)} aborted` : ''}, {formatNumber(r.keys_copied)} keys
          {r.ended_unix_ms != null ? ` in ${formatDuration((r.ended_unix_ms - r.started_unix_ms) / 1000)}` : ''}
        </div>
      )}
      <div className="stats-row">
        <div className="stat">
          <div className="stat-label">Done</div>
          <div className="stat-value" data-testid="migration-percent">
            {r && state !== 'idle' ? `${r.percent_done}%` : '—'}
          </div>
        </div>
        <div className="stat" title="Slots of the running migration not yet routed to their target">
          <div className="stat-label">Slots left</div>
          <div className="stat-value" data-testid="migration-remaining">
            {r && running ? (
              <>
                {formatNumber(r.slots - r.slots_done)}
                <span className="muted small"> / {formatNumber(r.slots)}</span>
              </>
            ) : (
              '—'
            )}
          </div>
        </div>
        <div className="stat">
          <div className="stat-label">Keys/s</div>
          <div className="stat-value" data-testid="migration-rate">
            {running ? formatNumber(status.keys_per_sec) : '—'}
          </div>
        </div>
        <div className="stat" title="Until every key of the migration is copied once, at the rate of the last 10 s">
          <div className="stat-label">ETA</div>
          <div className="stat-value" data-testid="migration-eta">
            {running ? formatDuration(status.eta_secs) : '—'}
          </div>
        </div>
        <div className="stat" title="Keys of the migration's slots copied once, of the keys they held (counted when queued, then by their first copy)">
          <div className="stat-label">Keys copied</div>
          <div className="stat-value" data-testid="migration-keys-moved">
            {r ? formatNumber(r.keys_copied) : '—'}
            {r?.keys_total != null ? <span className="muted small"> / {formatNumber(r.keys_total)}</span> : null}
            {r ? <span className="muted small"> · {formatBytes(r.bytes_moved)}</span> : null}
          </div>
        </div>
        <div className="stat" title="Keys of the migration's slots not yet copied; keys written since their copy are copied again and shown apart">
          <div className="stat-label">Keys left</div>
          <div className="stat-value" data-testid="migration-keys-left">
            {running && status.keys_left != null ? formatNumber(status.keys_left) : '—'}
            {running && r && r.keys_recopy > 0 ? (
              <span className="muted small" data-testid="migration-recopy">
                {' '}
                + {formatNumber(r.keys_recopy)} rewritten
              </span>
            ) : null}
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
      {r && (
        <HoldTimeline holds={status.holds} startMs={r.started_unix_ms} endMs={r.ended_unix_ms} />
      )}
      <ThrottleControl c={c} status={status} />
    </div>
  );
}
