import { describe, expect, it } from 'vitest';
import { busiest, formatValue, hasData, isRange, toColumns, type SeriesLike } from '../src/lib/history';

const s = (id: string, recent: number | null, group = 'plugin:metrics'): SeriesLike => ({
  id,
  label: id,
  unit: '/s',
  kind: 'rate',
  group,
  recent,
});

describe('history shaping', () => {
  it('the busiest series come first, not the first alphabetically', () => {
    const all = [s('a_zero', 0), s('b_zero', 0), s('commands_total{get}', 4300), s('commands_total{set}', 12), s('x', null), s('ops', 9e9, 'ops')];
    expect(busiest(all, 'plugin:metrics', 2)).toEqual(['commands_total{get}', 'commands_total{set}']);
    expect(busiest(all, 'plugin:metrics', 10).at(-1)).toBe('x');
  });

  it('columns follow the timestamps and say when there is nothing to draw', () => {
    const h = { timestamps: [10, 11], series: [{ ...s('ops', 1, 'ops'), values: [null, 5] }] };
    expect(toColumns(h)).toEqual([[10, 11], [null, 5]]);
    expect(hasData(h)).toBe(true);
    expect(hasData({ timestamps: [], series: [] })).toBe(false);
    expect(hasData({ timestamps: [10], series: [{ ...s('ops', 1, 'ops'), values: [null] }] })).toBe(false);
    expect(hasData(null)).toBe(false);
  });

  it('values carry their units', () => {
    expect(formatValue(1234, 'ops/s')).toBe('1.23k ops/s');
    expect(formatValue(0.000175, 's')).toBe('175 µs');
    expect(formatValue(0.0025, 's')).toBe('2.5 ms');
    expect(formatValue(3 * 1024 * 1024, 'bytes')).toBe('3.0 MiB');
    expect(formatValue(12, '/s')).toBe('12/s');
    expect(formatValue(null, 'ops/s')).toBe('—');
  });

  it('only the ranges the API takes are ranges', () => {
    expect(['5m', '1h', '6h', '24h'].every(isRange)).toBe(true);
    expect(isRange('1y')).toBe(false);
  });
});
