// The console end to end, against the federation of the global setup: one scenario whose
// steps run in order and build on each other (the slot moves, then the audit log that must
// show them). A screenshot of each view goes to e2e/screenshots/. The longer steps are in
// e2e/steps/.

import fs from 'node:fs';
import path from 'node:path';
import { expect, test, type BrowserContext } from '@playwright/test';
import { historyStep, throttleIdleStep, throttleLiveStep } from './steps/migration-jobs';
import { eventsStep, historyChartsStep } from './steps/history';
import { mirrorStep } from './steps/mirror';
import { pluginCanaryStep } from './steps/plugin-canary';
import { pluginChartStep } from './steps/plugin-chart';
import { pluginsStep } from './steps/plugins';
import { routesStep } from './steps/routes';
import { slotKeyboardStep } from './steps/slot-keyboard';
import { slowLogStep } from './steps/slow-log';
import { backupsStep } from './steps/backups';
import { dashboardDownStep } from './steps/dashboard-down';
import { tokensStep } from './steps/tokens';
import { ConsolePage, log } from './support/console-page';
import { FAILED_MARK } from './support/federation';
import { apiDocument, BENCH } from './support/paths';
import { start, stop, type Started } from './support/processes';
import { sleep, until } from './support/wait';

test.describe.configure({ mode: 'serial' });

type Slot = { id: number; group: number | null };
type Group = { servers: { addr: string }[] };

const base = process.env.E2E_CONSOLE_URL ?? '';
const user = process.env.E2E_USER ?? 'admin';
const password = process.env.E2E_PASSWORD ?? '';

let context: BrowserContext;
let con: ConsolePage;
/** Processes the steps start (the benchmarks), stopped after the scenario whatever happens. */
const started: Started[] = [];
/** The clusters listed, the first one's name, relayed API and proxies. */
let clusterNames: string[] = [];
let name = '';
let capi = '';
let proxies: { addr: string }[] = [];
/** The first cluster's slot map before the moves, and the groups the moves go between. */
let slots: Slot[] = [];
let src = 0;
let dst = 0;
let smallTo = 0;
/** Audit rows the changes must leave, as [method, path]. */
const audit: [string, string][] = [];

test.beforeAll(async ({ browser }) => {
  expect(base, 'the global setup names the console (E2E_CONSOLE_URL)').not.toBe('');
  context = await browser.newContext();
  con = new ConsolePage(await context.newPage(), base.replace(/\/$/, ''));
  log(`console ${base}, user ${user}`);
});

test.afterEach(({}, testInfo) => {
  // A failure keeps the federation's data and logs (see the global teardown).
  if (testInfo.status !== testInfo.expectedStatus && process.env.E2E_DATA_DIR) {
    fs.writeFileSync(path.join(process.env.E2E_DATA_DIR, FAILED_MARK), testInfo.title);
  }
});

test.afterAll(async () => {
  const problems: string[] = [];
  for (const p of started) problems.push(...(await stop(p)));
  await context?.close();
  expect(problems, 'processes the steps started and left behind').toEqual([]);
});

test('without a session only the login form shows; a wrong password is refused; then log in', async () => {
  const { tid, text, page } = con;
  const anon = await page.request.get(`${con.base}/api/clusters`);
  expect(anon.status(), 'GET /api/clusters without a session').toBe(401);
  await page.goto(`${con.base}/#/clusters`);
  await tid('login-form').waitFor({ timeout: 30_000 });
  expect(await tid('clusters-table').count(), 'the clusters table without a session').toBe(0);

  // A wrong password is refused with the API's message.
  await tid('login-user').fill(user);
  await tid('login-password').fill('not-the-password');
  await tid('login-submit').click();
  await tid('login-error').waitFor();
  log(`wrong password refused: ${await text('login-error')}`);
  await con.shot('01-login');

  await tid('login-password').fill(password);
  await tid('login-submit').click();
  await tid('clusters-table').waitFor({ timeout: 30_000 });
});

