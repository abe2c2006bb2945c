// The ring buffer and the QPS series of the overview chart.

import { describe, expect, it } from 'vitest';
import { QpsSeries, RingBuffer } from '../src/lib/ring';
import { addStats } from '../src/views/Overview';
import type { Stats } from '../src/api/shapes';

/** One proxy's stats as the dashboard relays them, with `ops_per_sec`. */
const proxyStats = (token: string, ops_per_sec: number) => ({
  token,
  epoch: 1,
  sessions: 0,
  ops_total: 0,
  errors_total: 0,
  ops_per_sec,
  commands: [],
  backend: { requests: 0, batches: 0, connects: 0, connect_failures: 0, reconnects: 0 },
  uptime_secs: 1,
});

describe('RingBuffer', () => {
  it('keeps the newest `capacity` items, oldest first', () => {
    const r = new RingBuffer<number>(3);
    expect(r.toArray()).toEqual([]);
    expect(r.last()).toBeUndefined();
    r.push(1);
    r.push(2);
    expect(r.toArray()).toEqual([1, 2]);
    r.push(3);
    r.push(4);
    r.push(5);
    expect(r.toArray()).toEqual([3, 4, 5]);
    expect(r.length).toBe(3);
    expect(r.last()).toBe(5);
    r.clear();
    expect(r.length).toBe(0);
  });
  it('refuses a zero capacity', () => {
    expect(() => new RingBuffer(0)).toThrow();
  });
  it('holds exactly five minutes of one-second samples', () => {
    const s = new QpsSeries();
    for (let t = 0; t < 400; t++) s.add({ t, total: t, perProxy: {} });
    const [times] = s.toColumns();
    expect(times.length).toBe(300);
    expect(times[0]).toBe(100);
    expect(s.latest()).toBe(399);
  });
});

describe('QpsSeries', () => {
  it('columns: times, total, one column per proxy, with gaps as null', () => {
    const s = new QpsSeries(10);
    s.add({ t: 1, total: 10, perProxy: { a: 10 } });
    s.add({ t: 2, total: 30, perProxy: { a: 12, b: 18 } });
    s.add({ t: 3, total: 5, perProxy: { b: 5 } });
    expect(s.proxies()).toEqual(['a', 'b']);
    expect(s.toColumns()).toEqual([
      [1, 2, 3],
      [10, 30, 5],
      [10, 12, null],
      [null, 18, 5],
    ]);
  });
  it('drops late (out of order) samples', () => {
    const s = new QpsSeries(10);
    expect(s.add({ t: 5, total: 1, perProxy: {} })).toBe(true);
    expect(s.add({ t: 5, total: 2, perProxy: {} })).toBe(false);
    expect(s.add({ t: 4, total: 3, perProxy: {} })).toBe(false);
    expect(s.latest()).toBe(1);
  });
  it('forgets a proxy once its samples have left the window', () => {
    const s = new QpsSeries(2);
    s.add({ t: 1, total: 1, perProxy: { old: 1 } });
    s.add({ t: 2, total: 1, perProxy: { b: 1 } });
    s.add({ t: 3, total: 1, perProxy: { b: 1 } });
    expect(s.proxies()).toEqual(['b']);
  });
  it('takes /stats replies: per proxy ops/s, failed proxies left out', () => {
    const s = new QpsSeries(10);
    const st: Stats = {
      ops_per_sec: 1500,
      ops_total: 0,
      errors_total: 0,
      sessions: 3,
      commands: [],
      proxies: [
        proxyStats('p1', 1000),
        proxyStats('p2', 500),
        { token: 'p3', error: 'timed out' },
      ],
    };
    expect(addStats(s, st, 100)).toBe(true);
    expect(s.toColumns()).toEqual([[100], [1500], [1000], [500]]);
  });
});
