// The tokens view (admins only; the page says `you: admin`): a viewer token made there is
// shown once, reads on the dashboard itself, is refused a migration (403), and once revoked
// (confirmed) gets 401. Returns the audit rows it made.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { until } from '../support/wait';

type Cluster = { name: string; role: string | null; token_role: string | null; dashboard: { admin_addr: string } | null };

export async function tokensStep(con: ConsolePage, name: string): Promise<[string, string][]> {
  const { tid, text } = con;
  const clusters = await con.get<Cluster[]>('/api/clusters');
  const cl = clusters.find((c) => c.name === name);
  expect({ role: cl?.role, token_role: cl?.token_role }, `up's console user should be an admin on ${name}`).toEqual({ role: 'admin', token_role: 'admin' });
  expect(await text('cluster-role'), 'the role the cluster page shows').toBe('you: admin');
  const dashboard = `http://${cl?.dashboard?.admin_addr}`;
  await tid('tab-tokens').click();
  await tid('tokens-table').waitFor();
  await tid('token-name').fill('e2e-viewer');
  await tid('token-role').selectOption('viewer');
  await tid('token-create').click();
  await tid('token-secret').waitFor();
  const secret = await text('token-secret');
  const auth = { Authorization: `Bearer ${secret}` };
  const who = (await (await fetch(`${dashboard}/api/whoami`, { headers: auth })).json()) as unknown;
  expect(who, 'the new token on the dashboard').toMatchObject({ token: 'e2e-viewer', role: 'viewer' });
  const refused = await fetch(`${dashboard}/api/migrations`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 0, to: 0, group: 1 }),
  });
  expect(refused.status, "a viewer token's migration").toBe(403);
  await tid('token-e2e-viewer').waitFor();
  await con.shot('12b-tokens');
  await tid('token-revoke-e2e-viewer').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await until('the revoked token to leave the list', async () => (await tid('token-e2e-viewer').count()) === 0, 15_000);
  const after = await fetch(`${dashboard}/api/whoami`, { headers: auth });
  expect(after.status, 'the revoked token').toBe(401);
  log('tokens: a viewer token made in the console reads, is refused a migration (403), and once revoked gets 401');
  return [
    ['POST', '/api/tokens'],
    ['DELETE', '/api/tokens/e2e-viewer'],
  ];
}