test('both clusters are listed and healthy', async () => {
  const { page, text } = con;
  const minClusters = Number(process.env.E2E_MIN_CLUSTERS ?? 2);
  clusterNames = await until(
    `${minClusters} clusters listed, all reachable`,
    async () => {
      const rows = await page
        .locator('[data-testid^="cluster-row-"]')
        .evaluateAll((els) => els.map((e) => (e.getAttribute('data-testid') ?? '').slice('cluster-row-'.length)));
      if (rows.length < minClusters) return null;
      for (const n of rows) {
        const h = await text(`cluster-health-${n}`);
        if (['no dashboard', 'unreachable', 'unknown'].includes(h)) return null;
      }
      return rows;
    },
    90_000,
    500,
  );
  log(`clusters: ${clusterNames.join(', ')}`);
  await con.shot('02-clusters');
  name = clusterNames[0];
  capi = con.clusterApi(name);
});

test('each dashboard serves the OpenAPI document the console\'s was derived from', async () => {
  // The console's types and answer schemas come from the console's document `npm run gen`
  // read, which relays the dashboard's routes with the schemas of the dashboard's document
  // beside it (both derived from the code by `tessera openapi`); a dashboard serving another
  // one would answer in shapes the console was not built for.
  const dashboardDocument = path.join(path.dirname(apiDocument()), 'openapi.json');
  const document: unknown = JSON.parse(fs.readFileSync(dashboardDocument, 'utf8'));
  const clusters = await con.get<{ name: string; dashboard: { admin_addr: string } | null }[]>('/api/clusters');
  for (const n of clusterNames) {
    const addr = clusters.find((c) => c.name === n)?.dashboard?.admin_addr;
    expect(addr, `cluster ${n}'s dashboard`).toBeTruthy();
    const served = await fetch(`http://${addr}/api/openapi.json`);
    expect(served.status, `GET /api/openapi.json of ${n}'s dashboard`).toBe(200);
    expect(await served.json(), `the document ${n}'s dashboard serves, against ${dashboardDocument}`).toEqual(document);
  }
});

test('under redis-benchmark load through a proxy the QPS chart rises above 0', async () => {
  const { tid, text, page } = con;
  await tid(`cluster-link-${name}`).click();
  await page.locator('[data-testid="qps-chart"] canvas').first().waitFor({ timeout: 20_000 });
  proxies = await con.get<{ addr: string }[]>(`${capi}/proxies`);
  expect(proxies.length, `cluster ${name}'s proxies: ${JSON.stringify(proxies)}`).toBeGreaterThan(0);
  const [host, port] = proxies[0].addr.split(':');
  log(`load: ${BENCH} against proxy ${proxies[0].addr}`);
  const bench = start('redis-benchmark', BENCH, ['-h', host, '-p', port, '-t', 'set,get', '-n', '100000', '-r', '50000', '-c', '10', '-q']);
  started.push(bench);
  let benchOut = '';
  bench.child.stdout?.on('data', (d: Buffer) => (benchOut += d.toString()));
  bench.child.stderr?.on('data', (d: Buffer) => (benchOut += d.toString()));
  const qps = await until(
    'the QPS chart latest value to rise above 0 under load',
    async () => {
      const v = Number((await text('qps-latest')).replace(/[^0-9.]/g, ''));
      return v > 0 ? v : null;
    },
    60_000,
    500,
  );
  log(`QPS now ${qps}`);
  await sleep(3000); // a few more points on the chart, for the screenshot
  await con.shot('03-overview-under-load');
  await historyChartsStep(con);
  const done = await Promise.race([bench.exited, sleep(180_000).then(() => null)]);
  expect(done, `redis-benchmark finished within 180 s: ${benchOut.slice(-500)}`).not.toBeNull();
  expect(done?.code, `redis-benchmark's exit: ${benchOut.slice(-500)}`).toBe(0);
  log(`benchmark: ${benchOut.trim().split(/\r|\n/).filter((l) => /requests per second/.test(l)).join('; ')}`);
});

