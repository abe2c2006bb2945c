// The backups view: a backup of the cluster started from the console (`tessera up` gives each
// dashboard a backup root) is followed group by group until it is done, and the events
// stream says so. Returns the audit rows it made.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';
import { until } from '../support/wait';

type Job = { id: number; dir: string; state: string; groups: { state: string; bytes: number }[] };
type Backups = { enabled: boolean; backups: Job[] };
type Events = { events: { kind: string; detail: string }[] };

export async function backupsStep(con: ConsolePage, name: string): Promise<[string, string][]> {
  const { tid, text } = con;
  const api = `/api/clusters/${name}`;
  expect((await con.get<Backups>(`${api}/backups`)).enabled, "up's dashboard takes backups").toBe(true);
  await tid('tab-backups').click();
  await tid('backup-dir').fill('e2e/first');
  await tid('backup-start').click();
  let job: Job | undefined;
  await until(
    'the backup started in the console to finish',
    async () => {
      job = (await con.get<Backups>(`${api}/backups`)).backups.find((b) => b.dir === 'e2e/first');
      return job?.state === 'done' || job?.state === 'failed';
    },
    90_000,
    500,
  );
  expect(job?.state, `the backup: ${JSON.stringify(job)}`).toBe('done');
  expect(job?.groups.every((g) => g.state === 'done' && g.bytes > 0), 'every group sent its data').toBe(true);
  await until('the view to show it done', async () => (await text(`backup-${job?.id}-state`)) === 'done', 15_000);
  await con.shot('12f-backups');
  const events = await con.get<Events>(`${api}/events?limit=1000`);
  expect(
    events.events.some((e) => e.kind === 'backup-taken' && e.detail.includes('e2e/first')),
    'the events stream says the backup was taken',
  ).toBe(true);
  log('backups: a backup started in the console finished on every group and is in the events stream');
  return [['POST', '/api/backups']];
}
