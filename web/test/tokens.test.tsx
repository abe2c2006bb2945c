// The tokens view against a fake console: the list, a new token's secret shown once, a revoke
// behind the confirm dialog, and the dashboard's refusal shown as a notice.

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { Tokens } from '../src/views/Tokens';

afterEach(cleanup);

const token = (name: string, role: string) => ({ name, role, created_unix: 1_700_000_000, created_by: 'admin' });

function server(route: (method: string, url: string, body: unknown) => [number, unknown] | undefined) {
  const calls: { method: string; url: string; body: unknown; csrf?: string }[] = [];
  const f = async (url: string, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : init?.body;
    calls.push({ method, url, body, csrf: (init?.headers as Record<string, string>)['X-CSRF-Token'] });
    const r = route(method, url, body) ?? [404, { error: { code: 'not_found', message: `no route ${method} ${url}` } }];
    return new Response(JSON.stringify(r[1]), { status: r[0] });
  };
  const client = new Client(f);
  client.csrf = 'csrf-1';
  return { c: client.cluster('local'), calls };
}

function renderTokens(c: ReturnType<typeof server>['c']) {
  return render(
    <NoticesProvider>
      <ConfirmProvider>
        <Tokens c={c} />
      </ConfirmProvider>
    </NoticesProvider>,
  );
}

describe('Tokens view', () => {
  it('lists tokens, shows a new one its secret once, and revokes after a confirm', async () => {
    let list = [token('admin', 'admin')];
    const { c, calls } = server((method, url, body) => {
      if (method === 'GET' && url === '/api/clusters/local/tokens') return [200, list];
      if (method === 'POST' && url === '/api/clusters/local/tokens') {
        const b = body as { name: string; role: string };
        list = [...list, token(b.name, b.role)];
        return [201, { ...token(b.name, b.role), token: 'f00d'.repeat(8) }];
      }
      if (method === 'DELETE' && url === '/api/clusters/local/tokens/grafana') {
        list = list.filter((t) => t.name !== 'grafana');
        return [200, {}];
      }
      return undefined;
    });
    renderTokens(c);
    await screen.findByTestId('token-admin');

    fireEvent.change(screen.getByTestId('token-name'), { target: { value: 'grafana' } });
    fireEvent.change(screen.getByTestId('token-role'), { target: { value: 'viewer' } });
    fireEvent.click(screen.getByTestId('token-create'));
    expect((await screen.findByTestId('token-secret')).textContent).toBe('f00d'.repeat(8));
    const post = calls.find((x) => x.method === 'POST');
    expect(post?.body).toEqual({ name: 'grafana', role: 'viewer' });
    expect(post?.csrf).toBe('csrf-1');
    await screen.findByTestId('token-grafana');

    fireEvent.click(screen.getByTestId('token-revoke-grafana'));
    fireEvent.click(await screen.findByTestId('confirm-ok'));
    await waitFor(() => expect(screen.queryByTestId('token-grafana')).toBeNull());
    expect(screen.queryByTestId('token-secret')).toBeNull();
    expect(calls.some((x) => x.method === 'DELETE' && x.url === '/api/clusters/local/tokens/grafana')).toBe(true);
  });

  it("shows the dashboard's refusal", async () => {
    const { c } = server((method, url) => {
      if (method === 'GET' && url === '/api/clusters/local/tokens') return [200, [token('admin', 'admin')]];
      if (method === 'DELETE') return [409, { error: { code: 'conflict', message: 'admin is the last admin token' } }];
      return undefined;
    });
    renderTokens(c);
    fireEvent.click(await screen.findByTestId('token-revoke-admin'));
    fireEvent.click(await screen.findByTestId('confirm-ok'));
    expect((await screen.findByTestId('notice-error')).textContent).toMatch(/last admin token \(409 conflict\)/);
  });
});
