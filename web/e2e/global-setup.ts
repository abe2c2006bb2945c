// Before the e2e: a fresh screenshots directory and a federation to drive (./support/
// federation.ts), or the console already running at E2E_CONSOLE_URL (then nothing is started
// or stopped). The tests read where it is from the environment this sets. The function
// returned is the teardown, which Playwright runs after the tests, failed or not.

import fs from 'node:fs';
import path from 'node:path';
import { FAILED_MARK, startFederation, stopFederation } from './support/federation';
import { SHOTS } from './support/paths';
import { until } from './support/wait';

export default async function globalSetup(): Promise<() => Promise<void>> {
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const f of fs.readdirSync(SHOTS)) if (f.endsWith('.png')) fs.rmSync(path.join(SHOTS, f)); // this run's only

  if (process.env.E2E_CONSOLE_URL) {
    if (!process.env.E2E_PASSWORD) throw new Error('E2E_CONSOLE_URL needs E2E_PASSWORD (and E2E_USER unless admin)');
    process.env.E2E_USER ??= 'admin';
    await until('the console to answer /health', async () => (await fetch(`${process.env.E2E_CONSOLE_URL}/health`)).ok, 60_000);
    return () => Promise.resolve();
  }

  const fed = await startFederation();
  try {
    const base = fed.url.replace(/\/$/, '');
    await until('the console to answer /health', async () => (await fetch(`${base}/health`)).ok, 60_000);
    process.env.E2E_CONSOLE_URL = base;
    process.env.E2E_USER = fed.user;
    process.env.E2E_PASSWORD = fed.password;
    process.env.E2E_DATA_DIR = fed.dataDir;
    // Ours: admin commands are on in its proxies (KEYS is answered without a filter).
    process.env.E2E_OWN_FEDERATION = '1';
  } catch (e) {
    fs.writeFileSync(path.join(fed.dataDir, FAILED_MARK), '');
    await stopFederation(fed);
    throw e;
  }
  return () => stopFederation(fed);
}
