// Migration progress helpers: keys per second from samples, ETA formatting, the panel's state
// from the dashboard's run (whose numbers the panel shows as they are), slots in flight as
// ranges.

import type { MigrationHold, MigrationJob, MigrationStatus } from '../api/shapes';
import { rangeLabel } from './slots';

export interface KeySample {
  /** ms */
  t: number;
  keys: number;
}

/** Keys per second over the samples within `windowMs` of the newest; 0 with too few. */
export function keysPerSecond(samples: readonly KeySample[], windowMs = 10_000): number {
  if (samples.length < 2) return 0;
  const last = samples[samples.length - 1];
  const inWindow = samples.filter((s) => last.t - s.t <= windowMs);
  const first = inWindow[0];
  const dt = (last.t - first.t) / 1000;
  if (dt <= 0) return 0;
  // A counter that went down (a dashboard restarted) restarts the rate.
  const dk = last.keys - first.keys;
  return dk > 0 ? dk / dt : 0;
}

/** Seconds left for `remaining` units at `rate` per second; null when nothing moves. */
export function eta(remaining: number, rate: number): number | null {
  if (remaining <= 0) return 0;
  if (!(rate > 0) || !Number.isFinite(rate)) return null;
  return remaining / rate;
}

/** "42s", "3m 05s", "1h 02m"; "—" when unknown. */
export function formatDuration(secs: number | null | undefined): string {
  if (secs == null || !Number.isFinite(secs) || secs < 0) return '—';
  const s = Math.round(secs);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, '0')}m`;
}

/**
 * The panel's state, from the dashboard's `run` alone (one definition of progress, shared
 * with the CLI): idle before any migration, running (aborting while slots turn around), then
 * complete or aborted once the last one ended.
 */
export type RunState = 'idle' | 'running' | 'aborting' | 'complete' | 'aborted';

export function runState(st: Pick<MigrationStatus, 'run' | 'slots'>): RunState {
  const r = st.run;
  if (!r) return 'idle';
  if (r.running) return st.slots.some((s) => s.aborting) ? 'aborting' : 'running';
  if (r.slots_aborted > 0) return 'aborted';
  return r.slots_done > 0 ? 'complete' : 'idle';
}

/** The bar's width: nothing when idle, the run's percent otherwise. */
export function barPercent(st: Pick<MigrationStatus, 'run' | 'slots'>): number {
  return runState(st) === 'idle' || !st.run ? 0 : st.run.percent_done;
}

/** "20000 keys/s, 2.0 MiB/s", or null for no cap. */
export function describeThrottle(t: MigrationStatus['throttle'], formatBytes: (n: number) => string): string | null {
  const parts: string[] = [];
  if (t.max_keys_per_sec != null) parts.push(`${t.max_keys_per_sec} keys/s`);
  if (t.max_bytes_per_sec != null) parts.push(`${formatBytes(t.max_bytes_per_sec)}/s`);
  return parts.length ? parts.join(', ') : null;
}

/** Slots of the status still to move (every listed slot; finished ones await their push). */
export function activeSlots(st: Pick<MigrationStatus, 'slots'>): number {
  return st.slots.length;
}

/** Counts by state, for the status line. */
export function stateCounts(st: Pick<MigrationStatus, 'slots'>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of st.slots) {
    const k = s.aborting ? `${s.state} (aborting)` : s.state;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/**
 * The copy rounds of the slots still copying: how many, the furthest round, the keys written
 * during their last round (copied again in the next), and how many have converged (their last
 * round left few enough keys for a handoff). `null` when no slot is copying.
 */
export function copyRounds(
  st: Pick<MigrationStatus, 'slots'>,
): { copying: number; round: number; changed: number; converged: number } | null {
  const copying = st.slots.filter((s) => s.phase === 'copying');
  if (copying.length === 0) return null;
  return {
    copying: copying.length,
    round: Math.max(...copying.map((s) => s.round)),
    changed: copying.reduce((n, s) => n + s.changed_last_round, 0),
    converged: copying.filter((s) => s.converged).length,
  };
}

/** Slots in flight in ranges: consecutive slots in the same state between the same groups. */
export interface FlightRange {
  from: number;
  to: number;
  state: string;
  source: number;
  target: number;
  aborting: boolean;
  keys_moved: number;
}

export function summarizeFlight(slots: MigrationStatus['slots']): FlightRange[] {
  const sorted = [...slots].sort((a, b) => a.slot - b.slot);
  const out: FlightRange[] = [];
  for (const s of sorted) {
    const last = out[out.length - 1];
    if (
      last &&
      last.to === s.slot - 1 &&
      last.state === s.state &&
      last.source === s.source &&
      last.target === s.target &&
      last.aborting === s.aborting
    ) {
      last.to = s.slot;
      last.keys_moved += s.keys_moved;
    } else {
      out.push({ from: s.slot, to: s.slot, state: s.state, source: s.source, target: s.target, aborting: s.aborting, keys_moved: s.keys_moved });
    }
  }
  return out;
}

/** Slot ranges as the CLI writes them: "400-511, 700". */
export function spansLabel(spans: readonly { from: number; to: number }[]): string {
  return spans.map((s) => rangeLabel(s.from, s.to)).join(', ') || '—';
}

/** How a job ended, in words, and the badge tone to show it with. */
export function jobOutcome(job: Pick<MigrationJob, 'outcome' | 'aborted_by' | 'slots_aborted' | 'reason'>): {
  text: string;
  tone: 'ok' | 'bad' | 'warn' | 'muted';
} {
  switch (job.outcome) {
    case 'running':
      return { text: 'running', tone: 'warn' };
    case 'finished':
      return { text: 'finished', tone: 'ok' };
    case 'aborted':
      return {
        text: `aborted by ${job.aborted_by ?? 'someone unknown'} (${job.slots_aborted} slot${job.slots_aborted === 1 ? '' : 's'})`,
        tone: 'bad',
      };
    case 'failed':
      return { text: `failed: ${job.reason ?? 'no reason recorded'}`, tone: 'bad' };
  }
}

/**
 * A speed cap as typed: a whole number of keys per second (at least 1), `undefined` for an
 * empty field (no cap), or the reason it is not one.
 */
export function parseCap(text: string): number | undefined | { error: string } {
  const t = text.trim().replace(/[,_ ]/g, '');
  if (t === '') return undefined;
  const n = Number(t);
  if (!Number.isInteger(n) || n < 1) return { error: 'the speed cap is a whole number of keys per second (at least 1), or empty for none' };
  return n;
}

/** A hold placed on a timeline from `startMs` to `endMs`: left and width in percent. */
export interface PlacedHold {
  hold: MigrationHold;
  left: number;
  width: number;
}

/**
 * The holds on the job's timeline: each from its first to its last sighting, at least 0.5 %
 * wide so a single one shows; clamped to the span (a clock step must not draw outside it).
 */
export function placeHolds(holds: readonly MigrationHold[], startMs: number, endMs: number): PlacedHold[] {
  const span = Math.max(endMs - startMs, 1);
  const pct = (t: number) => Math.min(100, Math.max(0, ((t - startMs) / span) * 100));
  return holds.map((hold) => {
    const left = Math.min(pct(hold.time_ms), 99.5);
    const right = Math.max(pct(hold.last_ms), left + 0.5);
    return { hold, left, width: Math.min(right, 100) - left };
  });
}