test('groups: a promote asked for and cancelled changes nothing; the read policy set and back; proxies listed', async () => {
  const { tid, text, page } = con;
  await tid('tab-groups').click();
  await page.locator('[data-testid^="group-"][data-testid$="-state"]').first().waitFor();
  // A destructive action asks first; cancelling changes nothing.
  const promote = page.locator('[data-testid^="promote-"]').first();
  await promote.waitFor();
  const masters = (gs: Group[]) => gs.map((g) => g.servers[0]?.addr).join(',');
  const groupsBefore = await con.get<Group[]>(`${capi}/groups`);
  await promote.click();
  await tid('confirm-dialog').waitFor();
  await con.shot('04-groups-confirm');
  await tid('confirm-cancel').click();
  await tid('confirm-dialog').waitFor({ state: 'detached' });
  expect(masters(await con.get<Group[]>(`${capi}/groups`)), 'the masters after cancelling the promote').toBe(masters(groupsBefore));
  await con.shot('04-groups');

  // The read policy (docs/replica-reads.md), above the groups: set from the console, seen by
  // the API, then back to the default so the rest of the run reads from masters.
  const readPolicy = async () => (await con.get<{ policy?: { mode: string; max_lag_ms: number } }>(`${capi}/read-policy`)).policy;
  const setReadPolicy = async (mode: string, ms: number) => {
    await tid('read-policy-select').selectOption(mode);
    await tid('read-policy-lag').fill(String(ms));
    await tid('read-policy-apply').click();
    await until(
      `the read policy to become ${mode}`,
      async () => {
        const p = await readPolicy();
        return p?.mode === mode && p.max_lag_ms === ms;
      },
      15_000,
    );
    await until(`the panel to show ${mode}`, async () => (await text('read-policy-mode')) === mode, 15_000);
  };
  await until('the read policy panel', async () => (await text('read-policy-mode')) === 'master', 15_000);
  expect(await page.locator('[data-testid^="replica-state-"]').count(), 'the replicas the read policy panel lists').toBeGreaterThan(0);
  await setReadPolicy('prefer-replica', 500);
  await con.shot('04-groups-read-policy');
  await setReadPolicy('master', 1000);

  await tid('tab-proxies').click();
  await tid('proxies-table').waitFor();
  await until('the proxies table to list the proxies', async () => (await page.locator('[data-testid^="proxy-state-"]').count()) >= proxies.length, 15_000);
  await con.shot('05-proxies');

  // A proxy frozen by SIGSTOP shows as lost, here and in the clusters list (not "healthy,
  // 2/2"), and as up again once it wakes. It is always woken, whatever fails.
  const listed = await con.get<{ token: string; pid: number; addr: string; health: string }[]>(`${capi}/proxies`);
  const frozen = listed[listed.length - 1];
  log(`freezing proxy ${frozen.addr} (pid ${frozen.pid})`);
  process.kill(frozen.pid, 'SIGSTOP');
  try {
    await until('the frozen proxy to show as lost', async () => (await text(`proxy-health-${frozen.token}`)) === 'lost', 20_000, 200);
    await con.shot('05c-proxies-frozen');
    await page.goto(`${con.base}/#/clusters`);
    await until(
      'the clusters list to name the lost proxy',
      async () => (await text(`cluster-health-${name}`)).includes('1 proxy(ies) lost'),
      20_000,
      200,
    );
    await con.shot('05d-clusters-proxy-lost');
  } finally {
    process.kill(frozen.pid, 'SIGCONT');
  }
  await page.goto(`${con.base}/#/clusters/${name}/proxies`);
  await until('the woken proxy to be up again', async () => (await text(`proxy-health-${frozen.token}`)) === 'up', 60_000, 500);
  log(`proxy ${frozen.addr} is up again`);
  await eventsStep(con, frozen.addr);
});

