// The cluster's mirror (docs/mirroring.md): the shadow target and mode, turning it on or off,
// the counters summed over the proxies by command, and the latest mismatches with both replies.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useMirrorOff, useSetMirror } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { Mirror, MirrorMode } from '../api/shapes';
import { Badge, ErrorBox, Stat, useConfirm, useNotices } from '../components/ui';
import { formatBytes, formatNumber, formatTime } from '../lib/format';

/** host:port, as the dashboard checks it. */
export function validTarget(t: string): boolean {
  const i = t.lastIndexOf(':');
  if (i <= 0) return false;
  const port = Number(t.slice(i + 1));
  return !/\s/.test(t) && Number.isInteger(port) && port > 0 && port < 65536;
}

export function MirrorView({ c }: { c: ClusterApi }) {
  const m = useQuery({ ...reads.mirror(c), refetchInterval: 2000 });
  return (
    <section>
      <ErrorBox error={m.error} />
      <Settings c={c} m={m.data} />
      {m.data && <Figures m={m.data} />}
      {m.data && <Samples m={m.data} />}
    </section>
  );
}

function Settings({ c, m }: { c: ClusterApi; m: Mirror | undefined }) {
  const { run } = useNotices();
  const confirm = useConfirm();
  const set = useSetMirror(c);
  const stop = useMirrorOff(c);
  const [target, setTarget] = useState('');
  const [mode, setMode] = useState<MirrorMode>('writes');
  const [password, setPassword] = useState('');
  const on = !!m?.config;
  const apply = async () => {
    const change = { target: target.trim(), mode, ...(password ? { password } : {}) };
    await run('Mirror', () => set.mutateAsync(change), (x) => `mirroring ${x.config?.mode} to ${x.config?.target}`);
    setPassword('');
  };
  const off = async () => {
    const ok = await confirm('Stop mirroring?', 'Every proxy stops sending copies to the shadow; the counters are kept.', 'Stop mirroring');
    if (!ok) return;
    await run('Mirror off', () => stop.mutateAsync(undefined), () => 'mirroring off');
  };
  return (
    <div className="panel">
      <h3>
        Shadow target{' '}
        <Badge ok={on ? true : null} testid="mirror-state">
          {on ? `on: ${m?.config?.mode} to ${m?.config?.target}` : 'off'}
        </Badge>
      </h3>
      <p className="muted small">
        Copies of client commands go to the shadow (a Redis server or another cluster's proxy) after the primary answered; its replies are compared. Never slows clients: a full queue drops copies and counts them.
      </p>
      <div className="toolbar">
        <label>
          Target <input value={target} onChange={(e) => setTarget(e.target.value)} placeholder="host:port" size={22} data-testid="mirror-target" />
        </label>
        <label>
          Mode{' '}
          <select value={mode} onChange={(e) => setMode(e.target.value as MirrorMode)} data-testid="mirror-mode">
            <option value="writes">writes</option>
            <option value="all">all (reads compared too)</option>
          </select>
        </label>
        <label>
          Password <input type="password" value={password} onChange={(e) => setPassword(e.target.value)} size={12} data-testid="mirror-password" />
        </label>
        <button className="primary" onClick={apply} disabled={!validTarget(target.trim())} data-testid="mirror-apply">
          {on ? 'Change' : 'Start mirroring'}
        </button>
        {on && (
          <button className="danger-outline" onClick={off} data-testid="mirror-off">
            Stop
          </button>
        )}
      </div>
    </div>
  );
}

function Figures({ m }: { m: Mirror }) {
  const f = m.figures;
  const dropped = Object.values(f.dropped ?? {}).reduce((a, b) => a + b, 0);
  // A proxy the dashboard could not read is listed with only its token, address and error.
  const unreached = m.proxies.flatMap((p) => ('error' in p ? [p] : []));
  return (
    <div className="panel">
      <div className="stats-row">
        <Stat label="Sent" value={formatNumber(f.sent)} testid="mirror-sent" />
        <Stat label="Compared" value={formatNumber(f.compared)} testid="mirror-compared" />
        <Stat label="Mismatched" value={formatNumber(f.mismatched)} testid="mirror-mismatched" />
        <Stat label="Not compared" value={formatNumber(f.uncompared)} />
        <Stat label="Dropped" value={formatNumber(dropped)} testid="mirror-dropped" />
        <Stat label="Shadow errors" value={formatNumber(f.errors)} />
        <Stat label="Queued now" value={`${formatNumber(f.queue_entries)} · ${formatBytes(f.queue_bytes)}`} />
      </div>
      {dropped > 0 && (
        <p className="small muted" data-testid="mirror-dropped-reasons">
          dropped: {Object.entries(f.dropped).map(([k, n]) => `${k.replace('_', ' ')} ${formatNumber(n)}`).join(', ')}
        </p>
      )}
      {unreached.map((p) => (
        <div key={p.token} className="error-text small">
          proxy {p.addr} not reached: {p.error}
        </div>
      ))}
      <table className="table" data-testid="mirror-commands">
        <thead>
          <tr>
            <th>Command</th>
            <th className="num">Sent</th>
            <th className="num">Compared</th>
            <th className="num">Mismatched</th>
            <th className="num">Not compared</th>
          </tr>
        </thead>
        <tbody>
          {f.commands.map((x) => (
            <tr key={x.command} data-testid={`mirror-command-${x.command}`}>
              <td className="mono">{x.command}</td>
              <td className="num">{formatNumber(x.sent)}</td>
              <td className="num">{formatNumber(x.compared)}</td>
              <td className="num">{x.mismatched > 0 ? <strong className="error-text">{formatNumber(x.mismatched)}</strong> : '0'}</td>
              <td className="num">{formatNumber(x.uncompared)}</td>
            </tr>
          ))}
          {f.commands.length === 0 && (
            <tr>
              <td colSpan={5} className="muted">
                Nothing mirrored yet.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

function Samples({ m }: { m: Mirror }) {
  if (m.samples.length === 0) return null;
  return (
    <div className="panel">
      <h3>Latest mismatches</h3>
      <table className="table" data-testid="mirror-samples">
        <thead>
          <tr>
            <th>When</th>
            <th>Command</th>
            <th>Primary replied</th>
            <th>Shadow replied</th>
          </tr>
        </thead>
        <tbody>
          {m.samples.map((s, i) => (
            <tr key={`${s.proxy}-${s.unix_ms}-${i}`} data-testid={`mirror-sample-${i}`}>
              <td className="small">{formatTime(s.unix_ms)}</td>
              <td className="mono small">
                {s.command} {s.args.join(' ')}
              </td>
              <td className="mono small">{s.primary}</td>
              <td className="mono small">{s.shadow}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
