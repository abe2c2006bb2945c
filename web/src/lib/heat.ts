// The slot heatmap's scale: a value per slot to a color, relative to the busiest slot.

import type { SlotStats } from '../api/shapes';

export type HeatMeasure = 'ops' | 'memory';

/** The per-slot values of a measure (1024 entries, 0 where none). */
export function heatValues(stats: SlotStats | null | undefined, m: HeatMeasure): number[] {
  const v = stats ? (m === 'ops' ? stats.slots.ops_per_sec : stats.slots.memory) : [];
  return Array.from({ length: 1024 }, (_, i) => v[i] ?? 0);
}

/** A square-root scale (a few hot slots must not flatten the rest to white). */
export function heatColor(value: number, max: number): string {
  if (!(value > 0) || !(max > 0)) return '#f3f4f6';
  const t = Math.sqrt(Math.min(1, value / max));
  // From a pale yellow to a deep red.
  const hue = 50 - 50 * t;
  const light = 90 - 50 * t;
  return `hsl(${hue.toFixed(0)}, 90%, ${light.toFixed(0)}%)`;
}
