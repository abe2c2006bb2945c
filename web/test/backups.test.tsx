// The backups view against a fake console: a backup started with its directory and the
// one-instant option (the body sent), its groups' progress, the pause measured, and a failed
// job's error shown; the start button waits for a valid directory and an enabled dashboard.

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { BackupsView, validBackupDir } from '../src/views/Backups';

afterEach(cleanup);

const group = (state: string, bytes: number) => ({ group: 1, source: '10.0.0.2:6379', source_role: 'replica', state, bytes, keys: 1200, offset: 42 });

describe('Backups view', () => {
  it('starts a backup and shows its progress, its pause and a failed one', async () => {
    let backups: unknown[] = [
      { id: 1, dir: 'old', state: 'failed', one_instant: false, started_unix_ms: 1_700_000_000_000, groups: [{ ...group('failed', 10), error: 'source gone' }], total_bytes: 0, error: 'group 1: source gone' },
    ];
    const calls: { method: string; url: string; body: unknown }[] = [];
    const f = async (url: string, init?: RequestInit) => {
      const method = init?.method ?? 'GET';
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
      calls.push({ method, url, body });
      if (url !== '/api/clusters/local/backups') return new Response('{}', { status: 404 });
      if (method === 'POST') {
        const b = body as { dir: string; one_instant: boolean };
        const job = { id: 2, dir: b.dir, state: 'done', one_instant: b.one_instant, started_unix_ms: 1_700_000_100_000, finished_unix_ms: 1_700_000_101_000, pause_ms: 3.5, max_pause_ms: 500, groups: [group('done', 2048)], total_bytes: 4096 };
        backups = [job, ...backups];
        return new Response(JSON.stringify(job), { status: 202 });
      }
      return new Response(JSON.stringify({ enabled: true, backups }), { status: 200 });
    };
    const client = new Client(f);
    client.csrf = 'csrf-1';
    render(
      <NoticesProvider>
        <ConfirmProvider>
          <BackupsView c={client.cluster('local')} />
        </ConfirmProvider>
      </NoticesProvider>,
    );
    await waitFor(() => expect(screen.getByTestId('backups-enabled').textContent).toBe('enabled'));
    expect((await screen.findByTestId('backup-1-error')).textContent).toContain('source gone');
    const start = screen.getByTestId<HTMLButtonElement>('backup-start');
    fireEvent.change(screen.getByLabelText(/Directory/), { target: { value: '../out' } });
    expect(start.disabled).toBe(true);
    fireEvent.change(screen.getByLabelText(/Directory/), { target: { value: 'nightly/1' } });
    fireEvent.click(screen.getByLabelText(/One instant/));
    fireEvent.click(start);
    await waitFor(() => expect(screen.getByTestId('backup-2-state').textContent).toBe('done'));
    expect(calls.find((x) => x.method === 'POST')?.body).toEqual({ dir: 'nightly/1', one_instant: true });
    expect(screen.getByTestId('backup-2-pause').textContent).toContain('3.5 ms');
    expect(screen.getByTestId('backup-2').textContent).toContain('10.0.0.2:6379 (replica)');
  });

  it('checks directories as the dashboard does', () => {
    for (const ok of ['nightly', '2026/12/06', 'a.b_c-d']) expect(validBackupDir(ok)).toBe(true);
    for (const bad of ['', '/abs', 'a/../b', '..', 'a//b', 'a b', 'x'.repeat(201)]) expect(validBackupDir(bad)).toBe(false);
  });
});
