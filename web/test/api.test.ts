// The API client against a fake console: the CSRF token on mutating calls only, URLs and
// bodies of the dashboard routes, errors as ApiError, a 401 ending the session.

import { describe, expect, it, vi } from 'vitest';
import { Client } from '../src/api/client';
import { ApiError } from '../src/api/error';
import { noCap } from './answers';

type Call = { url: string; init: RequestInit };

function stub(responses: (() => Response)[]) {
  const calls: Call[] = [];
  const f = vi.fn(async (url: string, init?: RequestInit) => {
    calls.push({ url, init: init ?? {} });
    const r = responses.shift();
    if (!r) throw new Error('no more responses');
    return r();
  });
  return { f, calls };
}

const json = (status: number, body: unknown) => () =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const headers = (c: Call) => c.init.headers as Record<string, string>;

describe('API client', () => {
  it('login keeps the CSRF token and sends it on every mutating call, not on reads', async () => {
    const { f, calls } = stub([
      json(200, { user: 'admin', csrf: 'tok123' }),
      json(200, []),
      json(200, { queued: 20, throttle: noCap }),
      json(200, { id: 1, slots: 0, down: false, tls: false, servers: [] }),
      json(200, { name: 'filter', sha256: 'ab'.repeat(32), size: 4, config: null, enabled: false, fail: 'open', updated_unix: 1 }),
    ]);
    const c = new Client(f);
    expect(await c.login('admin', 'pw')).toEqual({ user: 'admin', csrf: 'tok123' });
    expect(calls[0].url).toBe('/auth/login');
    expect(JSON.parse(calls[0].init.body as string)).toEqual({ user: 'admin', password: 'pw' });

    await c.clusters();
    expect(calls[1].init.method).toBe('GET');
    expect(headers(calls[1])['X-CSRF-Token']).toBeUndefined();

    const r = await c.cluster('local').migrate(0, 19, 2);
    expect(r).toEqual({ queued: 20, throttle: noCap });
    expect(calls[2].url).toBe('/api/clusters/local/migrations');
    expect(calls[2].init.method).toBe('POST');
    expect(headers(calls[2])['X-CSRF-Token']).toBe('tok123');
    expect(JSON.parse(calls[2].init.body as string)).toEqual({ from: 0, to: 19, group: 2 });

    await c.cluster('a/b').removeServer(1, '127.0.0.1:7000');
    expect(calls[3].url).toBe('/api/clusters/a%2Fb/groups/1/servers/127.0.0.1%3A7000');
    expect(calls[3].init.method).toBe('DELETE');
    expect(headers(calls[3])['X-CSRF-Token']).toBe('tok123');

    const bytes = new Uint8Array([0, 97, 115, 109]).buffer;
    await c.cluster('local').uploadPlugin('filter', bytes);
    expect(calls[4].init.method).toBe('PUT');
    expect(calls[4].url).toBe('/api/clusters/local/plugins/filter/module');
    expect(headers(calls[4])['Content-Type']).toBe('application/wasm');
    expect(headers(calls[4])['X-CSRF-Token']).toBe('tok123');
    expect(calls[4].init.body).toBe(bytes);
  });

  it('turns the error shape into an ApiError with code and message', async () => {
    const { f } = stub([json(409, { error: { code: 'conflict', message: 'slot 3 is already migrating' } })]);
    const c = new Client(f);
    const e = (await c.cluster('local').migrate(0, 3, 2).catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(409);
    expect(e.code).toBe('conflict');
    expect(e.message).toBe('slot 3 is already migrating');
  });

  it('copes with non-JSON error bodies and network failures', async () => {
    const { f } = stub([
      () => new Response('bad gateway from nginx', { status: 502, statusText: 'Bad Gateway' }),
      () => {
        throw new TypeError('Failed to fetch');
      },
    ]);
    const c = new Client(f);
    const e1 = await c.clusters().catch((x: unknown) => x);
    expect(e1).toMatchObject({ status: 502, code: 'http_502', message: 'bad gateway from nginx' });
    const e2 = await c.clusters().catch((x: unknown) => x);
    expect(e2).toMatchObject({ status: 0, code: 'network' });
  });

  it('a 401 on a data route calls onUnauthorized (session over), a failed login does not', async () => {
    const { f } = stub([
      json(401, { error: { code: 'unauthorized', message: 'log in' } }),
      json(401, { error: { code: 'unauthorized', message: 'bad credentials' } }),
    ]);
    const c = new Client(f);
    const out = vi.fn();
    c.onUnauthorized = out;
    await expect(c.clusters()).rejects.toThrow('log in');
    expect(out).toHaveBeenCalledTimes(1);
    await expect(c.login('admin', 'wrong')).rejects.toThrow('bad credentials');
    expect(out).toHaveBeenCalledTimes(1);
  });

  it('rebalance sends dry_run and weights; abort sends the slots or nothing', async () => {
    const { f, calls } = stub([
      json(200, { user: 'u', csrf: 'x' }),
      json(200, { dry_run: true, by: 'slots', moves: [], slots: 0 }),
      json(200, { aborted: 2 }),
      json(200, { aborted: 5 }),
    ]);
    const c = new Client(f);
    await c.me();
    const k = c.cluster('local');
    await k.rebalance(true, { '1': 1, '2': 3 });
    expect(JSON.parse(calls[1].init.body as string)).toEqual({ dry_run: true, weights: { '1': 1, '2': 3 } });
    expect(headers(calls[1])['X-CSRF-Token']).toBe('x');
    await k.abort([4, 5]);
    expect(JSON.parse(calls[2].init.body as string)).toEqual({ slots: [4, 5] });
    await k.abort();
    expect(JSON.parse(calls[3].init.body as string)).toEqual({});
  });

  it('a rebalance by load sends by and tolerance; a previewed plan is queued as its moves', async () => {
    const moves = [{ slot: 7, from: 1, to: 2 }];
    const { f, calls } = stub([
      json(200, { user: 'u', csrf: 'x' }),
      json(200, { dry_run: true, by: 'load', moves, slots: 1 }),
      json(200, { dry_run: false, by: 'load', moves, slots: 1 }),
    ]);
    const c = new Client(f);
    await c.me();
    const k = c.cluster('local');
    await k.rebalance(true, undefined, 'load', 15);
    expect(JSON.parse(calls[1].init.body as string)).toEqual({ dry_run: true, by: 'load', tolerance: 15 });
    await k.queueMoves(moves, 'load');
    expect(calls[2].url).toBe('/api/clusters/local/rebalance');
    expect(JSON.parse(calls[2].init.body as string)).toEqual({ moves, by: 'load' });
  });

  it('logout forgets the token even when the call fails', async () => {
    const { f } = stub([json(200, { user: 'u', csrf: 'x' }), json(500, { error: { code: 'internal', message: 'boom' } })]);
    const c = new Client(f);
    await c.me();
    await expect(c.logout()).rejects.toThrow('boom');
    expect(c.csrf).toBeNull();
  });
});
