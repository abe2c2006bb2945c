// The overview's live QPS chart (uPlot): the series' last five minutes, total and one line per
// proxy, redrawn when the series' version changes.

import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import { formatShort } from '../lib/format';
import { QPS_WINDOW, type QpsSeries } from '../lib/ring';

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#76b7b2', '#edc948'];

/** Live QPS: total and one line per proxy. Redrawn whenever `version` changes. */
export function QpsChart({ series, version, height = 260 }: { series: QpsSeries; version: number; height?: number }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const proxiesKey = useRef('');

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const proxies = series.proxies();
    const key = proxies.join(',');
    const data = series.toColumns() as uPlot.AlignedData;
    if (!plot.current || key !== proxiesKey.current) {
      plot.current?.destroy();
      proxiesKey.current = key;
      const width = Math.max(300, el.clientWidth || 800);
      plot.current = new uPlot(
        {
          width,
          height,
          legend: { show: true },
          scales: {
            // Always the last five minutes, the newest sample at the right edge.
            x: { time: true, range: (_u, _min, max) => [max - QPS_WINDOW, max] },
            y: { range: (_u, _min, max) => [0, Number.isFinite(max) ? Math.max(10, max * 1.1) : 10] } },
          axes: [
            {},
            { size: 60, values: (_u, ticks) => ticks.map((t) => formatShort(t)) },
          ],
          series: [
            {},
            { label: 'total', stroke: '#222', width: 2 },
            ...proxies.map((p, i) => ({ label: `proxy ${p.slice(0, 8)}`, stroke: COLORS[i % COLORS.length], width: 1 })),
          ],
        },
        data,
        el,
      );
    } else {
      plot.current.setData(data);
    }
  }, [series, version, height]);

  useEffect(() => {
    const el = host.current;
    if (!el || typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => {
      if (plot.current && el.clientWidth > 0) plot.current.setSize({ width: el.clientWidth, height });
    });
    ro.observe(el);
    return () => ro.disconnect();
  }, [height]);

  useEffect(
    () => () => {
      plot.current?.destroy();
      plot.current = null;
    },
    [],
  );

  return <div className="chart" ref={host} data-testid="qps-chart" />;
}
