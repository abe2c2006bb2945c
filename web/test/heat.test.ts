// The slot heatmap's values per measure and its colour scale.

import { describe, expect, it } from 'vitest';
import { EMPTY_COLOR, heatBands, heatColor, heatValues, slotOverlay } from '../src/lib/heat';
import type { SlotStats } from '../src/api/shapes';

const stats = (ops: number[], memory: number[]): SlotStats => ({
  window_secs: 60,
  sample_secs: 5,
  keys_every_secs: 30,
  proxies: 1,
  slots: { group: [], ops_per_sec: ops, bytes_per_sec: [], keys: [], memory },
  groups: [],
});

describe('slot heatmap scale', () => {
  it('gives 1024 values of the chosen measure, 0 where none', () => {
    const s = stats([5, 0, 7], [100]);
    expect(heatValues(s, 'ops').slice(0, 4)).toEqual([5, 0, 7, 0]);
    expect(heatValues(s, 'memory').slice(0, 2)).toEqual([100, 0]);
    expect(heatValues(null, 'ops')).toHaveLength(1024);
  });

  it('is absolute: the same value is the same colour whatever the busiest slot', () => {
    expect(heatColor(0, 'ops')).toBe(EMPTY_COLOR);
    // An even load of 50 ops/s a slot is one moderate colour, not the top of the scale.
    expect(heatColor(50, 'ops')).toBe(heatBands('ops')[1].color);
    expect(heatColor(50, 'ops')).not.toBe(heatBands('ops')[5].color);
    expect(heatColor(5, 'ops')).toBe(heatBands('ops')[0].color);
    expect(heatColor(250_000, 'ops')).toBe(heatBands('ops')[5].color);
    expect(heatColor(300 << 10, 'memory')).toBe(heatBands('memory')[2].color);
  });

  it('labels every band for the legend', () => {
    expect(heatBands('ops').map((b) => b.label)).toEqual(['< 10 ops/s', '≥ 10 ops/s', '≥ 100 ops/s', '≥ 1k ops/s', '≥ 10k ops/s', '≥ 100k ops/s']);
    expect(heatBands('memory')[0].label).toBe('< 16.0 KiB');
  });
});

describe('slot map overlay', () => {
  it('gives each slot its owner and where it moves; out-of-range ids are ignored', () => {
    const o = slotOverlay(
      [
        { id: 0, group: 1 },
        { id: 3, group: 2, action: { target: 1 } },
        { id: 5000, group: 9 },
        { id: -1, group: 9 },
      ],
      8,
    );
    expect(o).toHaveLength(8);
    expect(o[0]).toEqual({ group: 1, movingTo: null });
    expect(o[3]).toEqual({ group: 2, movingTo: 1 });
    expect(o[7]).toEqual({ group: null, movingTo: null });
    expect(slotOverlay(undefined, 2)).toEqual([
      { group: null, movingTo: null },
      { group: null, movingTo: null },
    ]);
  });
});
