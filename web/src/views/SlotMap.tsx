// The slot map: 1024 cells coloured by owner, migrating ones marked; a range selected by click,
// shift-click, drag, typing or the keyboard (arrows move, Enter or Space select, shift
// extends, Escape clears), then assigned, migrated or aborted; the heatmap and the running
// migration's progress below.

import { useQuery } from '@tanstack/react-query';
import { memo, useEffect, useMemo, useRef, useState } from 'react';
import { useAbort, useAssign, useMigrate } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import { MigrationProgress, useMigrations } from '../components/MigrationProgress';
import { SlotHeatmap } from '../components/SlotHeatmap';
import { ErrorBox, useConfirm, useNotices } from '../components/ui';
import {
  clickSlot,
  extendTo,
  groupColor,
  inSelection,
  moveFocus,
  parseRange,
  rangeLabel,
  selectionProblem,
  selectionSize,
  SLOT_COUNT,
  slotLabel,
  slotsPerGroup,
  summarizeSlots,
  type Selection,
} from '../lib/slots';
import type { Slot, SlotProgress } from '../api/shapes';

const COLS = 32;

interface CellProps {
  slot: Slot;
  selected: boolean;
  focused: boolean;
}

const Cell = memo(function Cell({ slot, selected, focused }: CellProps) {
  const a = slot.action;
  const cls = ['slot-cell'];
  if (a) cls.push('migrating');
  if (a?.aborting) cls.push('aborting');
  if (selected) cls.push('selected');
  if (focused) cls.push('focused');
  const style: React.CSSProperties = { background: groupColor(slot.group) };
  if (a) style.background = `linear-gradient(135deg, ${groupColor(a.source)} 50%, ${groupColor(a.target)} 50%)`;
  return (
    <div
      className={cls.join(' ')}
      style={style}
      id={`slot-cell-${slot.id}`}
      role="gridcell"
      aria-selected={selected}
      aria-label={slotLabel(slot)}
      data-slot={slot.id}
      data-testid={`slot-${slot.id}`}
      data-group={slot.group ?? ''}
      data-state={a ? a.state : ''}
      title={`slot ${slot.id}: ${slot.group == null ? 'unassigned' : `group ${slot.group}`}${a ? ` — ${a.state} ${a.source}→${a.target}${a.aborting ? ' (aborting)' : ''}` : ''}`}
    />
  );
});

