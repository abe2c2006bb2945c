// Slot-map logic: summarising ownership into ranges, and range selection by click,
// shift-click and drag.

import type { Slot } from '../api/shapes';

export const SLOT_COUNT = 1024;

/** A run of consecutive slots with the same owner (null: unassigned). */
export interface SlotRange {
  from: number;
  to: number;
  group: number | null;
}

/** Consecutive slots with the same owner, in slot order: e.g. [0..511 → 1, 512..1023 → 2]. */
export function summarizeSlots(slots: Pick<Slot, 'id' | 'group'>[]): SlotRange[] {
  const sorted = [...slots].sort((a, b) => a.id - b.id);
  const out: SlotRange[] = [];
  for (const s of sorted) {
    const g = s.group ?? null;
    const last = out[out.length - 1];
    if (last && last.group === g && last.to === s.id - 1) last.to = s.id;
    else out.push({ from: s.id, to: s.id, group: g });
  }
  return out;
}

/** "0-511" or "7" for a single slot. */
export function rangeLabel(from: number, to: number): string {
  return from === to ? `${from}` : `${from}-${to}`;
}

/** Slots owned per group (unassigned under the key "none"). */
export function slotsPerGroup(slots: Pick<Slot, 'group'>[]): Map<number | 'none', number> {
  const m = new Map<number | 'none', number>();
  for (const s of slots) {
    const k = s.group ?? 'none';
    m.set(k, (m.get(k) ?? 0) + 1);
  }
  return m;
}

/** A contiguous selection of slots; `anchor` is where the click or drag started. */
export interface Selection {
  anchor: number;
  from: number;
  to: number;
}

const clamp = (n: number) => Math.max(0, Math.min(SLOT_COUNT - 1, Math.trunc(n)));

/** A plain click selects one slot (and sets the anchor for shift-click). */
export function selectOne(slot: number): Selection {
  const s = clamp(slot);
  return { anchor: s, from: s, to: s };
}

/** Shift-click (or dragging onto `slot`) extends from the anchor to `slot`, either way. */
export function extendTo(sel: Selection | null, slot: number): Selection {
  const s = clamp(slot);
  if (!sel) return selectOne(s);
  return { anchor: sel.anchor, from: Math.min(sel.anchor, s), to: Math.max(sel.anchor, s) };
}

/** What a click on a cell does: shift extends the selection, a plain click starts anew. */
export function clickSlot(sel: Selection | null, slot: number, shift: boolean): Selection {
  return shift ? extendTo(sel, slot) : selectOne(slot);
}

/**
 * Where a key moves the focus in a grid of `cols` columns over the slots: arrows by a cell or
 * a row, Home and End to the row's ends, PageUp and PageDown by 8 rows, clamped to the slots.
 * `null` for any other key.
 */
export function moveFocus(focus: number, key: string, cols = 32): number | null {
  const row = Math.floor(focus / cols) * cols;
  const to: Record<string, number> = {
    ArrowLeft: focus - 1,
    ArrowRight: focus + 1,
    ArrowUp: focus - cols,
    ArrowDown: focus + cols,
    Home: row,
    End: row + cols - 1,
    PageUp: focus - cols * 8,
    PageDown: focus + cols * 8,
  };
  return key in to ? clamp(to[key]) : null;
}

/** A slot as a screen reader reads it: "slot 700, group 2, migrating to group 1". */
export function slotLabel(slot: Pick<Slot, 'id' | 'group' | 'action'>): string {
  const owner = slot.group == null ? 'unassigned' : `group ${slot.group}`;
  const a = slot.action;
  const move = a ? `, ${a.aborting ? 'aborting its move' : 'migrating'} to group ${a.target}` : '';
  return `slot ${slot.id}, ${owner}${move}`;
}

export function selectionSize(sel: Selection | null): number {
  return sel ? sel.to - sel.from + 1 : 0;
}

export function inSelection(sel: Selection | null, slot: number): boolean {
  return !!sel && slot >= sel.from && slot <= sel.to;
}

/** Parses "10-29" or "10" (as typed by the operator) into a range, or an error message. */
export function parseRange(text: string): { from: number; to: number } | string {
  const m = /^\s*(\d+)\s*(?:[-–.]+\s*(\d+)\s*)?$/.exec(text);
  if (!m) return 'a slot range is "from-to", e.g. 0-511';
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  if (from > to) return `the range ${from}-${to} runs backwards`;
  if (to >= SLOT_COUNT) return `slots are 0-${SLOT_COUNT - 1}`;
  return { from, to };
}

/** The owners of a selection's slots; a migration needs them all assigned and not moving. */
export function selectionProblem(slots: Slot[], sel: Selection, target: number): string | null {
  let moving = 0;
  let unassigned = 0;
  let already = 0;
  for (let i = sel.from; i <= sel.to; i++) {
    const s = slots[i];
    if (!s) continue;
    if (s.action) moving++;
    if (s.group == null) unassigned++;
    else if (s.group === target) already++;
  }
  if (unassigned) return `${unassigned} slot(s) of the selection are not assigned: assign them instead`;
  if (moving) return `${moving} slot(s) of the selection are already migrating`;
  if (already === selectionSize(sel)) return `group ${target} owns every selected slot already`;
  return null;
}

/** A stable colour per group id (unassigned is grey). */
const PALETTE = [
  '#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948',
  '#b07aa1', '#ff9da7', '#9c755f', '#8cd17d', '#499894', '#d37295',
];
export function groupColor(group: number | null | undefined): string {
  if (group == null) return '#d0d4da';
  return PALETTE[(((group - 1) % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

/** A rebalance plan in ranges: consecutive slots moving between the same two groups. */
export interface MoveRange {
  from: number;
  to: number;
  source: number;
  target: number;
}

export function summarizeMoves(moves: { slot: number; from: number; to: number }[]): MoveRange[] {
  const sorted = [...moves].sort((a, b) => a.slot - b.slot);
  const out: MoveRange[] = [];
  for (const m of sorted) {
    const last = out[out.length - 1];
    if (last && last.to === m.slot - 1 && last.source === m.from && last.target === m.to) last.to = m.slot;
    else out.push({ from: m.slot, to: m.slot, source: m.from, target: m.to });
  }
  return out;
}

/** Slots each group gains (positive) or loses (negative) under a plan. */
export function planDelta(moves: { from: number; to: number }[]): Map<number, number> {
  const d = new Map<number, number>();
  for (const m of moves) {
    d.set(m.from, (d.get(m.from) ?? 0) - 1);
    d.set(m.to, (d.get(m.to) ?? 0) + 1);
  }
  return d;
}
