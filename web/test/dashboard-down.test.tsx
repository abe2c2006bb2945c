// A cluster page while its dashboard is down: the console's reason shows once (one banner,
// not one box per read), the Tokens tab stays and says why it is empty, and admin-only gating
// still holds while the dashboard answers.

import { QueryClientProvider } from '@tanstack/react-query';
import { cleanup, render, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ClusterPage } from '../src/App';
import { makeQueryClient } from '../src/api/queries';
import type { ClusterSummary } from '../src/api/shapes';
import { ConfirmProvider, NoticesProvider } from '../src/components/ui';
import type { ClusterTab } from '../src/routing';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

const REASON =
  'the dashboard at 127.0.0.1:18080 (pid 42 on h1), which held the cluster lock until 2026-12-06 14:00:00Z (30 s ago), does not answer: it may be frozen, stopped or unreachable.';

const dashboard = { admin_addr: '127.0.0.1:18080', pid: 42, host: 'h1', version: '0.1.0', start_unix: 0 };

/** `east` with its dashboard down: nobody holds the lock, its last holder does not answer. */
const down: ClusterSummary = {
  name: 'east',
  store: 'fs:///s',
  dashboard: null,
  reachable: false,
  overview: null,
  error: REASON,
  has_token: true,
  token_role: null,
  role: null,
  last_dashboard: { admin_addr: dashboard.admin_addr, pid: 42, host: 'h1', version: '0.1.0', last_seen_unix_ms: 1_780_000_000_000, answers: false },
};

/** A console whose /api/clusters lists `summary`, and whose relay refuses every call to it as
 * the console does when no dashboard serves it (503 `unavailable`, the same reason). */
function consoleWith(summary: ClusterSummary) {
  const calls: string[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn((url: string) => {
      calls.push(url);
      const reply = (status: number, body: unknown) => Promise.resolve(new Response(JSON.stringify(body), { status }));
      if (url === '/api/clusters') return reply(200, [summary]);
      if (url.startsWith('/api/clusters/east/') && !summary.reachable) return reply(503, { error: { code: 'unavailable', message: REASON } });
      return reply(404, { error: { code: 'not_found', message: `no route ${url}` } });
    }),
  );
  return calls;
}

function renderPage(tab: ClusterTab, queries = makeQueryClient()) {
  return render(
    <QueryClientProvider client={queries}>
      <NoticesProvider>
        <ConfirmProvider>
          <ClusterPage name="east" tab={tab} />
        </ConfirmProvider>
      </NoticesProvider>
    </QueryClientProvider>,
  );
}

/** How many times `text` is on the page. */
function count(text: string): number {
  return document.body.textContent.split(text).length - 1;
}

describe('a cluster page with its dashboard down', () => {
  it('says why once: one banner, no box per failed read', async () => {
    const calls = consoleWith(down);
    const queries = makeQueryClient();
    renderPage('overview', queries);
    expect((await screen.findByTestId('cluster-down')).textContent).toBe(`${REASON}${screen.getByTestId('cluster-down-stale').textContent}`);
    expect(screen.getByTestId('cluster-down-stale').textContent).toContain('not refreshed until it answers again');
    // The overview's reads (overview, stats, groups, events, history) all failed with it.
    await waitFor(() => {
      for (const path of ['overview', 'stats', 'groups', 'events', 'history/series']) {
        expect(calls.some((u) => u.startsWith(`/api/clusters/east/${path}`)), path).toBe(true);
      }
      expect(queries.isFetching()).toBe(0);
      for (const key of [['cluster', 'east', 'overview'], ['cluster', 'east', 'groups']]) {
        expect(queries.getQueryState(key)?.status, key.join('/')).toBe('error');
      }
    });
    expect(count('does not answer: it may be frozen')).toBe(1);
    expect(screen.getAllByRole('alert')).toHaveLength(1);
    // The charts give way to one line rather than six saying there is no series.
    expect(screen.getByTestId('history-down')).toBeTruthy();
    expect(screen.queryByTestId('qps-chart-empty')).toBeNull();
  });

  it('keeps the Tokens tab, which says the dashboard is not answering', async () => {
    consoleWith(down);
    renderPage('tokens');
    await screen.findByTestId('cluster-down');
    expect(screen.getByTestId('tab-tokens')).toBeTruthy();
    expect(screen.getByTestId('tokens-unavailable').textContent).toContain('not answering');
    expect(count('does not answer: it may be frozen')).toBe(1);
  });

  it('shows the Tokens tab to an admin only while the dashboard answers', async () => {
    const up = { ...down, dashboard, reachable: true, error: null, last_dashboard: null, token_role: 'admin' as const };
    consoleWith({ ...up, role: 'operator' });
    const { unmount } = renderPage('overview');
    await screen.findByTestId('cluster-role');
    expect(screen.getByTestId('tab-groups')).toBeTruthy();
    expect(screen.queryByTestId('tab-tokens')).toBeNull();
    expect(screen.queryByTestId('cluster-down')).toBeNull();
    unmount();
    vi.unstubAllGlobals();
    consoleWith({ ...up, role: 'admin' });
    renderPage('overview');
    await screen.findByTestId('cluster-role');
    expect(screen.getByTestId('tab-tokens')).toBeTruthy();
  });
});
