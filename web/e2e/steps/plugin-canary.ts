// A canary of the filter on the plugins view: the filter (its config from the plugins step,
// KEYS refused) is enabled, a candidate config that also refuses INCR is started on the first
// proxy alone, INCR is refused through that proxy and served through the other, the side by
// side table shows one proxy on each track and the canary's denies, then the canary is
// promoted (confirmed) and both proxies refuse INCR; the filter is disabled again for the
// steps after. Returns the audit rows the changes must leave, as [method, path].

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { isError, resp } from '../support/resp';
import { until } from '../support/wait';

type Plugin = { name: string; enabled: boolean; config: unknown; canary?: { proxies: string[] } | null };

export async function pluginCanaryStep(con: ConsolePage, capi: string, proxies: { addr: string }[]): Promise<[string, string][]> {
  const { tid, text } = con;
  expect(proxies.length, 'a canary on one proxy of two needs two proxies').toBeGreaterThanOrEqual(2);
  const [canaryProxy, stableProxy] = [proxies[0].addr, proxies[1].addr];
  const audit: [string, string][] = [];
  const incrRefused = async (addr: string) => {
    const r = await resp(addr, 'INCR', 'e2e:canary');
    if (isError(r)) {
      expect(r.error, `INCR through ${addr}`).toMatch(/is not allowed/);
      return true;
    }
    expect(r, `INCR through ${addr}`).toMatch(/^\d+$/);
    return false;
  };
  await tid('tab-plugins').click();
  await tid('plugin-filter').waitFor({ timeout: 20_000 });
  if (!(await tid('plugin-filter').textContent())?.includes('enabled')) {
    await con.clickForNotice('plugin-toggle-filter', 'filter enabled');
    audit.push(['POST', '/api/plugins/filter/enable']);
  }
  await tid('plugin-open-filter').click();
  await tid('plugin-canary').waitFor();
  expect(await text('plugin-canary-state'), 'before any canary').toMatch(/No canary/);
  expect(await incrRefused(canaryProxy), 'INCR refused before the canary').toBe(false);

  // Start: the candidate config on the first proxy alone.
  await tid('canary-config').fill('{"deny_commands": ["KEYS", "INCR"]}');
  await tid('canary-percent').fill('101');
  await tid('canary-share-error').waitFor();
  expect(await tid('canary-start').isDisabled(), 'Start with a share out of bounds').toBe(true);
  await tid('canary-percent').fill('0');
  await tid('canary-proxies').fill(canaryProxy);
  await tid('canary-share-error').waitFor({ state: 'detached' });
  await tid('canary-start').click();
  await tid('notice-ok').filter({ hasText: 'filter: canary on 0 % of proxies and 1 named' }).first().waitFor({ timeout: 60_000 });
  audit.push(['POST', '/api/plugins/filter/canary']);
  const started = (await con.get<Plugin[]>(`${capi}/plugins`)).find((p) => p.name === 'filter');
  expect(started?.canary?.proxies, 'the canary in the catalog').toEqual([canaryProxy]);
  expect(await incrRefused(canaryProxy), 'INCR through the canary proxy').toBe(true);
  expect(await incrRefused(stableProxy), 'INCR through the stable proxy').toBe(false);
  await until('the canary state to name the proxy', async () => (await text('plugin-canary-state')).includes(canaryProxy), 15_000);

  // Side by side: one proxy on each track, the canary's denies counted.
  const cells = async (row: string) =>
    (await tid(`canary-row-${row}`).locator('td').allTextContents()).map((s) => s.trim());
  await until(
    'the side by side table to show one proxy per track and the canary denying',
    async () => {
      if (!(await tid('canary-side-by-side').count())) return null;
      const p = await cells('proxies');
      const d = await cells('denies');
      return p[1] === '1' && p[2] === '1' && Number(d[2].replace(/\D/g, '')) >= 1 ? [p, d] : null;
    },
    30_000,
    500,
  );
  log(`side by side: proxies ${JSON.stringify(await cells('proxies'))}, denies ${JSON.stringify(await cells('denies'))}`);
  await con.shot('13-plugin-canary');

  // Promote (confirmed): every proxy runs the candidate.
  await tid('canary-promote').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await tid('notice-ok').filter({ hasText: 'filter: canary promoted' }).first().waitFor({ timeout: 60_000 });
  audit.push(['POST', '/api/plugins/filter/canary/promote']);
  const promoted = (await con.get<Plugin[]>(`${capi}/plugins`)).find((p) => p.name === 'filter');
  expect(promoted?.config, 'the promoted config').toEqual({ deny_commands: ['KEYS', 'INCR'] });
  expect(promoted?.canary ?? null, 'no canary after the promotion').toBeNull();
  expect(await incrRefused(canaryProxy)).toBe(true);
  expect(await incrRefused(stableProxy), 'INCR through the other proxy after the promotion').toBe(true);
  await until('the view to show no canary', async () => /No canary/.test(await text('plugin-canary-state')), 15_000);
  log('canary promoted: both proxies refuse INCR');

  await con.clickForNotice('plugin-toggle-filter', 'filter disabled');
  audit.push(['POST', '/api/plugins/filter/disable']);
  expect(await incrRefused(stableProxy), 'INCR with the filter disabled').toBe(false);
  return audit;
}