export function SlotMap({ c }: { c: ClusterApi }) {
  const slots = useQuery({ ...reads.slots(c), refetchInterval: 1000 });
  const groups = useQuery({ ...reads.groups(c), refetchInterval: 5000 });
  const mig = useMigrations(c);
  const migrateSlots = useMigrate(c);
  const assignSlots = useAssign(c);
  const abortSlots = useAbort(c);
  const { run, notify } = useNotices();
  const confirm = useConfirm();
  const [sel, setSelection] = useState<Selection | null>(null);
  const [focus, setFocus] = useState<number | null>(null);
  const [chosen, setChosen] = useState<number | ''>('');
  // The range field shows the selection until the operator types in it.
  const [rangeEdit, setRangeEdit] = useState<string | null>(null);
  const rangeText = rangeEdit ?? (sel ? rangeLabel(sel.from, sel.to) : '');
  const dragging = useRef(false);
  const setSel = (f: (s: Selection | null) => Selection | null) => {
    setSelection(f);
    setRangeEdit(null);
  };

  useEffect(() => {
    const up = () => (dragging.current = false);
    window.addEventListener('mouseup', up);
    return () => window.removeEventListener('mouseup', up);
  }, []);

  const list: Slot[] = useMemo(() => {
    const d = slots.data ?? [];
    const out = new Array<Slot>(SLOT_COUNT);
    for (let i = 0; i < SLOT_COUNT; i++) out[i] = d[i]?.id === i ? d[i] : (d.find((s) => s.id === i) ?? { id: i, group: null });
    return out;
  }, [slots.data]);
  const ranges = useMemo(() => summarizeSlots(list), [list]);
  const counts = useMemo(() => slotsPerGroup(list), [list]);
  const groupIds = (groups.data ?? []).filter((g) => g.servers.length > 0).map((g) => g.id);
  const progressBySlot = useMemo(() => {
    const m = new Map<number, SlotProgress>();
    for (const p of mig.data?.slots ?? []) m.set(p.slot, p);
    return m;
  }, [mig.data]);

  // The target: the group chosen, unless none is or it owns the selection's first slot; then
  // another group.
  const owner = sel ? list[sel.from]?.group : undefined;
  const other = groupIds.find((g) => g !== owner);
  const target = sel && (chosen === '' || chosen === owner) && other !== undefined ? other : chosen;

  const slotFromEvent = (e: React.MouseEvent): number | null => {
    const el = (e.target as HTMLElement).closest<HTMLElement>('[data-slot]');
    return el ? Number(el.dataset.slot) : null;
  };
  const onMouseDown = (e: React.MouseEvent) => {
    const id = slotFromEvent(e);
    if (id == null || e.button !== 0) return;
    e.preventDefault();
    setSel((s) => clickSlot(s, id, e.shiftKey));
    setFocus(id);
    dragging.current = true;
  };
  const onMouseOver = (e: React.MouseEvent) => {
    if (!dragging.current) return;
    const id = slotFromEvent(e);
    if (id == null) return;
    setSel((s) => extendTo(s, id));
  };

  const onKeyDown = (e: React.KeyboardEvent) => {
    const at = focus ?? sel?.from ?? 0;
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      setSel((s) => clickSlot(s, at, e.shiftKey));
      setFocus(at);
      return;
    }
    if (e.key === 'Escape') {
      setSel(() => null);
      return;
    }
    const next = moveFocus(at, e.key, COLS);
    if (next == null) return;
    e.preventDefault();
    // Shift extends the selection from its anchor (or from where the focus was).
    if (e.shiftKey) setSel((s) => extendTo(s ?? { anchor: at, from: at, to: at }, next));
    setFocus(next);
  };

  const applyRangeText = () => {
    const r = parseRange(rangeText);
    if (typeof r === 'string') {
      notify('error', r);
      return;
    }
    setSel(() => ({ anchor: r.from, from: r.from, to: r.to }));
    setFocus(r.from);
  };

  const allUnassigned = !!sel && list.slice(sel.from, sel.to + 1).every((s) => s.group == null);
  const migratingInSel = sel ? list.slice(sel.from, sel.to + 1).filter((s) => s.action).map((s) => s.id) : [];
  const problem = sel && target !== '' && !allUnassigned ? selectionProblem(list, sel, target) : null;

  const migrate = async () => {
    if (!sel || target === '') return;
    await run(
      `Migrate slots ${rangeLabel(sel.from, sel.to)}`,
      () => migrateSlots.mutateAsync({ from: sel.from, to: sel.to, group: target }),
      (r) => `${r.queued} slot(s) queued to move to group ${target}`,
    );
  };
  const assign = async () => {
    if (!sel || target === '') return;
    await run(
      `Assign slots ${rangeLabel(sel.from, sel.to)}`,
      () => assignSlots.mutateAsync({ from: sel.from, to: sel.to, group: target }),
      (r) => `${r.assigned} slot(s) assigned to group ${target} (epoch ${r.epoch})`,
    );
  };
  const abortSel = async () => {
    if (!migratingInSel.length) return;
    const ok = await confirm(
      `Abort the migration of ${migratingInSel.length} selected slot(s)?`,
      'Pending ones are dropped; started ones turn around and move their keys back.',
      'Abort',
    );
    if (!ok) return;
    await run('Abort', () => abortSlots.mutateAsync(migratingInSel), (r) => `${r.aborted} slot migration(s) aborted`);
  };

  const focused = focus == null ? null : list[focus];
  const fp = focus == null ? undefined : progressBySlot.get(focus);

  return (
    <section className="slotmap-page">
      <ErrorBox error={slots.error} />
      <div className="slotmap-layout">
        <div>
          <div
            className="slot-grid"
            style={{ gridTemplateColumns: `repeat(${COLS}, 1fr)` }}
            onMouseDown={onMouseDown}
            onMouseOver={onMouseOver}
            onKeyDown={onKeyDown}
            onFocus={() => setFocus((f) => f ?? sel?.from ?? 0)}
            tabIndex={0}
            aria-activedescendant={focus == null ? undefined : `slot-cell-${focus}`}
            aria-multiselectable
            data-testid="slot-grid"
            role="grid"
            aria-label="slot map: arrows move, Enter or Space select, shift extends, Escape clears; or click, shift-click or drag"
          >
            {Array.from({ length: SLOT_COUNT / COLS }, (_, r) => (
              <div role="row" key={r} className="slot-row">
                {list.slice(r * COLS, (r + 1) * COLS).map((s) => (
                  <Cell key={s.id} slot={s} selected={inSelection(sel, s.id)} focused={focus === s.id} />
                ))}
              </div>
            ))}
          </div>
          <div className="legend">
            {(groups.data ?? []).map((g) => (
              <span key={g.id} className="legend-item">
                <span className="swatch" style={{ background: groupColor(g.id) }} /> group {g.id} ({counts.get(g.id) ?? 0})
              </span>
            ))}
            <span className="legend-item">
              <span className="swatch" style={{ background: groupColor(null) }} /> unassigned ({counts.get('none') ?? 0})
            </span>
            <span className="legend-item">
              <span className="swatch migrating-swatch" /> migrating
            </span>
          </div>
          <div className="muted small" data-testid="slot-ranges">
            {ranges.map((r) => `${rangeLabel(r.from, r.to)} → ${r.group == null ? 'none' : `g${r.group}`}`).join(', ')}
          </div>
          <SlotHeatmap c={c} />
        </div>
        <aside className="slot-side">
          <div className="panel">
            <h3>Selection</h3>
            <div className="toolbar">
              <input
                value={rangeText}
                onChange={(e) => setRangeEdit(e.target.value)}
                onKeyDown={(e) => e.key === 'Enter' && applyRangeText()}
                onBlur={() => rangeText && applyRangeText()}
                placeholder="from-to"
                aria-label="selected slots (from-to)"
                size={10}
                data-testid="selection-range"
              />
              <span className="muted" data-testid="selection-size">
                {selectionSize(sel)} slot(s)
              </span>
              {sel && (
                <button className="link" onClick={() => setSel(() => null)}>
                  clear
                </button>
              )}
            </div>
            <div className="toolbar">
              <label>
                to group{' '}
                <select
                  value={target}
                  onChange={(e) => setChosen(e.target.value === '' ? '' : Number(e.target.value))}
                  data-testid="target-group"
                >
                  <option value="">—</option>
                  {groupIds.map((g) => (
                    <option key={g} value={g}>
                      group {g}
                    </option>
                  ))}
                </select>
              </label>
            </div>
            <div className="toolbar">
              {allUnassigned ? (
                <button className="primary" disabled={!sel || target === ''} onClick={assign} data-testid="assign-selection">
                  Assign {selectionSize(sel)} slot(s)
                </button>
              ) : (
                <button
                  className="primary"
                  disabled={!sel || target === '' || !!problem}
                  onClick={migrate}
                  data-testid="migrate-selection"
                >
                  Migrate {selectionSize(sel)} slot(s)
                </button>
              )}
              {migratingInSel.length > 0 && (
                <button className="danger" onClick={abortSel} data-testid="abort-selection">
                  Abort {migratingInSel.length}
                </button>
              )}
            </div>
            {problem && <div className="error-text small">{problem}</div>}
            <p className="muted small">Click a slot, shift-click another (or drag) to select a range.</p>
          </div>
          <div className="panel" data-testid="slot-detail">
            <h3>Slot {focused ? focused.id : '—'}</h3>
            {focused ? (
              <dl className="kv">
                <dt>Owner</dt>
                <dd data-testid="slot-detail-group">{focused.group == null ? 'unassigned' : `group ${focused.group}`}</dd>
                <dt>Migration</dt>
                <dd data-testid="slot-detail-action">
                  {focused.action
                    ? `${focused.action.state}: group ${focused.action.source} → ${focused.action.target}${focused.action.aborting ? ' (aborting)' : ''}`
                    : 'none'}
                </dd>
                {fp && (
                  <>
                    <dt>Keys moved</dt>
                    <dd>{fp.keys_moved}</dd>
                  </>
                )}
              </dl>
            ) : (
              <p className="muted">Click a slot for its detail.</p>
            )}
          </div>
        </aside>
      </div>
      <MigrationProgress c={c} status={mig.data} error={mig.error} />
    </section>
  );
}
