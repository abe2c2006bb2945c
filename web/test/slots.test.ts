// Slot-map logic: ranges by owner, selection, range parsing, what keeps a range from moving,
// rebalance plans in ranges.

import { describe, expect, it } from 'vitest';
import {
  clickSlot,
  extendTo,
  groupColor,
  inSelection,
  parseRange,
  planDelta,
  rangeLabel,
  selectOne,
  selectionProblem,
  selectionSize,
  slotsPerGroup,
  summarizeMoves,
  summarizeSlots, moveFocus, slotLabel } from '../src/lib/slots';
import type { Slot } from '../src/api/shapes';

const evenSplit = (): Slot[] => Array.from({ length: 1024 }, (_, id) => ({ id, group: id < 512 ? 1 : 2 }));

describe('summarizeSlots', () => {
  it('summarises an even split into two ranges', () => {
    expect(summarizeSlots(evenSplit())).toEqual([
      { from: 0, to: 511, group: 1 },
      { from: 512, to: 1023, group: 2 },
    ]);
  });
  it('keeps unassigned runs and interleavings, whatever the input order', () => {
    const slots: Slot[] = [
      { id: 3, group: 2 },
      { id: 0, group: null },
      { id: 1, group: null },
      { id: 2, group: 1 },
      { id: 4, group: 2 },
      { id: 5, group: 1 },
    ];
    expect(summarizeSlots(slots)).toEqual([
      { from: 0, to: 1, group: null },
      { from: 2, to: 2, group: 1 },
      { from: 3, to: 4, group: 2 },
      { from: 5, to: 5, group: 1 },
    ]);
  });
  it('splits a run at a gap in the ids', () => {
    expect(summarizeSlots([{ id: 0, group: 1 }, { id: 2, group: 1 }])).toEqual([
      { from: 0, to: 0, group: 1 },
      { from: 2, to: 2, group: 1 },
    ]);
  });
  it('counts slots per group, unassigned apart', () => {
    expect(Object.fromEntries(slotsPerGroup([{ group: 1 }, { group: 2 }, { group: 1 }, { group: null }]))).toEqual({ 1: 2, 2: 1, none: 1 });
  });
  it('gives nothing for no slot', () => {
    expect(summarizeSlots([])).toEqual([]);
  });
  it('labels ranges', () => {
    expect(rangeLabel(0, 511)).toBe('0-511');
    expect(rangeLabel(7, 7)).toBe('7');
  });
});

describe('selection', () => {
  it('a click selects one slot, shift-click extends from the anchor either way', () => {
    let s = clickSlot(null, 100, false);
    expect(s).toEqual({ anchor: 100, from: 100, to: 100 });
    s = clickSlot(s, 119, true);
    expect(s).toEqual({ anchor: 100, from: 100, to: 119 });
    expect(selectionSize(s)).toBe(20);
    s = clickSlot(s, 90, true);
    expect(s).toEqual({ anchor: 100, from: 90, to: 100 });
    s = clickSlot(s, 5, false);
    expect(s).toEqual({ anchor: 5, from: 5, to: 5 });
  });
  it('dragging extends from where the drag began', () => {
    let s = selectOne(10);
    for (const over of [11, 12, 15, 13]) s = extendTo(s, over);
    expect(s).toEqual({ anchor: 10, from: 10, to: 13 });
    expect(inSelection(s, 13)).toBe(true);
    expect(inSelection(s, 14)).toBe(false);
    expect(inSelection(null, 0)).toBe(false);
  });
  it('shift-click with nothing selected selects that slot; out-of-range ids are clamped', () => {
    expect(clickSlot(null, 4, true)).toEqual({ anchor: 4, from: 4, to: 4 });
    expect(selectOne(5000)).toEqual({ anchor: 1023, from: 1023, to: 1023 });
    expect(selectionSize(null)).toBe(0);
  });
  it('parses typed ranges', () => {
    expect(parseRange('10-29')).toEqual({ from: 10, to: 29 });
    expect(parseRange(' 7 ')).toEqual({ from: 7, to: 7 });
    expect(parseRange('30-10')).toMatch(/backwards/);
    expect(parseRange('0-1024')).toMatch(/0-1023/);
    expect(parseRange('abc')).toMatch(/from-to/);
  });
  it('says why a selection cannot be migrated', () => {
    const slots = evenSplit();
    expect(selectionProblem(slots, { anchor: 0, from: 0, to: 19 }, 2)).toBeNull();
    expect(selectionProblem(slots, { anchor: 0, from: 0, to: 19 }, 1)).toMatch(/owns every/);
    // Part already on the target is fine (those slots are skipped).
    expect(selectionProblem(slots, { anchor: 500, from: 500, to: 520 }, 2)).toBeNull();
    slots[3] = { id: 3, group: 1, action: { state: 'migrating', source: 1, target: 2, aborting: false } };
    expect(selectionProblem(slots, { anchor: 0, from: 0, to: 19 }, 2)).toMatch(/already migrating/);
    slots[4] = { id: 4, group: null };
    expect(selectionProblem(slots, { anchor: 0, from: 0, to: 19 }, 2)).toMatch(/not assigned/);
  });
});

describe('rebalance plan', () => {
  it('summarises moves into ranges and per-group deltas', () => {
    const moves = [
      { slot: 12, from: 1, to: 3 },
      { slot: 10, from: 1, to: 3 },
      { slot: 11, from: 1, to: 3 },
      { slot: 600, from: 2, to: 3 },
      { slot: 601, from: 2, to: 3 },
      { slot: 13, from: 2, to: 3 },
    ];
    expect(summarizeMoves(moves)).toEqual([
      { from: 10, to: 12, source: 1, target: 3 },
      { from: 13, to: 13, source: 2, target: 3 },
      { from: 600, to: 601, source: 2, target: 3 },
    ]);
    expect(Object.fromEntries(planDelta(moves))).toEqual({ 1: -3, 2: -3, 3: 6 });
  });
});

describe('groupColor', () => {
  it('is stable per group and grey for unassigned', () => {
    expect(groupColor(1)).toBe(groupColor(1));
    expect(groupColor(1)).not.toBe(groupColor(2));
    expect(groupColor(null)).toBe('#d0d4da');
  });
});

describe('the slot grid from the keyboard', () => {
  it('moves by cell, row, row end and page, clamped to the slots', () => {
    expect(moveFocus(0, 'ArrowRight')).toBe(1);
    expect(moveFocus(0, 'ArrowLeft')).toBe(0);
    expect(moveFocus(5, 'ArrowDown')).toBe(37);
    expect(moveFocus(1023, 'ArrowDown')).toBe(1023);
    expect(moveFocus(40, 'Home')).toBe(32);
    expect(moveFocus(40, 'End')).toBe(63);
    expect(moveFocus(1000, 'PageDown')).toBe(1023);
    expect(moveFocus(3, 'Tab')).toBeNull();
  });
  it('reads a slot with its group and its move', () => {
    expect(slotLabel({ id: 5, group: 1 })).toBe('slot 5, group 1');
    expect(slotLabel({ id: 9, group: null })).toBe('slot 9, unassigned');
    expect(slotLabel({ id: 700, group: 2, action: { state: 'copying', source: 2, target: 1, aborting: false } })).toBe(
      'slot 700, group 2, migrating to group 1',
    );
  });
});
