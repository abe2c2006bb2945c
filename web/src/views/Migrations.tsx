// Migrations: the running one's progress, moving a slot range, rebalancing (by slot count and
// weights, or by measured load or memory: a plan previewed, then executed), the slots in flight.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useAbort, useMigrate, usePlanRebalance, useRebalance } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { RebalanceBy, RebalanceResult } from '../api/shapes';
import { MigrationHistory } from '../components/MigrationHistory';
import { MigrationProgress, useMigrations } from '../components/MigrationProgress';
import { ErrorBox, useConfirm, useNotices } from '../components/ui';
import { formatBytes, formatNumber } from '../lib/format';
import { parseCap, summarizeFlight } from '../lib/migration';
import { groupColor, parseRange, planDelta, rangeLabel, summarizeMoves } from '../lib/slots';

export function Migrations({ c }: { c: ClusterApi }) {
  const mig = useMigrations(c);
  const groups = useQuery({ ...reads.groups(c), refetchInterval: 5000 });
  const { run, notify } = useNotices();
  const confirm = useConfirm();
  const migrate = useMigrate(c);
  const abort = useAbort(c);
  const planRebalance = usePlanRebalance(c);
  const rebalance = useRebalance(c);
  const [range, setRange] = useState('');
  const [cap, setCap] = useState('');
  const [target, setTarget] = useState<number | ''>('');
  const [rangeErr, setRangeErr] = useState<string | null>(null);
  const [weights, setWeights] = useState<Record<number, string>>({});
  const [plan, setPlan] = useState<RebalanceResult | null>(null);
  const [planWeights, setPlanWeights] = useState<Record<string, number> | undefined>(undefined);
  const [by, setBy] = useState<RebalanceBy>('slots');
  const [tolerance, setTolerance] = useState('10');
  const measured = by === 'load' || by === 'memory';

  const groupIds = (groups.data ?? []).filter((g) => g.servers.length > 0).map((g) => g.id);

  const start = async () => {
    const r = parseRange(range);
    if (typeof r === 'string') return setRangeErr(r);
    if (target === '') return setRangeErr('choose the group the slots move to');
    const maxKeysPerSec = parseCap(cap);
    if (typeof maxKeysPerSec === 'object') return setRangeErr(maxKeysPerSec.error);
    setRangeErr(null);
    await run(
      `Migrate slots ${rangeLabel(r.from, r.to)}`,
      () => migrate.mutateAsync({ from: r.from, to: r.to, group: target, maxKeysPerSec }),
      (x) => `${x.queued} slot(s) queued to move to group ${target}`,
    );
  };

  const currentWeights = (): Record<string, number> | undefined | string => {
    const entries = Object.entries(weights).filter(([, v]) => v.trim() !== '');
    if (!entries.length) return undefined;
    const out: Record<string, number> = {};
    for (const [g, v] of entries) {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) return `the weight of group ${g} must be a whole number ≥ 0`;
      out[g] = n;
    }
    // Groups left blank get weight 1 once any weight is given.
    for (const g of groupIds) if (!(String(g) in out)) out[String(g)] = 1;
    return out;
  };

  const preview = async () => {
    const w = measured ? undefined : currentWeights();
    if (typeof w === 'string') return setRangeErr(w);
    const tol = Number(tolerance);
    if (measured && !(tol >= 0 && tol <= 100)) return setRangeErr('the tolerance is a percent, 0 to 100');
    const p = await run('Rebalance preview', () =>
      planRebalance.mutateAsync(measured ? { by, tolerance: tol } : { weights: w, by: w ? 'weight' : 'slots' }),
    );
    if (p) {
      setPlan(p);
      setPlanWeights(w);
    }
  };
  const execute = async () => {
    if (!plan) return;
    const ok = await confirm(
      `Execute the rebalance (${plan.slots} slots)?`,
      'The planned slots are queued for migration; keys move while the cluster keeps serving.',
      'Execute',
    );
    if (!ok) return;
    // A measured plan is queued exactly as previewed (the measure moves on meanwhile).
    const rep = await run(
      'Rebalance',
      () =>
        rebalance.mutateAsync(
          plan.by === 'load' || plan.by === 'memory' ? { moves: plan.moves, by: plan.by } : { weights: planWeights },
        ),
      (x) => `${x.slots} slot(s) queued by the rebalance`,
    );
    if (rep) {
      if (rep.slots !== plan.slots)
        notify('error', `The cluster changed since the preview: the rebalance queued ${rep.slots} slot(s), not the ${plan.slots} previewed.`);
      setPlan(null);
    }
  };
  const abortRange = async (from: number, to: number) => {
    const ok = await confirm(`Abort the migration of slots ${rangeLabel(from, to)}?`, 'Keys already moved go back.', 'Abort');
    if (!ok) return;
    const slots = Array.from({ length: to - from + 1 }, (_, i) => from + i);
    await run('Abort', () => abort.mutateAsync(slots), (r) => `${r.aborted} slot migration(s) aborted`);
  };

  const ranges = plan ? summarizeMoves(plan.moves) : [];
  const delta = plan ? planDelta(plan.moves) : new Map();

  return (
    <section>
      <MigrationProgress c={c} status={mig.data} error={mig.error} />
      <div className="columns">
        <div className="panel">
          <h3>Move a slot range</h3>
          <div className="toolbar">
            <label>
              Slots{' '}
              <input value={range} onChange={(e) => setRange(e.target.value)} placeholder="0-99" size={10} data-testid="migrate-range" />
            </label>
            <label>
              to group{' '}
              <select
                value={target}
                onChange={(e) => setTarget(e.target.value === '' ? '' : Number(e.target.value))}
                data-testid="migrate-target"
              >
                <option value="">—</option>
                {groupIds.map((g) => (
                  <option key={g} value={g}>
                    group {g}
                  </option>
                ))}
              </select>
            </label>
            <label title="At most this many keys per second, over every source; empty for no cap. It ends with the migration.">
              cap{' '}
              <input value={cap} onChange={(e) => setCap(e.target.value)} placeholder="keys/s" size={7} data-testid="migrate-cap" />
            </label>
            <button className="primary" onClick={start} data-testid="migrate-start">
              Start migration
            </button>
          </div>
          {rangeErr && <div className="error-text small">{rangeErr}</div>}
        </div>
        <div className="panel">
          <h3>Rebalance</h3>
          <p className="muted small">
            Even split by slot count, or by the weights given (blank: 1); or even out the measured load (ops/s) or memory
            within a tolerance, moving few slots.
          </p>
          <div className="toolbar">
            <label>
              by{' '}
              <select value={by} onChange={(e) => setBy(e.target.value as RebalanceBy)} data-testid="rebalance-by">
                <option value="slots">slots / weight</option>
                <option value="load">load (ops/s)</option>
                <option value="memory">memory</option>
              </select>
            </label>
            {measured && (
              <label>
                tolerance ±
                <input size={3} value={tolerance} onChange={(e) => setTolerance(e.target.value)} data-testid="rebalance-tolerance" /> %
              </label>
            )}
          </div>
          <div className="toolbar">
            {!measured && groupIds.map((g) => (
              <label key={g}>
                <span className="swatch" style={{ background: groupColor(g) }} /> g{g}{' '}
                <input
                  size={3}
                  value={weights[g] ?? ''}
                  placeholder="1"
                  onChange={(e) => setWeights((w) => ({ ...w, [g]: e.target.value }))}
                  data-testid={`weight-${g}`}
                />
              </label>
            ))}
            <button onClick={preview} data-testid="rebalance-preview">
              Preview plan
            </button>
          </div>
          {plan && (
            <div data-testid="rebalance-plan">
              <p>
                <b>{plan.slots}</b> slot(s) would move
                {plan.slots > 0 && (
                  <>
                    {' '}
                    (
                    {[...delta.entries()]
                      .sort((a, b) => a[0] - b[0])
                      .map(([g, d]) => `g${g} ${d > 0 ? '+' : ''}${d}`)
                      .join(', ')}
                    )
                  </>
                )}
                .
              </p>
              {plan.before && plan.after && (
                <table className="table compact" data-testid="rebalance-measure">
                  <thead>
                    <tr>
                      <th>Group</th>
                      <th className="num">Before ({plan.by === 'load' ? 'ops/s' : plan.by === 'memory' ? 'memory' : 'slots'})</th>
                      <th className="num">After</th>
                    </tr>
                  </thead>
                  <tbody>
                    {Object.keys(plan.before).map((g) => {
                      const f = (v: number | undefined) =>
                        plan.by === 'memory' ? formatBytes(Math.round(v ?? 0)) : formatNumber(v ?? 0);
                      return (
                        <tr key={g}>
                          <td>group {g}</td>
                          <td className="num">{f(plan.before?.[g])}</td>
                          <td className="num">{f(plan.after?.[g])}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              )}
              {(plan.notes ?? []).map((n) => (
                <p key={n} className="muted small">
                  {n}
                </p>
              ))}
              {ranges.length > 0 && (
                <table className="table compact">
                  <thead>
                    <tr>
                      <th>Slots</th>
                      <th>From</th>
                      <th>To</th>
                    </tr>
                  </thead>
                  <tbody>
                    {ranges.slice(0, 50).map((r) => (
                      <tr key={r.from}>
                        <td>{rangeLabel(r.from, r.to)}</td>
                        <td>group {r.source}</td>
                        <td>group {r.target}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
              {ranges.length > 50 && <p className="muted small">… and {ranges.length - 50} more ranges</p>}
              <div className="toolbar">
                <button className="primary" onClick={execute} disabled={plan.slots === 0} data-testid="rebalance-execute">
                  Execute plan
                </button>
                <button onClick={() => setPlan(null)}>Discard</button>
              </div>
            </div>
          )}
        </div>
      </div>
      <div className="panel">
        <h3>Slots in flight</h3>
        <ErrorBox error={groups.error} />
        {mig.data && mig.data.slots.length > 0 ? (
          <table className="table compact" data-testid="migration-slots">
            <thead>
              <tr>
                <th>Slots</th>
                <th>State</th>
                <th>From → to</th>
                <th className="num">Keys moved</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {summarizeFlight(mig.data.slots)
                .slice(0, 100)
                .map((r) => (
                  <tr key={r.from}>
                    <td>
                      {rangeLabel(r.from, r.to)} <span className="muted small">({r.to - r.from + 1})</span>
                    </td>
                    <td>
                      {r.state}
                      {r.aborting && <span className="badge badge-warn">aborting</span>}
                    </td>
                    <td>
                      group {r.source} → group {r.target}
                    </td>
                    <td className="num">{formatNumber(r.keys_moved)}</td>
                    <td>
                      {!r.aborting && r.state !== 'finished' && (
                        <button className="link" onClick={() => abortRange(r.from, r.to)}>
                          abort
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
            </tbody>
          </table>
        ) : (
          <p className="muted">No slot is moving.</p>
        )}
      </div>
      <MigrationHistory c={c} />
    </section>
  );
}
