// A dashboard frozen by SIGSTOP until its lock lapses (docs/console.md, "When a dashboard is
// down"): the cluster's page says once that its last lock holder does not answer, without
// advice to start another, and the Tokens tab stays, saying why it is empty. The dashboard is
// always woken; woken after its lock lapsed, it exits at its next store write (or, on an fs
// store, keeps the lock if its heartbeat renewed it first), so this runs last on its cluster.

import fs from 'node:fs';
import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { until } from '../support/wait';

type Cluster = {
  name: string;
  reachable: boolean;
  error: string | null;
  dashboard: { admin_addr: string; pid: number } | null;
  last_dashboard: { admin_addr: string; pid: number; answers: boolean } | null;
};

/** Whether process `pid` is gone or a zombie (exited, not yet reaped by `tessera up`). */
function exited(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? true;
  } catch {
    return true;
  }
}

export async function dashboardDownStep(con: ConsolePage, name: string): Promise<void> {
  const { tid, text, page } = con;
  const cluster = async () => (await con.get<Cluster[]>('/api/clusters')).find((c) => c.name === name);
  const before = await cluster();
  const pid = before?.dashboard?.pid;
  expect(pid, `${name} has a dashboard`).toBeTruthy();
  if (!pid) return;
  await page.goto(`${con.base}/#/clusters/${encodeURIComponent(name)}/overview`);
  await tid('tab-tokens').waitFor();
  log(`freezing the dashboard of ${name} (pid ${pid})`);
  process.kill(pid, 'SIGSTOP');
  try {
    // The lock lapses after its TTL (10 s); the console then names the silent last holder.
    await until(
      `${name}'s page to say its last dashboard does not answer`,
      async () => (await tid('cluster-down').count()) > 0 && (await text('cluster-down')).includes('does not answer: it may be frozen'),
      60_000,
      500,
    );
    const said = await text('cluster-down');
    expect(said, 'no advice to start a second dashboard').not.toContain('`tessera dashboard');
    expect(said).toContain(`pid ${pid}`);
    const listed = await cluster();
    expect(listed?.last_dashboard, 'the last holder in /api/clusters').toMatchObject({ pid, answers: false });
    // Once on the page, whatever the overview's reads failed with.
    await expect(page.getByText('does not answer: it may be frozen')).toHaveCount(1);
    await expect(page.getByRole('alert')).toHaveCount(1);
    await con.shot('16-dashboard-down');
    await tid('tab-tokens').click();
    await tid('tokens-unavailable').waitFor();
    await expect(page.getByText('does not answer: it may be frozen')).toHaveCount(1);
    await con.shot('16b-dashboard-down-tokens');
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  const woken = await until(
    `the woken dashboard of ${name} to exit or hold its lock again`,
    async () => (exited(pid) ? 'exited' : (await cluster())?.reachable ? 'holds the lock again' : null),
    30_000,
    500,
  );
  log(`the woken dashboard of ${name} ${woken}`);
}
