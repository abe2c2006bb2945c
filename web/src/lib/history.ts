// The dashboard's metrics history (GET /api/history) shaped for the charts: uPlot's columns,
// values with their units, the ranges a picker offers, the busiest series a picker starts
// with, and whether there is anything to draw at all.

/** The ranges `GET /api/history` takes, and how often each is read again (ms). */
export const RANGES = ['5m', '1h', '6h', '24h'] as const;
export type Range = (typeof RANGES)[number];
export const RANGE_TEXT: Record<Range, string> = { '5m': 'last 5 minutes', '1h': 'last hour', '6h': 'last 6 hours', '24h': 'last 24 hours' };
export const REFRESH_MS: Record<Range, number> = { '5m': 2000, '1h': 5000, '6h': 30000, '24h': 60000 };

export function isRange(s: string): s is Range {
  return (RANGES as readonly string[]).includes(s);
}

/** The fields of a series these functions read (the API's `SeriesInfo`). */
export interface SeriesLike {
  id: string;
  label: string;
  unit: string;
  kind: 'rate' | 'gauge';
  group: string;
  recent: number | null;
}

export interface HistoryLike {
  timestamps: number[];
  series: (SeriesLike & { values: (number | null)[] })[];
}

/** uPlot's columns: [unix seconds, …one column per series]; a missing point is null. */
export function toColumns(h: HistoryLike): [number[], ...(number | null)[][]] {
  return [h.timestamps, ...h.series.map((s) => s.values)];
}

/** Whether there is a point to draw: some series has a value somewhere. */
export function hasData(h: HistoryLike | null | undefined): boolean {
  return !!h && h.timestamps.length > 0 && h.series.some((s) => s.values.some((v) => v != null));
}

/** How busy a series is: its last minute's size; -1 without one. */
const busy = (s: SeriesLike) => (s.recent == null ? -1 : Math.abs(s.recent));

/**
 * The `n` busiest series of `all` in `group` (largest mean over the last minute first; a
 * series with no recent value last), so a picker starts with what moves, not with zeros.
 */
export function busiest(all: readonly SeriesLike[], group: string, n: number): string[] {
  return all
    .filter((s) => s.group === group)
    .slice()
    .sort((a, b) => busy(b) - busy(a) || a.id.localeCompare(b.id))
    .slice(0, n)
    .map((s) => s.id);
}

/** The ids of a group's series, in the listing's order. */
export function idsOf(all: readonly SeriesLike[], group: string): string[] {
  return all.filter((s) => s.group === group).map((s) => s.id);
}

/** 950, 1.2k, 3.4M */
function short(n: number): string {
  const a = Math.abs(n);
  const t = (x: number) => Number(x.toFixed(Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2)).toString();
  if (a >= 1e9) return `${t(n / 1e9)}G`;
  if (a >= 1e6) return `${t(n / 1e6)}M`;
  if (a >= 1e3) return `${t(n / 1e3)}k`;
  return t(n);
}

/** A value with its unit: `1.2k ops/s`, `175 µs`, `3.4 MiB`, `12/s`. */
export function formatValue(v: number | null | undefined, unit: string): string {
  if (v == null || !Number.isFinite(v)) return '—';
  switch (unit) {
    case 's': {
      const a = Math.abs(v);
      if (a >= 1) return `${short(v)} s`;
      if (a >= 1e-3) return `${short(v * 1e3)} ms`;
      return `${short(v * 1e6)} µs`;
    }
    case 'bytes': {
      const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
      let x = v;
      let i = 0;
      while (Math.abs(x) >= 1024 && i < units.length - 1) {
        x /= 1024;
        i++;
      }
      return `${i === 0 ? Math.round(x) : x.toFixed(1)} ${units[i]}`;
    }
    case '':
      return short(v);
    default:
      return unit.startsWith('/') ? `${short(v)}${unit}` : `${short(v)} ${unit}`;
  }
}
