// The slot heatmap's scale: a value per slot to a colour on an absolute, labelled scale (the
// same value is the same colour whatever the busiest slot), with the bands for its legend.

import type { SlotStats } from '../api/shapes';
import { formatBytes, formatShort } from './format';

export type HeatMeasure = 'ops' | 'memory';

/** The per-slot values of a measure (1024 entries, 0 where none). */
export function heatValues(stats: SlotStats | null | undefined, m: HeatMeasure): number[] {
  const v = stats ? (m === 'ops' ? stats.slots.ops_per_sec : stats.slots.memory) : [];
  return Array.from({ length: 1024 }, (_, i) => v[i] ?? 0);
}

/** One band of the scale: values from `from` (inclusive) up to the next band's. */
export interface HeatBand {
  from: number;
  color: string;
  label: string;
}

/** No value: a grey that reads as empty in both colour schemes. */
export const EMPTY_COLOR = '#9ca3af33';

// Pale yellow to deep red, one step per band (a decade of ops/s, ×16 of bytes): an even,
// moderate load is one moderate colour, never all red.
const RAMP = ['#fef3c7', '#fde68a', '#fbbf24', '#f97316', '#dc2626', '#7f1d1d'];

/** The scale of a measure, lowest band first (values above 0 and below the first band take it). */
export function heatBands(m: HeatMeasure): HeatBand[] {
  if (m === 'ops') {
    const from = [0, 10, 100, 1_000, 10_000, 100_000];
    return from.map((f, i) => ({ from: f, color: RAMP[i], label: i === 0 ? '< 10 ops/s' : `≥ ${formatShort(f)} ops/s` }));
  }
  const from = [0, 16 << 10, 256 << 10, 4 << 20, 64 << 20, 1 << 30];
  return from.map((f, i) => ({ from: f, color: RAMP[i], label: i === 0 ? `< ${formatBytes(16 << 10)}` : `≥ ${formatBytes(f)}` }));
}

/** The colour of `value` on the measure's absolute scale; grey for nothing. */
export function heatColor(value: number, m: HeatMeasure): string {
  if (!(value > 0)) return EMPTY_COLOR;
  const bands = heatBands(m);
  let c = bands[0].color;
  for (const b of bands) if (value >= b.from) c = b.color;
  return c;
}

/** One slot of the slot map laid over the heat: its owner, and where it moves if it does. */
export interface SlotOverlay {
  group: number | null;
  movingTo: number | null;
}

/**
 * The slot map for the heatmap's overlay, one entry per slot id (0-1023); a slot the map
 * does not list (or lists twice) keeps the last word, and one it lacks has no owner.
 */
export function slotOverlay(
  slots: readonly { id: number; group: number | null; action?: { target: number } | null }[] | undefined,
  n = 1024,
): SlotOverlay[] {
  const out: SlotOverlay[] = Array.from({ length: n }, () => ({ group: null, movingTo: null }));
  for (const s of slots ?? []) {
    if (!Number.isInteger(s.id) || s.id < 0 || s.id >= n) continue;
    out[s.id] = { group: s.group, movingTo: s.action ? s.action.target : null };
  }
  return out;
}
