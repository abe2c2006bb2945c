// The routes view: the prefix `e2e-routed:` of the first cluster routed to the other cluster
// (no user), every proxy of the first shown forwarding it to a proxy of the other (as the API
// has it); a key written through the first cluster's proxy read back through the other's;
// the route in the clusters page's Routes column; then removed (confirmed), after which the
// first cluster's proxy no longer sees the key. Returns the audit rows it made.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { resp } from '../support/resp';
import { until } from '../support/wait';

type Routes = {
  routes: { prefix: string; cluster: string; user: string | null }[];
  clusters: string[];
  proxies: { addr: string; routes: { prefix: string; target: string | null }[] }[];
};

export async function routesStep(con: ConsolePage, name: string, proxy: string): Promise<[string, string][]> {
  const { tid, text } = con;
  const prefix = 'e2e-routed:';
  const capi = con.clusterApi(name);
  const clusters = await con.get<{ name: string }[]>('/api/clusters');
  const other = clusters.find((c) => c.name !== name);
  expect(other, 'the routes step needs a second cluster to route to').toBeDefined();
  if (!other) return [];
  const otherProxies = await con.get<{ addr: string }[]>(`${con.clusterApi(other.name)}/proxies`);
  const otherAddrs = otherProxies.map((p) => p.addr);
  const otherProxy = otherAddrs[0];
  expect(otherProxy, `cluster ${other.name} has a proxy: ${JSON.stringify(otherProxies)}`).toBeTruthy();
  if (!otherProxy) return [];
  const want = (await con.get<unknown[]>(`${capi}/proxies`)).length;
  // The key is in neither cluster before (the route does not exist yet: DEL through the first
  // cluster's proxy is served by its own groups).
  const key = `${prefix}k`;
  const value = `routed-${Date.now()}`;
  await resp(proxy, 'DEL', key);
  await resp(otherProxy, 'DEL', key);

  await tid('tab-routes').click();
  await tid('routes-table').waitFor({ timeout: 20_000 });
  const before = await con.get<Routes>(`${capi}/routes`);
  expect(before.clusters, `GET /routes offers cluster ${other.name} to route to`).toContain(other.name);
  await tid('route-prefix').fill(prefix);
  await tid('route-cluster').selectOption(other.name);
  await tid('route-user').fill('');
  await tid('route-password').fill('');
  await tid('route-add').click();
  await tid(`route-row-${prefix}`).waitFor({ timeout: 15_000 });
  const status = tid(`route-status-${prefix}`);
  await until(
    `all ${want} proxies of ${name} to route ${prefix} in the routes view`,
    async () => {
      const routing = Number(await status.getAttribute('data-routing'));
      const total = Number(await status.getAttribute('data-proxies'));
      if (total === want && routing === total) return true;
      // Why not yet, for the timeout's message: the badge and each proxy's line.
      throw new Error(`the view shows "${(await tid(`route-row-${prefix}`).innerText()).replace(/\s+/g, ' ')}"`);
    },
    60_000,
    500,
  );
  // As the API has it: every proxy of this cluster forwards the prefix to a proxy of the other.
  const now = await con.get<Routes>(`${capi}/routes`);
  const route = now.routes.find((r) => r.prefix === prefix);
  expect(route, 'GET /routes has the route').toMatchObject({ cluster: other.name });
  expect(route?.user, 'the route has no user').toBeFalsy();
  for (const p of now.proxies) {
    const r = p.routes.find((x) => x.prefix === prefix);
    expect(otherAddrs, `proxy ${p.addr} routes ${prefix} to ${JSON.stringify(r)}, a proxy of ${other.name}`).toContain(r?.target);
  }
  log(`routes: ${prefix} → ${other.name}: ${now.proxies.map((p) => `${p.addr} → ${p.routes.find((x) => x.prefix === prefix)?.target}`).join(', ')}`);
  await con.shot('12d-routes');

  // A key with the prefix written through this cluster's proxy lives in the other cluster.
  expect(await resp(proxy, 'SET', key, value), `SET ${key} through ${proxy}`).toBe('OK');
  expect(await resp(otherProxy, 'GET', key), `GET ${key} through ${other.name}'s proxy ${otherProxy}`).toBe(value);
  expect(await resp(proxy, 'GET', key), `GET ${key} through ${proxy}`).toBe(value);
  log(`routes: SET ${key} through ${proxy}, read back through ${other.name}'s proxy ${otherProxy}`);

  // The clusters page lists the route in its Routes column.
  await tid('nav-clusters').click();
  await tid('clusters-table').waitFor({ timeout: 20_000 });
  const shown = `${prefix} → ${other.name}`;
  await until(`the Routes column of ${name} to show "${shown}"`, async () => (await text(`cluster-routes-${name}`)).includes(shown), 20_000, 500);
  await con.shot('12e-clusters-routes');

  // Removed again in the view.
  await tid(`cluster-link-${name}`).click();
  await tid('tab-routes').click();
  await tid(`route-remove-${prefix}`).click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await tid(`route-row-${prefix}`).waitFor({ state: 'detached', timeout: 15_000 });
  const after = await con.get<Routes>(`${capi}/routes`);
  expect(after.routes.map((r) => r.prefix), 'GET /routes after the removal').not.toContain(prefix);
  // Every proxy of this cluster serves the prefix from its own groups again, where the key
  // never was.
  await until(`GET ${key} through ${proxy} to miss once the route is removed`, async () => (await resp(proxy, 'GET', key)) === null, 30_000, 500);
  log(`routes: ${prefix} removed; ${key} is no longer seen through ${proxy}`);
  await resp(otherProxy, 'DEL', key);
  return [['PUT', '/api/routes']];
}
