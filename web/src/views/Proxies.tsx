// A cluster's proxies: health (up, fenced, lost, draining) and state, QPS, errors and sessions,
// version, epoch; taking one offline (left out of pushes) and back online; removing a lost one
// (a proxy whose registration is gone or that does not answer stays listed until then).

import { useQuery } from '@tanstack/react-query';
import { useRemoveProxy, useSetProxyOnline } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { Proxy, ProxyStats } from '../api/shapes';
import { Badge, ErrorBox, useConfirm, useNotices } from '../components/ui';
import { formatAge, formatNumber } from '../lib/format';

export function Proxies({ c }: { c: ClusterApi }) {
  const proxies = useQuery({ ...reads.proxies(c), refetchInterval: 2000 });
  const stats = useQuery({ ...reads.stats(c), refetchInterval: 2000 });
  const { run } = useNotices();
  const confirm = useConfirm();
  const setState = useSetProxyOnline(c);
  const remove = useRemoveProxy(c);
  const byToken = new Map<string, ProxyStats>();
  for (const p of stats.data?.proxies ?? []) byToken.set(p.token, p);

  const setOnline = async (p: Proxy, online: boolean) => {
    if (!online) {
      const ok = await confirm(
        `Take proxy ${p.addr} offline?`,
        'It stays registered but is left out of topology pushes; clients should stop using it.',
        'Take offline',
      );
      if (!ok) return;
    }
    await run(
      `Proxy ${p.addr} ${online ? 'online' : 'offline'}`,
      () => setState.mutateAsync({ token: p.token, online }),
      () => `proxy ${p.addr} is ${online ? 'online' : 'offline'}`,
    );
  };

  const removeLost = async (p: Proxy) => {
    const ok = await confirm(
      `Remove proxy ${p.addr} from the list?`,
      'It is lost: its registration is gone or it does not answer. If it comes back, it registers again and is listed again.',
      'Remove',
    );
    if (!ok) return;
    await run(`Remove proxy ${p.addr}`, () => remove.mutateAsync(p.token), () => `proxy ${p.addr} removed from the list`);
  };

  return (
    <section>
      <ErrorBox error={proxies.error} />
      {proxies.data && (
        <table className="table" data-testid="proxies-table">
          <thead>
            <tr>
              <th>Proxy</th>
              <th>Health</th>
              <th>State</th>
              <th className="num">QPS</th>
              <th className="num">Errors</th>
              <th className="num">Sessions</th>
              <th>Version</th>
              <th className="num">Epoch</th>
              <th>Host / pid</th>
              <th>Up for</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {proxies.data.map((p) => {
              const st = byToken.get(p.token);
              // A proxy whose stats could not be fetched has only the reason.
              const s = st && !('error' in st) ? st : undefined;
              const why = p.error ?? (st && 'error' in st ? st.error : undefined);
              return (
                <tr key={p.token} data-testid={`proxy-${p.token}`}>
                  <td>
                    {p.addr}
                    <div className="muted small">
                      admin {p.admin_addr} · {p.token.slice(0, 12)}
                    </div>
                  </td>
                  <td>
                    <Badge ok={p.health === 'up' ? true : p.health === 'draining' ? null : false} testid={`proxy-health-${p.token}`}>
                      {p.health}
                    </Badge>
                    {why && <div className="error-text small">{why}</div>}
                  </td>
                  <td>
                    <Badge ok={p.state === 'online' ? true : null} testid={`proxy-state-${p.token}`}>
                      {p.state}
                    </Badge>
                  </td>
                  <td className="num">{formatNumber(s?.ops_per_sec)}</td>
                  <td className="num">{formatNumber(s?.errors_total)}</td>
                  <td className="num">{formatNumber(s?.sessions)}</td>
                  <td>{p.version}</td>
                  <td className="num">{p.epoch ?? '—'}</td>
                  <td className="small">
                    {p.host} / {p.pid}
                  </td>
                  <td>{formatAge(p.start_unix)}</td>
                  <td>
                    {p.health === 'lost' && (
                      <button className="danger-outline" onClick={() => removeLost(p)} data-testid={`proxy-remove-${p.token}`}>
                        Remove
                      </button>
                    )}
                    {!p.registered ? null : p.state === 'online' ? (
                      <button className="danger-outline" onClick={() => setOnline(p, false)} data-testid={`proxy-offline-${p.token}`}>
                        Offline
                      </button>
                    ) : (
                      <button onClick={() => setOnline(p, true)} data-testid={`proxy-online-${p.token}`}>
                        Online
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
            {proxies.data.length === 0 && (
              <tr>
                <td colSpan={11} className="muted">
                  No proxy registered.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
