// A plugin's own metrics over time, from the dashboard's metrics history: counters as rates
// per second, levels as they are; a series picker that starts with the busiest series (the
// largest rate over the last minute), so that what moves is drawn, not the first names.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import { busiest, formatValue, type Range } from '../lib/history';
import { HistoryChart, RangePicker } from './HistoryChart';

/** Series drawn at first, and at most. */
export const DEFAULT_LINES = 4;
export const MAX_LINES = 8;

export function PluginChart({ c, plugin }: { c: ClusterApi; plugin: string }) {
  const list = useQuery({ ...reads.historySeries(c), refetchInterval: 5000 });
  const [range, setRange] = useState<Range>('5m');
  const [picked, setPicked] = useState<string[] | null>(null);
  const group = `plugin:${plugin}`;
  const all = (list.data?.series ?? []).filter((s) => s.group === group);
  const known = new Set(all.map((s) => s.id));
  // Until the operator picks, the busiest; a picked series that went away is dropped.
  const ids = (picked ?? busiest(all, group, DEFAULT_LINES)).filter((id) => known.has(id));
  const rates = all.filter((s) => ids.includes(s.id));
  const units = new Set(rates.map((s) => s.unit));
  return (
    <div className="plugin-chart">
      <div className="chart-controls">
        <RangePicker range={range} onChange={setRange} testid="plugin-range" />
        <label>
          Series (the busiest first){' '}
          <select
            multiple
            size={Math.min(6, Math.max(2, all.length))}
            value={ids}
            onChange={(e) => setPicked(Array.from(e.target.selectedOptions, (o) => o.value).slice(0, MAX_LINES))}
            data-testid="plugin-series-picker"
          >
            {all.map((s) => (
              <option key={s.id} value={s.id}>
                {s.label} — {formatValue(s.recent, s.unit)}
              </option>
            ))}
          </select>
        </label>
      </div>
      {list.data && list.data.plugin_series_dropped > 0 && (
        <p className="muted small">
          The history keeps the {list.data.plugin_series_cap} busiest plugin series; {list.data.plugin_series_dropped} quieter ones are not kept.
        </p>
      )}
      {units.size > 1 ? (
        <p className="muted small">Rates (/s) and levels are drawn on one axis: pick series of one kind to compare them.</p>
      ) : null}
      <HistoryChart c={c} ids={list.data ? ids : []} range={range} title="Over time" sync={`plugin-${plugin}`} testid="plugin-chart" />
    </div>
  );
}
