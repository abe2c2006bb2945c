// A plugin's canary on the Plugins view (docs/plugins.md, "Canary rollout"): a candidate
// module and/or config run by a share of the proxies first, its metrics beside the stable
// version's, and Promote or Roll back.

import { useQuery } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { usePromoteCanary, useRollbackCanary, useStartCanary, useUploadCanaryModule } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { Plugin } from '../api/shapes';
import { ErrorBox, useConfirm, useNotices } from '../components/ui';
import { parseShare, sideBySide } from '../lib/canary';
import { formatConfig, validateConfig } from '../lib/config';

export function PluginCanary({ c, plugin }: { c: ClusterApi; plugin: Plugin }) {
  const { run } = useNotices();
  const confirm = useConfirm();
  const upload = useUploadCanaryModule(c);
  const start = useStartCanary(c);
  const promote = usePromoteCanary(c);
  const rollback = useRollbackCanary(c);
  const canary = plugin.canary ?? null;
  const m = useQuery({ ...reads.pluginMetrics(c, plugin.name), refetchInterval: 3000 });
  const [text, setText] = useState(() => formatConfig(canary?.config ?? plugin.config));
  const [percent, setPercent] = useState(String(canary?.percent ?? 10));
  const [proxies, setProxies] = useState((canary?.proxies ?? []).join(', '));
  const [file, setFile] = useState<File | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const fileRef = useRef<HTMLInputElement>(null);
  const check = validateConfig(text);
  const share = parseShare(percent, proxies);
  const busy = upload.isPending || start.isPending || promote.isPending || rollback.isPending;

  const send = async () => {
    if (!check.ok || !share.ok) return;
    setErr(null);
    try {
      if (file) await upload.mutateAsync({ name: plugin.name, wasm: await file.arrayBuffer() });
      await run(
        `Canary of ${plugin.name}`,
        () => start.mutateAsync({ name: plugin.name, body: { config: check.value, percent: share.percent, proxies: share.proxies } }),
        (e) => `${e.name}: canary on ${e.canary?.percent ?? 0} % of proxies${e.canary?.proxies?.length ? ` and ${e.canary.proxies.length} named` : ''}`,
      );
      setFile(null);
      if (fileRef.current) fileRef.current.value = '';
    } catch (e) {
      setErr(e);
    }
  };
  const doPromote = async () => {
    const ok = await confirm(
      `Promote the canary of ${plugin.name}?`,
      'Every proxy of the cluster runs the candidate version; the stable version it replaces is gone.',
      'Promote',
    );
    if (ok) await run(`Promote ${plugin.name}`, () => promote.mutateAsync(plugin.name), (e) => `${e.name}: canary promoted`);
  };
  const doRollback = async () => {
    const ok = await confirm(`Roll back the canary of ${plugin.name}?`, 'Every proxy runs the stable version again; the candidate is dropped.', 'Roll back');
    if (ok) await run(`Roll back ${plugin.name}`, () => rollback.mutateAsync(plugin.name), (e) => `${e.name}: canary rolled back`);
  };

  const rows = sideBySide(m.data?.tracks ?? []);
  return (
    <div className="panel" data-testid="plugin-canary">
      <h3>Canary of {plugin.name}</h3>
      {canary ? (
        <p className="small" data-testid="plugin-canary-state">
          Running: module <span className="mono">{canary.sha256.slice(0, 12)}</span> on {canary.percent} % of proxies
          {(canary.proxies ?? []).length > 0 && <> and {(canary.proxies ?? []).join(', ')}</>}.
        </p>
      ) : (
        <p className="muted small" data-testid="plugin-canary-state">
          No canary: every proxy runs the stable version. Start one with a candidate config and/or module on a share of the proxies.
        </p>
      )}
      <textarea
        className={check.ok ? 'code' : 'code invalid'}
        rows={6}
        spellCheck={false}
        aria-label={`candidate config of ${plugin.name} (JSON)`}
        value={text}
        onChange={(e) => setText(e.target.value)}
        data-testid="canary-config"
        aria-invalid={!check.ok}
      />
      {!check.ok && <div className="error-text small">{check.message}</div>}
      <div className="toolbar">
        <label>
          Candidate module (optional){' '}
          <input ref={fileRef} type="file" accept=".wasm,application/wasm" onChange={(e) => setFile(e.target.files?.[0] ?? null)} data-testid="canary-file" />
        </label>
      </div>
      <div className="toolbar">
        <label title="The share of proxies that run the candidate, by a hash of each proxy's address">
          Percent of proxies <input size={4} inputMode="numeric" value={percent} onChange={(e) => setPercent(e.target.value)} data-testid="canary-percent" />
        </label>
        <label title="Proxies (client addresses) that run the candidate whatever the percentage">
          and proxies <input size={32} placeholder="host:port, …" value={proxies} onChange={(e) => setProxies(e.target.value)} data-testid="canary-proxies" />
        </label>
      </div>
      {!share.ok && (
        <div className="error-text small" data-testid="canary-share-error">
          {share.error}
        </div>
      )}
      <div className="toolbar">
        <button className="primary" onClick={send} disabled={!check.ok || !share.ok || busy} data-testid="canary-start">
          {canary ? 'Update canary' : 'Start canary'}
        </button>
        <button onClick={doPromote} disabled={!canary || busy} data-testid="canary-promote">
          Promote
        </button>
        <button className="danger-outline" onClick={doRollback} disabled={!canary || busy} data-testid="canary-rollback">
          Roll back
        </button>
      </div>
      <ErrorBox error={err ?? m.error} testid="canary-error" />
      {rows.length > 0 && (m.data?.tracks ?? []).length > 0 && (
        <table className="table compact" data-testid="canary-side-by-side">
          <thead>
            <tr>
              <th></th>
              <th className="num">stable</th>
              <th className="num">canary</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.label} data-testid={`canary-row-${r.label}`}>
                <td className="mono small">{r.label}</td>
                <td className="num">{r.stable}</td>
                <td className="num">{r.canary}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p className="muted small">Counts are each proxy's since it started: compare their rates in the metrics history or Prometheus (tessera_plugin_track names each proxy's version).</p>
    </div>
  );
}
