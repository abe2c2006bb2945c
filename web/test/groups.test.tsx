// The groups view against a fake console: servers with health and lag, promote and remove
// behind the confirm dialog, the API's refusal shown, addresses checked before a call.

import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { Groups } from '../src/views/Groups';
import { server } from './answers';

afterEach(cleanup);

const groups = [
  {
    id: 1,
    slots: 512,
    down: false,
    tls: false,
    servers: [
      server({ addr: '127.0.0.1:7001', role: 'master', role_reported: 'master', repl_offset: 100, memory_bytes: 1048576, keys: 10 }),
      server({ addr: '127.0.0.1:7002', role: 'replica', up: false, role_reported: 'slave', master_link: 'down', lag_bytes: 4096, error: 'connection refused' }),
    ],
  },
];

function setup(reply: (method: string, url: string, body: unknown) => [number, unknown] | undefined) {
  const calls: { method: string; url: string; body: unknown; csrf?: string }[] = [];
  const f = async (url: string, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
    calls.push({ method, url, body, csrf: (init?.headers as Record<string, string>)['X-CSRF-Token'] });
    const r = method === 'GET' ? [200, groups] : (reply(method, url, body) ?? [200, groups[0]]);
    return new Response(JSON.stringify(r[1]), { status: r[0] as number });
  };
  const client = new Client(f);
  client.csrf = 'tok';
  render(
    <NoticesProvider>
      <ConfirmProvider>
        <Groups c={client.cluster('local')} />
      </ConfirmProvider>
    </NoticesProvider>,
  );
  return calls;
}

describe('Groups view', () => {
  it('shows servers with health, role and replication lag', async () => {
    setup(() => undefined);
    await screen.findByTestId('group-1');
    expect(screen.getByTestId('lag-127.0.0.1:7002').textContent).toBe('4,096 B');
    expect(screen.getByTestId('lag-127.0.0.1:7001').textContent).toBe('—');
    expect(screen.getByTestId('server-127.0.0.1:7002').textContent).toContain('connection refused');
    expect(screen.getByTestId('server-127.0.0.1:7001').textContent).toContain('1.0 MiB');
    // Only replicas can be promoted.
    expect(screen.queryByTestId('promote-127.0.0.1:7001')).toBeNull();
  });

  it('promote and remove ask first; the API error is shown to the operator', async () => {
    const calls = setup((method, url) =>
      method === 'DELETE' && url.includes('/servers/')
        ? [409, { error: { code: 'conflict', message: 'group 1 still has slots and replicas: promote a replica first' } }]
        : undefined,
    );
    await screen.findByTestId('group-1');
    fireEvent.click(screen.getByTestId('promote-127.0.0.1:7002'));
    expect(screen.getByTestId('confirm-dialog').textContent).toContain('Promote 127.0.0.1:7002 to master of group 1?');
    await act(async () => fireEvent.click(screen.getByTestId('confirm-cancel')));
    expect(calls.filter((c) => c.method !== 'GET')).toEqual([]);

    fireEvent.click(screen.getByTestId('promote-127.0.0.1:7002'));
    await act(async () => fireEvent.click(screen.getByTestId('confirm-ok')));
    await waitFor(() => expect(calls.some((c) => c.method === 'POST')).toBe(true));
    expect(calls.find((c) => c.method === 'POST')).toMatchObject({
      url: '/api/clusters/local/groups/1/promote',
      body: { addr: '127.0.0.1:7002' },
      csrf: 'tok',
    });

    fireEvent.click(screen.getByTestId('remove-127.0.0.1:7001'));
    expect(screen.getByTestId('confirm-dialog').textContent).toContain('It is the master');
    await act(async () => fireEvent.click(screen.getByTestId('confirm-ok')));
    const err = await screen.findByTestId('notice-error');
    expect(err.textContent).toContain('group 1 still has slots and replicas: promote a replica first (409 conflict)');
    expect(calls.find((c) => c.method === 'DELETE')?.url).toBe('/api/clusters/local/groups/1/servers/127.0.0.1%3A7001');
  });

  it('says replica, never slave, and shows no negative lag', async () => {
    setup(() => undefined);
    await screen.findByTestId('group-1');
    expect(screen.getByTestId('server-127.0.0.1:7002').textContent).toContain('replica');
    expect(screen.getByTestId('group-1').textContent).not.toContain('slave');
  });

  it('offers no delete for a group that holds slots', async () => {
    const calls = setup(() => undefined);
    await screen.findByTestId('group-1');
    const del = screen.getByTestId<HTMLButtonElement>('delete-group-1');
    expect(del.disabled).toBe(true);
    expect(del.title).toContain('512 slots');
    fireEvent.click(del);
    expect(screen.queryByTestId('confirm-dialog')).toBeNull();
    expect(calls.filter((c) => c.method !== 'GET')).toEqual([]);
  });

  it('checks a server address before adding it', async () => {
    const calls = setup(() => undefined);
    await screen.findByTestId('group-1');
    fireEvent.change(screen.getByTestId('add-server-addr-1'), { target: { value: 'not an address' } });
    fireEvent.click(screen.getByTestId('add-server-1'));
    expect(screen.getByTestId('group-1').textContent).toContain('an address is host:port');
    expect(calls.filter((c) => c.method !== 'GET')).toEqual([]);
    fireEvent.change(screen.getByTestId('add-server-addr-1'), { target: { value: '127.0.0.1:7003' } });
    await act(async () => fireEvent.click(screen.getByTestId('add-server-1')));
    await waitFor(() => expect(calls.some((c) => c.method === 'POST')).toBe(true));
    expect(calls.find((c) => c.method === 'POST')).toMatchObject({ url: '/api/clusters/local/groups/1/servers', body: { addr: '127.0.0.1:7003' } });
  });
});
