// The cluster's hot keys (GET /api/hotkeys): the top keys by operations and by bytes over the
// proxies' recent window, summed over the proxies, with the share each proxy saw.
import { useQuery } from '@tanstack/react-query';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { HotCacheFigures, HotKey } from '../api/shapes';
import { ErrorBox, Stat } from '../components/ui';
import { formatBytes, formatNumber, formatRate, perSecond } from '../lib/format';

/** Hits over the cache's lookups (hits and misses) since the proxies started. */
export function hitRate(f: HotCacheFigures): string {
  const lookups = f.hits + f.misses;
  return lookups === 0 ? '–' : `${((100 * f.hits) / lookups).toFixed(1)} %`;
}

export function HotKeysView({ c }: { c: ClusterApi }) {
  const hot = useQuery({ ...reads.hotKeys(c), refetchInterval: 3000 });
  const v = hot.data;
  return (
    <section>
      <ErrorBox error={hot.error} />
      {v && (
        <>
          <div className="stats-row">
            <Stat label="Window" value={`${Math.round(v.window_secs)} s`} testid="hotkeys-window" />
            <Stat label="Proxies counted" value={v.proxies} testid="hotkeys-proxies" />
            {v.unanswered.length > 0 && <Stat label="Proxies not answering" value={v.unanswered.length} testid="hotkeys-unanswered" />}
            {v.hot_cache?.enabled && (
              <>
                <Stat label="Cache hit rate" value={hitRate(v.hot_cache)} testid="hotkeys-cache-hit-rate" />
                <Stat label="Cache held" value={`${formatNumber(v.hot_cache.entries)} keys, ${formatBytes(v.hot_cache.bytes)}`} testid="hotkeys-cache-held" />
              </>
            )}
          </div>
          <div className="columns">
            <Ranking title="By operations" keys={v.by_ops} windowSecs={v.window_secs} testid="hotkeys-ops" />
            <Ranking title="By bytes" keys={v.by_bytes} windowSecs={v.window_secs} testid="hotkeys-bytes" />
          </div>
          <p className="muted small">
            Rates are each key's count over the window ({Math.round(v.window_secs)} s) divided by its length. Counts are estimates over each proxy's sliding window (never under a key's true count while it stays in a proxy's top list). Long keys are cut; bytes outside printable ASCII show as \xHH.
          </p>
        </>
      )}
    </section>
  );
}

function Ranking({ title, keys, windowSecs, testid }: { title: string; keys: HotKey[]; windowSecs: number; testid: string }) {
  const rate = (n: number) => perSecond(n, windowSecs);
  return (
    <div>
      <h3>{title}</h3>
      <table className="table" data-testid={testid}>
        <thead>
          <tr>
            <th>Key</th>
            <th className="num">Ops/s</th>
            <th className="num">Bytes/s</th>
            <th className="num">Slot</th>
            <th className="num">Group</th>
            <th>Seen by</th>
          </tr>
        </thead>
        <tbody>
          {keys.map((k) => (
            <tr key={`${k.key}/${k.key_len}`} data-testid={`${testid}-row`}>
              <td className="mono" title={k.truncated ? `${k.key_len} bytes, cut` : undefined}>
                {k.key}
                {k.truncated && <span className="muted small"> … ({formatBytes(k.key_len)})</span>}
              </td>
              <td className="num" data-testid={`${testid}-ops`} title={`${formatNumber(k.ops)} operations in the window`}>
                {formatRate(rate(k.ops))}
              </td>
              <td className="num">{rate(k.bytes) == null ? '—' : `${formatBytes(Math.round(rate(k.bytes) ?? 0))}/s`}</td>
              <td className="num">{k.slot ?? '—'}</td>
              <td className="num">{k.group ?? '—'}</td>
              <td className="small">
                {k.seen_by.map((s) => (
                  <div key={s.token}>
                    {s.addr}: {formatRate(rate(s.ops))} ops/s
                  </div>
                ))}
              </td>
            </tr>
          ))}
          {keys.length === 0 && (
            <tr>
              <td colSpan={6} className="muted">
                No traffic counted yet.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
