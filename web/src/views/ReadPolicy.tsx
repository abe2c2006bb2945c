// The cluster's read policy (docs/replica-reads.md): where read-only commands go, the lag
// bound, and each replica's link and lag as the dashboard's health checks see them. Shown
// at the top of the Groups view; setting it needs an admin token.

import { useEffect, useState } from 'react';
import type { ClusterApi } from '../api';
import { Badge, ErrorBox, useNotices } from '../components/ui';
import { usePoll } from '../hooks';
import { formatNumber } from '../lib/format';
import type { ReadMode } from '../types';

const MODES: { mode: ReadMode; label: string }[] = [
  { mode: 'master', label: 'master: every read to the master' },
  { mode: 'prefer-replica', label: 'prefer-replica: a fresh replica, else the master' },
  { mode: 'replica-only', label: 'replica-only: a fresh replica, else TRYAGAIN' },
];

export function ReadPolicyPanel({ c }: { c: ClusterApi }) {
  const { data, error, refresh } = usePoll((s) => c.readPolicy(s), 2000, [c.name]);
  const { run } = useNotices();
  const [mode, setMode] = useState<ReadMode>('master');
  const [lag, setLag] = useState('');
  const [err, setErr] = useState<string | null>(null);
  // Network input: a body of another shape shows nothing rather than breaking the view.
  const current = data?.policy && typeof data.policy.mode === 'string' ? data.policy : undefined;
  const replicas = Array.isArray(data?.replicas) ? data.replicas : [];

  // The form starts from the policy in force, and follows it until edited.
  useEffect(() => {
    if (current) {
      setMode(current.mode);
      setLag(String(current.max_lag_ms));
    }
  }, [current?.mode, current?.max_lag_ms]);

  const apply = async () => {
    const ms = Number(lag);
    if (!Number.isInteger(ms) || ms < 200 || ms > 3_600_000) {
      setErr('the lag bound is a whole number of milliseconds, 200 to 3600000');
      return;
    }
    setErr(null);
    await run(
      'Set read policy',
      () => c.setReadPolicy({ mode, max_lag_ms: ms }),
      (v) => `reads: ${v.policy.mode}, within ${v.policy.max_lag_ms} ms`,
    );
    refresh();
  };

  return (
    <div className="panel" data-testid="read-policy">
      <div className="group-head">
        <h3>Read policy</h3>
        <span data-testid="read-policy-mode">{current ? current.mode : '…'}</span>
        {current && current.mode !== 'master' && (
          <span className="muted" data-testid="read-policy-lag-now">
            replicas at most {formatNumber(current.max_lag_ms)} ms behind
          </span>
        )}
      </div>
      <div className="toolbar">
        <label>
          Reads go to
          <select value={mode} onChange={(e) => setMode(e.target.value as ReadMode)} data-testid="read-policy-select">
            {MODES.map((m) => (
              <option key={m.mode} value={m.mode}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Max lag (ms)
          <input value={lag} onChange={(e) => setLag(e.target.value)} size={8} data-testid="read-policy-lag" />
        </label>
        <button className="primary" onClick={apply} data-testid="read-policy-apply">
          Apply
        </button>
        {err && <span className="error-text small">{err}</span>}
      </div>
      <ErrorBox error={error} testid="read-policy-error" />
      {replicas.length > 0 && (
        <table className="table compact">
          <thead>
            <tr>
              <th>Group</th>
              <th>Replica</th>
              <th>Health</th>
              <th>Master link</th>
              <th className="num">Lag</th>
            </tr>
          </thead>
          <tbody>
            {replicas.map((r) => (
              <tr key={r.addr} data-testid={`replica-state-${r.addr}`}>
                <td>{r.group}</td>
                <td>{r.addr}</td>
                <td>
                  <Badge ok={r.up}>{r.up ? 'up' : 'down'}</Badge>
                </td>
                <td>
                  <Badge ok={r.link == null ? null : r.link === 'up'}>{r.link ?? '—'}</Badge>
                </td>
                <td className="num">{r.lag_bytes == null ? 'unknown' : `${formatNumber(r.lag_bytes)} B`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {current && replicas.length === 0 && <p className="muted">No replica in any group: every read goes to a master.</p>}
    </div>
  );
}
