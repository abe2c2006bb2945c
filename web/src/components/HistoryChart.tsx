// A chart of the dashboard's metrics history (GET /api/history, uPlot): the series asked for
// over the range picked, counters as rates, the unit on the y axis and in the legend, the
// values under the cursor in the legend (the newest ones when the cursor is elsewhere), and
// a crosshair shared with the view's other charts (`sync`). Without points it says why
// instead of drawing an empty axis.

import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import { formatValue, hasData, isRange, RANGE_TEXT, RANGES, REFRESH_MS, toColumns, type HistoryLike, type Range } from '../lib/history';
import { isRelayDown, useDashboardDown } from './DashboardDown';
import { errorText } from './ui';

/** Readable on both the light and the dark panel. */
export const COLORS = ['#4e79a7', '#e8843a', '#4fa35a', '#d9534f', '#9c6fc0', '#3fa7a0', '#c9a227', '#e377a2'];

function cssVar(name: string, fallback: string): string {
  if (typeof window === 'undefined' || !window.getComputedStyle) return fallback;
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

/**
 * The least top of the y axis: a flat zero still gets ticks that read apart (a kibibyte of
 * lag, a millisecond, one per second) instead of five labels that all round to 0.
 */
function floorOf(unit: string): number {
  if (unit === 'bytes') return 1024;
  if (unit === 's') return 0.001;
  return 1;
}

/** Draws `h` into `el` (a new plot when the series change, new data otherwise). */
function useUplot(el: React.RefObject<HTMLDivElement | null>, h: HistoryLike | undefined, sync: string, height: number) {
  const plot = useRef<uPlot | null>(null);
  const drawn = useRef('');
  useEffect(() => {
    const host = el.current;
    if (!host || !h || !hasData(h)) {
      plot.current?.destroy();
      plot.current = null;
      drawn.current = '';
      return;
    }
    const data = toColumns(h) as uPlot.AlignedData;
    const key = h.series.map((s) => `${s.id}:${s.unit}`).join('\n');
    const last = () => (plot.current ? plot.current.data[0].length - 1 : null);
    if (!plot.current || key !== drawn.current) {
      plot.current?.destroy();
      drawn.current = key;
      const unit = h.series[0]?.unit ?? '';
      const text = cssVar('--text', '#1d2530');
      const grid = cssVar('--border', '#dde2e8');
      const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
      plot.current = new uPlot(
        {
          width: Math.max(300, host.clientWidth || 700),
          height,
          cursor: { sync: { key: sync }, drag: { x: false, y: false } },
          legend: { show: true, live: true },
          scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min), Math.max(Number.isFinite(max) ? max * 1.1 : 0, floorOf(unit))] } },
          axes: [
            // Room for each time label, so that they never overlap.
            { ...axis, space: 90 },
            { ...axis, size: 96, values: (_u, ticks) => ticks.map((t) => formatValue(t, unit)) },
          ],
          series: [
            { label: 'time', value: (_u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleTimeString()) },
            ...h.series.map((s, i) => ({
              label: s.label,
              stroke: COLORS[i % COLORS.length],
              width: i === 0 ? 2 : 1.5,
              spanGaps: false,
              value: (_u: uPlot, v: number | null) => formatValue(v, s.unit),
            })),
          ],
          hooks: {
            // The cursor off the chart: the legend shows the newest values, not dashes.
            setCursor: [
              (u) => {
                if (u.cursor.idx == null && u.data[0].length > 0) u.setLegend({ idx: u.data[0].length - 1 });
              },
            ],
          },
        },
        data,
        host,
      );
    } else {
      plot.current.setData(data);
    }
    const i = last();
    if (plot.current && plot.current.cursor.idx == null && i != null && i >= 0) plot.current.setLegend({ idx: i });
  }, [el, h, sync, height]);

  useEffect(() => {
    const host = el.current;
    if (!host || typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => {
      if (plot.current && host.clientWidth > 0) plot.current.setSize({ width: host.clientWidth, height });
    });
    ro.observe(host);
    return () => ro.disconnect();
  }, [el, height]);

  useEffect(
    () => () => {
      plot.current?.destroy();
      plot.current = null;
    },
    [],
  );
}

/**
 * The history of `ids` (the cluster's totals when null) over `range`. `sync` names the
 * crosshair group; `testid` the chart's element (`<testid>-empty` its message when there is
 * nothing to draw).
 */
export function HistoryChart({
  c,
  ids,
  range,
  title,
  sync,
  testid,
  height = 220,
}: {
  c: ClusterApi;
  ids: string[] | null;
  range: Range;
  title: string;
  sync: string;
  testid: string;
  height?: number;
}) {
  const { down } = useDashboardDown();
  const q = useQuery({ ...reads.history(c, range, ids), refetchInterval: REFRESH_MS[range], enabled: ids == null || ids.length > 0 });
  const host = useRef<HTMLDivElement>(null);
  const h = q.data;
  const drawable = hasData(h);
  useUplot(host, drawable ? h : undefined, sync, height);
  const unit = h?.series[0]?.unit;
  let empty: string | null = null;
  if (ids != null && ids.length === 0) empty = 'No series of this kind yet.';
  // The page's banner says why when the dashboard is down; the chart does not repeat it.
  else if (q.error && !h) empty = down && isRelayDown(q.error) ? 'No history.' : `No history: the dashboard did not answer (${errorText(q.error)}).`;
  else if (!h) empty = 'Loading…';
  else if (!drawable) empty = `No data in the ${RANGE_TEXT[range]} yet: the dashboard samples its proxies once a second.`;
  return (
    <figure className="history-chart">
      <figcaption>
        <strong>{title}</strong>
        {unit && <span className="muted small"> ({unit})</span>}
        {h && h.step_secs > 1 && <span className="muted small"> · one point a minute</span>}
      </figcaption>
      {empty ? (
        <p className="muted chart-empty" data-testid={`${testid}-empty`}>
          {empty}
        </p>
      ) : null}
      <div
        className="chart"
        ref={host}
        hidden={!drawable}
        data-testid={testid}
        data-points={drawable ? h?.timestamps.length : 0}
        data-unit={unit ?? ''}
        data-series={h?.series.map((s) => s.label).join('\n') ?? ''}
      />
    </figure>
  );
}

/** The range picker of a view's charts. */
export function RangePicker({ range, onChange, testid = 'range-picker' }: { range: Range; onChange: (r: Range) => void; testid?: string }) {
  return (
    <label className="range-picker">
      Time range{' '}
      <select value={range} onChange={(e) => isRange(e.target.value) && onChange(e.target.value)} data-testid={testid}>
        {RANGES.map((r) => (
          <option key={r} value={r}>
            {RANGE_TEXT[r]}
          </option>
        ))}
      </select>
    </label>
  );
}
