// The plugins view on the first cluster: the filter `tessera up` loaded refuses FLUSHALL
// through a proxy and is deleted (confirmed); the module is uploaded again (its name from the
// file), an invalid config is caught in the page (Save disabled), a config the plugin refuses
// shows the server's message, a valid one is saved and enabled (KEYS refused by it through a
// proxy, SET and GET still served, the metrics panel names the proxies running it), then it
// is disabled. Returns the audit rows the changes must leave, as [method, path].

import fs from 'node:fs';
import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { FILTER_WASM } from '../support/paths';
import { isError, resp, type Reply } from '../support/resp';
import { until } from '../support/wait';

type Plugin = { name: string; enabled: boolean; config: unknown };

export async function pluginsStep(con: ConsolePage, capi: string, proxy: string): Promise<[string, string][]> {
  const { tid, text } = con;
  expect(
    fs.existsSync(FILTER_WASM),
    `${FILTER_WASM} is missing: cargo build --release --target wasm32-unknown-unknown -p tessera-plugin-filter (or set TESSERA_PLUGIN_DIR)`,
  ).toBe(true);
  const audit: [string, string][] = [];
  // The filter's refusal says "is not allowed". `tessera up`'s proxies allow the cluster-wide
  // admin commands, so its example filter (FLUSHALL, FLUSHDB) is what refuses FLUSHALL; the
  // filter configured below refuses KEYS, which the proxies otherwise answer.
  const byFilter = (r: Reply) => isError(r) && /is not allowed/.test(r.error);
  const flushall = () => resp(proxy, 'FLUSHALL');
  const keys = () => resp(proxy, 'KEYS', 'e2e:nothing:*');
  // Without a filter KEYS is answered only by the federation started here (admin commands on);
  // a console given by E2E_CONSOLE_URL might run with them off.
  const own = !!process.env.E2E_OWN_FEDERATION;
  await tid('tab-plugins').click();
  await tid('plugins-table').waitFor({ timeout: 20_000 });
  const catalog = await con.get<Plugin[]>(`${capi}/plugins`);
  log(`plugin catalog at start: ${catalog.map((p) => `${p.name} (${p.enabled ? 'enabled' : 'disabled'})`).join(', ') || 'empty'}`);
  if (catalog.some((p) => p.name === 'filter')) {
    // `tessera up` loaded the example filter (FLUSHALL, FLUSHDB): it is listed, it works, and
    // the view deletes it, so that what follows starts from no filter.
    await tid('plugin-filter').waitFor();
    const r = await flushall();
    expect(byFilter(r), `with up's filter FLUSHALL answered ${JSON.stringify(r)}`).toBe(true);
    await tid('plugin-delete-filter').click();
    await tid('confirm-dialog').waitFor();
    await tid('confirm-ok').click();
    await tid('plugin-filter').waitFor({ state: 'detached', timeout: 60_000 });
    audit.push(['DELETE', '/api/plugins/filter']);
    log("deleted up's example filter through the view");
  }
  if (own) {
    const before = await keys();
    expect(Array.isArray(before), `without the filter KEYS answered ${JSON.stringify(before)}, not a list of keys`).toBe(true);
    log(`without the filter: KEYS → ${JSON.stringify(before)}`);
  }

  // Upload: the name comes from the file name.
  await tid('plugin-file').setInputFiles(FILTER_WASM);
  expect(await tid('plugin-name').inputValue(), 'the name taken from the file').toBe('filter');
  await tid('plugin-upload').click();
  await tid('plugin-filter').waitFor({ timeout: 60_000 });
  await until('the uploaded filter to show as disabled', async () => (await tid('plugin-filter').textContent())?.includes('disabled'), 15_000);
  audit.push(['PUT', '/api/plugins/filter/module']);
  log('filter uploaded');

  // Config: invalid JSON is caught in the page, a config the plugin refuses gets the server's message.
  await tid('plugin-open-filter').click();
  const editor = tid('plugin-config-text');
  await editor.fill('{"deny_commands": ["FLUSHALL",]}');
  const parseError = await text('plugin-config-parse-error');
  expect(parseError, 'the inline JSON error').toMatch(/line 1, column \d+/);
  expect(await tid('plugin-config-save').isDisabled(), 'Save is enabled with invalid JSON').toBe(true);
  log(`invalid JSON: ${parseError}`);
  await con.shot('10-plugins-invalid-json');
  await editor.fill('{"deny_classes": ["admn"]}');
  await tid('plugin-config-parse-error').waitFor({ state: 'detached' });
  await tid('plugin-config-save').click();
  await tid('plugin-config-server-error').waitFor({ timeout: 60_000 });
  const refused = await text('plugin-config-server-error');
  expect(refused, 'the refused config').toMatch(/unknown class "admn"/);
  log(`refused config: ${refused}`);
  await con.shot('11-plugins-refused-config');
  await editor.fill('{"deny_commands": ["KEYS"]}');
  await tid('plugin-config-save').click();
  await tid('notice-ok').filter({ hasText: 'filter: config saved' }).first().waitFor({ timeout: 60_000 });
  const saved = (await con.get<Plugin[]>(`${capi}/plugins`)).find((p) => p.name === 'filter');
  expect(saved?.config, 'the catalog has the config saved').toEqual({ deny_commands: ['KEYS'] });
  audit.push(['PUT', '/api/plugins/filter/config']);

  // Enable: KEYS is refused by the filter through the proxy, GET is still served.
  await con.clickForNotice('plugin-toggle-filter', 'filter enabled');
  await until('the filter to show as enabled', async () => (await tid('plugin-filter').textContent())?.includes('enabled'), 15_000);
  audit.push(['POST', '/api/plugins/filter/enable']);
  const denied = await keys();
  expect(byFilter(denied), `with the filter enabled KEYS answered ${JSON.stringify(denied)}`).toBe(true);
  log(`filter enabled: KEYS → ${JSON.stringify(denied)}`);
  const set = await resp(proxy, 'SET', 'e2e:plugin', 'still-served');
  const got = await resp(proxy, 'GET', 'e2e:plugin');
  expect([set, got], 'SET and GET with the filter').toEqual(['OK', 'still-served']);
  // Its metrics panel: the proxies running it.
  if (!(await tid('plugin-metrics').count())) await tid('plugin-open-filter').click();
  await until('the metrics panel to show the proxies running the filter', async () => /Summed over [1-9]\d* prox/.test(await text('plugin-metrics-proxies')), 20_000, 500);
  log(`metrics panel: ${await text('plugin-metrics-proxies')}`);
  await con.shot('12-plugins-enabled');

  // Disable: the proxy answers KEYS again.
  await con.clickForNotice('plugin-toggle-filter', 'filter disabled');
  audit.push(['POST', '/api/plugins/filter/disable']);
  if (own) {
    const after = await keys();
    expect(Array.isArray(after), `with the filter disabled KEYS answered ${JSON.stringify(after)}`).toBe(true);
  }
  await until('the filter to show as disabled', async () => (await tid('plugin-filter').textContent())?.includes('disabled'), 15_000);
  log('filter disabled');
  return audit;
}
