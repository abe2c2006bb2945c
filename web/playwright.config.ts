// The console's end-to-end test (e2e/): one scenario, in order, against a real
// `tessera up --clusters 2` that the global setup starts and its teardown stops, driven in
// Debian's headless Chromium (never a downloaded browser: `npx playwright install` is not
// needed). CHROMIUM overrides the browser's path.

import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: './e2e',
  globalSetup: './e2e/global-setup.ts',
  // One federation, one scenario: its steps build on each other, so they run in order.
  workers: 1,
  fullyParallel: false,
  retries: 0,
  forbidOnly: true,
  // A step's own waits are bounded and named; this only bounds a step as a whole (the
  // migration steps wait minutes on a loaded machine).
  timeout: 10 * 60_000,
  expect: { timeout: 15_000 },
  reporter: [['list']],
  outputDir: 'test-results',
  use: {
    browserName: 'chromium',
    headless: true,
    viewport: { width: 1440, height: 1000 },
    // Every action and wait of a page is bounded (Playwright's default is none).
    actionTimeout: 15_000,
    navigationTimeout: 30_000,
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
  },
});
