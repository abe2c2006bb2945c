// The migration panel shows the dashboard's run as it is: no bar when idle, the run's own
// percent, slots left and keys left while it runs, and once it ended no rate, no ETA and the
// keys it really copied (it used to say "complete" beside 0 keys moved and a keys/s rate).

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import type { MigrationStatus } from '../src/api/shapes';
import { MigrationProgress } from '../src/components/MigrationProgress';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { migrationRun, migrationStatus, slotProgress } from './answers';
import { render } from './render';

function show(status: MigrationStatus) {
  const client = new Client(async () => new Response('{}', { status: 404 }));
  render(
    <NoticesProvider>
      <ConfirmProvider>
        <MigrationProgress c={client.cluster('local')} status={status} error={null} />
      </ConfirmProvider>
    </NoticesProvider>,
  );
  const text = (id: string) => screen.getByTestId(id).textContent;
  const fill = () => (document.querySelector('.progress-fill') as HTMLElement).style.width;
  return { text, fill };
}

afterEach(cleanup);

describe('migration panel', () => {
  it('is idle with an empty bar before any migration', () => {
    const { text, fill } = show(migrationStatus());
    expect(screen.getByTestId('migration-progress').getAttribute('data-state')).toBe('idle');
    expect(fill()).toBe('0%');
    expect(text('migration-percent')).toBe('—');
    expect(text('migration-remaining')).toBe('—');
  });

  it('shows the run while it moves: percent, slots left of the run, keys left and rewritten', () => {
    const { text, fill } = show(
      migrationStatus({
        slots: [slotProgress({ slot: 500 })],
        keys_per_sec: 2006,
        keys_left: 4566,
        eta_secs: 30,
        run: migrationRun({ slots: 112, slots_done: 40, keys_total: 9900, keys_copied: 5334, keys_left: 4566, keys_recopy: 12, percent_done: 53.8 }),
      }),
    );
    expect(fill()).toBe('53.8%');
    expect(text('migration-percent')).toBe('53.8%');
    expect(text('migration-remaining')).toBe('72 / 112');
    expect(text('migration-rate')).toBe('2,006');
    expect(text('migration-keys-left')).toBe('4,566 + 12 rewritten');
    expect(text('migration-keys-moved')).toContain('5,334 / 9,900');
    expect(text('migration-eta')).toBe('30s');
  });

  it('once ended: complete with the keys it copied, and no rate or ETA', () => {
    const { text } = show(
      migrationStatus({
        keys_per_sec: 0,
        run: migrationRun({ running: false, ended_unix_ms: 61_000, slots: 200, slots_done: 200, keys_total: 9900, keys_copied: 9900, keys_left: 0, percent_done: 100 }),
      }),
    );
    expect(screen.getByTestId('migration-progress').getAttribute('data-state')).toBe('complete');
    expect(text('migration-percent')).toBe('100%');
    expect(text('migration-rate')).toBe('—');
    expect(text('migration-eta')).toBe('—');
    expect(text('migration-remaining')).toBe('—');
    expect(text('migration-last')).toBe('Last migration: 200 slot(s) moved, 9,900 keys in 1m 00s');
  });
});

describe('throttle control and held steps', () => {
  it('shows the cap and the live rate, and the 409 reason when nothing runs', async () => {
    const reason = 'no migration is running: a speed cap applies to a running migration and ends with it';
    const sent: { method: string; url: string; body: string }[] = [];
    const client = new Client(async (url, init) => {
      sent.push({ method: String(init?.method), url: String(url), body: typeof init?.body === 'string' ? init.body : '' });
      return new Response(JSON.stringify({ error: { code: 'conflict', message: reason } }), {
        status: 409,
        headers: { 'content-type': 'application/json' },
      });
    });
    render(
      <NoticesProvider>
        <ConfirmProvider>
          <MigrationProgress
            c={client.cluster('local')}
            status={migrationStatus({ throttle: { max_keys_per_sec: 300, max_bytes_per_sec: null } })}
            error={null}
          />
        </ConfirmProvider>
      </NoticesProvider>,
    );
    expect(screen.getByTestId('throttle-current').textContent).toBe('300 keys/s');
    expect(screen.getByTestId('throttle-rate').textContent).toBe('—');
    fireEvent.change(screen.getByTestId('throttle-input'), { target: { value: 'fast' } });
    fireEvent.click(screen.getByTestId('throttle-set'));
    expect(screen.getByTestId('throttle-error').textContent).toContain('whole number');
    expect(sent).toHaveLength(0);
    fireEvent.change(screen.getByTestId('throttle-input'), { target: { value: '1,500' } });
    fireEvent.click(screen.getByTestId('throttle-set'));
    await waitFor(() => expect(screen.getByTestId('throttle-error').textContent).toBe(`${reason} (409 conflict)`));
    expect(sent[0].method.toLowerCase()).toBe('put');
    expect(sent[0].url).toContain('/migrations/throttle');
    expect(JSON.parse(sent[0].body)).toEqual({ max_keys_per_sec: 1500 });
  });

  it('draws the held steps of the run, naming the proxy', () => {
    show(
      migrationStatus({
        slots: [slotProgress({ slot: 3 })],
        run: migrationRun({ started_unix_ms: 1_000 }),
        holds: [
          {
            time_ms: 2_000,
            last_ms: 4_000,
            times: 3,
            slots: [{ from: 0, to: 9 }],
            reason: 'waiting for proxies: proxy p at 127.0.0.1:7001 (unreachable: timed out)',
          },
        ],
      }),
    );
    const holds = screen.getAllByTestId('hold');
    expect(holds).toHaveLength(1);
    expect(holds[0].textContent).toContain('slots 0-9: waiting for proxies: proxy p at 127.0.0.1:7001');
    expect(holds[0].textContent).toContain('3×');
  });
});
