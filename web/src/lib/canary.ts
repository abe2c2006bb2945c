// A plugin canary in the console: the share an operator types (a percentage and proxy
// addresses), checked as the dashboard checks it, and the plugin's metrics by track laid out
// side by side, one row per measure, stable beside canary.

import type { TrackMetrics } from '../api/shapes';
import { formatNumber, formatSeconds } from './format';

/** The most proxy addresses a canary lists (`tessera_wire::plugin_canary::MAX_CANARY_PROXIES`). */
export const MAX_CANARY_PROXIES = 256;

export type ShareCheck = { ok: true; percent: number; proxies: string[] } | { ok: false; error: string };

/** The share from the form: a whole percentage 0–100 (empty: 0) and addresses separated by
 * commas or spaces. */
export function parseShare(percent: string, proxies: string): ShareCheck {
  const p = percent.trim() === '' ? 0 : Number(percent.trim());
  if (!Number.isInteger(p) || p < 0 || p > 100) return { ok: false, error: 'percent must be a whole number from 0 to 100' };
  const list = proxies.split(/[\s,]+/).filter((s) => s !== '');
  if (list.length > MAX_CANARY_PROXIES) return { ok: false, error: `at most ${MAX_CANARY_PROXIES} proxy addresses` };
  const bad = list.find((a) => !/^[^\s]+:\d{1,5}$/.test(a));
  if (bad !== undefined) return { ok: false, error: `${bad} is not a host:port` };
  return { ok: true, percent: p, proxies: list };
}

export interface SideBySideRow {
  label: string;
  stable: string;
  canary: string;
}

function sampleKey(s: TrackMetrics['samples'][number]): string {
  const labels = Object.entries(s.labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return labels ? `${s.name}{${labels}}` : s.name;
}

/** One row per measure: proxies, module, calls, denies, faults, each of the plugin's own
 * series, each hook's p99; `—` where a track does not run. */
export function sideBySide(tracks: TrackMetrics[]): SideBySideRow[] {
  const stable = tracks.find((t) => t.track === 'stable');
  const canary = tracks.find((t) => t.track === 'canary');
  const row = (label: string, f: (t: TrackMetrics) => string): SideBySideRow => ({
    label,
    stable: stable ? f(stable) : '—',
    canary: canary ? f(canary) : '—',
  });
  const rows = [
    row('proxies', (t) => String(t.proxies.length)),
    row('module', (t) => t.sha256.slice(0, 12)),
    row('calls', (t) => formatNumber(t.calls)),
    row('denies', (t) => formatNumber(t.denies)),
    row('faults', (t) => formatNumber(t.faults)),
  ];
  const keys = [...new Set(tracks.flatMap((t) => t.samples.map(sampleKey)))].sort();
  for (const key of keys) {
    rows.push(row(key, (t) => formatNumber(t.samples.find((s) => sampleKey(s) === key)?.value ?? 0)));
  }
  const hooks = [...new Set(tracks.flatMap((t) => t.hooks.map((h) => h.hook)))].sort();
  for (const hook of hooks) {
    rows.push(
      row(`${hook} p99`, (t) => {
        const h = t.hooks.find((x) => x.hook === hook);
        if (!h || h.count === 0) return '—';
        return h.p99_seconds == null ? '> 100 ms' : `≤ ${formatSeconds(h.p99_seconds)}`;
      }),
    );
  }
  return rows;
}
