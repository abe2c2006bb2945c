// The run-time checks of answers: the schemas generated from the console's API document as
// the client applies them, nulls included, and the error envelope.

import { describe, expect, it } from 'vitest';
import { checkAnswer, fitsAnswer } from '../src/api/check';
import { Client } from '../src/api/client';
import { ApiError, envelopeOf } from '../src/api/error';

const json = (status: number, body: unknown) => () =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

function client(responses: (() => Response)[]) {
  return new Client(async () => {
    const r = responses.shift();
    if (!r) throw new Error('no more responses');
    return r();
  });
}

const dashboard = { admin_addr: '127.0.0.1:18080', pid: 1, host: 'h', version: '0.1.0', start_unix: 0 };
const overview = {
  cluster: 'alpha',
  epoch: 7,
  dashboard,
  groups: 2,
  groups_down: 0,
  failover: { enabled: false, max_lag_bytes: 0, not_failing_over: [], last: null },
  servers: 4,
  servers_down: 0,
  proxies: 2,
  proxies_online: 2,
  proxies_lost: 0,
  proxies_fenced: 0,
  proxies_draining: 0,
  slots_assigned: 1024,
  slots_unassigned: 0,
  ops_per_sec: 10,
  memory_bytes: 0,
  keys: 0,
  routes: [],
};
const cluster = (name: string, o: unknown) => ({
  name,
  store: 'fs:///a',
  dashboard,
  reachable: true,
  overview: o,
  error: null,
  has_token: true,
  token_role: 'admin',
  role: 'operator',
  last_dashboard: null,
});

/** The slot map: 1024 slots, `changed` replacing some. */
const slotMap = (changed: Record<number, object> = {}) => Array.from({ length: 1024 }, (_, id) => ({ id, group: 1, ...changed[id] }));

describe('answer checks', () => {
  // The console's document names a dashboard route as the console relays it.
  const slots = 'GET /api/clusters/{cluster}/slots';
  const moving = { state: 'copying', source: 1, target: 2, aborting: false };

  it('take what the schema allows, nulls where it says nullable', () => {
    expect(fitsAnswer(slots, slotMap({ 1: { group: null } }))).toBeNull();
    expect(fitsAnswer(slots, slotMap({ 2: { action: moving } }))).toBeNull();
    expect(fitsAnswer(slots, slotMap({ 4: { id: 'four' } }))).toMatch(/^\/4\/id: /);
    const status = {
      slots: [],
      pending: 0,
      in_flight: 0,
      keys_moved: 0,
      bytes_moved: 0,
      keys_per_sec: 0,
      bytes_per_sec: 0,
      run_keys_moved: 0,
      run_bytes_moved: 0,
      keys_left: null,
      run: null,
      throttle: { max_keys_per_sec: null, max_bytes_per_sec: null },
      slowest_command: null,
      blocked: null,
      max_slots_in_flight: 4,
      abort_pending: false,
    };
    expect(fitsAnswer('GET /api/clusters/{cluster}/migrations', { ...status, eta_secs: null, write_pause: null, holds: [] })).toBeNull();
    expect(fitsAnswer('POST /api/clusters/{cluster}/rebalance', { dry_run: true, by: null, moves: [], slots: 0 })).toBeNull();
  });

  it('name the route and where an answer departs from it', () => {
    expect(fitsAnswer(slots, slotMap({ 3: { group: 'one' } }))).toMatch(/^\/3\/group: /);
    expect(fitsAnswer(slots, slotMap({ 0: { action: { ...moving, state: 'moving' } } }))).toMatch(/^\/0\/action\/state: /);
    let err: unknown;
    try {
      checkAnswer('cluster local', 'GET /api/groups', 200, [{ id: 1, slots: 3, down: 'no', tls: false, servers: [] }], 'GET /api/clusters/{cluster}/groups');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 200, code: 'bad_answer' });
    expect((err as Error).message).toMatch(/^cluster local answered GET \/api\/groups in a shape this console does not know \(\/0\/down: /);
  });

  it('check the console’s own answers', () => {
    expect(fitsAnswer('GET /auth/me', { user: 'admin', csrf: 'x' })).toBeNull();
    expect(fitsAnswer('GET /auth/me', { user: 'admin' })).toMatch(/csrf/);
    expect(fitsAnswer('GET /api/logins', [{ time_ms: 1, user: 'a', addr: '::1', outcome: 'hacked', status: 200, detail: '', count: 1 }])).toMatch(
      /^\/0\/outcome: /,
    );
  });

  it('a relayed answer of another shape is refused with bad_answer, naming the cluster', async () => {
    const c = client([json(200, { queued: 'twenty' })]);
    c.csrf = 't';
    const e = (await c
      .cluster('east')
      .migrate(0, 1, 2)
      .catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.code).toBe('bad_answer');
    expect(e.message).toMatch(/^cluster east answered POST \/api\/migrations in a shape this console does not know \(\/queued: /);
  });

  it('the clusters list keeps a cluster whose overview it cannot read, without it and saying why', async () => {
    const c = client([json(200, [cluster('alpha', overview), cluster('beta', { ...overview, groups: 'two' })])]);
    const [a, b] = await c.clusters();
    expect(a.overview).toEqual(overview);
    expect(a.error).toBeNull();
    expect(b.overview).toBeNull();
    expect(b.reachable).toBe(true);
    expect(b.error).toMatch(/^its dashboard's overview is of a shape this console does not know \(\/groups: /);
  });

  it('a clusters list of another shape is refused as a whole', async () => {
    const c = client([json(200, [{ name: 'alpha' }])]);
    await expect(c.clusters()).rejects.toMatchObject({ code: 'bad_answer' });
  });

  it('a success answer that is not JSON is refused', async () => {
    const c = client([() => new Response('<html>', { status: 200 })]);
    await expect(c.clusters()).rejects.toMatchObject({ code: 'bad_answer', status: 200 });
  });
});

describe('error envelope', () => {
  it('is believed only with a string code and message', () => {
    expect(envelopeOf({ error: { code: 'conflict', message: 'm' } })).toEqual({ code: 'conflict', message: 'm' });
    expect(envelopeOf({ error: { code: 409, message: 'm' } })).toBeNull();
    expect(envelopeOf({ error: 'conflict' })).toBeNull();
    expect(envelopeOf({ error: { message: 'm' } })).toBeNull();
    expect(envelopeOf(null)).toBeNull();
    expect(envelopeOf([])).toBeNull();
  });

  it('a failure whose body is no envelope keeps its status and text', async () => {
    const c = client([json(500, { error: { code: 7, message: 'boom' } })]);
    const e = (await c.clusters().catch((x: unknown) => x)) as ApiError;
    expect(e).toMatchObject({ status: 500, code: 'http_500' });
    expect(e.message).toContain('boom');
  });
});
