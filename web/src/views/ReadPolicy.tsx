// The cluster's read policy (docs/replica-reads.md): where read-only commands go, the lag
// bound, and each replica: how fresh the proxies' own probes proved it (ms, like the bound),
// its link and how many bytes it is behind as the dashboard's health checks see them. Shown
// at the top of the Groups view; setting it needs an admin token.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useSetReadPolicy } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { ReadMode } from '../api/shapes';
import { Badge, ErrorBox, useNotices } from '../components/ui';
import { formatBytes, formatNumber } from '../lib/format';

const MODES: { mode: ReadMode; label: string }[] = [
  { mode: 'master', label: 'master: every read to the master' },
  { mode: 'prefer-replica', label: 'prefer-replica: a fresh replica, else the master' },
  { mode: 'replica-only', label: 'replica-only: a fresh replica, else TRYAGAIN' },
];

export function ReadPolicyPanel({ c }: { c: ClusterApi }) {
  const { data, error } = useQuery({ ...reads.readPolicy(c), refetchInterval: 2000 });
  const { run } = useNotices();
  const setPolicy = useSetReadPolicy(c);
  // The form shows the policy in force, and follows it until edited; once applied, it
  // follows the policy in force again.
  const [modeEdit, setModeEdit] = useState<ReadMode | null>(null);
  const [lagEdit, setLagEdit] = useState<string | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const current = data?.policy;
  const replicas = data?.replicas ?? [];
  // The proxies probe replicas only while reads may go to them.
  const probed = current != null && current.mode !== 'master';
  const mode = modeEdit ?? current?.mode ?? 'master';
  const lag = lagEdit ?? (current ? String(current.max_lag_ms) : '');

  const apply = async () => {
    const ms = Number(lag);
    if (!Number.isInteger(ms) || ms < 200 || ms > 3_600_000) {
      setErr('the lag bound is a whole number of milliseconds, 200 to 3600000');
      return;
    }
    setErr(null);
    const set = await run(
      'Set read policy',
      () => setPolicy.mutateAsync({ mode, max_lag_ms: ms }),
      (v) => `reads: ${v.policy.mode}, within ${v.policy.max_lag_ms} ms`,
    );
    if (set) {
      setModeEdit(null);
      setLagEdit(null);
    }
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
          <select value={mode} onChange={(e) => setModeEdit(e.target.value as ReadMode)} data-testid="read-policy-select">
            {MODES.map((m) => (
              <option key={m.mode} value={m.mode}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Max lag (ms)
          <input value={lag} onChange={(e) => setLagEdit(e.target.value)} size={8} data-testid="read-policy-lag" />
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
              <th className="num" title="Proxies whose probes proved it within the bound: a read routed now may go there">
                Fresh on
              </th>
              <th className="num" title="The oldest of the proxies' proofs that it had caught up with its master">
                Proven
              </th>
              <th className="num" title="The master's replication offset minus the replica's, at the last health check">
                Behind master
              </th>
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
                <td className="num" data-testid={`replica-fresh-${r.addr}`}>
                  {probed ? `${r.fresh_on}/${data?.proxies ?? 0} proxies` : '—'}
                </td>
                <td className="num" data-testid={`replica-proven-${r.addr}`}>
                  {!probed ? 'not probed' : r.proven_ms_ago == null ? 'not proven' : `${formatNumber(r.proven_ms_ago)} ms ago`}
                </td>
                <td className="num">{r.lag_bytes == null ? 'unknown' : formatBytes(Math.max(0, r.lag_bytes))}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {current && replicas.length === 0 && <p className="muted">No replica in any group: every read goes to a master.</p>}
      {current && replicas.length > 0 && !probed && (
        <p className="muted small" data-testid="read-policy-unprobed">
          Reads go to the masters, so the proxies do not probe their replicas: freshness shows once a replica mode is set.
        </p>
      )}
      {data && data.unreachable.length > 0 && (
        <p className="error-text small" data-testid="read-policy-unreachable">
          Not answering, so not counted: {data.unreachable.join(', ')}
        </p>
      )}
    </div>
  );
}
