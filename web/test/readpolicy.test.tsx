// The read-policy panel against a fake console: the policy and each replica shown, a new policy
// set (the body sent), a bound out of range refused before any call, the API's refusal shown.

import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { NoticesProvider } from '../src/components/ui';
import { ReadPolicyPanel } from '../src/views/ReadPolicy';

afterEach(cleanup);

const replica = { group: 1, addr: '127.0.0.1:7002', up: true, link: 'up', lag_bytes: 0, fresh_on: 0, proven_ms_ago: null };
const view = { policy: { mode: 'master', max_lag_ms: 1000 }, replicas: [replica], proxies: 2, unreachable: [] };

function setup(put: (body: unknown) => [number, unknown]) {
  const calls: { method: string; url: string; body: unknown }[] = [];
  const f = async (url: string, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
    calls.push({ method, url, body });
    const r = method === 'GET' ? [200, view] : put(body);
    return new Response(JSON.stringify(r[1]), { status: r[0] as number });
  };
  const client = new Client(f);
  client.csrf = 'tok';
  render(
    <NoticesProvider>
      <ReadPolicyPanel c={client.cluster('local')} />
    </NoticesProvider>,
  );
  return calls;
}

describe('Read policy panel', () => {
  it('shows the policy and each replica, and sets a new policy', async () => {
    const calls = setup((body) => [200, { ...view, policy: body }]);
    await waitFor(() => expect(screen.getByTestId('read-policy-mode').textContent).toBe('master'));
    expect(screen.getByTestId('replica-state-127.0.0.1:7002').textContent).toContain('0 B');
    expect(screen.getByTestId('replica-proven-127.0.0.1:7002').textContent).toBe('not probed');
    expect(screen.getByTestId('read-policy-unprobed')).toBeTruthy();
    fireEvent.change(screen.getByTestId('read-policy-select'), { target: { value: 'prefer-replica' } });
    fireEvent.change(screen.getByTestId('read-policy-lag'), { target: { value: '500' } });
    await act(async () => fireEvent.click(screen.getByTestId('read-policy-apply')));
    await waitFor(() => expect(calls.some((c) => c.method === 'PUT')).toBe(true));
    expect(calls.find((c) => c.method === 'PUT')).toMatchObject({
      url: '/api/clusters/local/read-policy',
      body: { mode: 'prefer-replica', max_lag_ms: 500 },
    });
  });

  it('shows how fresh the proxies proved each replica, in ms beside the bound', async () => {
    const probed = {
      policy: { mode: 'prefer-replica', max_lag_ms: 500 },
      replicas: [
        { ...replica, fresh_on: 1, proven_ms_ago: 180, lag_bytes: 2048 },
        { ...replica, addr: '127.0.0.1:7004', group: 2, fresh_on: 0, proven_ms_ago: null, lag_bytes: -45 },
      ],
      proxies: 1,
      unreachable: ['127.0.0.1:19001'],
    };
    const client = new Client(async () => new Response(JSON.stringify(probed), { status: 200 }));
    render(
      <NoticesProvider>
        <ReadPolicyPanel c={client.cluster('local')} />
      </NoticesProvider>,
    );
    await waitFor(() => expect(screen.getByTestId('read-policy-mode').textContent).toBe('prefer-replica'));
    expect(screen.getByTestId('read-policy-lag-now').textContent).toContain('500 ms');
    expect(screen.getByTestId('replica-fresh-127.0.0.1:7002').textContent).toBe('1/1 proxies');
    expect(screen.getByTestId('replica-proven-127.0.0.1:7002').textContent).toBe('180 ms ago');
    expect(screen.getByTestId('replica-state-127.0.0.1:7002').textContent).toContain('2.0 KiB');
    expect(screen.getByTestId('replica-fresh-127.0.0.1:7004').textContent).toBe('0/1 proxies');
    expect(screen.getByTestId('replica-proven-127.0.0.1:7004').textContent).toBe('not proven');
    expect(screen.getByTestId('replica-state-127.0.0.1:7004').textContent).toContain('0 B');
    expect(screen.getByTestId('read-policy-unreachable').textContent).toContain('127.0.0.1:19001');
    expect(screen.queryByTestId('read-policy-unprobed')).toBeNull();
  });

  it('refuses a bound out of range before calling, and shows the API refusal', async () => {
    const calls = setup(() => [403, { error: { code: 'forbidden', message: 'viewer has the role viewer; PUT /api/read-policy needs admin or above' } }]);
    await waitFor(() => expect(screen.getByTestId('read-policy-mode').textContent).toBe('master'));
    fireEvent.change(screen.getByTestId('read-policy-lag'), { target: { value: '50' } });
    await act(async () => fireEvent.click(screen.getByTestId('read-policy-apply')));
    expect(screen.getByTestId('read-policy').textContent).toContain('200 to 3600000');
    expect(calls.filter((c) => c.method === 'PUT')).toEqual([]);
    fireEvent.change(screen.getByTestId('read-policy-lag'), { target: { value: '500' } });
    await act(async () => fireEvent.click(screen.getByTestId('read-policy-apply')));
    const err = await screen.findByTestId('notice-error');
    expect(err.textContent).toContain('needs admin or above (403 forbidden)');
  });
});
