// The slow log view against a fake console (each log type with its unit and proxy, a 403
// explained).

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { fakeCluster as cluster } from './fake';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { arrangeEntries } from '../src/lib/commandlog';
import { SlowLog } from '../src/views/SlowLog';

afterEach(cleanup);

const entry = (proxy: string, id: number, value: number, args: string[]) => ({
  proxy,
  proxy_addr: `127.0.0.1:1900${proxy === 'aaaa' ? 0 : 1}`,
  id,
  time: 1_796_400_000 + id,
  value,
  args,
  client_addr: '127.0.0.1:50000',
  client_name: 'reporter',
});

describe('Slow log view', () => {
  it('shows each type of the merged log with its unit and proxy, and switches type', async () => {
    const { c, urls } = cluster((url) => {
      if (url.endsWith('type=slow'))
        return [200, { type: 'slow', proxies: 2, unreachable: [], settings: [{ threshold: 10_000, max_len: 128, proxies: ['127.0.0.1:19000', '127.0.0.1:19001'] }], entries: [entry('bbbb', 3, 104_233, ['EVAL', 'return 1', '0']), entry('aaaa', 1, 20, ['GET', 'k'])] }];
      const settings = [
        { threshold: 1_048_576, max_len: 128, proxies: ['127.0.0.1:19000'] },
        { threshold: null, max_len: 0, proxies: ['127.0.0.1:19001'] },
      ];
      return [200, { type: 'large-reply', proxies: 2, unreachable: ['cccccccccc'], settings, entries: [entry('aaaa', 0, 2_097_165, ['GET', 'big'])] }];
    });
    render(<SlowLog c={c} />);
    const rows = await screen.findAllByTestId('slowlog-entry');
    expect(rows).toHaveLength(2);
    expect(rows[0].textContent).toContain('EVAL return 1 0');
    expect(rows[0].textContent).toContain('104.2 ms');
    expect(rows[1].textContent).toContain('20 µs');
    expect(rows[0].textContent).toContain('127.0.0.1:19001');
    expect(screen.getByTestId('slowlog-threshold').textContent).toBe('Logged: commands slower than 10.0 ms, the last 128 kept, on every proxy.');
    fireEvent.click(screen.getByTestId('slowlog-type-large-reply'));
    await waitFor(() => expect(screen.getByTestId('slowlog-args').textContent).toBe('GET big'));
    expect(screen.getByTestId('slowlog-value').textContent).toBe('2.0 MiB');
    expect(screen.getByTestId('slowlog-summary').textContent).toContain('not answering: cccccccc');
    expect(screen.getByTestId('slowlog-threshold').textContent).toBe(
      'Logged: on 127.0.0.1:19000: replies of at least 1.0 MiB, the last 128 kept; on 127.0.0.1:19001: this log is disabled (proxy.toml).',
    );
    expect(urls).toContain('/api/clusters/local/commandlog?type=large-reply');
  });

  it('explains a 403: the log needs the operator role', async () => {
    const { c } = cluster(() => [403, { error: { code: 'forbidden', message: 'viewer' } }]);
    render(<SlowLog c={c} />);
    await screen.findByTestId('slowlog-forbidden');
  });
});

describe('Slow log sort and filter', () => {
  const entries = [
    entry('aaaa', 1, 500, ['GET', 'user:1']),
    entry('bbbb', 2, 90_000, ['EVAL', 'return 1', '0']),
    entry('aaaa', 3, 20, ['SET', 'user:2', 'x']),
  ];
  it('sorts newest first or by value, and keeps rows matching every word', () => {
    expect(arrangeEntries(entries, 'time', '').map((e) => e.id)).toEqual([3, 2, 1]);
    expect(arrangeEntries(entries, 'value', '').map((e) => e.id)).toEqual([2, 1, 3]);
    expect(arrangeEntries(entries, 'time', 'USER').map((e) => e.id)).toEqual([3, 1]);
    expect(arrangeEntries(entries, 'time', 'user set').map((e) => e.id)).toEqual([3]);
    expect(arrangeEntries(entries, 'time', '19001').map((e) => e.id)).toEqual([2]);
  });
  it('applies them in the view', async () => {
    const { c } = cluster(() => [200, { type: 'slow', proxies: 2, unreachable: [], settings: [], entries }]);
    render(<SlowLog c={c} />);
    await screen.findByTestId('slowlog-table');
    fireEvent.change(screen.getByTestId('slowlog-sort'), { target: { value: 'value' } });
    expect(screen.getAllByTestId('slowlog-args').map((e) => e.textContent)).toEqual(['EVAL return 1 0', 'GET user:1', 'SET user:2 x']);
    fireEvent.change(screen.getByTestId('slowlog-filter'), { target: { value: 'user' } });
    expect(screen.getAllByTestId('slowlog-entry')).toHaveLength(2);
    expect(screen.getByTestId('slowlog-shown').textContent).toBe('2 of 3 shown');
  });
});
