// The plugins view against a fake console: no catalog (404), the chain in order, the config
// checked inline and the server's refusal shown, reordering, upload with its metrics, delete
// behind the confirm dialog.

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { Plugins } from '../src/views/Plugins';

afterEach(cleanup);

const plugin = (name: string, order: number, extra = {}) => ({
  name,
  sha256: 'ab'.repeat(32),
  size: 2048,
  config: { deny: ['FLUSHALL'] },
  enabled: true,
  order,
  fail: 'open',
  updated_unix: 1_700_000_000,
  ...extra,
});

type Route = (method: string, url: string, body: unknown) => [number, unknown] | undefined;

function server(route: Route) {
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

function renderPlugins(c: ReturnType<typeof server>['c']) {
  return render(
    <NoticesProvider>
      <ConfirmProvider>
        <Plugins c={c} />
      </ConfirmProvider>
    </NoticesProvider>,
  );
}

describe('Plugins view', () => {
  it('says so when the dashboard has no plugin catalog (404)', async () => {
    const { c } = server(() => undefined);
    renderPlugins(c);
    await screen.findByTestId('plugins-unavailable');
  });

  it('lists plugins in order, validates the config inline, shows the server 400, and reorders', async () => {
    const { c, calls } = server((method, url, body) => {
      if (method === 'GET' && url === '/api/clusters/local/plugins') return [200, [plugin('metrics', 1), plugin('filter', 0)]];
      if (method === 'PUT' && url === '/api/clusters/local/plugins/filter/config') {
        const cfg = (body as { config: { deny?: unknown } }).config;
        if (!Array.isArray(cfg.deny)) return [400, { error: { code: 'bad_request', message: 'filter: "deny" must be a list' } }];
        return [200, plugin('filter', 0, { config: cfg })];
      }
      if (method === 'PUT' && url === '/api/clusters/local/plugins/order') return [200, { version: 7, plugins: [plugin('metrics', 0), plugin('filter', 1)] }];
      return undefined;
    });
    renderPlugins(c);
    const table = await screen.findByTestId('plugins-table');
    const rows = [...table.querySelectorAll('tbody tr')].map((r) => r.getAttribute('data-testid'));
    expect(rows).toEqual(['plugin-filter', 'plugin-metrics']);

    fireEvent.click(screen.getByTestId('plugin-open-filter'));
    const text = await screen.findByTestId<HTMLTextAreaElement>('plugin-config-text');
    expect(JSON.parse(text.value)).toEqual({ deny: ['FLUSHALL'] });

    // A parse error is shown inline with its place, and saving is disabled.
    fireEvent.change(text, { target: { value: '{\n  "deny": ["FLUSHALL",]\n}' } });
    expect(screen.getByTestId('plugin-config-parse-error').textContent).toMatch(/line 2, column \d+: trailing comma/);
    expect(screen.getByTestId<HTMLButtonElement>('plugin-config-save').disabled).toBe(true);

    // Valid JSON the plugin refuses: the server's 400 message is shown.
    fireEvent.change(text, { target: { value: '{"deny": "FLUSHALL"}' } });
    expect(screen.queryByTestId('plugin-config-parse-error')).toBeNull();
    fireEvent.click(screen.getByTestId('plugin-config-save'));
    const err = await screen.findByTestId('plugin-config-server-error');
    expect(err.textContent).toContain('filter: "deny" must be a list');
    const put = calls.find((x) => x.method === 'PUT' && x.url.endsWith('/filter/config'));
    expect(put?.body).toEqual({ config: { deny: 'FLUSHALL' }, fail: 'open' });
    expect(put?.csrf).toBe('csrf-1');

    // Move filter down: the whole order is sent.
    fireEvent.click(screen.getByTestId('plugin-down-filter'));
    await waitFor(() => expect(calls.some((x) => x.url.endsWith('/plugins/order'))).toBe(true));
    expect(calls.find((x) => x.url.endsWith('/plugins/order'))?.body).toEqual({ order: ['metrics', 'filter'] });

    // Metrics 404 is tolerated.
    await screen.findByText(/does not serve plugin metrics yet/);
  });

  it('uploads a module under the name taken from its file, and shows its metrics and the proxies running it', async () => {
    const { c, calls } = server((method, url) => {
      if (method === 'GET' && url === '/api/clusters/local/plugins') return [200, [plugin('filter', 0)]];
      if (method === 'PUT' && url === '/api/clusters/local/plugins/filter/module') return [200, plugin('filter', 0, { enabled: false })];
      if (method === 'GET' && url === '/api/clusters/local/plugins/filter/metrics')
        return [200, { proxies: 2, samples: [{ name: 'filter_denied_total', labels: { command: 'FLUSHALL' }, value: 3 }] }];
      return undefined;
    });
    renderPlugins(c);
    const input = await screen.findByTestId<HTMLInputElement>('plugin-file');
    const file = new File([new Uint8Array([0, 0x61, 0x73, 0x6d])], 'tessera_plugin_filter.wasm', { type: 'application/wasm' });
    fireEvent.change(input, { target: { files: [file] } });
    expect(screen.getByTestId<HTMLInputElement>('plugin-name').value).toBe('filter');
    fireEvent.click(screen.getByTestId('plugin-upload'));
    await waitFor(() => expect(calls.some((x) => x.method === 'PUT' && x.url.endsWith('/plugins/filter/module'))).toBe(true));
    expect(screen.queryByTestId('plugin-upload-error')).toBeNull();

    fireEvent.click(screen.getByTestId('plugin-open-filter'));
    expect((await screen.findByTestId('plugin-metrics-proxies')).textContent).toContain('Summed over 2 proxies');
    expect(screen.getByTestId('plugin-metrics').textContent).toContain('filter_denied_total');
    expect(screen.getByTestId('plugin-metrics').textContent).toContain('command=FLUSHALL');
  });

  it('shows calls and latency percentiles per hook, in µs and ms, and a percentile over the top bucket', async () => {
    const hook = (name: string, count: number, p50: number | null, p99: number | null) => ({
      hook: name,
      count,
      sum_seconds: count * 2e-6,
      buckets: [count, ...new Array<number>(16).fill(0)],
      p50_seconds: p50,
      p99_seconds: p99,
    });
    const { c } = server((method, url) => {
      if (method === 'GET' && url === '/api/clusters/local/plugins') return [200, [plugin('metrics', 0)]];
      if (method === 'GET' && url === '/api/clusters/local/plugins/metrics/metrics')
        return [
          200,
          {
            proxies: 2,
            samples: [],
            hooks: [hook('on_command', 1234, 0.0000025, 0.000025), hook('on_commands', 7, 0.0025, null), hook('on_tick', 3, 0.05, 0.1)],
          },
        ];
      return undefined;
    });
    renderPlugins(c);
    fireEvent.click(await screen.findByTestId('plugin-open-metrics'));
    const table = await screen.findByTestId('plugin-hook-latency');
    const cells = (hook: string) => Array.from(screen.getByTestId(`hook-${hook}`).querySelectorAll('td')).map((td) => td.textContent);
    expect(cells('on_command')).toEqual(['on_command', '1,234', '≤ 2.5 µs', '≤ 25 µs']);
    expect(cells('on_commands')).toEqual(['on_commands', '7', '≤ 2.5 ms', '> 100 ms']);
    expect(cells('on_tick')).toEqual(['on_tick', '3', '≤ 50 ms', '≤ 100 ms']);
    expect(table.querySelectorAll('tbody tr')).toHaveLength(3);
  });

  it('says no hook was called when the proxies report none', async () => {
    const { c } = server((method, url) => {
      if (method === 'GET' && url === '/api/clusters/local/plugins') return [200, [plugin('metrics', 0)]];
      if (method === 'GET' && url === '/api/clusters/local/plugins/metrics/metrics') return [200, { proxies: 1, samples: [], hooks: [] }];
      return undefined;
    });
    renderPlugins(c);
    fireEvent.click(await screen.findByTestId('plugin-open-metrics'));
    await screen.findByText('No hook called yet.');
    expect(screen.queryByTestId('plugin-hook-latency')).toBeNull();
  });

  it('offers the CPU, memory and input limits the CLI has, checked before they are sent', async () => {
    const { c, calls } = server((method, url) => {
      if (method === 'GET' && url === '/api/clusters/local/plugins') return [200, [plugin('filter', 0, { cpu_budget_ms: 5 })]];
      if (method === 'PUT' && url === '/api/clusters/local/plugins/filter/config') return [200, plugin('filter', 0, { cpu_budget_ms: 10, memory_mb: 32 })];
      return undefined;
    });
    renderPlugins(c);
    fireEvent.click(await screen.findByTestId('plugin-open-filter'));
    const cpu = await screen.findByTestId<HTMLInputElement>('plugin-cpu-budget');
    expect(cpu.value).toBe('5');
    fireEvent.change(cpu, { target: { value: '10' } });
    fireEvent.change(screen.getByTestId('plugin-memory'), { target: { value: 'lots' } });
    expect(screen.getByTestId('plugin-limits-error').textContent).toContain('the memory limit (MiB) is a whole number');
    expect(screen.getByTestId<HTMLButtonElement>('plugin-config-save').disabled).toBe(true);
    fireEvent.change(screen.getByTestId('plugin-memory'), { target: { value: '32' } });
    fireEvent.click(screen.getByTestId('plugin-config-save'));
    await waitFor(() => expect(calls.some((x) => x.method === 'PUT')).toBe(true));
    const put = calls.find((x) => x.method === 'PUT');
    expect(put?.body).toEqual({ config: { deny: ['FLUSHALL'] }, fail: 'open', cpu_budget_ms: 10, memory_mb: 32 });
  });

  it('asks before deleting a plugin', async () => {
    const { c, calls } = server((method, url) => {
      if (method === 'GET' && url === '/api/clusters/local/plugins') return [200, [plugin('filter', 0)]];
      if (method === 'DELETE') return [200, {}];
      return undefined;
    });
    renderPlugins(c);
    fireEvent.click(await screen.findByTestId('plugin-delete-filter'));
    expect(screen.getByTestId('confirm-dialog').textContent).toContain('Delete plugin filter?');
    fireEvent.click(screen.getByTestId('confirm-cancel'));
    expect(calls.some((x) => x.method === 'DELETE')).toBe(false);
    fireEvent.click(screen.getByTestId('plugin-delete-filter'));
    fireEvent.click(screen.getByTestId('confirm-ok'));
    await waitFor(() => expect(calls.some((x) => x.method === 'DELETE' && x.url === '/api/clusters/local/plugins/filter')).toBe(true));
  });
});
