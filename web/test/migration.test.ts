// Migration progress maths: keys/s from samples, ETA, percent done, the tracker's states,
// slots in flight as ranges, the throttle's text.

import { describe, expect, it } from 'vitest';
import { copyRounds, describeThrottle, donePercent, eta, formatDuration, keysPerSecond, progress, ProgressTracker, stateCounts, summarizeFlight } from '../src/lib/migration';
import { slotProgress } from './answers';

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

describe('progress', () => {
  it('percent of slots done', () => {
    expect(progress(20, 20).percent).toBe(0);
    expect(progress(20, 5)).toEqual({ total: 20, remaining: 5, done: 15, percent: 75 });
    expect(progress(20, 0).percent).toBe(100);
    expect(progress(0, 0).percent).toBe(100);
    expect(progress(3, 1).percent).toBe(66.6);
  });
  it('the tracker remembers the total as slots leave the status', () => {
    const t = new ProgressTracker();
    t.start(20, 0, 0);
    expect(t.observe(20).percent).toBe(0);
    expect(t.observe(10).percent).toBe(50);
    expect(t.slotRate(10, 5000)).toBe(2);
    expect(t.observe(0).percent).toBe(100);
  });
  it('names the state: idle, running, aborting, complete, aborted', () => {
    const t = new ProgressTracker();
    expect(t.state(0, false)).toBe('idle');
    t.start(20, 0);
    expect(t.state(20, false)).toBe('running');
    expect(t.state(0, false)).toBe('complete');
    t.abortedSome(0);
    expect(t.state(0, false)).toBe('complete');
    t.abortedSome(5);
    expect(t.state(5, true)).toBe('aborting');
    expect(t.state(0, false)).toBe('aborted');
    t.start(3, 0);
    expect(t.state(0, false)).toBe('complete');
  });
  it('a migration started elsewhere: the most slots seen in flight is the total', () => {
    const t = new ProgressTracker();
    expect(t.observe(8)).toMatchObject({ total: 8, percent: 0 });
    expect(t.observe(2)).toMatchObject({ total: 8, done: 6, percent: 75 });
    expect(t.slotRate(2)).toBe(0);
  });
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

describe('done percent', () => {
  const bySlots = progress(100, 87); // 13 % of the slots past their handoff
  it('is by keys when the dashboard estimates the keys left, so a preparing move shows 0', () => {
    expect(donePercent({ slots: [{} as never], run_keys_moved: 0, keys_left: 5000 }, bySlots)).toBe(0);
    expect(donePercent({ slots: [{} as never], run_keys_moved: 2500, keys_left: 2500 }, bySlots)).toBe(50);
    // Never 100 while a slot is still listed.
    expect(donePercent({ slots: [{} as never], run_keys_moved: 5000, keys_left: 0 }, bySlots)).toBe(99.9);
  });
  it('falls back to slots without an estimate, and is 100 when nothing is left', () => {
    expect(donePercent({ slots: [{} as never], run_keys_moved: 0, keys_left: null }, bySlots)).toBe(13);
    expect(donePercent({ slots: [], run_keys_moved: 0, keys_left: null }, progress(20, 0))).toBe(100);
  });
});

describe('throttle text', () => {
  const fmt = (n: number) => `${n} B`;
  it('names each cap, or none', () => {
    expect(describeThrottle({ max_keys_per_sec: 5000, max_bytes_per_sec: 1024 }, fmt)).toBe('5000 keys/s, 1024 B/s');
    expect(describeThrottle({ max_keys_per_sec: null, max_bytes_per_sec: null }, fmt)).toBeNull();
  });
});
