// Vitest: the unit tests in jsdom, with test/setup.ts.

import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';

export default defineConfig({
  plugins: [react()],
  test: {
    environment: 'jsdom',
    setupFiles: ['./test/setup.ts'],
    include: ['test/**/*.test.{ts,tsx}'],
    // Two shared cores, often busy with cargo: generous limits, so only real failures fail.
    testTimeout: 30_000,
  },
});
