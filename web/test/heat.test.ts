// The slot heatmap's values per measure and its colour scale.

import { describe, expect, it } from 'vitest';
import { heatColor, heatValues } from '../src/lib/heat';
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

  it('leaves idle slots grey and darkens with the value', () => {
    expect(heatColor(0, 10)).toBe('#f3f4f6');
    expect(heatColor(5, 0)).toBe('#f3f4f6');
    expect(heatColor(10, 10)).toBe('hsl(0, 90%, 40%)');
    expect(heatColor(1, 100)).not.toBe(heatColor(100, 100));
  });
});
