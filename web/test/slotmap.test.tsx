// The slot map against a fake console: cells by owner, selection by click, shift-click and
// drag, the target group, migrate and abort, the heatmap.

import { act, cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { render } from './render';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '../src/api/client';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import { SlotMap } from '../src/views/SlotMap';
import { migrationRun, migrationStatus, noCap, server, slotProgress } from './answers';

afterEach(cleanup);

const slots = Array.from({ length: 1024 }, (_, id) => ({
  id,
  group: id < 512 ? 1 : 2,
  ...(id === 700 ? { action: { state: 'migrating', source: 2, target: 1, aborting: false } } : {}),
}));
const groups = [1, 2].map((id) => ({ id, slots: 512, down: false, tls: false, servers: [server({ addr: `127.0.0.1:700${id}`, role: 'master' })] }));
const ops = Array.from({ length: 1024 }, (_, i) => (i === 5 ? 400 : i < 512 ? 1 : 0));
const slotStats = {
  window_secs: 60,
  sample_secs: 5,
  keys_every_secs: 30,
  proxies: 1,
  slots: { group: slots.map((s) => s.group), ops_per_sec: ops, bytes_per_sec: ops, keys: ops, memory: ops.map((o) => o * 100) },
  groups: [
    { group: 1, slots: 512, ops_per_sec: 911, bytes_per_sec: 911, keys: 911, memory: 91100, used_memory: 1048576, keys_exact: true, keys_scanned: 911, dbsize: 911, keys_at_unix: 1 },
    { group: 2, slots: 512, ops_per_sec: 0, bytes_per_sec: 0, keys: 0, memory: 0, used_memory: null, keys_exact: false, keys_scanned: null, dbsize: null, keys_at_unix: null },
  ],
};
const status = migrationStatus({
  slots: [slotProgress({ slot: 700, state: 'migrating', source: 2, target: 1, keys_moved: 42 })],
  in_flight: 1,
  keys_moved: 42,
  keys_per_sec: 10,
  eta_secs: 3,
  max_slots_in_flight: 512,
  run: migrationRun({ keys_copied: 42, keys_left: 58, percent_done: 42 }),
});

function setup() {
  const calls: { method: string; url: string; body: unknown }[] = [];
  const f = async (url: string, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
    calls.push({ method, url, body });
    const base = '/api/clusters/local';
    const reply =
      method === 'GET' && url === `${base}/slots`
        ? slots
        : method === 'GET' && url === `${base}/groups`
          ? groups
          : method === 'GET' && url === `${base}/slots/stats`
            ? slotStats
          : method === 'GET' && url === `${base}/migrations`
            ? status
            : method === 'POST' && url === `${base}/migrations`
              ? { queued: 6, throttle: noCap }
              : method === 'POST' && url === `${base}/migrations/abort`
                ? { aborted: 1 }
                : null;
    return new Response(JSON.stringify(reply ?? { error: { code: 'not_found', message: url } }), { status: reply ? 200 : 404 });
  };
  const client = new Client(f);
  client.csrf = 't';
  render(
    <NoticesProvider>
      <ConfirmProvider>
        <SlotMap c={client.cluster('local')} />
      </ConfirmProvider>
    </NoticesProvider>,
  );
  return calls;
}

describe('SlotMap', () => {
  it('is usable from the keyboard: arrows move, Enter selects, shift extends, Escape clears', async () => {
    setup();
    await waitFor(() => expect(screen.getByTestId('slot-1023').getAttribute('data-group')).toBe('2'));
    const grid = screen.getByTestId('slot-grid');
    expect(grid.tabIndex).toBe(0);
    fireEvent.focus(grid);
    expect(grid.getAttribute('aria-activedescendant')).toBe('slot-cell-0');
    fireEvent.keyDown(grid, { key: 'ArrowDown' });
    fireEvent.keyDown(grid, { key: 'ArrowRight' });
    expect(grid.getAttribute('aria-activedescendant')).toBe('slot-cell-33');
    fireEvent.keyDown(grid, { key: 'Enter' });
    expect(screen.getByTestId<HTMLInputElement>('selection-range').value).toBe('33');
    fireEvent.keyDown(grid, { key: 'ArrowRight', shiftKey: true });
    fireEvent.keyDown(grid, { key: 'ArrowRight', shiftKey: true });
    expect(screen.getByTestId<HTMLInputElement>('selection-range').value).toBe('33-35');
    expect(screen.getByTestId('slot-35').getAttribute('aria-selected')).toBe('true');
    expect(screen.getByTestId('slot-35').getAttribute('aria-label')).toBe('slot 35, group 1');
    expect(screen.getByTestId('slot-700').getAttribute('aria-label')).toBe('slot 700, group 2, migrating to group 1');
    fireEvent.keyDown(grid, { key: 'Escape' });
    expect(screen.getByTestId<HTMLInputElement>('selection-range').value).toBe('');
    expect(document.querySelectorAll('[role="row"]').length).toBe(32);
  });
  it('lays the slot map over the heat on request: owner bars and moving slots outlined', async () => {
    setup();
    await waitFor(() => expect(screen.getByTestId('heat-5').getAttribute('data-value')).toBe('400'));
    expect(screen.getByTestId('heat-700').getAttribute('data-owner')).toBeNull();
    fireEvent.click(screen.getByTestId('heat-overlay'));
    await waitFor(() => expect(screen.getByTestId('heat-700').getAttribute('data-owner')).toBe('2'));
    expect(screen.getByTestId('heat-700').className).toContain('heat-moving');
    expect(screen.getByTestId('heat-700').title).toContain('moving to group 1');
    expect(screen.getByTestId('heat-5').getAttribute('data-owner')).toBe('1');
    expect(screen.getByTestId('heat-5').className).not.toContain('heat-moving');
    expect(screen.getByTestId('heat-5').title).toBe('slot 5: 400 ops/s, group 1');
    expect(screen.getByTestId('heat-overlay-legend').textContent).toContain('moving');
  });

  it('draws 1024 cells coloured by group, marks migrating slots, and shows a slot on click', async () => {
    setup();
    await waitFor(() => expect(screen.getByTestId('slot-1023').getAttribute('data-group')).toBe('2'));
    expect(document.querySelectorAll('.slot-cell').length).toBe(1024);
    expect(screen.getByTestId('slot-700').className).toContain('migrating');
    expect(screen.getByTestId('slot-ranges').textContent).toBe('0-511 → g1, 512-1023 → g2');
    await waitFor(() => expect(screen.getByTestId('migration-rate').textContent).toBe('10'));
    fireEvent.mouseDown(screen.getByTestId('slot-700'), { button: 0 });
    fireEvent.mouseUp(window);
    expect(screen.getByTestId('slot-detail-action').textContent).toBe('migrating: group 2 → 1');
    expect(screen.getByTestId('slot-detail').textContent).toContain('42');
  });

  it('shows a heatmap of ops/s per slot beside the map, and memory on toggle', async () => {
    setup();
    await waitFor(() => expect(screen.getByTestId('heat-5').getAttribute('data-value')).toBe('400'));
    expect(document.querySelectorAll('.heat-cell').length).toBe(1024);
    expect(screen.getByTestId('heat-600').getAttribute('data-value')).toBe('0');
    expect(screen.getByTestId('heat-5').style.background).not.toBe(screen.getByTestId('heat-6').style.background);
    expect(screen.getByTestId('heat-summary').textContent).toContain('busiest slot 400 ops/s');
    expect(screen.getByTestId('heat-groups').textContent).toContain('(est.)');
    // An absolute scale with its legend, and the master's memory as the Groups view shows it.
    expect(screen.getByTestId('heat-legend').textContent).toContain('≥ 100 ops/s');
    expect(screen.getByTestId('heat-used-1').textContent).toBe('1.0 MiB');
    expect(screen.getByTestId('heat-used-2').textContent).toBe('—');
    fireEvent.click(screen.getByTestId('heat-memory'));
    expect(screen.getByTestId('heat-5').getAttribute('data-value')).toBe('40000');
  });

  it('drag selects a range, which migrates to the chosen group', async () => {
    const calls = setup();
    await waitFor(() => expect(screen.getByTestId('slot-10').getAttribute('data-group')).toBe('1'));
    fireEvent.mouseDown(screen.getByTestId('slot-10'), { button: 0 });
    for (const s of [11, 13, 15]) fireEvent.mouseOver(screen.getByTestId(`slot-${s}`));
    fireEvent.mouseUp(window);
    fireEvent.mouseOver(screen.getByTestId('slot-40')); // not dragging any more
    expect(screen.getByTestId('selection-size').textContent).toBe('6 slot(s)');
    expect(screen.getByTestId<HTMLInputElement>('selection-range').value).toBe('10-15');
    // The target defaults to a group other than the owner.
    await waitFor(() => expect(screen.getByTestId<HTMLSelectElement>('target-group').value).toBe('2'));
    await act(async () => fireEvent.click(screen.getByTestId('migrate-selection')));
    await waitFor(() => expect(calls.some((c) => c.method === 'POST')).toBe(true));
    expect(calls.find((c) => c.method === 'POST')).toMatchObject({
      url: '/api/clusters/local/migrations',
      body: { from: 10, to: 15, group: 2 },
    });
    await screen.findByText('6 slot(s) queued to move to group 2');
  });

  it('shift-click extends; a range containing a moving slot cannot be migrated but can be aborted after a confirm', async () => {
    const calls = setup();
    await waitFor(() => expect(screen.getByTestId('slot-700').className).toContain('migrating'));
    fireEvent.mouseDown(screen.getByTestId('slot-698'), { button: 0 });
    fireEvent.mouseUp(window);
    fireEvent.mouseDown(screen.getByTestId('slot-702'), { button: 0, shiftKey: true });
    fireEvent.mouseUp(window);
    expect(screen.getByTestId('selection-size').textContent).toBe('5 slot(s)');
    await waitFor(() => expect(screen.getByTestId<HTMLSelectElement>('target-group').value).toBe('1'));
    expect(screen.getByTestId<HTMLButtonElement>('migrate-selection').disabled).toBe(true);
    fireEvent.click(screen.getByTestId('abort-selection'));
    expect(screen.getByTestId('confirm-dialog').textContent).toContain('Abort the migration of 1 selected slot(s)?');
    await act(async () => fireEvent.click(screen.getByTestId('confirm-ok')));
    await waitFor(() => expect(calls.some((c) => c.url.endsWith('/migrations/abort'))).toBe(true));
    expect(calls.find((c) => c.url.endsWith('/migrations/abort'))?.body).toEqual({ slots: [700] });
  });
});
