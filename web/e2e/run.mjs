// End-to-end test of the console against a real local federation:
//   `tessera up --clusters 2` (two clusters: redis-servers, dashboards, proxies, and the
//   console), then headless Chromium logs in, watches QPS under redis-benchmark load, moves
//   20 slots in the slot map to 100%, starts a larger move and aborts it, loads the filter
//   plugin through the plugins view (invalid and refused configs, enable, FLUSHALL refused
//   through a proxy, disable), charts the metrics plugin's own metrics, finds a slow script
//   and a large reply in the slow log view (checked against the API), makes a viewer token in
//   the tokens view (checked on the dashboard: it reads, a migration is 403, once revoked 401),
//   mirrors the first cluster to a proxy of the second in the mirror view (a planted divergence
//   shown as mismatched GETs), routes a key prefix of the first cluster to the second in the
//   routes view (a key SET through the first cluster's proxy is read back through the
//   second's; the clusters page lists the route), finds those changes with the user in the
//   audit log and its logins in the separate login log. A screenshot of every
//   view goes to e2e/screenshots/.
//
// Env: TESSERA_BIN (default ../target/debug/tessera, or under CARGO_TARGET_DIR when set),
// TESSERA_PLUGIN_DIR (the plugins' wasm32 builds, default
// ../target/wasm32-unknown-unknown/release, or under CARGO_TARGET_DIR), CHROMIUM (default
// /usr/bin/chromium), REDIS_BENCHMARK (default redis-benchmark), E2E_KEEP=1 keeps the data
// directory.
// For a development loop against a console already running: E2E_CONSOLE_URL, E2E_USER,
// E2E_PASSWORD (nothing is started or stopped then).
//
// Every wait is bounded and says what it waited for; every process started here is stopped
// (SIGTERM to `tessera up`, which stops its children; checked) even on failure.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const WEB = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// The cargo target directory: CARGO_TARGET_DIR when cargo was told to build elsewhere.
const TARGET = process.env.CARGO_TARGET_DIR ? path.resolve(WEB, '..', process.env.CARGO_TARGET_DIR) : path.resolve(WEB, '../target');
const BIN = process.env.TESSERA_BIN ?? path.join(TARGET, 'debug/tessera');
const PLUGIN_DIR = process.env.TESSERA_PLUGIN_DIR ?? path.join(TARGET, 'wasm32-unknown-unknown/release');
const FILTER_WASM = path.join(PLUGIN_DIR, 'tessera_plugin_filter.wasm');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const BENCH = process.env.REDIS_BENCHMARK ?? 'redis-benchmark';
const SHOTS = path.join(WEB, 'e2e', 'screenshots');
const T0 = Date.now();

const log = (...a) => console.log(`[e2e +${((Date.now() - T0) / 1000).toFixed(1)}s]`, ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Thrown by a probe to stop waiting at once (e.g. the process being waited on exited). */
class Fatal extends Error {}

/** Polls `probe` until it returns a truthy value; fails after `ms` naming what it waited for. */
async function waitFor(what, probe, ms, every = 250) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
      last = v;
    } catch (e) {
      if (e instanceof Fatal) throw e;
      last = e instanceof Error ? e.message.split('\n')[0] : e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${Math.round(ms / 1000)}s waiting for ${what} (last: ${JSON.stringify(last)})`);
    }
    await sleep(every);
  }
}

/** One RESP command to `addr` (host:port); resolves to the reply: a string, or {error} for an error reply. */
function resp(addr, ...args) {
  const [host, port] = addr.split(':');
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), host);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply from ${addr} to ${args[0]} within 10 s`));
    }, 10_000);
    const done = (v) => {
      clearTimeout(timer);
      sock.end();
      resolve(v);
    };
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const nl = buf.indexOf('\r\n');
      if (nl < 0) return;
      const line = buf.subarray(1, nl).toString();
      switch (String.fromCharCode(buf[0])) {
        case '-':
          return done({ error: line });
        case '+':
        case ':':
          return done(line);
        case '$': {
          const n = Number(line);
          if (n < 0) return done(null);
          if (buf.length < nl + 2 + n + 2) return; // the rest is still coming
          return done(buf.subarray(nl + 2, nl + 2 + n).toString());
        }
        case '*': {
          // A flat array of bulk strings (KEYS); anything else is reported as unexpected.
          const n = Number(line);
          if (n <= 0) return done([]);
          const items = [];
          let at = nl + 2;
          for (let i = 0; i < n; i++) {
            const end = buf.indexOf('\r\n', at);
            if (end < 0) return;
            if (buf[at] !== 0x24) return done({ error: `unexpected array element ${JSON.stringify(buf.toString().slice(at, at + 20))}` });
            const len = Number(buf.subarray(at + 1, end).toString());
            if (buf.length < end + 2 + len + 2) return;
            items.push(buf.subarray(end + 2, end + 2 + len).toString());
            at = end + 2 + len + 2;
          }
          return done(items);
        }
        default:
          return done({ error: `unexpected reply ${JSON.stringify(buf.toString().slice(0, 80))}` });
      }
    });
    sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
  });
}

const reserved = new Set();

function bindable(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * `n` consecutive free ports (a flag of `up` whose further clusters take the next ones),
 * below the kernel's ephemeral range, where no outgoing connection takes them. `up` picks
 * its redis-servers' ports in 20000–31999 too, never one of the ports it was given here.
 */
async function freePortRun(n) {
  const [lo] = fs
    .readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
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

// --- processes ---

/** Every descendant pid of `pid` (from /proc), children before grandchildren. */
function descendants(pid) {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  const out = [];
  const walk = (p) => {
    for (const k of kids.get(p) ?? []) {
      out.push(k);
      walk(k);
    }
  };
  walk(pid);
  return out;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    // A zombie has exited; it only waits for its parent to reap it.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

const started = []; // { name, child }
let createdDataDir = null;

function start(name, cmd, args, opts = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...opts });
  started.push({ name, child });
  child.exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve({ code, sig })));
  child.on('error', (e) => log(`${name}: ${e.message}`));
  return child;
}

/** Stops `tessera up` with SIGTERM (it stops its children), then checks none is left. */
async function stopAll() {
  const problems = [];
  for (const { name, child } of started.reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const family = descendants(child.pid);
    log(`stopping ${name} (pid ${child.pid}, ${family.length} descendant(s)) with SIGTERM`);
    try {
      process.kill(child.pid, 'SIGTERM');
    } catch {
      // already gone
    }
    const done = await Promise.race([child.exited, sleep(30_000).then(() => null)]);
    if (!done) {
      problems.push(`${name} did not exit within 30 s of SIGTERM`);
      try {
        process.kill(-child.pid, 'SIGKILL'); // its own process group (detached)
      } catch {
        // gone
      }
    }
    const left = await waitFor(
      `the children of ${name} to exit`,
      () => family.every((p) => !alive(p)),
      15_000,
    ).catch(() => false);
    if (!left) {
      const still = family.filter(alive);
      problems.push(`${name} left ${still.length} process(es) running: ${still.join(', ')}`);
      for (const p of still) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // gone
        }
      }
    } else if (family.length) {
      log(`${name} and its ${family.length} descendant(s) are gone`);
    }
  }
  return problems;
}

