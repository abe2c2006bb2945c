// Processes the e2e starts (`tessera up`, redis-benchmark): each is spawned in a process group
// of its own and stopped with SIGTERM, and its stop is checked: it and every process under it
// must be gone, within bounds, or the run fails naming what is left (killed then). Should the
// process that started one die without stopping it, the kernel sends it SIGTERM (setpriv
// --pdeathsig, from util-linux), as `tessera up` has its own children do.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { sleep, until } from './wait';

export interface Started {
  name: string;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Every descendant pid of `pid` (from /proc), children before grandchildren. */
export function descendants(pid: number): number[] {
  const kids = new Map<number, number[]>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      kids.set(ppid, [...(kids.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const k of kids.get(p) ?? []) {
      out.push(k);
      walk(k);
    }
  };
  walk(pid);
  return out;
}

/** Whether `pid` runs (a zombie has exited: it only waits for its parent to reap it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Starts `cmd` in a process group of its own, its output piped. */
export function start(name: string, cmd: string, args: string[]): Started {
  // setpriv execs `cmd`: the pid is the command's own.
  const child = spawn('setpriv', ['--pdeathsig', 'TERM', '--', cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  child.on('error', (e) => console.error(`[e2e] ${name}: ${e.message}`));
  return { name, child, exited };
}

function kill(pid: number, signal: NodeJS.Signals) {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Stops `p` with SIGTERM (it stops its own children), waits up to 30 s for it and 15 s more
 * for everything under it; returns what went wrong (what was left is killed).
 */
export async function stop(p: Started): Promise<string[]> {
  const { name, child } = p;
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return [];
  const pid = child.pid;
  const family = descendants(pid);
  console.log(`[e2e] stopping ${name} (pid ${pid}, ${family.length} descendant(s)) with SIGTERM`);
  kill(pid, 'SIGTERM');
  const problems: string[] = [];
  const done = await Promise.race([p.exited, sleep(30_000).then(() => null)]);
  if (!done) {
    problems.push(`${name} did not exit within 30 s of SIGTERM`);
    kill(-pid, 'SIGKILL'); // its own process group
  }
  const gone = await until(`the children of ${name} to exit`, () => family.every((f) => !alive(f)), 15_000).catch(() => false);
  if (!gone) {
    const still = family.filter(alive);
    problems.push(`${name} left ${still.length} process(es) running: ${still.join(', ')}`);
    for (const s of still) kill(s, 'SIGKILL');
  } else if (family.length) {
    console.log(`[e2e] ${name} and its ${family.length} descendant(s) are gone`);
  }
  return problems;
}
