// The federation the e2e drives: `tessera up --clusters 2` (two clusters of redis-servers, a
// dashboard and two proxies each, and the console) in a fresh data directory on free ports,
// the plugins' wasm32 builds loaded; its console URL and admin password read from what it
// prints. Stopped with SIGTERM, which stops every child (checked, see ./processes.ts).
//
// E2E_KEEP=1 keeps the data directory (kept anyway after a failure); ./paths.ts says which
// binary and plugins.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { BIN, PLUGIN_DIR, WEB } from './paths';
import { start, stop, type Started } from './processes';
import { Fatal, until } from './wait';

/** A test that fails leaves this file in the data directory, so that teardown keeps it. */
export const FAILED_MARK = '.e2e-failed';

export interface Federation {
  url: string;
  user: string;
  password: string;
  dataDir: string;
  up: Started;
}

async function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

const reserved = new Set<number>();

/**
 * `n` consecutive free ports (a flag of `up` whose further clusters take the next ones),
 * below the kernel's ephemeral range, where no outgoing connection takes them. `up` picks
 * its redis-servers' ports in 20000–31999 too, never one of the ports it was given here.
 */
async function freePortRun(n: number): Promise<number> {
  const [lo] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const top = Math.min(lo || 32768, 65535) - n;
  const bottom = Math.min(20000, top - 1000);
  for (let i = 0; i < 200; i++) {
    const p = bottom + Math.floor(Math.random() * (top - bottom));
    let ok = true;
    for (let k = 0; k < n && ok; k++) ok = !reserved.has(p + k) && (await bindable(p + k));
    if (ok) {
      for (let k = 0; k < n; k++) reserved.add(p + k);
      return p;
    }
  }
  throw new Error(`no ${n} consecutive free ports below ${top + n}`);
}

function upHelp(): string {
  const r = spawnSync(BIN, ['up', '--help'], { encoding: 'utf8' });
  if (r.error) throw new Error(`cannot run ${BIN}: ${r.error.message} (build it: cargo build -p tessera)`);
  return r.stdout + r.stderr;
}

/** The console URL, admin user and password `up` printed, once it has. */
function printed(out: string): { url: string; user: string; password: string } | null {
  const url = /(https?:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+)\/?\S*/.exec(
    out.split('\n').find((l) => /console/i.test(l) && /https?:\/\//.test(l)) ?? '',
  );
  const pw = /password:\s*(\S{6,})/i.exec(out) ?? /password\S*\s*[:=]?\s*(?:is\s+)?["'`]?([A-Za-z0-9_\-+/=.]{6,})["'`]?/i.exec(out);
  const user = /user(?:name)?\s*[:=]?\s*["'`]?([a-z][a-z0-9_-]*)["'`]?/i.exec(
    out.split('\n').find((l) => /console|password|login/i.test(l) && /user/i.test(l)) ?? '',
  );
  return url && pw ? { url: url[1], password: pw[1], user: user?.[1] ?? 'admin' } : null;
}

/** Starts `tessera up --clusters 2`; resolves once it printed the console URL and password. */
export async function startFederation(): Promise<Federation> {
  if (!fs.existsSync(path.join(WEB, 'dist', 'index.html'))) {
    throw new Error('web/dist is missing: run `npm run build` first (the console serves it)');
  }
  const help = upHelp();
  if (!help.includes('--clusters')) throw new Error(`${BIN} up has no --clusters flag: the binary is older than the console`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-e2e-'));
  const args = ['up', '--clusters', '2', '--data-dir', dataDir];
  // Free ports for every flag this build of `up` has (the others pick their own).
  // Two clusters of two proxies: 4 proxy ports, 4 admin ports, 2 dashboard ports, 1 console.
  const flags = { '--port': 4, '--admin-port': 4, '--dashboard-port': 2, '--console-port': 1 };
  for (const [flag, n] of Object.entries(flags)) {
    if (new RegExp(`${flag}[ =<]`).test(help)) args.push(flag, String(await freePortRun(n)));
  }
  // The example plugins `up` loads come from the same builds as the plugin steps'.
  if (/--plugins-dir[ =<]/.test(help)) args.push('--plugins-dir', PLUGIN_DIR);
  console.log(`[e2e] starting ${BIN} ${args.join(' ')}`);
  const up = start('tessera up', BIN, args);
  let out = '';
  let err = '';
  up.child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    process.stdout.write(`  [up] ${d.toString()}`.replace(/\n(?=.)/g, '\n  [up] '));
  });
  up.child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  let exited: unknown = null;
  void up.exited.then((e) => (exited = e));
  try {
    const found = await until(
      'tessera up to print the console URL and the admin password',
      () => {
        if (exited) throw new Fatal(`tessera up exited (${JSON.stringify(exited)}) before the console was up: ${err.slice(-3000)}`);
        return printed(out);
      },
      180_000,
      200,
    );
    return { ...found, dataDir, up };
  } catch (e) {
    for (const p of await stop(up)) console.error(`[e2e] cleanup: ${p}`);
    keepOrRemove(dataDir, true);
    throw e;
  }
}

/** The last warnings and errors of the federation's logs, to say why a run failed. */
function logTails(dir: string) {
  const logs = path.join(dir, 'logs');
  if (!fs.existsSync(logs)) return;
  for (const f of fs.readdirSync(logs).filter((f) => f.endsWith('.err.log')).sort()) {
    // Warnings, errors and an error's cause chain; not the INFO lines nor backtraces.
    const all = fs.readFileSync(path.join(logs, f), 'utf8').split('\n');
    const lines = all.filter(
      (l, i) => /\b(WARN|ERROR)\b|^Error|^Caused by|panicked/.test(l) || (/^\s{4}\S/.test(l) && /^Caused by/.test(all[i - 1] ?? '')),
    );
    if (!lines.length) continue;
    console.error(`[e2e] ${f} (last lines):`);
    for (const l of lines.slice(-6)) console.error(`    ${l.slice(0, 300)}`);
  }
}

function keepOrRemove(dataDir: string, failed: boolean) {
  if (failed) logTails(dataDir);
  if (failed || process.env.E2E_KEEP) console.error(`[e2e] data and logs kept in ${dataDir}`);
  else fs.rmSync(dataDir, { recursive: true, force: true });
}

/** Stops the federation; throws naming what was left running. Keeps its data after a failure. */
export async function stopFederation(f: Federation): Promise<void> {
  const problems = await stop(f.up);
  keepOrRemove(f.dataDir, problems.length > 0 || fs.existsSync(path.join(f.dataDir, FAILED_MARK)));
  if (problems.length) throw new Error(`cleanup: ${problems.join('; ')}`);
}