test('hot keys: a hammered key is listed first, as GET /api/hotkeys has it, with the proxy that saw it', async () => {
  const { tid, page } = con;
  // A benchmark without -r hammers the one key `key:__rand_int__`.
  const [host, port] = proxies[0].addr.split(':');
  const hammer = start('redis-benchmark (one key)', BENCH, ['-h', host, '-p', port, '-t', 'get', '-n', '200000', '-c', '4', '-q']);
  started.push(hammer);
  await tid('tab-hotkeys').click();
  await tid('hotkeys-ops').waitFor();
  type HotKeys = { by_ops?: { key: string; ops: number; seen_by: { addr: string }[] }[] };
  const hotKey = await until(
    'the Hot keys tab to list the hammered key first, as the API does',
    async () => {
      const first = page.locator('[data-testid="hotkeys-ops-row"]').first();
      if (!(await first.count())) return null;
      const shown = (await first.locator('td').first().innerText()).trim();
      const top = (await con.get<HotKeys>(`${capi}/hotkeys`)).by_ops?.[0];
      if (shown !== 'key:__rand_int__' || top?.key !== shown) return null;
      if (!top.seen_by.some((p) => p.addr === proxies[0].addr)) throw new Error(`GET /api/hotkeys: ${JSON.stringify(top)} not seen by ${proxies[0].addr}`);
      return { shown, ops: top.ops };
    },
    30_000,
    500,
  );
  log(`hot keys: ${hotKey.shown} first, ${hotKey.ops} ops in the window`);
  await con.shot('05b-hotkeys');
  expect(await stop(hammer), 'stopping the one-key benchmark').toEqual([]);
});

test('slot map: the heatmap shows the load and memory per slot; drag and shift-click select; 20 slots move to 100%', async () => {
  const { tid, text, page } = con;
  await tid('tab-slots').click();
  await tid('slot-0').waitFor();
  // The heatmap below the map shows the benchmark's load: ops/s on most slots (its 50000
  // random keys spread over every slot), the same numbers as GET /api/slots/stats; memory on
  // toggle.
  type SlotStats = { window_secs: number; slots: { ops_per_sec: number[] }; groups: { keys_exact: boolean | null }[] };
  await tid('slot-heatmap').waitFor();
  const heatValues = () =>
    page.locator('[data-testid="heat-grid"] [data-value]').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-value'))));
  const heat = await until(
    'the heatmap to show ops/s on most slots after the benchmark',
    async () => {
      const values = await heatValues();
      const busy = values.filter((v) => v > 0).length;
      return values.length === 1024 && busy > 900 ? { busy, max: Math.max(...values) } : null;
    },
    30_000,
    500,
  );
  const stats = await con.get<SlotStats>(`${capi}/slots/stats`);
  const apiBusy = stats.slots.ops_per_sec.filter((v) => v > 0).length;
  expect(apiBusy, 'slots with ops/s in GET /api/slots/stats').toBeGreaterThanOrEqual(900);
  log(`heatmap: ops/s on ${heat.busy} slots, busiest ${heat.max.toFixed(1)} ops/s; the API: ${apiBusy} slots over ${stats.window_secs.toFixed(0)} s`);
  await con.shot('06-heatmap-ops');
  // An absolute, labelled scale; every group listed with its master's memory as the Groups
  // view has it.
  expect(await text('heat-legend'), 'the heatmap legend').toContain('≥ 100 ops/s');
  for (const g of await con.get<{ id: number; servers: { memory_bytes: number | null }[] }[]>(`${capi}/groups`)) {
    await tid(`heat-used-${g.id}`).waitFor();
  }
  await tid('heat-memory').check();
  await until(
    'the heatmap to show memory per slot',
    async () => {
      const s = await con.get<SlotStats>(`${capi}/slots/stats`);
      if (!s.groups.every((g) => g.keys_exact !== null)) return null; // no key scan yet
      return (await heatValues()).filter((v) => v > 0).length > 900 ? true : null;
    },
    60_000,
    1000,
  );
  await tid('heat-ops').check();
  // The heatmap sits below the slot map: back to the map before dragging over it by mouse.
  await tid('slot-grid').scrollIntoViewIfNeeded();
  await page.evaluate(() => window.scrollTo(0, 0));
  slots = await until(
    'the slot map to load',
    async () => {
      const s = await con.get<Slot[]>(`${capi}/slots`);
      return s.length === 1024 && s.every((x) => x.group != null) ? s : null;
    },
    30_000,
  );
  const groups = [...new Set(slots.map((s) => s.group))];
  expect(groups.length, `groups with slots in cluster ${name} (the test needs 2)`).toBeGreaterThanOrEqual(2);
  src = slots[0].group ?? 0;
  dst = groups.find((g) => g !== src) ?? 0;
  const first = slots.findIndex((s) => s.group === src);
  const small = { from: first, to: first + 19 };
  smallTo = small.to;
  await until('slot cells coloured by group', async () => (await tid(`slot-${small.from}`).getAttribute('data-group')) === String(src), 15_000);
  // Drag selects a range …
  const centre = async (id: number) => {
    const b = await tid(`slot-${id}`).boundingBox();
    expect(b, `slot ${id} is on screen`).not.toBeNull();
    return { x: (b?.x ?? 0) + (b?.width ?? 0) / 2, y: (b?.y ?? 0) + (b?.height ?? 0) / 2 };
  };
  const a = await centre(first + 40);
  const b = await centre(first + 49);
  await page.mouse.move(a.x, a.y);
  await page.mouse.down();
  await page.mouse.move(b.x, b.y, { steps: 10 });
  await page.mouse.up();
  expect(await text('selection-size'), 'dragging over 10 slots selects').toBe('10 slot(s)');
  // … and so do click + shift-click.
  await tid(`slot-${small.from}`).click();
  await tid(`slot-${small.to}`).click({ modifiers: ['Shift'] });
  expect(await text('selection-size'), 'click + shift-click selects').toMatch(/^20 /);
  expect(await text('slot-detail-group'), 'the slot detail shows the owner').toContain(`group ${src}`);
  await tid('target-group').selectOption(String(dst));
  log(`migrating slots ${small.from}-${small.to}: group ${src} → ${dst}`);
  await tid('migrate-selection').click();
  await tid('notice-ok').filter({ hasText: '20 slot(s) queued' }).first().waitFor({ timeout: 60_000 });
  await page
    .locator('.slot-cell.migrating')
    .first()
    .waitFor({ timeout: 10_000 })
    .then(
      () => con.shot('06-slotmap-migrating'),
      () => log('the move was too quick to see a migrating cell'),
    );
  await until(
    'the 20-slot migration to reach 100%',
    async () => (await tid('migration-progress').getAttribute('data-state')) === 'complete' && (await text('migration-percent')) === '100%',
    180_000,
    500,
  );
  await until(
    `slots ${small.from}-${small.to} to show group ${dst} in the map`,
    async () =>
      (await tid(`slot-${small.from}`).getAttribute('data-group')) === String(dst) &&
      (await tid(`slot-${small.to}`).getAttribute('data-group')) === String(dst),
    15_000,
  );
  log('20-slot migration complete');
  // The panel says what the finished migration copied, with no rate left behind.
  const last = await text('migration-last');
  expect(last, 'the last migration is summarised').toMatch(/^Last migration: 20 slot\(s\) moved, [\d,]+ keys/);
  expect(await text('migration-rate'), 'no keys/s once nothing moves').toBe('—');
  await con.shot('07-slotmap-done');
  await slotKeyboardStep(con);

  audit.push(['POST', '/api/migrations']);
});

