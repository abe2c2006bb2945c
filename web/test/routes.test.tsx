// The routes view against a fake console: the routes and what each proxy forwards them to,
// a route added (the whole list sent, existing routes resent with their user and without a
// password), one removed behind the confirm dialog, the API's refusal shown, and a viewer
// who sees the routes but no way to change them.

import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import type { PrefixRoute, Role } from '../src/api/shapes';
import { routeStatus, RoutesView } from '../src/views/Routes';

afterEach(cleanup);

/** What each proxy does with `routes`: the first routes all, the second cannot reach b, the third did not answer. */
function proxiesFor(routes: PrefixRoute[]) {
  return [
    { addr: '127.0.0.1:19000', error: null, routes: routes.map((r) => ({ prefix: r.prefix, cluster: r.cluster, target: r.cluster === 'b' ? '127.0.0.1:19100' : '127.0.0.1:19200', error: null })) },
    {
      addr: '127.0.0.1:19001',
      error: null,
      routes: routes.map((r) => (r.cluster === 'b' ? { prefix: r.prefix, cluster: r.cluster, target: null, error: 'no proxy of b answers' } : { prefix: r.prefix, cluster: r.cluster, target: '127.0.0.1:19200', error: null })),
    },
    { addr: '127.0.0.1:19002', error: 'connection refused', routes: [] },
  ];
}

/** The body of a PUT of the routes. */
type Put = { routes: { prefix: string; cluster: string; user?: string; password?: string }[] };

function setup(role: Role, put?: (body: Put) => [number, unknown] | null) {
  let routes: PrefixRoute[] = [
    { prefix: 'user:', cluster: 'b', user: 'front' },
    { prefix: 'sess:', cluster: 'c', user: null },
  ];
  const view = () => ({ routes, clusters: ['b', 'c'], proxies: proxiesFor(routes) });
  const calls: { method: string; url: string; body: unknown }[] = [];
  const f = async (url: string, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Put) : undefined;
    calls.push({ method, url, body });
    if (url !== '/api/clusters/local/routes') return new Response('{}', { status: 404 });
    if (method === 'PUT') {
      const sent = body ?? { routes: [] };
      const refused = put?.(sent);
      if (refused) return new Response(JSON.stringify(refused[1]), { status: refused[0] });
      routes = sent.routes.map((r) => ({ prefix: r.prefix, cluster: r.cluster, user: r.user ?? null }));
    }
    return new Response(JSON.stringify(view()), { status: 200 });
  };
  const client = new Client(f);
  client.csrf = 'csrf-1';
  render(
    <NoticesProvider>
      <ConfirmProvider>
        <RoutesView c={client.cluster('local')} role={role} />
      </ConfirmProvider>
    </NoticesProvider>,
  );
  return calls;
}

const puts = (calls: { method: string; body: unknown }[]) => calls.filter((c) => c.method === 'PUT').map((c) => c.body);

