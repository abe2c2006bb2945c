// The slot heatmap: ops/s or memory per slot (GET /api/slots/stats), in the slot map's layout,
// on an absolute scale with its legend; every group listed, those without slots too, with its
// master's memory as the groups view shows it beside the keys' estimated size. With the
// overlay on, each cell also shows its owner (a bar in the group's colour) and a moving slot
// is outlined, so what moves shows beside what is hot.

import { useQuery } from '@tanstack/react-query';
import { memo, useMemo, useState } from 'react';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import { formatBytes, formatShort } from '../lib/format';
import { EMPTY_COLOR, heatBands, heatColor, heatValues, slotOverlay, type HeatMeasure, type SlotOverlay } from '../lib/heat';
import { groupColor } from '../lib/slots';

const COLS = 32;

const HeatCell = memo(function HeatCell({
  slot,
  value,
  measure,
  overlay,
}: {
  slot: number;
  value: number;
  measure: HeatMeasure;
  overlay: SlotOverlay | null;
}) {
  const label = measure === 'ops' ? `${formatShort(value)} ops/s` : formatBytes(Math.round(value));
  const owner = overlay ? `, group ${overlay.group ?? 'none'}` : '';
  const moving = overlay?.movingTo != null ? `, moving to group ${overlay.movingTo}` : '';
  return (
    <div
      className={`heat-cell${overlay?.movingTo != null ? ' heat-moving' : ''}`}
      style={{
        background: heatColor(value, measure),
        boxShadow: overlay ? `inset 0 -3px 0 ${groupColor(overlay.group)}` : undefined,
      }}
      data-testid={`heat-${slot}`}
      data-value={value}
      data-owner={overlay ? (overlay.group ?? 'none') : undefined}
      title={`slot ${slot}: ${label}${owner}${moving}`}
    />
  );
});

export function SlotHeatmap({ c }: { c: ClusterApi }) {
  const stats = useQuery({ ...reads.slotStats(c), refetchInterval: 2000 });
  const [measure, setMeasure] = useState<HeatMeasure>('ops');
  const [overlayOn, setOverlayOn] = useState(false);
  const slots = useQuery({ ...reads.slots(c), refetchInterval: 2000, enabled: overlayOn });
  const overlay = useMemo(() => (overlayOn ? slotOverlay(slots.data) : null), [overlayOn, slots.data]);
  const values = useMemo(() => heatValues(stats.data, measure), [stats.data, measure]);
  const max = Math.max(0, ...values);
  const total = values.reduce((a, b) => a + b, 0);
  const fmt = (v: number) => (measure === 'ops' ? `${formatShort(v)} ops/s` : formatBytes(Math.round(v)));
  return (
    <div className="panel" data-testid="slot-heatmap">
      <h3>Heatmap</h3>
      <div className="toolbar" role="radiogroup" aria-label="heatmap measure">
        <label>
          <input type="radio" name="heat-measure" checked={measure === 'ops'} onChange={() => setMeasure('ops')} data-testid="heat-ops" /> ops/s
        </label>
        <label>
          <input type="radio" name="heat-measure" checked={measure === 'memory'} onChange={() => setMeasure('memory')} data-testid="heat-memory" /> keys' size
        </label>
        <label title="Show each slot's group (a bar in its colour) and outline the slots moving">
          <input type="checkbox" checked={overlayOn} onChange={(e) => setOverlayOn(e.target.checked)} data-testid="heat-overlay" /> slot map
          overlay
        </label>
        <span className="muted small" data-testid="heat-summary">
          total {fmt(total)}, busiest slot {fmt(max)}
          {stats.data && measure === 'ops' && ` (over ${stats.data.window_secs.toFixed(0)} s)`}
        </span>
      </div>
      <div className="slot-grid" style={{ gridTemplateColumns: `repeat(${COLS}, 1fr)` }} data-testid="heat-grid">
        {values.map((v, i) => (
          <HeatCell key={i} slot={i} value={v} measure={measure} overlay={overlay?.[i] ?? null} />
        ))}
      </div>
      <div className="heat-legend small" data-testid="heat-legend" aria-label="colour scale">
        <span className="heat-legend-item">
          <span className="heat-swatch" style={{ background: EMPTY_COLOR }} /> none
        </span>
        {heatBands(measure).map((b) => (
          <span className="heat-legend-item" key={b.from}>
            <span className="heat-swatch" style={{ background: b.color }} /> {b.label}
          </span>
        ))}
        <span className="muted"> per slot</span>
        {overlay && (
          <span className="heat-legend-item" data-testid="heat-overlay-legend">
            · bar: the slot's group ·<span className="heat-swatch heat-moving" /> moving
          </span>
        )}
      </div>
      {stats.data && (
        <table className="table compact" data-testid="heat-groups">
          <thead>
            <tr>
              <th>Group</th>
              <th className="num">Slots</th>
              <th className="num">ops/s</th>
              <th className="num">Keys</th>
              <th className="num" title="Its keys' size: MEMORY USAGE of sampled keys, summed over its slots">
                Keys' size
              </th>
              <th className="num" title="Its master's used_memory (INFO), as the Groups view shows it">
                Memory used
              </th>
            </tr>
          </thead>
          <tbody>
            {stats.data.groups.map((g) => (
              <tr key={g.group}>
                <td>group {g.group}</td>
                <td className="num">{g.slots}</td>
                <td className="num">{formatShort(g.ops_per_sec)}</td>
                <td className="num">
                  {formatShort(g.keys)}
                  {g.keys_exact === false && <span className="muted small"> (est.)</span>}
                </td>
                <td className="num">{formatBytes(Math.round(g.memory))}</td>
                <td className="num" data-testid={`heat-used-${g.group}`}>
                  {g.used_memory != null ? formatBytes(g.used_memory) : '—'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