test('migrations: a larger move is started and aborted; a rebalance is previewed, executed and evens the groups', async () => {
  const { tid, text } = con;
  await tid('tab-migrations').click();
  // Moving the slots just moved to the group that holds them moves nothing: refused, with the
  // reason, not a green success.
  await tid('migrate-range').fill(`${smallTo - 19}-${smallTo}`);
  await tid('migrate-target').selectOption(String(dst));
  await tid('migrate-start').click();
  const refused = tid('notice-error').filter({ hasText: 'nothing to move' }).first();
  await refused.waitFor({ timeout: 30_000 });
  log('a migration that moves nothing is refused with its reason');
  // An error stays until dismissed; it would cover the tabs the next steps click.
  await refused.getByRole('button', { name: 'dismiss' }).click();
  await refused.waitFor({ state: 'detached' });
  const big = slots.filter((s, i) => s.group === src && i > smallTo).map((s) => s.id);
  const bigFrom = big[0];
  let bigTo = bigFrom;
  while (big.includes(bigTo + 1)) bigTo++;
  await tid('migrate-range').fill(`${bigFrom}-${bigTo}`);
  await tid('migrate-target').selectOption(String(dst));
  // Under a speed cap, so that it is still moving when the abort comes (a few thousand keys
  // move in well under a second uncapped).
  await tid('migrate-cap').fill('200');
  log(`migrating slots ${bigFrom}-${bigTo}: group ${src} → ${dst} at 200 keys/s, to abort`);
  await tid('migrate-start').click();
  await tid('notice-ok').filter({ hasText: `${bigTo - bigFrom + 1} slot(s) queued` }).first().waitFor({ timeout: 60_000 });
  await until('the large migration to show as running', async () => (await tid('migration-progress').getAttribute('data-state')) === 'running', 20_000, 200);
  await con.shot('08-migrations-running');
  await throttleLiveStep(con, 200, 300);
  await tid('abort-all').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await until(
    'the abort button to show the call in progress or done',
    async () => (await text('abort-all')) !== 'Abort' || (await tid('notice-ok').filter({ hasText: 'aborted' }).count()) > 0,
    10_000,
    100,
  );
  const aborted = await tid('notice-ok').filter({ hasText: 'aborted' }).first().locator('span').textContent({ timeout: 90_000 });
  log(`abort: ${aborted}`);
  const n = Number(/(\d+) slot migration/.exec(aborted ?? '')?.[1] ?? 0);
  expect(n, `slots the abort aborted ("${aborted}"): the move must not have finished before it`).toBeGreaterThan(0);
  await until(
    'the aborted migration to settle (every slot moved back or finished)',
    async () => (await tid('migration-progress').getAttribute('data-state')) === 'aborted',
    240_000,
    500,
  );
  const after = await con.get<Slot[]>(`${capi}/slots`);
  const backHome = after.filter((s) => s.id >= bigFrom && s.id <= bigTo && s.group === src).length;
  log(`after the abort ${backHome} of ${bigTo - bigFrom + 1} slots are (back) in group ${src}`);
  expect(backHome, 'slots of the large range in their source group after the abort').toBeGreaterThan(0);
  audit.push(['POST', '/api/migrations/abort']);
  audit.push(['PUT', '/api/migrations/throttle']);
  // The jobs so far, newest first: the aborted move, the 20 slots moved from the slot map.
  await historyStep(con, `console:${user}`, ['aborted', 'finished']);

  // Rebalance preview (dry run) shows a plan.
  await tid('rebalance-preview').click();
  await tid('rebalance-plan').waitFor();
  const planText = (await tid('rebalance-plan').textContent()) ?? '';
  const planned = Number(/(\d+) slot\(s\) would move/.exec(planText)?.[1] ?? NaN);
  log(`rebalance preview: ${planned} slot(s) would move`);
  await con.shot('09-migrations-rebalance-preview');
  expect(planned, `the rebalance preview after the 20-slot migration: "${planText.slice(0, 200)}"`).toBeGreaterThan(0);
  // Execute the plan (confirmed) and watch it to the end: the groups are even again.
  await tid('rebalance-execute').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await tid('notice-ok').filter({ hasText: `${planned} slot(s) queued by the rebalance` }).first().waitFor({ timeout: 60_000 });
  await until(
    'the rebalance to complete',
    async () => (await tid('migration-progress').getAttribute('data-state')) === 'complete' && (await text('migration-percent')) === '100%',
    180_000,
    500,
  );
  // The handoffs' write pause is shown beside the progress, in milliseconds.
  const pause = await until(
    'the write pause to be shown',
    async () => {
      const t = await text('migration-pause');
      return /^\d+ ms$/.test(t) ? t : null;
    },
    15_000,
  );
  log(`write pause p99 shown: ${pause}`);
  const even = await until(
    'the slots to be split evenly again',
    async () => {
      const per: Record<string, number> = {};
      for (const x of await con.get<Slot[]>(`${capi}/slots`)) per[String(x.group)] = (per[String(x.group)] ?? 0) + 1;
      return Object.values(per).every((k) => k === 1024 / Object.keys(per).length) ? per : null;
    },
    15_000,
  );
  log(`rebalanced: ${JSON.stringify(even)}`);
  audit.push(['POST', '/api/rebalance']);
  await historyStep(con, `console:${user}`, ['finished', 'aborted', 'finished']);
  await throttleIdleStep(con);
});

