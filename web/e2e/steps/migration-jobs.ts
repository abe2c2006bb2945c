// Migrations as jobs in the Migrations view: the live throttle control changes the running
// migration's cap (the cap and the rate shown beside it), a cap with nothing running shows the
// dashboard's 409 reason, and the history table lists the jobs with who started them and how
// they ended (docs/console.md, "Migrations").

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { until } from '../support/wait';

/** While a capped migration runs: the cap shown is `was`; it is raised to `to` from the panel. */
export async function throttleLiveStep(con: ConsolePage, was: number, to: number): Promise<void> {
  const { tid, text } = con;
  expect(await text('throttle-current'), 'the cap the migration was started with').toBe(`${was} keys/s`);
  await tid('throttle-input').fill(String(to));
  await tid('throttle-set').click();
  await until('the new cap to be shown', async () => (await text('throttle-current')) === `${to} keys/s`, 15_000, 200);
  const rate = await until(
    'the live rate beside the cap to show keys moving',
    async () => {
      const t = await text('throttle-rate');
      return /^[\d,.]+ keys\/s$/.test(t) && t !== '0 keys/s' ? t : null;
    },
    15_000,
    200,
  );
  log(`speed cap raised from the panel: ${was} → ${to} keys/s, moving at ${rate}`);
}

/** With nothing running: a cap is refused, and the panel says why. */
export async function throttleIdleStep(con: ConsolePage): Promise<void> {
  const { tid, text } = con;
  await tid('throttle-input').fill('500');
  await tid('throttle-set').click();
  await tid('throttle-error').waitFor({ timeout: 15_000 });
  const why = await text('throttle-error');
  expect(why, 'the 409 reason of a cap with nothing running').toContain('no migration is running');
  log(`a cap with nothing running is refused: ${why.slice(0, 80)}…`);
}

/** The history table: the newest jobs as `outcomes` says (newest first), started by `by`. */
export async function historyStep(con: ConsolePage, by: string, outcomes: string[]): Promise<void> {
  const { tid } = con;
  const rows = tid('history-job');
  await until(
    'the history to list the jobs',
    async () => {
      const got = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-outcome')));
      return outcomes.every((o, i) => got[i] === o) ? got : null;
    },
    30_000,
    500,
  );
  for (let i = 0; i < outcomes.length; i++) {
    const row = rows.nth(i);
    expect(await row.getByTestId('history-by').textContent(), `job ${i}'s caller`).toContain(by);
    const keys = Number(((await row.getByTestId('history-keys').textContent()) ?? '').replace(/,/g, ''));
    expect(keys, `job ${i}'s keys moved, a number`).toBeGreaterThanOrEqual(0);
    const outcome = (await row.getByTestId('history-outcome').textContent()) ?? '';
    if (outcomes[i] === 'aborted') {
      expect(outcome, 'who aborted it').toContain(`aborted by ${by}`);
      // It was aborted while it moved (the step checks the abort caught slots in flight).
      expect(keys, 'the aborted job moved keys before the abort').toBeGreaterThan(0);
    }
  }
  await tid('migration-history').scrollIntoViewIfNeeded();
  await con.shot('09b-migrations-history');
  log(`history: ${outcomes.join(', ')}, started by ${by}`);
}
