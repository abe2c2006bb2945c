// A plugin's own metrics over time: each series (metric and labels) summed over the proxies,
// one point per poll, the last five minutes, one line per series (at most MAX_LINES).

import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import { formatShort } from '../lib/format';
import { QPS_WINDOW, RingBuffer } from '../lib/ring';
import type { PluginMetrics } from '../types';

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#76b7b2', '#edc948', '#ff9da7'];
/** Lines drawn; more series are listed in the table only. */
export const MAX_LINES = COLORS.length;

/** `name{k=v,…}`: one series' key and label. */
export function seriesKey(s: PluginMetrics['samples'][number]): string {
  const labels = Object.entries(s.labels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return labels ? `${s.name}{${labels}}` : s.name;
}

interface Point {
  t: number;
  values: Record<string, number>;
}

/** Keeps every read of `data` (one per distinct object) and charts the first series. */
export function PluginChart({ data, height = 220 }: { data: PluginMetrics | null; height?: number }) {
  const ring = useRef(new RingBuffer<Point>(QPS_WINDOW));
  const [version, setVersion] = useState(0);
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const keysDrawn = useRef('');

  useEffect(() => {
    if (!data) return;
    const values: Record<string, number> = {};
    // Histogram buckets would crowd the chart: their count and sum are charted instead.
    for (const s of data.samples) if (!s.name.endsWith('_bucket')) values[seriesKey(s)] = s.value;
    const t = Date.now() / 1000;
    const last = ring.current.last();
    if (last && t <= last.t) return;
    ring.current.push({ t, values });
    setVersion((v) => v + 1);
  }, [data]);

  const points = ring.current.toArray();
  const keys: string[] = [];
  for (const p of points) for (const k of Object.keys(p.values)) if (!keys.includes(k)) keys.push(k);
  const drawn = keys.slice(0, MAX_LINES);

  useEffect(() => {
    const el = host.current;
    if (!el || drawn.length === 0) return;
    const columns = [points.map((p) => p.t), ...drawn.map((k) => points.map((p) => (k in p.values ? p.values[k] : null)))];
    const key = drawn.join('|');
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
          series: [{}, ...drawn.map((k, i) => ({ label: k, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
        },
        columns as uPlot.AlignedData,
        el,
      );
    } else {
      plot.current.setData(columns as uPlot.AlignedData);
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version, height]);

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
