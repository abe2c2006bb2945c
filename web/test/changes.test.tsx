// Changes read again what they touch: a migration (answered, or failed after it was persisted)
// reads the slot map, the migrations and the audit log again and nothing else; a rebalance's
// dry run touches nothing.

import { useQuery } from '@tanstack/react-query';
import { act, renderHook, waitFor } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { useMigrate, usePlanRebalance } from '../src/api/changes';
import { Client } from '../src/api/client';
import { consoleReads, reads } from '../src/api/queries';
import { migrationStatus, noCap } from './answers';
import { withQueries } from './render';

const status = migrationStatus();
const plan = { dry_run: true, by: 'slots', moves: [], slots: 0, before: {}, after: {}, notes: [] };

function setup(migrateAnswer: [number, unknown]) {
  const gets = new Map<string, number>();
  const client = new Client(async (url, init) => {
    const method = init?.method ?? 'GET';
    const base = '/api/clusters/local';
    const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status });
    if (method === 'GET') gets.set(url, (gets.get(url) ?? 0) + 1);
    if (method === 'POST' && url === `${base}/migrations`) return reply(...migrateAnswer);
    if (method === 'POST' && url === `${base}/rebalance`) return reply(200, plan);
    if (url === `${base}/slots`) return reply(200, Array.from({ length: 1024 }, (_, id) => ({ id, group: 1 })));
    if (url === `${base}/migrations`) return reply(200, status);
    if (url === `${base}/tokens`) return reply(200, []);
    if (url.startsWith('/api/audit')) return reply(200, []);
    return reply(404, { error: { code: 'not_found', message: url } });
  });
  client.csrf = 't';
  const c = client.cluster('local');
  const { wrapper } = withQueries();
  const { result } = renderHook(
    () => ({
      slots: useQuery(reads.slots(c)),
      migrations: useQuery(reads.migrations(c)),
      tokens: useQuery(reads.tokens(c)),
      audit: useQuery(consoleReads.audit(client, 10)),
      migrate: useMigrate(c),
      plan: usePlanRebalance(c),
    }),
    { wrapper },
  );
  const count = () => ({
    slots: gets.get('/api/clusters/local/slots') ?? 0,
    migrations: gets.get('/api/clusters/local/migrations') ?? 0,
    tokens: gets.get('/api/clusters/local/tokens') ?? 0,
    audit: gets.get('/api/audit?limit=10') ?? 0,
  });
  return { result, count };
}

describe('changes', () => {
  it('a migration reads the slots, the migrations and the audit log again, not the tokens', async () => {
    const { result, count } = setup([200, { queued: 1, throttle: noCap }]);
    await waitFor(() => expect(count()).toEqual({ slots: 1, migrations: 1, tokens: 1, audit: 1 }));
    await waitFor(() => expect(result.current.slots.isSuccess && result.current.audit.isSuccess).toBe(true));
    await act(async () => {
      expect(await result.current.migrate.mutateAsync({ from: 0, to: 0, group: 2 })).toEqual({ queued: 1, throttle: noCap });
    });
    expect(count()).toEqual({ slots: 2, migrations: 2, tokens: 1, audit: 2 });
  });

  it('a failed migration reads them again too: a 502 comes after the change was persisted', async () => {
    const { result, count } = setup([502, { error: { code: 'push_incomplete', message: 'proxy p1 did not acknowledge' } }]);
    await waitFor(() => expect(result.current.slots.isSuccess && result.current.migrations.isSuccess).toBe(true));
    await act(async () => {
      await expect(result.current.migrate.mutateAsync({ from: 0, to: 0, group: 2 })).rejects.toMatchObject({ code: 'push_incomplete' });
    });
    expect(count()).toMatchObject({ slots: 2, migrations: 2, tokens: 1 });
  });

  it('a rebalance dry run reads nothing again', async () => {
    const { result, count } = setup([200, { queued: 1, throttle: noCap }]);
    await waitFor(() => expect(result.current.slots.isSuccess && result.current.audit.isSuccess).toBe(true));
    const before = count();
    await act(async () => {
      expect(await result.current.plan.mutateAsync({})).toMatchObject({ dry_run: true, slots: 0 });
    });
    expect(count()).toEqual(before);
  });
});
