// The slow log view: a ~100 ms script and a 1.5 MB reply through a proxy show in the slow and
// large-reply tabs, on the proxy and with the arguments the dashboard's API gives.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { resp } from '../support/resp';
import { until } from '../support/wait';

type Log = { proxies: number; entries: { proxy_addr: string; args: string[]; value: number }[] };

export async function slowLogStep(con: ConsolePage, capi: string, proxy: string): Promise<void> {
  const { tid, text } = con;
  const marker = `e2e-slow-${Date.now()}`;
  const script = `-- ${marker}\nlocal s = redis.call('TIME') local t0 = s[1] * 1000000 + s[2] while true do local n = redis.call('TIME') if n[1] * 1000000 + n[2] - t0 >= 100000 then break end end return 1`;
  expect(await resp(proxy, 'EVAL', script, '0'), 'the slow script').toBe('1');
  const big = 'b'.repeat(1_500_000);
  expect(await resp(proxy, 'SET', 'e2e:big', big), 'SET e2e:big').toBe('OK');
  expect((await resp(proxy, 'GET', 'e2e:big')) === big, 'GET e2e:big returns the value').toBe(true);

  await tid('tab-slowlog').click();
  const row = (needle: string) => async () => {
    const rows = await tid('slowlog-entry').evaluateAll(
      (els, n) => els.map((e) => [...e.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')).filter((r) => r[3].includes(n)),
      needle,
    );
    return rows[0] ?? null;
  };
  const slowRow = await until('the slow script in the slow log view', row(marker), 20_000, 500);
  const slow = await con.get<Log>(`${capi}/commandlog?type=slow`);
  const api = slow.entries.find((e) => e.args[0] === 'EVAL' && e.args[1].includes(marker));
  expect(api, `GET /api/commandlog?type=slow has an entry for the script: ${JSON.stringify(slow).slice(0, 400)}`).toBeDefined();
  if (!api) return;
  expect(slowRow[1], 'the proxy the view shows').toBe(api.proxy_addr);
  expect(slowRow[3], 'the arguments the view shows').toBe(api.args.join(' '));
  expect(api.value, "the script's logged duration (µs)").toBeGreaterThanOrEqual(100_000);
  log(`slow log: ${slowRow[2]} for the script on ${slowRow[1]} (API: ${api.value} µs)`);
  await con.shot('13-slow-log');

  await tid('slowlog-type-large-reply').click();
  const bigRow = await until('GET e2e:big in the large-reply view', row('GET e2e:big'), 20_000, 500);
  const replies = await con.get<Log>(`${capi}/commandlog?type=large-reply`);
  const bigApi = replies.entries.find((e) => e.args.join(' ') === 'GET e2e:big');
  expect(bigApi?.value, `GET /api/commandlog?type=large-reply: ${JSON.stringify(bigApi)}`).toBeGreaterThanOrEqual(1_500_000);
  log(`large-reply log: ${bigRow[2]} for GET e2e:big (API: ${bigApi?.value} bytes)`);
  expect(await text('slowlog-summary'), `the summary vs ${replies.proxies} proxies in the API`).toMatch(new RegExp(`from ${replies.proxies} prox`));
}
