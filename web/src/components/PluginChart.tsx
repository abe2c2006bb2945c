// A plugin's own metrics over time: each series (metric and labels) summed over the proxies,
// one point per poll, the last five minutes, one line per series (at most MAX_LINES).

import { useEffect, useRef, useState, useSyncExternalStore } from 'react';
import uPlot from 'uplot';
import type { PluginMetrics, PluginSample } from '../api/shapes';
import { formatShort } from '../lib/format';
import { QPS_WINDOW, Samples } from '../lib/ring';

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#76b7b2', '#edc948', '#ff9da7'];
/** Lines drawn; more series are listed in the table only. */
export const MAX_LINES = COLORS.length;

/** `name{k=v,…}`: one series' key and label. */
export function seriesKey(s: PluginSample): string {
  const labels = Object.entries(s.labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return labels ? `${s.name}{${labels}}` : s.name;
}

interface Point {
  t: number;
  values: Record<string, number>;
}

/** Every series the points hold, in the order first seen. */
function seriesOf(points: readonly Point[]): string[] {
  const keys: string[] = [];
  for (const p of points) for (const k of Object.keys(p.values)) if (!keys.includes(k)) keys.push(k);
  return keys;
}

/**
 * Keeps every read of `data` (one point per distinct object, or per `at`: the time of the
 * answer, in ms, which changes with each poll even when the answer does not) and charts the
 * first series.
 */
export function PluginChart({ data, at, height = 220 }: { data: PluginMetrics | null; at?: number; height?: number }) {
  const [store] = useState(() => new Samples<Point>(QPS_WINDOW));
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const keysDrawn = useRef('');

  useEffect(() => {
    if (!data) return;
    const values: Record<string, number> = {};
    // Histogram buckets would crowd the chart: their count and sum are charted instead.
    for (const s of data.samples) if (!s.name.endsWith('_bucket')) values[seriesKey(s)] = s.value;
    store.add({ t: (at ?? Date.now()) / 1000, values });
  }, [store, data, at]);

  const points = useSyncExternalStore(store.subscribe, store.getSnapshot);
  const keys = seriesOf(points);
  const drawn = keys.slice(0, MAX_LINES);

  useEffect(() => {
    const el = host.current;
    const lines = seriesOf(points).slice(0, MAX_LINES);
    if (!el || lines.length === 0) return;
    const columns = [points.map((p) => p.t), ...lines.map((k) => points.map((p) => (k in p.values ? p.values[k] : null)))];
    const key = lines.join('\n');
    if (!plot.current || key !== keysDrawn.current) {
      plot.current?.destroy();
      keysDrawn.current = key;
      plot.current = new uPlot(
        {
          width: Math.max(300, el.clientWidth || 700),
          height,
          legend: { show: true },
          scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min), Number.isFinite(max) ? Math.max(1, max * 1.1) : 1] } },
          axes: [{}, { size: 60, values: (_u, ticks) => ticks.map((v) => formatShort(v)) }],
          series: [{}, ...lines.map((k, i) => ({ label: k, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
        },
        columns as uPlot.AlignedData,
        el,
      );
    } else {
      plot.current.setData(columns as uPlot.AlignedData);
    }
  }, [points, height]);

  useEffect(
    () => () => {
      plot.current?.destroy();
      plot.current = null;
    },
    [],
  );

  return (
    <div>
      <div className="chart" ref={host} data-testid="plugin-chart" data-points={points.length} data-series={drawn.join('\n')} />
      {keys.length > MAX_LINES && (
        <p className="muted small">
          Charting the first {MAX_LINES} of {keys.length} series; the table lists them all.
        </p>
      )}
    </div>
  );
}