test('plugins: the filter through the view, checked through a proxy', async () => {
  audit.push(...(await pluginsStep(con, capi, proxies[0].addr)));
});

test('plugin canary: a candidate config on one proxy, side by side with the stable one, promoted', async () => {
  audit.push(...(await pluginCanaryStep(con, capi, proxies)));
});

test("plugin chart: the metrics plugin's series, as the API reports them", async () => {
  await pluginChartStep(con, capi);
});

test('slow log: a slow script and a large reply through a proxy, as the API has them', async () => {
  await slowLogStep(con, capi, proxies[0].addr);
});

test('tokens: a viewer token reads on the dashboard, is refused a migration, and gets 401 once revoked', async () => {
  audit.push(...(await tokensStep(con, name)));
});

test("mirror: everything mirrored to the other cluster's proxy, a planted divergence counted with its sample", async () => {
  audit.push(...(await mirrorStep(con, name, proxies[0].addr)));
});

test('routes: a prefix routed to the other cluster, a key written here read there, the route removed', async () => {
  audit.push(...(await routesStep(con, name, proxies[0].addr)));
});

test('backups: one started in the console is followed to its end, and is an event', async () => {
  audit.push(...(await backupsStep(con, name)));
});

test('the other cluster through the cluster switcher: its overview', async () => {
  const { tid, text, page } = con;
  const other = clusterNames.find((n) => n !== name) ?? '';
  await tid('cluster-switch').selectOption(other);
  await until(`the page to show cluster ${other}`, async () => (await text('cluster-name')) === other, 10_000);
  await tid('tab-overview').click();
  await page.locator('[data-testid="qps-chart"] canvas').first().waitFor({ timeout: 20_000 });
  await until(`${other}'s overview to load`, async () => /\d/.test(await text('keys-total')), 20_000);
  await con.shot('14-other-cluster');
});

