// A cluster's plugin catalog (docs/plugins.md): the chain in order, upload, reorder, enable,
// disable and delete; a plugin's JSON config checked as it is typed, its own metrics, and its
// canary (./PluginCanary.tsx).

import { useQuery } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { useConfigurePlugin, useDeletePlugin, useOrderPlugins, useSetPluginEnabled, useUploadPlugin } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { ApiError } from '../api/error';
import { reads } from '../api/queries';
import type { Plugin, PluginMetrics } from '../api/shapes';
import { PluginChart } from '../components/PluginChart';
import { Badge, ErrorBox, errorText, useConfirm, useNotices } from '../components/ui';
import { formatConfig, parseLimits, validateConfig } from '../lib/config';
import { formatBytes, formatNumber, formatSeconds, formatTime } from '../lib/format';
import { PluginCanary } from './PluginCanary';

/** The dashboard's rule for plugin names. */
const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** A plugin name from a file name: `tessera_plugin_filter.wasm` → `filter`. */
export function nameFromFile(file: string): string {
  return file
    .replace(/\.wasm$/i, '')
    .replace(/^(lib)?tessera[_-]plugin[_-]/i, '')
    .replace(/[^A-Za-z0-9_-]/g, '-')
    .slice(0, 64);
}

/** The order after moving `name` one place up (-1) or down (+1). */
export function moveInOrder(names: string[], name: string, dir: -1 | 1): string[] {
  const i = names.indexOf(name);
  const j = i + dir;
  if (i < 0 || j < 0 || j >= names.length) return names;
  const out = [...names];
  [out[i], out[j]] = [out[j], out[i]];
  return out;
}

