// The chart of a plugin's own metrics (the metrics plugin `tessera up` loads) on the plugins
// view, drawn from the dashboard's metrics history: it holds points, every series it draws is
// one the dashboard's metrics route reports, and a series picker is offered; the per-hook
// latency table has a row for every hook the route reports calls of.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { until } from '../support/wait';

type Metrics = {
  samples: { name: string; labels?: Record<string, string>; value: number }[];
  hooks?: { hook: string; count: number }[];
};

export async function pluginChartStep(con: ConsolePage, capi: string): Promise<void> {
  const { tid, page } = con;
  await tid('tab-plugins').click();
  await tid('plugin-open-metrics').click();
  const chart = tid('plugin-chart');
  await chart.waitFor({ timeout: 20_000 });
  const drawn = await until(
    'the metrics plugin chart to hold two points or more of the history',
    async () => {
      const points = Number(await chart.getAttribute('data-points'));
      const series = (await chart.getAttribute('data-series')) ?? '';
      return points >= 2 && series ? series.split('\n') : null;
    },
    30_000,
    500,
  );
  await page.locator('[data-testid="plugin-chart"] canvas').first().waitFor();
  await tid('plugin-series-picker').waitFor();
  const m = await con.get<Metrics>(`${capi}/plugins/metrics/metrics`);
  const key = (x: Metrics['samples'][number]) => {
    const labels = Object.entries(x.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    return labels ? `${x.name}{${labels}}` : x.name;
  };
  const reported = new Set(m.samples.map(key));
  expect(drawn.filter((k) => !reported.has(k)), 'series the chart draws and the API does not report').toEqual([]);
  log(`plugin chart: ${drawn.length} series, e.g. ${drawn[0]}`);
  const hooks = m.hooks ?? [];
  expect(hooks.length, 'hooks of the metrics plugin called').toBeGreaterThan(0);
  await tid('plugin-hook-latency').waitFor();
  for (const h of hooks) await tid(`hook-${h.hook}`).waitFor();
  log(`hook latency: ${hooks.map((h) => `${h.hook} ${h.count}`).join(', ')}`);
  await con.shot('12b-plugin-chart');
}
