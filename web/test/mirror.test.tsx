// The mirror view against a fake console: off, then started with a target and mode (the body
// sent), counters by command and a mismatch sample with both replies shown, then stopped
// behind the confirm dialog.

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { MirrorView, validTarget } from '../src/views/Mirror';

afterEach(cleanup);

const figures = (sent: number, mismatched: number) => ({
  sent,
  compared: sent,
  mismatched,
  uncompared: 0,
  errors: 0,
  dropped: { queue_full: 2, queue_bytes: 0, too_large: 0 },
  queue_entries: 0,
  queue_bytes: 0,
  commands: sent ? [{ command: 'get', sent, compared: sent, mismatched, uncompared: 0 }] : [],
});

describe('Mirror view', () => {
  it('starts mirroring, shows counters and samples, and stops after a confirm', async () => {
    let state: Record<string, unknown> = { version: 0, config: null, figures: figures(0, 0), proxies: [], samples: [] };
    const calls: { method: string; url: string; body: unknown }[] = [];
    const f = async (url: string, init?: RequestInit) => {
      const method = init?.method ?? 'GET';
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
      calls.push({ method, url, body });
      if (url !== '/api/clusters/local/mirror') return new Response('{}', { status: 404 });
      if (method === 'PUT') {
        const b = body as { target: string; mode: string };
        state = {
          version: 1,
          config: { target: b.target, mode: b.mode, password: false, max_queue: 10000, max_queue_bytes: 16777216, max_command_bytes: 65536 },
          figures: figures(7, 3),
          proxies: [{ token: 't1', addr: '127.0.0.1:19000', version: 1, on: true, queue_entries: 0, queue_bytes: 0 }],
          samples: [{ command: 'GET', args: ['planted'], primary: '$3\\r\\none\\r\\n', shadow: '$3\\r\\ntwo\\r\\n', unix_ms: 1_700_000_000_000, proxy: 't1' }],
        };
      }
      if (method === 'DELETE') state = { ...state, version: 2, config: null };
      return new Response(JSON.stringify(state), { status: 200 });
    };
    const client = new Client(f);
    client.csrf = 'csrf-1';
    render(
      <NoticesProvider>
        <ConfirmProvider>
          <MirrorView c={client.cluster('local')} />
        </ConfirmProvider>
      </NoticesProvider>,
    );
    expect((await screen.findByTestId('mirror-state')).textContent).toBe('off');
    const apply = screen.getByTestId<HTMLButtonElement>('mirror-apply');
    fireEvent.change(screen.getByTestId('mirror-target'), { target: { value: 'nowhere' } });
    expect(apply.disabled).toBe(true);
    fireEvent.change(screen.getByTestId('mirror-target'), { target: { value: '10.0.0.20:7400' } });
    fireEvent.change(screen.getByTestId('mirror-mode'), { target: { value: 'all' } });
    fireEvent.click(apply);
    await waitFor(() => expect(screen.getByTestId('mirror-state').textContent).toBe('on: all to 10.0.0.20:7400'));
    expect(calls.find((x) => x.method === 'PUT')?.body).toEqual({ target: '10.0.0.20:7400', mode: 'all' });
    expect(screen.getByTestId('mirror-mismatched').textContent).toBe('3');
    expect(screen.getByTestId('mirror-command-get').textContent).toContain('7');
    expect(screen.getByTestId('mirror-sample-0').textContent).toContain('GET planted');
    expect(screen.getByTestId('mirror-sample-0').textContent).toContain('two');
    expect(screen.getByTestId('mirror-dropped-reasons').textContent).toContain('queue full 2');

    fireEvent.click(screen.getByTestId('mirror-off'));
    fireEvent.click(await screen.findByTestId('confirm-ok'));
    await waitFor(() => expect(screen.getByTestId('mirror-state').textContent).toBe('off'));
    expect(calls.some((x) => x.method === 'DELETE')).toBe(true);
  });

  it('checks targets as the dashboard does', () => {
    expect(validTarget('127.0.0.1:6379')).toBe(true);
    expect(validTarget('shadow.internal:7400')).toBe(true);
    for (const bad of ['', '127.0.0.1', ':6379', 'h:0', 'h:70000', 'a b:1']) expect(validTarget(bad)).toBe(false);
  });
});