export function Plugins({ c }: { c: ClusterApi }) {
  const list = useQuery({ ...reads.plugins(c), refetchInterval: 5000 });
  const { run } = useNotices();
  const confirm = useConfirm();
  const reorder = useOrderPlugins(c);
  const setEnabled = useSetPluginEnabled(c);
  const del = useDeletePlugin(c);
  const [selected, setSelected] = useState<string | null>(null);
  const unavailable = list.error instanceof ApiError && list.error.status === 404;
  const plugins = [...(list.data ?? [])].sort((a, b) => (a.order ?? 0) - (b.order ?? 0));
  const sel = plugins.find((p) => p.name === selected) ?? null;

  const move = async (p: Plugin, dir: -1 | 1) => {
    const order = moveInOrder(
      plugins.map((x) => x.name),
      p.name,
      dir,
    );
    await run('Reorder plugins', () => reorder.mutateAsync(order), () => `order: ${order.join(', ')}`);
  };
  const toggle = async (p: Plugin) => {
    await run(
      `${p.enabled ? 'Disable' : 'Enable'} ${p.name}`,
      () => setEnabled.mutateAsync({ name: p.name, enabled: !p.enabled }),
      (x) => `${x.name} ${x.enabled ? 'enabled' : 'disabled'}`,
    );
  };
  const remove = async (p: Plugin) => {
    const ok = await confirm(`Delete plugin ${p.name}?`, 'Every proxy of the cluster unloads it; its module and config are removed from the catalog.', 'Delete plugin');
    if (!ok) return;
    await run(`Delete ${p.name}`, () => del.mutateAsync(p.name), () => `${p.name} deleted`);
    if (selected === p.name) setSelected(null);
  };

  return (
    <section>
      {unavailable ? (
        <div className="panel" data-testid="plugins-unavailable">
          <p>This cluster's dashboard has no plugin catalog yet ({errorText(list.error)}).</p>
        </div>
      ) : (
        <ErrorBox error={list.error} />
      )}
      {!unavailable && <Upload c={c} />}
      {list.data && (
        <table className="table" data-testid="plugins-table">
          <thead>
            <tr>
              <th>#</th>
              <th>Plugin</th>
              <th>State</th>
              <th>On failure</th>
              <th className="num">Size</th>
              <th>sha256</th>
              <th>Updated</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {plugins.map((p, i) => (
              <tr key={p.name} data-testid={`plugin-${p.name}`} className={selected === p.name ? 'row-selected' : ''}>
                <td>{i + 1}</td>
                <td>
                  <button className="link" onClick={() => setSelected(p.name)} data-testid={`plugin-open-${p.name}`}>
                    {p.name}
                  </button>
                </td>
                <td>
                  <Badge ok={p.enabled ? true : null}>{p.enabled ? 'enabled' : 'disabled'}</Badge>
                  {p.canary && (
                    <>
                      {' '}
                      <Badge ok={null} testid={`plugin-canary-badge-${p.name}`}>
                        canary {p.canary.percent} %{(p.canary.proxies ?? []).length > 0 ? ` + ${(p.canary.proxies ?? []).length}` : ''}
                      </Badge>
                    </>
                  )}
                </td>
                <td>fail {p.fail}</td>
                <td className="num">{formatBytes(p.size)}</td>
                <td className="mono small" title={p.sha256}>
                  {p.sha256.slice(0, 12)}
                </td>
                <td className="small">{p.updated_unix ? formatTime(p.updated_unix * 1000) : '—'}</td>
                <td className="actions">
                  <button onClick={() => move(p, -1)} disabled={i === 0} aria-label="move up" data-testid={`plugin-up-${p.name}`}>
                    ↑
                  </button>
                  <button onClick={() => move(p, 1)} disabled={i === plugins.length - 1} aria-label="move down" data-testid={`plugin-down-${p.name}`}>
                    ↓
                  </button>
                  <button onClick={() => toggle(p)} data-testid={`plugin-toggle-${p.name}`}>
                    {p.enabled ? 'Disable' : 'Enable'}
                  </button>
                  <button className="danger-outline" onClick={() => remove(p)} data-testid={`plugin-delete-${p.name}`}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
            {plugins.length === 0 && (
              <tr>
                <td colSpan={8} className="muted">
                  No plugin in the catalog.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      {sel && (
        <div className="columns">
          <ConfigEditor key={`${sel.name}-${sel.updated_unix}`} c={c} plugin={sel} />
          <Metrics c={c} name={sel.name} />
        </div>
      )}
      {sel && <PluginCanary key={`canary-${sel.name}-${sel.updated_unix}-${sel.canary?.started_unix ?? 0}`} c={c} plugin={sel} />}
    </section>
  );
}

function Upload({ c }: { c: ClusterApi }) {
  const { notify } = useNotices();
  const upload = useUploadPlugin(c);
  const [name, setName] = useState('');
  const [file, setFile] = useState<File | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const fileRef = useRef<HTMLInputElement>(null);
  const send = async () => {
    setErr(null);
    if (!file) return setErr(new Error('choose a .wasm file'));
    if (!NAME_RE.test(name)) return setErr(new Error('a plugin name is letters, digits, - and _ (up to 64)'));
    try {
      const p = await upload.mutateAsync({ name, wasm: await file.arrayBuffer() });
      setFile(null);
      setName('');
      if (fileRef.current) fileRef.current.value = '';
      notify('ok', `${p.name} uploaded (${formatBytes(p.size)})`);
    } catch (e) {
      setErr(e);
    }
  };
  return (
    <div className="panel">
      <h3>Upload a plugin</h3>
      <div className="toolbar">
        <input
          ref={fileRef}
          type="file"
          accept=".wasm,application/wasm"
          aria-label="plugin module (.wasm)"
          onChange={(e) => {
            const f = e.target.files?.[0] ?? null;
            setFile(f);
            if (f && !name) setName(nameFromFile(f.name));
          }}
          data-testid="plugin-file"
        />
        <label>
          Name <input value={name} onChange={(e) => setName(e.target.value)} size={16} data-testid="plugin-name" />
        </label>
        <button className="primary" onClick={send} disabled={!file || upload.isPending} data-testid="plugin-upload">
          Upload
        </button>
      </div>
      <ErrorBox error={err} testid="plugin-upload-error" />
    </div>
  );
}

function ConfigEditor({ c, plugin }: { c: ClusterApi; plugin: Plugin }) {
  const { notify } = useNotices();
  const configure = useConfigurePlugin(c);
  const [text, setText] = useState(() => formatConfig(plugin.config));
  // The catalog keeps `fail` as it was given: the dashboard also takes `fail_open` and
  // `fail_closed`, and anything not open is closed.
  const [fail, setFail] = useState<'open' | 'closed'>(plugin.fail === 'open' || plugin.fail === 'fail_open' ? 'open' : 'closed');
  const [serverErr, setServerErr] = useState<unknown>(null);
  const shown = (n: number | null | undefined) => (n == null ? '' : String(n));
  const [limits, setLimits] = useState({
    cpu_budget_ms: shown(plugin.cpu_budget_ms),
    memory_mb: shown(plugin.memory_mb),
    max_input_kb: shown(plugin.max_input_kb),
  });
  const parsedLimits = parseLimits(limits);
  const check = validateConfig(text);
  const save = async () => {
    if (!check.ok || 'error' in parsedLimits) return;
    setServerErr(null);
    try {
      await configure.mutateAsync({ name: plugin.name, config: check.value, fail, limits: parsedLimits });
      notify('ok', `${plugin.name}: config saved`);
    } catch (e) {
      setServerErr(e);
    }
  };
  return (
    <div className="panel" data-testid="plugin-config">
      <h3>Config of {plugin.name}</h3>
      <textarea
        className={check.ok ? 'code' : 'code invalid'}
        rows={14}
        spellCheck={false}
        aria-label={`config of ${plugin.name} (JSON)`}
        value={text}
        onChange={(e) => setText(e.target.value)}
        data-testid="plugin-config-text"
        aria-invalid={!check.ok}
      />
      {!check.ok && (
        <div className="error-text small" data-testid="plugin-config-parse-error">
          {check.line ? `line ${check.line}, column ${check.column}: ` : ''}
          {check.message}
        </div>
      )}
      <div className="toolbar">
        <label>
          On failure{' '}
          <select value={fail} onChange={(e) => setFail(e.target.value as 'open' | 'closed')} data-testid="plugin-fail">
            <option value="open">open (let commands through)</option>
            <option value="closed">closed (refuse commands)</option>
          </select>
        </label>
      </div>
      <div className="toolbar" data-testid="plugin-limits">
        <label title="CPU time one call may use (default 5 ms)">
          CPU budget (ms per call){' '}
          <input
            size={6}
            inputMode="numeric"
            placeholder="5"
            value={limits.cpu_budget_ms}
            onChange={(e) => setLimits((l) => ({ ...l, cpu_budget_ms: e.target.value }))}
            data-testid="plugin-cpu-budget"
          />
        </label>
        <label title="Memory one instance may use (default 64 MiB)">
          memory (MiB){' '}
          <input
            size={6}
            inputMode="numeric"
            placeholder="64"
            value={limits.memory_mb}
            onChange={(e) => setLimits((l) => ({ ...l, memory_mb: e.target.value }))}
            data-testid="plugin-memory"
          />
        </label>
        <label title="The largest command or observed reply copied into the plugin (default: a quarter of the memory limit)">
          input (KiB){' '}
          <input
            size={6}
            inputMode="numeric"
            value={limits.max_input_kb}
            onChange={(e) => setLimits((l) => ({ ...l, max_input_kb: e.target.value }))}
            data-testid="plugin-max-input"
          />
        </label>
      </div>
      {'error' in parsedLimits && (
        <div className="error-text small" data-testid="plugin-limits-error">
          {parsedLimits.error}
        </div>
      )}
      <div className="toolbar">
        <button
          className="primary"
          disabled={!check.ok || 'error' in parsedLimits || configure.isPending}
          onClick={save}
          data-testid="plugin-config-save"
        >
          Save config
        </button>
        <button onClick={() => setText(formatConfig(plugin.config))}>Revert</button>
      </div>
      <ErrorBox error={serverErr} testid="plugin-config-server-error" />
    </div>
  );
}

function Metrics({ c, name }: { c: ClusterApi; name: string }) {
  const m = useQuery({ ...reads.pluginMetrics(c, name), refetchInterval: 3000 });
  const missing = m.error instanceof ApiError && m.error.status === 404;
  return (
    <div className="panel" data-testid="plugin-metrics">
      <h3>Metrics of {name}</h3>
      {missing ? (
        <p className="muted">No metrics: this dashboard does not serve plugin metrics yet.</p>
      ) : (
        <ErrorBox error={m.error} />
      )}
      {m.data && (
        <p className="muted small" data-testid="plugin-metrics-proxies">
          {m.data.proxies === 0
            ? 'No proxy runs it (a disabled plugin is not loaded).'
            : `Summed over ${m.data.proxies} ${m.data.proxies === 1 ? 'proxy' : 'proxies'} running it.`}
        </p>
      )}
      {m.data && <HookLatencyTable hooks={m.data.hooks ?? []} />}
      {m.data && m.data.samples.length > 0 && <PluginChart key={name} c={c} plugin={name} />}
      {m.data && m.data.samples.length > 0 ? (
        <details>
          <summary>Every sample now ({m.data.samples.length}), counters as totals</summary>
        <table className="table compact">
          <thead>
            <tr>
              <th>Metric</th>
              <th>Labels</th>
              <th className="num">Value</th>
            </tr>
          </thead>
          <tbody>
            {m.data.samples.map((s, i) => (
              <tr key={i}>
                <td className="mono">{s.name}</td>
                <td className="mono small">
                  {Object.entries(s.labels)
                    .map(([k, v]) => `${k}=${v}`)
                    .join(', ')}
                </td>
                <td className="num">{formatNumber(s.value)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        </details>
      ) : (
        !missing && !m.error && <p className="muted">No sample yet.</p>
      )}
    </div>
  );
}

/** The top bound of the hook latency buckets (`tessera_wire::plugin_hooks::BOUNDS_NS`). */
const TOP_BOUND_SECONDS = 0.1;

/** A percentile read from the buckets: the upper bound of its bucket, or over the top one. */
function percentile(s: number | null | undefined, count: number): string {
  if (count === 0) return '—';
  return s == null ? `> ${formatSeconds(TOP_BOUND_SECONDS)}` : `≤ ${formatSeconds(s)}`;
}

/** Timed calls and latency per hook, over the proxies running the plugin (their buckets
 * added). The hot hooks are a sample: one call in `plugin_hook_sample` (16) is timed. */
export function HookLatencyTable({ hooks }: { hooks: NonNullable<PluginMetrics['hooks']> }) {
  if (hooks.length === 0) return <p className="muted small">No hook called yet.</p>;
  return (
    <table className="table compact" data-testid="plugin-hook-latency">
      <thead>
        <tr>
          <th>Hook</th>
          <th className="num" title="Calls timed: on_close and on_tick every one; on_command, on_commands and on_reply one in 16 (proxy.toml's plugin_hook_sample)">
            Timed calls
          </th>
          <th className="num" title="Upper bound of the bucket the median call falls in">
            p50
          </th>
          <th className="num" title="Upper bound of the bucket the 99th percentile call falls in">
            p99
          </th>
        </tr>
      </thead>
      <tbody>
        {hooks.map((h) => (
          <tr key={h.hook} data-testid={`hook-${h.hook}`}>
            <td className="mono">{h.hook}</td>
            <td className="num">{formatNumber(h.count)}</td>
            <td className="num">{percentile(h.p50_seconds, h.count)}</td>
            <td className="num">{percentile(h.p99_seconds, h.count)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