test('audit log: every change by the console user on the cluster; the logins in a log of their own', async () => {
  const { tid, page } = con;
  await tid('nav-audit').click();
  await tid('audit-table').waitFor();
  const actor = `console:${user}`;
  const rowsOf = (testid: string) =>
    page.locator(`[data-testid="${testid}"]`).evaluateAll((els) => els.map((e) => [...e.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')));
  await until(
    `audit rows for ${audit.map((w) => w.join(' ')).join(' and ')} by ${actor} on ${name}`,
    async () => {
      const rows = await rowsOf('audit-row');
      return audit.every(([m, p]) => rows.some((r) => r[1] === name && r[2] === actor && r[3].endsWith(`${m} ${p}`)));
    },
    30_000,
    1000,
  );
  // Each reads as a sentence naming who did it; a refusal with its reason.
  const sentences = await page.getByTestId('audit-summary').allTextContents();
  expect(sentences.some((t) => new RegExp(`^${actor} moved slots \\d+-\\d+ to group \\d+`).test(t)), 'a migration as a sentence').toBe(true);
  expect(
    sentences.some((t) => t.startsWith(`${actor} tried to move`) && t.includes('refused (409), nothing to move')),
    'the refused migration with its reason',
  ).toBe(true);
  expect(sentences.some((t) => t.startsWith(`${actor} set the migration's speed cap to 300 keys/s`)), 'the live cap change').toBe(true);
  // Logins are a log of their own, under the changes: this run's wrong password and login.
  await tid('logins-table').waitFor();
  await until(
    `a failed login and a login of ${user} in the login log`,
    async () => {
      const rows = await rowsOf('login-row');
      return rows.some((r) => r[1] === user && r[3] === 'logged in') && rows.some((r) => r[1] === user && r[3].startsWith('failed'));
    },
    10_000,
  );
  expect(await page.locator('[data-testid="audit-row"]', { hasText: '/auth/login' }).count(), 'logins in the audit log of changes').toBe(0);
  await con.shot('15-audit');
});

test('a frozen dashboard: its page says once that it does not answer; the Tokens tab stays', async () => {
  // The other cluster: its dashboard may exit once woken, and nothing after this uses it.
  await dashboardDownStep(con, clusterNames.find((n) => n !== name) ?? '');
});

test('log out: back to the login form, the data routes answer 401 again, and the page threw nothing', async () => {
  const { tid, page } = con;
  await tid('logout').click();
  await tid('login-form').waitFor();
  const gone = await page.request.get(`${con.base}/api/clusters`);
  expect(gone.status(), 'GET /api/clusters after logout').toBe(401);
  expect(con.errors, 'uncaught errors in the page').toEqual([]);
});
