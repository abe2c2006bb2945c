// The hot keys view against a fake console: the cache's hit rate and what it holds are shown
// when a proxy caches hot keys, and not at all when none does.

import { cleanup, screen } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { perSecond } from '../src/lib/format';
import { HotKeysView, hitRate } from '../src/views/HotKeys';

afterEach(cleanup);

const view = (hot_cache: unknown) => ({
  proxies: 2,
  unanswered: [],
  window_secs: 10,
  by_ops: [],
  by_bytes: [],
  hot_cache,
});

const serve = (body: unknown) => async (url: string) =>
  url.startsWith('/api/clusters/local/hotkeys')
    ? new Response(JSON.stringify(body), { status: 200 })
    : new Response('{}', { status: 404 });

describe('Hot keys view', () => {
  it('shows the cache hit rate when the cache is on', async () => {
    const figures = { enabled: true, hits: 750, misses: 250, fills: 40, invalidations: 3, entries: 12, bytes: 2048 };
    render(<HotKeysView c={new Client(serve(view(figures))).cluster('local')} />);
    expect((await screen.findByTestId('hotkeys-cache-hit-rate')).textContent).toContain('75.0 %');
    expect(screen.getByTestId('hotkeys-cache-held').textContent).toContain('12');
  });

  it('shows no cache figures when no proxy caches', async () => {
    const figures = { enabled: false, hits: 0, misses: 0, fills: 0, invalidations: 0, entries: 0, bytes: 0 };
    render(<HotKeysView c={new Client(serve(view(figures))).cluster('local')} />);
    await screen.findByTestId('hotkeys-proxies');
    expect(screen.queryByTestId('hotkeys-cache-hit-rate')).toBeNull();
    expect(hitRate(figures)).toBe('–');
  });
});

describe('Hot keys rates', () => {
  it('shows ops/s: the window count divided by the window length', async () => {
    const figures = { enabled: false, hits: 0, misses: 0, fills: 0, invalidations: 0, entries: 0, bytes: 0 };
    const key = (k: string, ops: number) => ({
      key: k,
      key_len: k.length,
      truncated: false,
      slot: 1,
      group: 1,
      ops,
      bytes: ops * 100,
      seen_by: [{ token: 't', addr: '127.0.0.1:7000', ops, bytes: ops * 100 }],
    });
    const body = { ...view(figures), window_secs: 8, by_ops: [key('hot', 40_000), key('cold', 4)] };
    render(<HotKeysView c={new Client(serve(body)).cluster('local')} />);
    const cells = await screen.findAllByTestId('hotkeys-ops-ops');
    expect(cells.map((c) => c.textContent)).toEqual(['5,000', '0.5']);
    expect(screen.getAllByTestId('hotkeys-ops-row')[0].textContent).toContain('127.0.0.1:7000: 5,000 ops/s');
    expect(perSecond(10, 0)).toBeNull();
  });
});