describe('Routes view', () => {
  it('shows each route with its user and what every proxy routes it to', async () => {
    setup('admin');
    const row = await screen.findByTestId('route-row-user:');
    expect(row.textContent).toContain('user:');
    expect(row.textContent).toContain('b');
    expect(row.textContent).toContain('front');
    expect(screen.getByTestId('route-row-sess:').textContent).toContain('no AUTH');
    const st = screen.getByTestId('route-status-user:');
    expect(st.textContent).toBe('1/3 proxies routing');
    expect(st.getAttribute('data-routing')).toBe('1');
    expect(st.getAttribute('data-proxies')).toBe('3');
    expect(screen.getByTestId('route-status-sess:').textContent).toBe('2/3 proxies routing');
    expect(screen.getByTestId('route-proxy-user:-127.0.0.1:19000').textContent).toBe('127.0.0.1:19000 → 127.0.0.1:19100');
    expect(screen.getByTestId('route-proxy-user:-127.0.0.1:19001').textContent).toContain('no proxy of b answers');
    expect(screen.getByTestId('route-proxy-user:-127.0.0.1:19002').textContent).toContain('not reached: connection refused');
    const options = [...screen.getByTestId<HTMLSelectElement>('route-cluster').options].map((o) => o.value);
    expect(options).toEqual(['', 'b', 'c']);
  });

  it('adds a route: the whole list is sent, the existing routes without a password', async () => {
    const calls = setup('admin');
    await screen.findByTestId('route-row-user:');
    const add = screen.getByTestId<HTMLButtonElement>('route-add');
    expect(add.disabled).toBe(true);
    fireEvent.change(screen.getByTestId('route-prefix'), { target: { value: 'cart:' } });
    fireEvent.change(screen.getByTestId('route-cluster'), { target: { value: 'b' } });
    // A password alone is refused before any call.
    fireEvent.change(screen.getByTestId('route-password'), { target: { value: 'secret' } });
    expect(add.disabled).toBe(true);
    fireEvent.change(screen.getByTestId('route-user'), { target: { value: ' shop ' } });
    expect(add.disabled).toBe(false);
    await act(async () => fireEvent.click(add));
    await screen.findByTestId('route-row-cart:');
    expect(puts(calls)).toEqual([
      {
        routes: [
          { prefix: 'user:', cluster: 'b', user: 'front' },
          { prefix: 'sess:', cluster: 'c' },
          { prefix: 'cart:', cluster: 'b', user: 'shop', password: 'secret' },
        ],
      },
    ]);
    expect(calls.find((c) => c.method === 'PUT')?.url).toBe('/api/clusters/local/routes');
    expect(screen.getByTestId('route-row-cart:').textContent).toContain('shop');
    expect(screen.getByTestId<HTMLInputElement>('route-prefix').value).toBe('');
    expect(screen.getByTestId<HTMLInputElement>('route-password').value).toBe('');
    expect((await screen.findByTestId('notice-ok')).textContent).toContain('cart: routed to b');
  });

  it('adds a route without a credential: no user, no password', async () => {
    const calls = setup('admin');
    await screen.findByTestId('route-row-user:');
    fireEvent.change(screen.getByTestId('route-prefix'), { target: { value: 'tmp:' } });
    fireEvent.change(screen.getByTestId('route-cluster'), { target: { value: 'c' } });
    await act(async () => fireEvent.click(screen.getByTestId('route-add')));
    await screen.findByTestId('route-row-tmp:');
    expect(puts(calls)[0]).toEqual({
      routes: [{ prefix: 'user:', cluster: 'b', user: 'front' }, { prefix: 'sess:', cluster: 'c' }, { prefix: 'tmp:', cluster: 'c' }],
    });
  });

  it('removes a route after a confirm: the list without it', async () => {
    const calls = setup('admin');
    await screen.findByTestId('route-row-user:');
    fireEvent.click(screen.getByTestId('route-remove-sess:'));
    fireEvent.click(await screen.findByTestId('confirm-cancel'));
    await waitFor(() => expect(screen.queryByTestId('confirm-dialog')).toBeNull());
    expect(puts(calls)).toEqual([]);
    fireEvent.click(screen.getByTestId('route-remove-sess:'));
    await act(async () => fireEvent.click(await screen.findByTestId('confirm-ok')));
    await waitFor(() => expect(screen.queryByTestId('route-row-sess:')).toBeNull());
    expect(puts(calls)).toEqual([{ routes: [{ prefix: 'user:', cluster: 'b', user: 'front' }] }]);
    expect(screen.getByTestId('route-row-user:')).toBeTruthy();
  });

  it("shows the API's refusal and keeps the list and the form", async () => {
    const calls = setup('admin', () => [400, { error: { code: 'bad_request', message: 'prefix "user:" is listed twice' } }]);
    await screen.findByTestId('route-row-user:');
    fireEvent.change(screen.getByTestId('route-prefix'), { target: { value: 'user:' } });
    fireEvent.change(screen.getByTestId('route-cluster'), { target: { value: 'c' } });
    await act(async () => fireEvent.click(screen.getByTestId('route-add')));
    const err = await screen.findByTestId('routes-error');
    expect(err.textContent).toBe('prefix "user:" is listed twice (400 bad_request)');
    expect(puts(calls)).toHaveLength(1);
    expect(screen.getByTestId('route-row-sess:')).toBeTruthy();
    expect(screen.getByTestId<HTMLInputElement>('route-prefix').value).toBe('user:');
  });

  it('lets a viewer see the routes but not change them', async () => {
    const calls = setup('viewer');
    await screen.findByTestId('route-row-user:');
    expect(screen.getByTestId('route-status-user:').textContent).toBe('1/3 proxies routing');
    expect(screen.queryByTestId('route-remove-user:')).toBeNull();
    expect(screen.queryByTestId('route-add')).toBeNull();
    expect(screen.queryByTestId('route-prefix')).toBeNull();
    expect(screen.getByTestId('routes-readonly').textContent).toContain('your role here: viewer');
    expect(puts(calls)).toEqual([]);
  });
});

describe('routeStatus', () => {
  it('counts only proxies forwarding the prefix to the route’s cluster', () => {
    const r = { prefix: 'user:', cluster: 'b', user: null };
    const st = routeStatus(r, [
      { addr: 'p1', error: null, routes: [{ prefix: 'user:', cluster: 'b', target: 't1', error: null }] },
      { addr: 'p2', error: null, routes: [{ prefix: 'user:', cluster: 'a', target: 't0', error: null }] },
      { addr: 'p3', error: null, routes: [] },
      { addr: 'p4', error: null, routes: [{ prefix: 'user:', cluster: 'b', target: null, error: null }] },
    ]);
    expect(st.routing).toBe(1);
    expect(st.total).toBe(4);
    expect(st.lines.map((l) => l.text)).toEqual(['→ t1', 'still routes it to a', 'not routing it yet', 'no proxy of the cluster reachable']);
    expect(routeStatus(r, [])).toEqual({ routing: 0, total: 0, lines: [] });
  });
});
