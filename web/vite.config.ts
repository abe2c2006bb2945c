// Vite: the React plugin, the build into dist/, and the dev server's proxy to a console.

import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// `npm run dev` proxies the API to a running console (TESSERA_CONSOLE, default 127.0.0.1:9090).
const consoleAddr = process.env.TESSERA_CONSOLE ?? 'http://127.0.0.1:9090';

export default defineConfig({
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true },
  server: {
    proxy: {
      '/api': consoleAddr,
      '/auth': consoleAddr,
    },
  },
});
