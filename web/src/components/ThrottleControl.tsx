// The running migration's speed cap, changed live (PUT /api/migrations/throttle): the cap in
// force and the rate the copy moves at beside it, a field for a new cap in keys per second, and
// a button that lifts it. A refusal (409 with nothing running, 400 for a bad cap) is shown
// here with the dashboard's reason.

import { useState } from 'react';
import { useThrottle } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import type { MigrationStatus } from '../api/shapes';
import { formatBytes, formatNumber } from '../lib/format';
import { describeThrottle, parseCap } from '../lib/migration';
import { errorText, useNotices } from './ui';

export function ThrottleControl({ c, status }: { c: ClusterApi; status: MigrationStatus }) {
  const throttle = useThrottle(c);
  const { notify } = useNotices();
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const running = status.run?.running ?? false;
  const cap = describeThrottle(status.throttle, formatBytes) ?? 'none';

  const apply = async (lift: boolean) => {
    let keys: number | undefined;
    if (!lift) {
      const parsed = parseCap(text);
      if (parsed === undefined) return setError('type a cap in keys per second, or lift the cap');
      if (typeof parsed === 'object') return setError(parsed.error);
      keys = parsed;
    }
    setError(null);
    try {
      const r = await throttle.mutateAsync(keys);
      notify('ok', `Speed cap now: ${describeThrottle(r.throttle, formatBytes) ?? 'none'}`);
      setText('');
    } catch (e) {
      setError(errorText(e));
    }
  };

  return (
    <div className="throttle-control" data-testid="throttle-control">
      <div className="toolbar">
        <span>
          Speed cap <b data-testid="throttle-current">{cap}</b>
        </span>
        <span className="muted">
          moving at <b data-testid="throttle-rate">{running ? `${formatNumber(status.keys_per_sec)} keys/s` : '—'}</b>
        </span>
        <label>
          new cap{' '}
          <input
            value={text}
            onChange={(e) => setText(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter') void apply(false);
            }}
            placeholder="keys/s"
            size={8}
            inputMode="numeric"
            aria-label="new speed cap, keys per second"
            data-testid="throttle-input"
          />
        </label>
        <button onClick={() => void apply(false)} disabled={throttle.isPending} data-testid="throttle-set">
          Set cap
        </button>
        <button onClick={() => void apply(true)} disabled={throttle.isPending} data-testid="throttle-lift">
          Lift cap
        </button>
      </div>
      {error && (
        <div className="error-text small" role="alert" data-testid="throttle-error">
          {error}
        </div>
      )}
    </div>
  );
}
