// The mirror view: everything the first cluster's proxies serve mirrored to a proxy of the
// other cluster, a write seen arriving there, a value planted there seen as mismatched GETs
// with both replies, mirroring stopped (confirmed). Returns the audit rows it made.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { resp } from '../support/resp';
import { until } from '../support/wait';

export async function mirrorStep(con: ConsolePage, name: string, proxy: string): Promise<[string, string][]> {
  const { tid, text } = con;
  const clusters = await con.get<{ name: string }[]>('/api/clusters');
  const other = clusters.find((c) => c.name !== name);
  expect(other, 'the mirror step needs a second cluster as the shadow').toBeDefined();
  if (!other) return [];
  const shadowProxies = await con.get<{ addr: string }[]>(`${con.clusterApi(other.name)}/proxies`);
  const shadow = shadowProxies[0]?.addr;
  expect(shadow, `cluster ${other.name} has a proxy: ${JSON.stringify(shadowProxies)}`).toBeTruthy();
  if (!shadow) return [];
  await tid('tab-mirror').click();
  await tid('mirror-state').waitFor();
  await tid('mirror-target').fill(shadow);
  await tid('mirror-mode').selectOption('all');
  await tid('mirror-apply').click();
  await until(`the mirror to be on towards ${shadow}`, async () => (await text('mirror-state')) === `on: all to ${shadow}`, 30_000);
  const key = `e2e:mirror:${Date.now()}`;
  expect(await resp(proxy, 'SET', key, 'primary-value'), `SET through ${proxy}`).toBe('OK');
  await until(`the mirrored SET to reach ${other.name}`, async () => (await resp(shadow, 'GET', key)) === 'primary-value', 15_000);
  await resp(shadow, 'SET', key, 'shadow-value');
  for (let i = 0; i < 3; i++) expect(await resp(proxy, 'GET', key), 'GET through the mirrored cluster').toBe('primary-value');
  const sample = await until(
    'a GET mismatch sample with both replies in the mirror view',
    async () => {
      if (!(await tid('mirror-sample-0').count())) return null;
      const t = await text('mirror-sample-0');
      return t.includes(`GET ${key}`) && t.includes('primary-value') && t.includes('shadow-value') ? t : null;
    },
    20_000,
    500,
  );
  const mismatched = Number((await text('mirror-mismatched')).replace(/[^0-9]/g, ''));
  expect(mismatched, 'the mismatches the mirror view shows').toBeGreaterThanOrEqual(3);
  log(`mirror: ${mismatched} mismatches, latest: ${sample}`);
  await con.shot('12c-mirror');
  await tid('mirror-off').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await until('the mirror to be off', async () => (await text('mirror-state')) === 'off', 30_000);
  return [
    ['PUT', '/api/mirror'],
    ['DELETE', '/api/mirror'],
  ];
}
