// Migration progress maths: keys/s from samples, ETA, percent done, the tracker's states,
// slots in flight as ranges, the throttle's text.

import { describe, expect, it } from 'vitest';
import {
  barPercent,
  copyRounds,
  describeThrottle,
  eta,
  formatDuration,
  jobOutcome,
  keysPerSecond,
  parseCap,
  placeHolds,
  runState,
  spansLabel,
  stateCounts,
  summarizeFlight,
} from '../src/lib/migration';
import { migrationRun, slotProgress } from './answers';

const moving = slotProgress();

describe('keys per second', () => {
  it('is the slope over the window', () => {
    const samples = [
      { t: 0, keys: 0 },
      { t: 1000, keys: 500 },
      { t: 2000, keys: 1000 },
      { t: 4000, keys: 3000 },
    ];
    expect(keysPerSecond(samples)).toBe(750);
    // Only the last 2 s: (3000-1000)/2
    expect(keysPerSecond(samples, 2000)).toBe(1000);
  });
  it('is 0 with too few samples, no time elapsed, or a counter reset', () => {
    expect(keysPerSecond([])).toBe(0);
    expect(keysPerSecond([{ t: 0, keys: 5 }])).toBe(0);
    expect(keysPerSecond([{ t: 0, keys: 5 }, { t: 0, keys: 9 }])).toBe(0);
    expect(keysPerSecond([{ t: 0, keys: 500 }, { t: 1000, keys: 10 }])).toBe(0);
  });
});

describe('ETA', () => {
  it('is remaining over rate, 0 when done, unknown when nothing moves', () => {
    expect(eta(1000, 250)).toBe(4);
    expect(eta(0, 0)).toBe(0);
    expect(eta(10, 0)).toBeNull();
    expect(eta(10, Infinity)).toBeNull();
  });
  it('formats durations', () => {
    expect(formatDuration(42.4)).toBe('42s');
    expect(formatDuration(185)).toBe('3m 05s');
    expect(formatDuration(3720)).toBe('1h 02m');
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(-1)).toBe('—');
  });
});

describe('the run', () => {
  it('names the state from the dashboard\'s run: idle, running, aborting, complete, aborted', () => {
    expect(runState({ run: null, slots: [] })).toBe('idle');
    expect(runState({ run: migrationRun(), slots: [moving] })).toBe('running');
    expect(runState({ run: migrationRun(), slots: [{ ...moving, aborting: true }] })).toBe('aborting');
    const ended = { running: false, ended_unix_ms: 2_000 };
    expect(runState({ run: migrationRun({ ...ended, slots: 4, slots_done: 4 }), slots: [] })).toBe('complete');
    expect(runState({ run: migrationRun({ ...ended, slots: 4, slots_done: 2, slots_aborted: 2 }), slots: [] })).toBe('aborted');
  });
  it('draws no bar when idle, and the run\'s own percent otherwise', () => {
    expect(barPercent({ run: null, slots: [] })).toBe(0);
    expect(barPercent({ run: migrationRun({ percent_done: 42.5 }), slots: [moving] })).toBe(42.5);
  });
});

describe('slot states', () => {
  it('counts slots by state, aborting apart', () => {
    expect(
      stateCounts({
        slots: [
          { ...moving, slot: 1, state: 'migrating' },
          { ...moving, slot: 2, state: 'migrating' },
          { ...moving, slot: 3, state: 'preparing', source: 2, target: 1, aborting: true },
        ],
      }),
    ).toEqual({ migrating: 2, 'preparing (aborting)': 1 });
  });
  it('sums the copy rounds of the slots still copying', () => {
    expect(copyRounds({ slots: [] })).toBeNull();
    expect(
      copyRounds({
        slots: [
          { ...moving, slot: 1, phase: 'copying', round: 3, changed_last_round: 40, converged: false },
          { ...moving, slot: 2, phase: 'copying', round: 5, changed_last_round: 2, converged: true },
          { ...moving, slot: 3, phase: 'cleanup', round: 9, changed_last_round: 0, converged: true },
        ],
      }),
    ).toEqual({ copying: 2, round: 5, changed: 42, converged: 1 });
  });
});


describe('slots in flight as ranges', () => {
  it('groups consecutive slots of the same state and direction, summing keys', () => {
    const mk = (slot: number, state: 'pending' | 'migrating', aborting = false, keys = 1) => ({
      ...moving,
      slot,
      state,
      aborting,
      keys_moved: keys,
    });
    expect(
      summarizeFlight([mk(12, 'pending'), mk(10, 'migrating'), mk(11, 'migrating', false, 5), mk(13, 'pending', true), mk(20, 'pending')]),
    ).toEqual([
      { from: 10, to: 11, state: 'migrating', source: 1, target: 2, aborting: false, keys_moved: 6 },
      { from: 12, to: 12, state: 'pending', source: 1, target: 2, aborting: false, keys_moved: 1 },
      { from: 13, to: 13, state: 'pending', source: 1, target: 2, aborting: true, keys_moved: 1 },
      { from: 20, to: 20, state: 'pending', source: 1, target: 2, aborting: false, keys_moved: 1 },
    ]);
  });
});

describe('throttle text', () => {
  const fmt = (n: number) => `${n} B`;
  it('names each cap, or none', () => {
    expect(describeThrottle({ max_keys_per_sec: 5000, max_bytes_per_sec: 1024 }, fmt)).toBe('5000 keys/s, 1024 B/s');
    expect(describeThrottle({ max_keys_per_sec: null, max_bytes_per_sec: null }, fmt)).toBeNull();
  });
});

describe('jobs', () => {
  it('label slot ranges as the CLI does', () => {
    expect(spansLabel([{ from: 400, to: 511 }, { from: 700, to: 700 }])).toBe('400-511, 700');
    expect(spansLabel([])).toBe('—');
  });
  it('say how a job ended, with who aborted it or why it failed', () => {
    const base = { aborted_by: null, slots_aborted: 0, reason: null };
    expect(jobOutcome({ ...base, outcome: 'finished' })).toEqual({ text: 'finished', tone: 'ok' });
    expect(jobOutcome({ ...base, outcome: 'aborted', aborted_by: 'ops-token', slots_aborted: 3 }).text).toBe(
      'aborted by ops-token (3 slots)',
    );
    expect(jobOutcome({ ...base, outcome: 'failed', reason: 'slots 3 left' }).text).toBe('failed: slots 3 left');
  });
  it('take a speed cap as a whole number of keys per second, or none', () => {
    expect(parseCap(' 1,500 ')).toBe(1500);
    expect(parseCap('')).toBeUndefined();
    expect(parseCap('0')).toHaveProperty('error');
    expect(parseCap('2.5')).toHaveProperty('error');
    expect(parseCap('fast')).toHaveProperty('error');
  });
  it('place holds on the job span, visible and clamped', () => {
    const hold = { time_ms: 1500, last_ms: 1500, times: 1, slots: [], reason: 'x' };
    const [one] = placeHolds([hold], 1000, 2000);
    expect(one.left).toBe(50);
    expect(one.width).toBe(0.5);
    const [late] = placeHolds([{ ...hold, time_ms: 5000, last_ms: 6000 }], 1000, 2000);
    expect(late.left + late.width).toBeLessThanOrEqual(100);
    const [long] = placeHolds([{ ...hold, time_ms: 1000, last_ms: 2000 }], 1000, 2000);
    expect([long.left, long.width]).toEqual([0, 100]);
  });
});
