// Components on their own: the clusters table and health, the confirm dialog, the audit and
// login rows.

import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfirmProvider, NoticesProvider, useConfirm } from '../src/components/ui';
import { auditWhat, auditWho, loginWhat } from '../src/views/Audit';
import { clusterHealth, ClustersTable } from '../src/views/Clusters';
import type { ClusterSummary } from '../src/api/shapes';

afterEach(cleanup);

const overview = {
  cluster: 'alpha',
  epoch: 7,
  dashboard: { admin_addr: '127.0.0.1:18080', pid: 1, host: 'h', version: '0.1.0', start_unix: 0 },
  groups: 2,
  groups_down: 0,
  failover: { enabled: false, max_lag_bytes: 0, not_failing_over: [], last: null },
  servers: 4,
  servers_down: 0,
  proxies: 2,
  proxies_online: 2,
  proxies_lost: 0,
  proxies_fenced: 0,
  proxies_draining: 0,
  slots_assigned: 1024,
  slots_unassigned: 0,
  ops_per_sec: 12345,
  memory_bytes: 2 * 1024 * 1024,
  keys: 1000,
  routes: [],
};

/** What the console says this user may do on a cluster, and no last lock holder (a dashboard
 * holds the lock): not what these tests look at. */
const grants = { has_token: true, token_role: 'admin', role: 'admin', last_dashboard: null } as const;

describe('ClustersTable', () => {
  it('renders every cluster with health, proxies, groups, QPS, memory and keys', () => {
    const clusters: ClusterSummary[] = [
      { name: 'alpha', store: 'fs:///a', dashboard: overview.dashboard, reachable: true, overview, error: null, ...grants },
      { name: 'beta', store: 'fs:///b', dashboard: null, reachable: false, overview: null, error: 'no dashboard holds the lock', ...grants },
    ];
    render(<ClustersTable clusters={clusters} />);
    expect(screen.getByTestId('cluster-link-alpha').getAttribute('href')).toBe('#/clusters/alpha/overview');
    expect(screen.getByTestId('cluster-health-alpha').textContent).toBe('healthy');
    expect(screen.getByTestId('cluster-qps-alpha').textContent).toBe('12,345');
    expect(screen.getByTestId('cluster-row-alpha').textContent).toContain('2.0 MiB');
    expect(screen.getByTestId('cluster-row-alpha').textContent).toContain('2/2 up');
    expect(screen.getByTestId('cluster-health-beta').textContent).toBe('no dashboard');
    expect(screen.getByTestId('cluster-row-beta').textContent).toContain('no dashboard holds the lock');
  });
  it('lists each cluster\'s prefix routes, or a dash (none, or no overview)', () => {
    const clusters: ClusterSummary[] = [
      {
        name: 'alpha',
        store: 'fs:///a',
        dashboard: overview.dashboard,
        reachable: true,
        overview: { ...overview, routes: [{ prefix: 'user:', cluster: 'beta' }, { prefix: 'sess:', cluster: 'gamma' }] },
        error: null,
        ...grants,
      },
      { name: 'beta', store: 'fs:///a', dashboard: overview.dashboard, reachable: true, overview: { ...overview, cluster: 'beta', routes: [] }, error: null, ...grants },
      { name: 'gamma', store: 'fs:///a', dashboard: overview.dashboard, reachable: true, overview: { ...overview, cluster: 'gamma', routes: [] }, error: null, ...grants },
      { name: 'delta', store: 'fs:///a', dashboard: null, reachable: false, overview: null, error: 'no dashboard holds the lock', ...grants },
    ];
    render(<ClustersTable clusters={clusters} />);
    const alpha = screen.getByTestId('cluster-routes-alpha');
    expect([...alpha.querySelectorAll('div')].map((d) => d.textContent)).toEqual(['user: → beta', 'sess: → gamma']);
    for (const n of ['beta', 'gamma', 'delta']) expect(screen.getByTestId(`cluster-routes-${n}`).textContent).toBe('—');
  });
  it('health names the problems', () => {
    const c: ClusterSummary = {
      name: 'x',
      store: '',
      dashboard: overview.dashboard,
      reachable: true,
      overview: { ...overview, servers_down: 1, proxies_online: 1 },
      error: null,
      ...grants,
    };
    expect(clusterHealth(c)).toEqual({ ok: false, text: '1 server(s) down, 1 proxy(ies) offline' });
  });
  it('a frozen proxy is not healthy: lost, fenced and draining proxies are named', () => {
    const c = (over: Partial<typeof overview>): ClusterSummary => ({
      name: 'x',
      store: '',
      dashboard: overview.dashboard,
      reachable: true,
      overview: { ...overview, ...over },
      error: null,
      ...grants,
    });
    expect(clusterHealth(c({ proxies: 1, proxies_online: 0, proxies_lost: 1 }))).toEqual({ ok: false, text: '1 proxy(ies) lost' });
    expect(clusterHealth(c({ proxies_online: 0, proxies_fenced: 1, proxies_draining: 1 }))).toEqual({
      ok: false,
      text: '1 proxy(ies) fenced, 1 proxy(ies) draining',
    });
    expect(clusterHealth(c({ proxies: 0, proxies_online: 0 }))).toEqual({ ok: false, text: 'no proxy' });
  });
});

function Destroyer({ onResult }: { onResult: (ok: boolean) => void }) {
  const confirm = useConfirm();
  return <button onClick={async () => onResult(await confirm('Remove server?', 'sure?', 'Remove'))}>go</button>;
}

describe('ConfirmDialog', () => {
  it('resolves true on confirm and false on cancel', async () => {
    const results: boolean[] = [];
    render(
      <NoticesProvider>
        <ConfirmProvider>
          <Destroyer onResult={(r) => results.push(r)} />
        </ConfirmProvider>
      </NoticesProvider>,
    );
    fireEvent.click(screen.getByText('go'));
    expect(screen.getByTestId('confirm-dialog').textContent).toContain('Remove server?');
    await act(async () => fireEvent.click(screen.getByTestId('confirm-ok')));
    fireEvent.click(screen.getByText('go'));
    await act(async () => fireEvent.click(screen.getByTestId('confirm-cancel')));
    expect(results).toEqual([true, false]);
    expect(screen.queryByTestId('confirm-dialog')).toBeNull();
  });
  it('puts the focus on Cancel, not on the destructive button', () => {
    render(
      <NoticesProvider>
        <ConfirmProvider>
          <Destroyer onResult={() => undefined} />
        </ConfirmProvider>
      </NoticesProvider>,
    );
    fireEvent.click(screen.getByText('go'));
    expect(document.activeElement).toBe(screen.getByTestId('confirm-cancel'));
  });
});

describe('audit rows', () => {
  it('who and what for dashboard entries and console events', () => {
    expect(auditWho({ time_ms: 0, actor: 'console:admin', method: 'POST', path: '/api/migrations' })).toBe('console:admin');
    expect(auditWhat({ time_ms: 0, actor: 'console:admin', method: 'POST', path: '/api/migrations' })).toBe('POST /api/migrations');
    expect(auditWho({ time_ms: 0, user: 'admin', event: 'login' })).toBe('admin');
    expect(auditWhat({ time_ms: 0, user: 'admin', event: 'login' })).toBe('login');
  });
  it('login events in words, a run with its count', () => {
    const e = { time_ms: 0, user: 'admin', addr: '127.0.0.1', status: 200, detail: '', count: 1 };
    expect(loginWhat({ ...e, outcome: 'login' })).toBe('logged in');
    expect(loginWhat({ ...e, outcome: 'locked_out', status: 429, count: 7 })).toBe('locked out ×7');
  });
});