// --- the federation ---

function upHelp() {
  const r = spawnSync(BIN, ['up', '--help'], { encoding: 'utf8' });
  if (r.error) throw new Error(`cannot run ${BIN}: ${r.error.message} (build it: cargo build -p tessera)`);
  return r.stdout + r.stderr;
}

async function startFederation() {
  if (!fs.existsSync(path.join(WEB, 'dist', 'index.html'))) {
    throw new Error('web/dist is missing: run `npm run build` first (the console serves it)');
  }
  const help = upHelp();
  if (!help.includes('--clusters')) throw new Error(`${BIN} up has no --clusters flag: the binary is older than the console`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-e2e-'));
  createdDataDir = dataDir;
  const args = ['up', '--clusters', '2', '--data-dir', dataDir];
  // Free ports for every flag this build of `up` has (the others pick their own).
  // Two clusters of two proxies: 4 proxy ports, 4 admin ports, 2 dashboard ports, 1 console.
  const flags = { '--port': 4, '--admin-port': 4, '--dashboard-port': 2, '--console-port': 1 };
  for (const [flag, n] of Object.entries(flags)) {
    if (new RegExp(`${flag}[ =<]`).test(help)) args.push(flag, String(await freePortRun(n)));
  }
  // The example plugins `up` loads come from the same builds as the plugin step's.
  if (/--plugins-dir[ =<]/.test(help)) args.push('--plugins-dir', PLUGIN_DIR);
  log(`starting ${BIN} ${args.join(' ')}`);
  const up = start('tessera up', BIN, args);
  let out = '';
  let err = '';
  up.stdout.on('data', (d) => {
    out += d;
    process.stdout.write(`  [up] ${d}`.replace(/\n(?=.)/g, '\n  [up] '));
  });
  up.stderr.on('data', (d) => (err += d));
  let exited = null;
  up.exited.then((e) => (exited = e));
  const found = await waitFor(
    'tessera up to print the console URL and the admin password',
    () => {
      if (exited) throw new Fatal(`tessera up exited (${JSON.stringify(exited)}) before the console was up: ${err.slice(-3000)}`);
      const url = /(https?:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+)\/?\S*/.exec(
        out.split('\n').find((l) => /console/i.test(l) && /https?:\/\//.test(l)) ?? '',
      );
      const pw = /password:\s*(\S{6,})/i.exec(out) ?? /password\S*\s*[:=]?\s*(?:is\s+)?["'`]?([A-Za-z0-9_\-+/=.]{6,})["'`]?/i.exec(out);
      const user = /user(?:name)?\s*[:=]?\s*["'`]?([a-z][a-z0-9_-]*)["'`]?/i.exec(
        out.split('\n').find((l) => /console|password|login/i.test(l) && /user/i.test(l)) ?? '',
      );
      return url && pw ? { url: url[1], password: pw[1], user: user?.[1] ?? 'admin' } : null;
    },
    180_000,
    200,
  );
  return { ...found, dataDir };
}

// --- the test ---

async function main() {
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const f of fs.readdirSync(SHOTS)) if (f.endsWith('.png')) fs.rmSync(path.join(SHOTS, f)); // this run's only
  let fed;
  if (process.env.E2E_CONSOLE_URL) {
    fed = { url: process.env.E2E_CONSOLE_URL, user: process.env.E2E_USER ?? 'admin', password: process.env.E2E_PASSWORD };
  } else {
    fed = await startFederation();
  }
  const base = fed.url.replace(/\/$/, '');
  log(`console ${base}, user ${fed.user}`);
  await waitFor('the console to answer /health', async () => (await fetch(`${base}/health`)).ok, 60_000);

  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-e2e-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 1000 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const pageErrors = [];
  let bench;
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    const shot = async (name) => {
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
      log(`screenshot ${name}.png`);
    };
    const tid = (id) => page.getByTestId(id);
    const text = async (id) => (await tid(id).textContent())?.trim() ?? '';

    // Without a session: the data routes answer 401 and the app shows only the login form.
    const anon = await ctx.request.get(`${base}/api/clusters`);
    if (anon.status() !== 401) throw new Error(`GET /api/clusters without a session answered ${anon.status()}, not 401`);
    await page.goto(`${base}/#/clusters`);
    await tid('login-form').waitFor({ timeout: 30_000 });
    if (await tid('clusters-table').count()) throw new Error('the clusters table shows without a session');

    // A wrong password is refused with the API's message.
    await tid('login-user').fill(fed.user);
    await tid('login-password').fill('not-the-password');
    await tid('login-submit').click();
    await tid('login-error').waitFor();
    log(`wrong password refused: ${await text('login-error')}`);
    await shot('01-login');

    // Log in.
    await tid('login-password').fill(fed.password);
    await tid('login-submit').click();
    await tid('clusters-table').waitFor({ timeout: 30_000 });
    const minClusters = Number(process.env.E2E_MIN_CLUSTERS ?? 2);
    const clusterNames = await waitFor(
      `${minClusters} clusters listed, all reachable`,
      async () => {
        const rows = await page.locator('[data-testid^="cluster-row-"]').evaluateAll((els) =>
          els.map((e) => e.getAttribute('data-testid').slice('cluster-row-'.length)),
        );
        if (rows.length < minClusters) return null;
        for (const n of rows) {
          const h = await text(`cluster-health-${n}`);
          if (['no dashboard', 'unreachable', 'unknown'].includes(h)) return null;
        }
        return rows;
      },
      90_000,
      500,
    );
    log(`clusters: ${clusterNames.join(', ')}`);
    await shot('02-clusters');
    const name = clusterNames[0];
    const capi = `${base}/api/clusters/${encodeURIComponent(name)}`;

    // Overview: QPS chart; load through one proxy moves its latest value above zero.
    await tid(`cluster-link-${name}`).click();
    await page.locator('[data-testid="qps-chart"] canvas').first().waitFor({ timeout: 20_000 });
    const proxies = await (await ctx.request.get(`${capi}/proxies`)).json();
    if (!Array.isArray(proxies) || !proxies.length) throw new Error(`cluster ${name} has no proxy: ${JSON.stringify(proxies)}`);
    const [host, port] = proxies[0].addr.split(':');
    log(`load: ${BENCH} against proxy ${proxies[0].addr}`);
    bench = start('redis-benchmark', BENCH, ['-h', host, '-p', port, '-t', 'set,get', '-n', '100000', '-r', '50000', '-c', '10', '-q']);
    let benchOut = '';
    bench.stdout.on('data', (d) => (benchOut += d));
    bench.stderr.on('data', (d) => (benchOut += d));
    const qps = await waitFor(
      'the QPS chart latest value to rise above 0 under load',
      async () => {
        const v = Number((await text('qps-latest')).replace(/[^0-9.]/g, ''));
        return v > 0 ? v : null;
      },
      60_000,
      500,
    );
    log(`QPS now ${qps}`);
    await sleep(3000); // a few more points on the chart
    await shot('03-overview-under-load');
    const benchDone = await Promise.race([bench.exited, sleep(180_000).then(() => null)]);
    if (!benchDone) throw new Error(`redis-benchmark did not finish within 180 s: ${benchOut.slice(-500)}`);
    if (benchDone.code !== 0) throw new Error(`redis-benchmark failed (${JSON.stringify(benchDone)}): ${benchOut.slice(-500)}`);
    log(`benchmark: ${benchOut.trim().split(/\r|\n/).filter((l) => /requests per second/.test(l)).join('; ')}`);

    // Groups and proxies views.
    await tid('tab-groups').click();
    await page.locator('[data-testid^="group-"][data-testid$="-state"]').first().waitFor();
    // A destructive action asks first; cancelling changes nothing.
    const promote = page.locator('[data-testid^="promote-"]').first();
    await promote.waitFor();
    const groupsBefore = await (await ctx.request.get(`${capi}/groups`)).json();
    await promote.click();
    await tid('confirm-dialog').waitFor();
    await shot('04-groups-confirm');
    await tid('confirm-cancel').click();
    await tid('confirm-dialog').waitFor({ state: 'detached' });
    const groupsAfter = await (await ctx.request.get(`${capi}/groups`)).json();
    const masters = (gs) => gs.map((g) => g.servers[0]?.addr).join(',');
    if (masters(groupsBefore) !== masters(groupsAfter)) throw new Error('cancelling the promote dialog changed a master');
    await shot('04-groups');
    // The read policy (docs/replica-reads.md), above the groups: set from the console, seen
    // by the API, then back to the default so the rest of the run reads from masters.
    const readPolicy = async () => (await (await ctx.request.get(`${capi}/read-policy`)).json()).policy ?? {};
    const setReadPolicy = async (mode, ms) => {
      await tid('read-policy-select').selectOption(mode);
      await tid('read-policy-lag').fill(String(ms));
      await tid('read-policy-apply').click();
      await waitFor(`the read policy to become ${mode}`, async () => {
        const p = await readPolicy();
        return p.mode === mode && p.max_lag_ms === ms;
      }, 15_000);
      await waitFor(`the panel to show ${mode}`, async () => (await text('read-policy-mode')) === mode, 15_000);
    };
    await waitFor('the read policy panel', async () => (await text('read-policy-mode')) === 'master', 15_000);
    if ((await page.locator('[data-testid^="replica-state-"]').count()) === 0) throw new Error('the read policy panel lists no replica');
    await setReadPolicy('prefer-replica', 500);
    await shot('04-groups-read-policy');
    await setReadPolicy('master', 1000);
    await tid('tab-proxies').click();
    await tid('proxies-table').waitFor();
    await waitFor('the proxies table to list the proxies', async () => (await page.locator('[data-testid^="proxy-state-"]').count()) >= proxies.length, 15_000);
    await shot('05-proxies');

    // Hot keys: a benchmark without -r hammers the one key `key:__rand_int__`; the Hot keys tab
    // lists it first by operations, as GET /api/hotkeys does, with the proxy that saw it.
    const hammer = start('redis-benchmark (one key)', BENCH, ['-h', host, '-p', port, '-t', 'get', '-n', '200000', '-c', '4', '-q']);
    await tid('tab-hotkeys').click();
    await tid('hotkeys-ops').waitFor();
    const hotKey = await waitFor(
      'the Hot keys tab to list the hammered key first, as the API does',
      async () => {
        const first = page.locator('[data-testid="hotkeys-ops-row"]').first();
        if (!(await first.count())) return null;
        const shown = (await first.locator('td').first().innerText()).trim();
        const api = await (await ctx.request.get(`${capi}/hotkeys`)).json();
        const top = api.by_ops?.[0];
        if (shown !== 'key:__rand_int__' || top?.key !== shown) return null;
        if (!top.seen_by.some((p) => p.addr === proxies[0].addr)) throw new Error(`GET /api/hotkeys: ${JSON.stringify(top)} not seen by ${proxies[0].addr}`);
        return { shown, ops: top.ops };
      },
      30_000,
      500,
    );
    log(`hot keys: ${hotKey.shown} first, ${hotKey.ops} ops in the window`);
    await shot('05b-hotkeys');
    try {
      process.kill(-hammer.pid, 'SIGTERM');
    } catch {
      // already done
    }
    await hammer.exited;

    // Slot map: select 20 slots of one group (click + shift-click) and move them to another.
    await tid('tab-slots').click();
    await tid('slot-0').waitFor();
    // The heatmap beside it shows the benchmark's load: ops/s on most slots (its 50000 random
    // keys spread over every slot), the same numbers as GET /api/slots/stats; memory on toggle.
    await tid('slot-heatmap').waitFor();
    const heat = await waitFor(
      'the heatmap to show ops/s on most slots after the benchmark',
      async () => {
        const values = await page.locator('[data-testid="heat-grid"] [data-value]').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-value'))));
        const busy = values.filter((v) => v > 0).length;
        return values.length === 1024 && busy > 900 ? { busy, max: Math.max(...values) } : null;
      },
      30_000,
      500,
    );
    const stats = await (await ctx.request.get(`${capi}/slots/stats`)).json();
    const apiBusy = stats.slots.ops_per_sec.filter((v) => v > 0).length;
    if (apiBusy < 900) throw new Error(`GET /api/slots/stats shows ops/s on ${apiBusy} slots`);
    log(`heatmap: ops/s on ${heat.busy} slots, busiest ${heat.max.toFixed(1)} ops/s; the API: ${apiBusy} slots over ${stats.window_secs.toFixed(0)} s`);
    await shot('06-heatmap-ops');
    await tid('heat-memory').check();
    await waitFor(
      'the heatmap to show memory per slot',
      async () => {
        const s = await (await ctx.request.get(`${capi}/slots/stats`)).json();
        if (!s.groups.every((g) => g.keys_exact !== null)) return null; // no key scan yet
        const values = await page.locator('[data-testid="heat-grid"] [data-value]').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-value'))));
        return values.filter((v) => v > 0).length > 900 ? true : null;
      },
      60_000,
      1000,
    );
    await tid('heat-ops').check();
    // The heatmap sits below the slot map: back to the map before dragging over it by mouse.
    await tid('slot-grid').scrollIntoViewIfNeeded();
    await page.evaluate(() => window.scrollTo(0, 0));
    const slots = await waitFor(
      'the slot map to load',
      async () => {
        const s = await (await ctx.request.get(`${capi}/slots`)).json();
        return Array.isArray(s) && s.length === 1024 && s.every((x) => x.group != null) ? s : null;
      },
      30_000,
    );
    const groups = [...new Set(slots.map((s) => s.group))];
    if (groups.length < 2) throw new Error(`cluster ${name} has ${groups.length} group(s) with slots; the test needs 2`);
    const src = slots[0].group;
    const dst = groups.find((g) => g !== src);
    const first = slots.findIndex((s) => s.group === src);
    const small = { from: first, to: first + 19 };
    await waitFor('slot cells coloured by group', async () => (await tid(`slot-${small.from}`).getAttribute('data-group')) === String(src), 15_000);
    // Drag selects a range …
    const box = async (id) => {
      const b = await tid(`slot-${id}`).boundingBox();
      return { x: b.x + b.width / 2, y: b.y + b.height / 2 };
    };
    const a = await box(first + 40);
    const b = await box(first + 49);
    await page.mouse.move(a.x, a.y);
    await page.mouse.down();
    await page.mouse.move(b.x, b.y, { steps: 10 });
    await page.mouse.up();
    if ((await text('selection-size')) !== '10 slot(s)') throw new Error(`dragging over 10 slots selected "${await text('selection-size')}"`);
    // … and so do click + shift-click.
    await tid(`slot-${small.from}`).click();
    await tid(`slot-${small.to}`).click({ modifiers: ['Shift'] });
    const size = await text('selection-size');
    if (!size.startsWith('20 ')) throw new Error(`click + shift-click selected "${size}", not 20 slots`);
    if (!(await text('slot-detail-group')).includes(`group ${src}`)) throw new Error('the slot detail does not show the owner');
    await tid('target-group').selectOption(String(dst));
    log(`migrating slots ${small.from}-${small.to}: group ${src} → ${dst}`);
    await tid('migrate-selection').click();
    await tid('notice-ok').filter({ hasText: '20 slot(s) queued' }).first().waitFor({ timeout: 60_000 });
    await page.locator('.slot-cell.migrating').first().waitFor({ timeout: 10_000 }).then(
      () => shot('06-slotmap-migrating'),
      () => log('the move was too quick to see a migrating cell'),
    );
    await waitFor(
      'the 20-slot migration to reach 100%',
      async () => {
        const st = await tid('migration-progress').getAttribute('data-state');
        const pct = await text('migration-percent');
        return st === 'complete' && pct === '100%';
      },
      180_000,
      500,
    );
    await waitFor(
      `slots ${small.from}-${small.to} to show group ${dst} in the map`,
      async () => (await tid(`slot-${small.from}`).getAttribute('data-group')) === String(dst) && (await tid(`slot-${small.to}`).getAttribute('data-group')) === String(dst),
      15_000,
    );
    log('20-slot migration complete');
    await shot('07-slotmap-done');

    // A larger move, started from the migrations view, then aborted.
    await tid('tab-migrations').click();
    const big = slots.filter((s, i) => s.group === src && i > small.to).map((s) => s.id);
    const bigFrom = big[0];
    let bigTo = bigFrom;
    while (big.includes(bigTo + 1)) bigTo++;
    await tid('migrate-range').fill(`${bigFrom}-${bigTo}`);
    await tid('migrate-target').selectOption(String(dst));
    log(`migrating slots ${bigFrom}-${bigTo}: group ${src} → ${dst}, to abort`);
    await tid('migrate-start').click();
    await tid('notice-ok').filter({ hasText: `${bigTo - bigFrom + 1} slot(s) queued` }).first().waitFor({ timeout: 60_000 });
    await waitFor('the large migration to show as running', async () => (await tid('migration-progress').getAttribute('data-state')) === 'running', 20_000, 200);
    await shot('08-migrations-running');
    await tid('abort-all').click();
    await tid('confirm-dialog').waitFor();
    await tid('confirm-ok').click();
    await waitFor('the abort button to show the call in progress or done', async () => (await text('abort-all')) !== 'Abort' || (await tid('notice-ok').filter({ hasText: 'aborted' }).count()) > 0, 10_000, 100);
    const aborted = await tid('notice-ok').filter({ hasText: 'aborted' }).first().locator('span').textContent({ timeout: 90_000 });
    log(`abort: ${aborted}`);
    const n = Number(/(\d+) slot migration/.exec(aborted ?? '')?.[1] ?? 0);
    if (!(n > 0)) throw new Error(`the abort aborted no slot ("${aborted}"): the move finished before it`);
    await waitFor(
      'the aborted migration to settle (every slot moved back or finished)',
      async () => (await tid('migration-progress').getAttribute('data-state')) === 'aborted',
      240_000,
      500,
    );
    const after = await (await ctx.request.get(`${capi}/slots`)).json();
    const backHome = after.filter((s) => s.id >= bigFrom && s.id <= bigTo && s.group === src).length;
    log(`after the abort ${backHome} of ${bigTo - bigFrom + 1} slots are (back) in group ${src}`);
    if (backHome === 0) throw new Error('after the abort no slot of the large range is in its source group');

    // Rebalance preview (dry run) shows a plan.
    await tid('rebalance-preview').click();
    await tid('rebalance-plan').waitFor();
    const planText = (await tid('rebalance-plan').textContent()) ?? '';
    const planned = Number(/(\d+) slot\(s\) would move/.exec(planText)?.[1] ?? NaN);
    log(`rebalance preview: ${planned} slot(s) would move`);
    await shot('09-migrations-rebalance-preview');
    if (!(planned > 0)) throw new Error(`the rebalance preview planned no move after the 20-slot migration: "${planText.slice(0, 200)}"`);
    // Execute the plan (confirmed) and watch it to the end: the groups are even again.
    await tid('rebalance-execute').click();
    await tid('confirm-dialog').waitFor();
    await tid('confirm-ok').click();
    await tid('notice-ok').filter({ hasText: `${planned} slot(s) queued by the rebalance` }).first().waitFor({ timeout: 60_000 });
    await waitFor(
      'the rebalance to complete',
      async () => (await tid('migration-progress').getAttribute('data-state')) === 'complete' && (await text('migration-percent')) === '100%',
      180_000,
      500,
    );
    // The handoffs' write pause is shown beside the progress, in milliseconds.
    const pause = await waitFor(
      'the write pause to be shown',
      async () => {
        const t = await text('migration-pause');
        return /^\d+ ms$/.test(t) ? t : null;
      },
      15_000,
    );
    log(`write pause p99 shown: ${pause}`);
    const even = await waitFor(
      'the slots to be split evenly again',
      async () => {
        const s = await (await ctx.request.get(`${capi}/slots`)).json();
        const per = {};
        for (const x of s) per[x.group] = (per[x.group] ?? 0) + 1;
        return Object.values(per).every((n) => n === 1024 / Object.keys(per).length) ? per : null;
      },
      15_000,
    );
    log(`rebalanced: ${JSON.stringify(even)}`);

    // Plugins: the filter through the view, checked through a proxy.
    const pluginAudit = await pluginsStep({ page, tid, text, shot, capi, ctx, proxy: proxies[0].addr });

    // The chart of a plugin's own metrics (the metrics plugin `up` loads), against the API.
    await pluginChartStep({ page, tid, capi, ctx });

    // The slow log view: a slow script and a large reply through a proxy, as the API has them.
    await slowLogStep({ page, tid, text, shot, capi, ctx, proxy: proxies[0].addr });

    // Tokens: a viewer token made in the tokens view works on the dashboard itself, reads
    // only, and is refused once revoked there.
    const tokenAudit = await tokensStep({ tid, text, shot, base, ctx, name });

    // Mirror: this cluster's commands copied to the other cluster's proxy, a divergence
    // planted there shown as mismatched GETs with both replies, then stopped.
    const mirrorAudit = await mirrorStep({ tid, text, shot, base, ctx, name, proxy: proxies[0].addr });

    // Routes: a key prefix of this cluster routed to the other cluster in the routes view, a
    // key written through this cluster's proxy read back through the other's, the route in
    // the clusters page's Routes column, then removed.
    const routesAudit = await routesStep({ tid, text, shot, base, ctx, name, proxy: proxies[0].addr });

    // The other cluster, through the switcher: its own overview and slot map.
    const other = clusterNames.find((n) => n !== name);
    await tid('cluster-switch').selectOption(other);
    await waitFor(`the page to show cluster ${other}`, async () => (await text('cluster-name')) === other, 10_000);
    await tid('tab-overview').click();
    await page.locator('[data-testid="qps-chart"] canvas').first().waitFor({ timeout: 20_000 });
    await waitFor(`${other}'s overview to load`, async () => /\d/.test(await text('keys-total')), 20_000);
    await shot('14-other-cluster');

    // Audit: the migrations and the abort, with the user who made them.
    await tid('nav-audit').click();
    await tid('audit-table').waitFor();
    const actor = `console:${fed.user}`;
    const wanted = [
      ['POST', '/api/migrations'],
      ['POST', '/api/migrations/abort'],
      ['POST', '/api/rebalance'],
      ...pluginAudit,
      ...tokenAudit,
      ...mirrorAudit,
      ...routesAudit,
    ];
    await waitFor(
      `audit rows for ${wanted.map((w) => w.join(' ')).join(' and ')} by ${actor} on ${name}`,
      async () => {
        const rows = await page.locator('[data-testid="audit-row"]').evaluateAll((els) =>
          els.map((e) => [...e.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')),
        );
        return wanted.every(([m, p]) => rows.some((r) => r[1] === name && r[2] === actor && r[3] === `${m} ${p}`));
      },
      30_000,
      1000,
    );
    // Logins are a log of their own, under the changes: this run's wrong password and login.
    await tid('logins-table').waitFor();
    await waitFor(
      `a failed login and a login of ${fed.user} in the login log`,
      async () => {
        const rows = await page.locator('[data-testid="login-row"]').evaluateAll((els) =>
          els.map((e) => [...e.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')),
        );
        return rows.some((r) => r[1] === fed.user && r[3] === 'logged in') && rows.some((r) => r[1] === fed.user && r[3].startsWith('failed'));
      },
      10_000,
    );
    if ((await page.locator('[data-testid="audit-row"]', { hasText: '/auth/login' }).count()) > 0) {
      throw new Error('a login shows in the audit log of changes');
    }
    await shot('15-audit');

    // Log out: back to the login form, and the data routes answer 401 again.
    await tid('logout').click();
    await tid('login-form').waitFor();
    const gone = await ctx.request.get(`${base}/api/clusters`);
    if (gone.status() !== 401) throw new Error(`after logout GET /api/clusters answered ${gone.status()}`);

    if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
    log('all checks passed');
  } finally {
    await ctx.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
  return fed;
}

/**
 * The metrics plugin's chart on the plugins view: points accumulate, one per poll, and every
 * series it draws is one the dashboard's metrics route reports.
 */
async function pluginChartStep({ page, tid, capi, ctx }) {
  await tid('tab-plugins').click();
  await tid('plugin-open-metrics').click();
  const chart = tid('plugin-chart');
  await chart.waitFor({ timeout: 20_000 });
  const drawn = await waitFor(
    'the metrics plugin chart to hold two points or more',
    async () => {
      const points = Number(await chart.getAttribute('data-points'));
      const series = (await chart.getAttribute('data-series')) ?? '';
      return points >= 2 && series ? series.split('\n') : null;
    },
    30_000,
    500,
  );
  await page.locator('[data-testid="plugin-chart"] canvas').first().waitFor();
  const m = await (await ctx.request.get(`${capi}/plugins/metrics/metrics`)).json();
  const key = (x) => {
    const labels = Object.entries(x.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
    return labels ? `${x.name}{${labels}}` : x.name;
  };
  const reported = new Set(m.samples.map(key));
  const unknown = drawn.filter((k) => !reported.has(k));
  if (unknown.length) throw new Error(`the chart draws series the API does not report: ${unknown.join(', ')}`);
  log(`plugin chart: ${drawn.length} series, e.g. ${drawn[0]}`);
}

/**
 * The slow log view: a ~100 ms script and a 1.5 MB reply through a proxy show in the slow and
 * large-reply tabs, on the proxy and with the arguments the dashboard's API gives.
 */
async function slowLogStep({ tid, text, shot, capi, ctx, proxy }) {
  const marker = `e2e-slow-${Date.now()}`;
  const script = `-- ${marker}\nlocal s = redis.call('TIME') local t0 = s[1] * 1000000 + s[2] while true do local n = redis.call('TIME') if n[1] * 1000000 + n[2] - t0 >= 100000 then break end end return 1`;
  const ran = await resp(proxy, 'EVAL', script, '0');
  if (ran !== '1') throw new Error(`the slow script answered ${JSON.stringify(ran)}`);
  const big = 'b'.repeat(1_500_000);
  if ((await resp(proxy, 'SET', 'e2e:big', big)) !== 'OK') throw new Error('SET e2e:big failed');
  if ((await resp(proxy, 'GET', 'e2e:big')) !== big) throw new Error('GET e2e:big did not return the value');

  await tid('tab-slowlog').click();
  const row = (needle) => async () => {
    const rows = await tid('slowlog-entry').evaluateAll(
      (els, n) => els.map((e) => [...e.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')).filter((r) => r[3].includes(n)),
      needle,
    );
    return rows[0] ?? null;
  };
  const slowRow = await waitFor('the slow script in the slow log view', row(marker), 20_000, 500);
  const slow = await (await ctx.request.get(`${capi}/commandlog?type=slow`)).json();
  const api = slow.entries.find((e) => e.args[0] === 'EVAL' && e.args[1].includes(marker));
  if (!api) throw new Error(`GET /api/commandlog?type=slow has no entry for the script: ${JSON.stringify(slow).slice(0, 400)}`);
  if (slowRow[1] !== api.proxy_addr) throw new Error(`the view shows proxy ${slowRow[1]}, the API ${api.proxy_addr}`);
  if (slowRow[3] !== api.args.join(' ')) throw new Error(`the view shows ${JSON.stringify(slowRow[3])}, the API ${JSON.stringify(api.args)}`);
  if (api.value < 100_000) throw new Error(`the script's logged duration is ${api.value} µs, under its 100 ms`);
  log(`slow log: ${slowRow[2]} for the script on ${slowRow[1]} (API: ${api.value} µs)`);
  await shot('13-slow-log');

  await tid('slowlog-type-large-reply').click();
  const bigRow = await waitFor('GET e2e:big in the large-reply view', row('GET e2e:big'), 20_000, 500);
  const replies = await (await ctx.request.get(`${capi}/commandlog?type=large-reply`)).json();
  const bigApi = replies.entries.find((e) => e.args.join(' ') === 'GET e2e:big');
  if (!bigApi || bigApi.value < 1_500_000) throw new Error(`GET /api/commandlog?type=large-reply: ${JSON.stringify(bigApi)}`);
  log(`large-reply log: ${bigRow[2]} for GET e2e:big (API: ${bigApi.value} bytes)`);
  const summary = await text('slowlog-summary');
  if (!new RegExp(`from ${replies.proxies} prox`).test(summary)) throw new Error(`summary "${summary}" vs ${replies.proxies} proxies in the API`);
}

/**
 * The plugins view on the first cluster: the filter uploaded, an invalid config (inline
 * error), a config the plugin refuses (the server's 400), a valid one, enabled (KEYS
 * refused by it through a proxy, GET still served), its metrics panel, disabled. Returns the
 * audit rows the changes must leave, as [method, path].
 */
/**
 * The mirror view: mirror everything from the first cluster to a proxy of the other, see a
 * write arrive there, plant a different value there and see its GETs as mismatches with both
 * replies, stop mirroring. Returns the audit rows it made.
 */
async function mirrorStep({ tid, text, shot, base, ctx, name, proxy }) {
  const clusters = await (await ctx.request.get(`${base}/api/clusters`)).json();
  const other = clusters.find((c) => c.name !== name);
  if (!other) throw new Error('the mirror step needs a second cluster as the shadow');
  const shadowProxies = await (await ctx.request.get(`${base}/api/clusters/${encodeURIComponent(other.name)}/proxies`)).json();
  const shadow = shadowProxies[0]?.addr;
  if (!shadow) throw new Error(`cluster ${other.name} has no proxy: ${JSON.stringify(shadowProxies)}`);
  await tid('tab-mirror').click();
  await tid('mirror-state').waitFor();
  await tid('mirror-target').fill(shadow);
  await tid('mirror-mode').selectOption('all');
  await tid('mirror-apply').click();
  await waitFor(`the mirror to be on towards ${shadow}`, async () => (await text('mirror-state')) === `on: all to ${shadow}`, 30_000);
  const key = `e2e:mirror:${Date.now()}`;
  const set = await resp(proxy, 'SET', key, 'primary-value');
  if (set !== 'OK') throw new Error(`SET through ${proxy} answered ${JSON.stringify(set)}`);
  await waitFor(`the mirrored SET to reach ${other.name}`, async () => (await resp(shadow, 'GET', key)) === 'primary-value', 15_000);
  await resp(shadow, 'SET', key, 'shadow-value');
  for (let i = 0; i < 3; i++) {
    const got = await resp(proxy, 'GET', key);
    if (got !== 'primary-value') throw new Error(`GET through the mirrored cluster answered ${JSON.stringify(got)}`);
  }
  const sample = await waitFor(
    'a GET mismatch sample with both replies in the mirror view',
    async () => {
      if (!(await tid('mirror-sample-0').count())) return null;
      const t = await text('mirror-sample-0');
      return t.includes(`GET ${key}`) && t.includes('primary-value') && t.includes('shadow-value') ? t : null;
    },
    20_000,
    500,
  );
  const mismatched = Number((await text('mirror-mismatched')).replace(/[^0-9]/g, ''));
  if (mismatched < 3) throw new Error(`the mirror view shows ${mismatched} mismatches, not at least 3`);
  log(`mirror: ${mismatched} mismatches, latest: ${sample}`);
  await shot('12c-mirror');
  await tid('mirror-off').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await waitFor('the mirror to be off', async () => (await text('mirror-state')) === 'off', 30_000);
  return [
    ['PUT', '/api/mirror'],
    ['DELETE', '/api/mirror'],
  ];
}

/**
 * The routes view: route the prefix `e2e-routed:` of the first cluster to the other cluster
 * (no user), wait until every proxy of the first forwards it to a proxy of the other, SET a
 * key through the first cluster's proxy and GET it through the other's, see the route in the
 * clusters page's Routes column, then remove it (confirmed). Returns the audit rows it made.
 */
async function routesStep({ tid, text, shot, base, ctx, name, proxy }) {
  const prefix = 'e2e-routed:';
  const capi = `${base}/api/clusters/${encodeURIComponent(name)}`;
  const clusters = await (await ctx.request.get(`${base}/api/clusters`)).json();
  const other = clusters.find((c) => c.name !== name);
  if (!other) throw new Error('the routes step needs a second cluster to route to');
  const otherProxies = await (await ctx.request.get(`${base}/api/clusters/${encodeURIComponent(other.name)}/proxies`)).json();
  const otherAddrs = Array.isArray(otherProxies) ? otherProxies.map((p) => p.addr) : [];
  const otherProxy = otherAddrs[0];
  if (!otherProxy) throw new Error(`cluster ${other.name} has no proxy: ${JSON.stringify(otherProxies)}`);
  const ownProxies = await (await ctx.request.get(`${capi}/proxies`)).json();
  const want = ownProxies.length;
  // The key is in neither cluster before (the route does not exist yet: DEL through the first
  // cluster's proxy is served by its own groups).
  const key = `${prefix}k`;
  const value = `routed-${Date.now()}`;
  await resp(proxy, 'DEL', key);
  await resp(otherProxy, 'DEL', key);

  await tid('tab-routes').click();
  await tid('routes-table').waitFor({ timeout: 20_000 });
  const before = await (await ctx.request.get(`${capi}/routes`)).json();
  if (!Array.isArray(before.clusters) || !before.clusters.includes(other.name)) {
    throw new Error(`GET /routes does not offer cluster ${other.name} to route to: ${JSON.stringify(before).slice(0, 400)}`);
  }
  await tid('route-prefix').fill(prefix);
  await tid('route-cluster').selectOption(other.name);
  await tid('route-user').fill('');
  await tid('route-password').fill('');
  await tid('route-add').click();
  await tid(`route-row-${prefix}`).waitFor({ timeout: 15_000 });
  const status = tid(`route-status-${prefix}`);
  await waitFor(
    `all ${want} proxies of ${name} to route ${prefix} in the routes view`,
    async () => {
      const routing = Number(await status.getAttribute('data-routing'));
      const total = Number(await status.getAttribute('data-proxies'));
      if (total === want && routing === total) return true;
      // Why not yet, for the timeout's message: the badge and each proxy's line.
      throw new Error(`the view shows "${(await tid(`route-row-${prefix}`).innerText()).replace(/\s+/g, ' ')}"`);
    },
    60_000,
    500,
  );
  // As the API has it: every proxy of this cluster forwards the prefix to a proxy of the other.
  const now = await (await ctx.request.get(`${capi}/routes`)).json();
  const route = now.routes.find((r) => r.prefix === prefix);
  if (!route || route.cluster !== other.name || route.user) throw new Error(`GET /routes has the route as ${JSON.stringify(route)}`);
  for (const p of now.proxies) {
    const r = p.routes.find((x) => x.prefix === prefix);
    if (!r?.target || !otherAddrs.includes(r.target)) {
      throw new Error(`proxy ${p.addr} routes ${prefix} to ${JSON.stringify(r)}, not to a proxy of ${other.name} (${otherAddrs.join(', ')})`);
    }
  }
  log(`routes: ${prefix} → ${other.name}: ${now.proxies.map((p) => `${p.addr} → ${p.routes.find((x) => x.prefix === prefix).target}`).join(', ')}`);
  await shot('12d-routes');

  // A key with the prefix written through this cluster's proxy lives in the other cluster.
  const set = await resp(proxy, 'SET', key, value);
  if (set !== 'OK') throw new Error(`SET ${key} through ${proxy} answered ${JSON.stringify(set)}`);
  const there = await resp(otherProxy, 'GET', key);
  if (there !== value) throw new Error(`GET ${key} through ${other.name}'s proxy ${otherProxy} answered ${JSON.stringify(there)}, not ${value}`);
  const back = await resp(proxy, 'GET', key);
  if (back !== value) throw new Error(`GET ${key} through ${proxy} answered ${JSON.stringify(back)}, not ${value}`);
  log(`routes: SET ${key} through ${proxy}, read back through ${other.name}'s proxy ${otherProxy}`);

  // The clusters page lists the route in its Routes column.
  await tid('nav-clusters').click();
  await tid('clusters-table').waitFor({ timeout: 20_000 });
  const shown = `${prefix} → ${other.name}`;
  await waitFor(`the Routes column of ${name} to show "${shown}"`, async () => (await text(`cluster-routes-${name}`)).includes(shown), 20_000, 500);
  await shot('12e-clusters-routes');

  // Removed again in the view.
  await tid(`cluster-link-${name}`).click();
  await tid('tab-routes').click();
  await tid(`route-remove-${prefix}`).click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await tid(`route-row-${prefix}`).waitFor({ state: 'detached', timeout: 15_000 });
  const after = await (await ctx.request.get(`${capi}/routes`)).json();
  if (after.routes.some((r) => r.prefix === prefix)) throw new Error(`GET /routes still lists ${prefix}: ${JSON.stringify(after.routes)}`);
  // Every proxy of this cluster serves the prefix from its own groups again, where the key
  // never was.
  await waitFor(`GET ${key} through ${proxy} to miss once the route is removed`, async () => (await resp(proxy, 'GET', key)) === null, 30_000, 500);
  log(`routes: ${prefix} removed; ${key} is no longer seen through ${proxy}`);
  await resp(otherProxy, 'DEL', key);
  return [['PUT', '/api/routes']];
}

/** The tokens view: make a viewer token, check it on the dashboard, revoke it. Returns the audit rows it made. */
async function tokensStep({ tid, text, shot, base, ctx, name }) {
  const clusters = await (await ctx.request.get(`${base}/api/clusters`)).json();
  const cl = clusters.find((c) => c.name === name);
  if (cl?.role !== 'admin' || cl?.token_role !== 'admin') throw new Error(`up's console user should be an admin on ${name}: ${JSON.stringify(cl)}`);
  if ((await text('cluster-role')) !== 'you: admin') throw new Error(`the cluster page shows the role "${await text('cluster-role')}"`);
  const dashboard = `http://${cl.dashboard.admin_addr}`;
  await tid('tab-tokens').click();
  await tid('tokens-table').waitFor();
  await tid('token-name').fill('e2e-viewer');
  await tid('token-role').selectOption('viewer');
  await tid('token-create').click();
  await tid('token-secret').waitFor();
  const secret = await text('token-secret');
  const auth = { Authorization: `Bearer ${secret}` };
  const who = await (await fetch(`${dashboard}/api/whoami`, { headers: auth })).json();
  if (who.token !== 'e2e-viewer' || who.role !== 'viewer') throw new Error(`the new token is ${JSON.stringify(who)} on the dashboard`);
  const refused = await fetch(`${dashboard}/api/migrations`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 0, to: 0, group: 1 }),
  });
  if (refused.status !== 403) throw new Error(`a viewer token's migration answered ${refused.status}, not 403`);
  await tid('token-e2e-viewer').waitFor();
  await shot('12b-tokens');
  await tid('token-revoke-e2e-viewer').click();
  await tid('confirm-dialog').waitFor();
  await tid('confirm-ok').click();
  await waitFor('the revoked token to leave the list', async () => (await tid('token-e2e-viewer').count()) === 0, 15_000);
  const after = await fetch(`${dashboard}/api/whoami`, { headers: auth });
  if (after.status !== 401) throw new Error(`the revoked token answered ${after.status}, not 401`);
  log('tokens: a viewer token made in the console reads, is refused a migration (403), and once revoked gets 401');
  return [
    ['POST', '/api/tokens'],
    ['DELETE', '/api/tokens/e2e-viewer'],
  ];
}

async function pluginsStep({ page, tid, text, shot, capi, ctx, proxy }) {
  if (!fs.existsSync(FILTER_WASM)) {
    throw new Error(`${FILTER_WASM} is missing: cargo build --release --target wasm32-unknown-unknown -p tessera-plugin-filter (or set TESSERA_PLUGIN_DIR)`);
  }
  const audit = [];
  // The filter's refusal says "is not allowed". `tessera up`'s proxies allow the cluster-wide
  // admin commands, so its example filter (FLUSHALL, FLUSHDB) is what refuses FLUSHALL; the
  // filter configured below refuses KEYS, which the proxies otherwise answer.
  const byFilter = (r) => typeof r === 'object' && r !== null && /is not allowed/.test(r.error ?? '');
  const flushall = () => resp(proxy, 'FLUSHALL');
  const keys = () => resp(proxy, 'KEYS', 'e2e:nothing:*');
  // Without a filter KEYS is answered only by the federation started here (admin commands on);
  // a console given by E2E_CONSOLE_URL might run with them off.
  const own = !process.env.E2E_CONSOLE_URL;
  await tid('tab-plugins').click();
  await tid('plugins-table').waitFor({ timeout: 20_000 });
  const catalog = await (await ctx.request.get(`${capi}/plugins`)).json();
  log(`plugin catalog at start: ${catalog.map((p) => `${p.name} (${p.enabled ? 'enabled' : 'disabled'})`).join(', ') || 'empty'}`);
  if (catalog.some((p) => p.name === 'filter')) {
    // `tessera up` loaded the example filter (FLUSHALL, FLUSHDB): it is listed, it works, and
    // the view deletes it, so that what follows starts from no filter.
    await tid('plugin-filter').waitFor();
    const r = await flushall();
    if (!byFilter(r)) throw new Error(`with up's filter FLUSHALL answered ${JSON.stringify(r)}`);
    await tid('plugin-delete-filter').click();
    await tid('confirm-dialog').waitFor();
    await tid('confirm-ok').click();
    await tid('plugin-filter').waitFor({ state: 'detached', timeout: 60_000 });
    audit.push(['DELETE', '/api/plugins/filter']);
    log("deleted up's example filter through the view");
  }
  if (own) {
    const before = await keys();
    if (!Array.isArray(before)) throw new Error(`without the filter KEYS answered ${JSON.stringify(before)}, not a list of keys`);
    log(`without the filter: KEYS → ${JSON.stringify(before)}`);
  }

  // Upload: the name comes from the file name.
  await tid('plugin-file').setInputFiles(FILTER_WASM);
  if ((await tid('plugin-name').inputValue()) !== 'filter') throw new Error(`the name taken from the file is "${await tid('plugin-name').inputValue()}"`);
  await tid('plugin-upload').click();
  await tid('plugin-filter').waitFor({ timeout: 60_000 });
  await waitFor('the uploaded filter to show as disabled', async () => (await tid('plugin-filter').textContent()).includes('disabled'), 15_000);
  audit.push(['PUT', '/api/plugins/filter/module']);
  log('filter uploaded');

  // Config: invalid JSON is caught in the page, a config the plugin refuses gets the server's message.
  await tid('plugin-open-filter').click();
  const editor = tid('plugin-config-text');
  await editor.fill('{"deny_commands": ["FLUSHALL",]}');
  const parseError = await text('plugin-config-parse-error');
  if (!/line 1, column \d+/.test(parseError)) throw new Error(`the inline JSON error is "${parseError}"`);
  if (!(await tid('plugin-config-save').isDisabled())) throw new Error('Save is enabled with invalid JSON');
  log(`invalid JSON: ${parseError}`);
  await shot('10-plugins-invalid-json');
  await editor.fill('{"deny_classes": ["admn"]}');
  await tid('plugin-config-parse-error').waitFor({ state: 'detached' });
  await tid('plugin-config-save').click();
  await tid('plugin-config-server-error').waitFor({ timeout: 60_000 });
  const refused = await text('plugin-config-server-error');
  if (!/unknown class "admn"/.test(refused)) throw new Error(`the refused config shows "${refused}"`);
  log(`refused config: ${refused}`);
  await shot('11-plugins-refused-config');
  await editor.fill('{"deny_commands": ["KEYS"]}');
  await tid('plugin-config-save').click();
  await tid('notice-ok').filter({ hasText: 'filter: config saved' }).first().waitFor({ timeout: 60_000 });
  const saved = (await (await ctx.request.get(`${capi}/plugins`)).json()).find((p) => p.name === 'filter');
  if (JSON.stringify(saved?.config) !== JSON.stringify({ deny_commands: ['KEYS'] })) throw new Error(`the catalog has config ${JSON.stringify(saved?.config)}`);
  audit.push(['PUT', '/api/plugins/filter/config']);

  // Enable: KEYS is refused by the filter through the proxy, GET is still served.
  await tid('plugin-toggle-filter').click();
  await tid('notice-ok').filter({ hasText: 'filter enabled' }).first().waitFor({ timeout: 60_000 });
  await waitFor('the filter to show as enabled', async () => (await tid('plugin-filter').textContent()).includes('enabled'), 15_000);
  audit.push(['POST', '/api/plugins/filter/enable']);
  const denied = await keys();
  if (!byFilter(denied)) throw new Error(`with the filter enabled KEYS answered ${JSON.stringify(denied)}`);
  log(`filter enabled: KEYS → ${denied.error}`);
  const set = await resp(proxy, 'SET', 'e2e:plugin', 'still-served');
  const got = await resp(proxy, 'GET', 'e2e:plugin');
  if (set !== 'OK' || got !== 'still-served') throw new Error(`with the filter SET/GET answered ${JSON.stringify(set)} / ${JSON.stringify(got)}`);
  // Its metrics panel: the proxies running it.
  if (!(await tid('plugin-metrics').count())) await tid('plugin-open-filter').click();
  await waitFor(
    'the metrics panel to show the proxies running the filter',
    async () => /Summed over [1-9]\d* prox/.test(await text('plugin-metrics-proxies')),
    20_000,
    500,
  );
  log(`metrics panel: ${await text('plugin-metrics-proxies')}`);
  await shot('12-plugins-enabled');

  // Disable: the proxy answers KEYS again.
  await tid('plugin-toggle-filter').click();
  await tid('notice-ok').filter({ hasText: 'filter disabled' }).first().waitFor({ timeout: 60_000 });
  audit.push(['POST', '/api/plugins/filter/disable']);
  if (own) {
    const after = await keys();
    if (!Array.isArray(after)) throw new Error(`with the filter disabled KEYS answered ${JSON.stringify(after)}`);
  }
  await waitFor('the filter to show as disabled', async () => (await tid('plugin-filter').textContent()).includes('disabled'), 15_000);
  log('filter disabled');
  return audit;
}

// Interrupted (Ctrl-C, a CI timeout): stop what was started, then exit.
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    console.error(`[e2e] ${sig}: stopping what was started`);
    for (const p of await stopAll()) console.error(`[e2e] cleanup: ${p}`);
    console.log('e2e: 0 passed, 1 failed');
    process.exit(1);
  });
}

/** The last lines of the federation's error logs, to say why it failed. */
function logTails(dir) {
  const logs = path.join(dir, 'logs');
  if (!fs.existsSync(logs)) return;
  for (const f of fs.readdirSync(logs).filter((f) => f.endsWith('.err.log')).sort()) {
    // Warnings, errors and an error's cause chain; not the INFO lines nor backtraces.
    const all = fs.readFileSync(path.join(logs, f), 'utf8').split('\n');
    const lines = all.filter(
      (l, i) =>
        /\b(WARN|ERROR)\b|^Error|^Caused by|panicked/.test(l) || (/^\s{4}\S/.test(l) && /^Caused by/.test(all[i - 1] ?? '')),
    );
    if (!lines.length) continue;
    console.error(`[e2e] ${f} (last lines):`);
    for (const l of lines.slice(-6)) console.error(`    ${l.slice(0, 300)}`);
  }
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`[e2e] FAILED: ${e instanceof Error ? e.stack : e}`);
}
const problems = await stopAll();
for (const p of problems) console.error(`[e2e] cleanup: ${p}`);
if (problems.length) failed = true;
if (createdDataDir) {
  if (failed) logTails(createdDataDir);
  if (failed || process.env.E2E_KEEP) console.error(`[e2e] data and logs kept in ${createdDataDir}`);
  else fs.rmSync(createdDataDir, { recursive: true, force: true });
}
console.log(failed ? 'e2e: 0 passed, 1 failed' : 'e2e: 1 passed, 0 failed');
process.exit(failed ? 1 : 0);
