// The overview's charts drawn from the dashboard's metrics history (a unit on each chart, a
// value with its unit in the legend under the cursor, the range picker asking for the range
// picked), and the Events view listing what the scenario did to the cluster (the proxy it froze).

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { until } from '../support/wait';

/** On the overview, after load went through a proxy. */
export async function historyChartsStep(con: ConsolePage): Promise<void> {
  const { tid, page } = con;
  const chart = tid('qps-chart');
  await until('the throughput chart to hold points', async () => (Number(await chart.getAttribute('data-points')) >= 2 ? true : null), 30_000, 500);
  expect(await chart.getAttribute('data-unit'), 'the throughput chart unit').toBe('ops/s');
  const series = (await chart.getAttribute('data-series')) ?? '';
  expect(series.split('\n'), 'the throughput chart names the proxies by address').toContainEqual(expect.stringMatching(/^proxy \d+\.\d+\.\d+\.\d+:\d+$/));
  await until('the latency chart to hold points', async () => (Number(await tid('latency-chart').getAttribute('data-points')) >= 2 ? true : null), 30_000, 500);
  expect(await tid('latency-chart').getAttribute('data-unit'), 'the latency chart unit').toBe('s');

  // Under the cursor the legend reads a value with its unit, not "--".
  const over = page.locator('[data-testid="qps-chart"] .u-over');
  const box = await over.boundingBox();
  expect(box, 'the throughput chart plot area').not.toBeNull();
  if (box) await page.mouse.move(box.x + box.width * 0.95, box.y + box.height / 2);
  const value = page.locator('[data-testid="qps-chart"] .u-legend .u-series').nth(1).locator('.u-value');
  const hovered = await until('a hover value with its unit', async () => {
    const t = (await value.textContent())?.trim() ?? '';
    return /ops\/s$/.test(t) ? t : null;
  }, 10_000, 250);
  log(`throughput under the cursor: ${hovered}`);
  await con.shot('03b-overview-hover');

  // The range picker asks the dashboard for the range picked.
  const asked = page.waitForResponse((r) => r.url().includes('/history?range=1h') && r.status() === 200, { timeout: 15_000 });
  await tid('range-picker').selectOption('1h');
  await asked;
  await until('the chart over the last hour', async () => (Number(await chart.getAttribute('data-points')) >= 2 ? true : null), 15_000, 250);
  await con.shot('03c-overview-1h');
  await tid('range-picker').selectOption('5m');
}

/** The Events view lists the lost and back events of the proxy the scenario froze. */
export async function eventsStep(con: ConsolePage, frozenAddr: string): Promise<void> {
  const { tid, page } = con;
  await tid('tab-events').click();
  await tid('events-table').waitFor({ timeout: 20_000 });
  const lost = page.locator('[data-testid^="event-"][data-kind="proxy-lost"]', { hasText: frozenAddr });
  const back = page.locator('[data-testid^="event-"][data-kind="proxy-back"]', { hasText: frozenAddr });
  await until('the lost and back events of the frozen proxy', async () => ((await lost.count()) > 0 && (await back.count()) > 0 ? true : null), 30_000, 500);
  expect(await lost.first().textContent(), 'the lost event').toContain('critical');
  await con.shot('05e-events');
  await tid('tab-overview').click();
  await tid('recent-events').waitFor({ timeout: 15_000 });
}
