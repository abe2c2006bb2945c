// Routing by key prefix: commands on keys with a route's prefix go from this cluster's proxies
// to a proxy of another cluster of the same store (as one of its users, when the route has
// one). The routes, what every proxy forwards each prefix to right now, and (admins only)
// adding and removing routes: every change sends the whole list, existing routes without
// their passwords (the server keeps them).

import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useSetRoutes } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { PrefixRoute, PrefixRouteChange, ProxyRouting, Role } from '../api/shapes';
import { Badge, ErrorBox, useConfirm, useNotices } from '../components/ui';

/** One proxy's state for a route: forwarding to `target`, or why not. */
export interface ProxyLine {
  addr: string;
  target: string | null;
  text: string;
}

/** How many of the cluster's proxies route `r` to its cluster now, and each proxy's line. */
export function routeStatus(r: PrefixRoute, proxies: ProxyRouting[]): { routing: number; total: number; lines: ProxyLine[] } {
  const lines = proxies.map((p): ProxyLine => {
    if (p.error) return { addr: p.addr, target: null, text: `not reached: ${p.error}` };
    const now = (p.routes ?? []).find((x) => x.prefix === r.prefix);
    if (!now) return { addr: p.addr, target: null, text: 'not routing it yet' };
    if (now.cluster !== r.cluster) return { addr: p.addr, target: null, text: `still routes it to ${now.cluster}` };
    if (!now.target) return { addr: p.addr, target: null, text: now.error ?? 'no proxy of the cluster reachable' };
    return { addr: p.addr, target: now.target, text: `→ ${now.target}` };
  });
  return { routing: lines.filter((l) => l.target).length, total: lines.length, lines };
}

/** A route as resent in PUT: its user but no password (the server keeps the one it has). */
function resend(r: PrefixRoute): PrefixRouteChange {
  return r.user ? { prefix: r.prefix, cluster: r.cluster, user: r.user } : { prefix: r.prefix, cluster: r.cluster };
}

export function RoutesView({ c, role }: { c: ClusterApi; role?: Role | null }) {
  const poll = useQuery({ ...reads.routes(c), refetchInterval: 2000 });
  const qc = useQueryClient();
  const setRoutes = useSetRoutes(c);
  const { notify } = useNotices();
  const confirm = useConfirm();
  const [putError, setPutError] = useState<unknown>(null);
  const busy = setRoutes.isPending;
  const canChange = role === 'admin';
  const routes = poll.data?.routes ?? [];
  const proxies = poll.data?.proxies ?? [];
  const clusters = poll.data?.clusters ?? [];

  /** The routes as last read: a change starts from them, even if they changed while a dialog was open. */
  const latest = () => qc.getQueryData(reads.routes(c).queryKey)?.routes ?? [];

  /** PUTs `list`; true when the server took it. */
  const put = async (list: PrefixRouteChange[], ok: string): Promise<boolean> => {
    try {
      await setRoutes.mutateAsync(list);
      setPutError(null);
      notify('ok', ok);
      return true;
    } catch (e) {
      setPutError(e);
      return false;
    }
  };

  const remove = async (r: PrefixRoute) => {
    const ok = await confirm(
      `Stop routing ${r.prefix}?`,
      `Commands on keys starting with "${r.prefix}" go to this cluster's own groups again; the keys already in ${r.cluster} stay there.`,
      'Remove route',
    );
    if (!ok) return;
    await put(latest().filter((x) => x.prefix !== r.prefix).map(resend), `${r.prefix} no longer routed`);
  };

  return (
    <section>
      <ErrorBox error={poll.error} />
      <div className="panel">
        <h3>Routes by key prefix</h3>
        <p className="muted small">
          Commands on keys starting with a route's prefix are forwarded by this cluster's proxies to a proxy of the other cluster, authenticated as the route's user when it has one.
          A command whose keys span clusters is refused.
        </p>
        <ErrorBox error={putError} testid="routes-error" />
        {poll.data && (
          <table className="table" data-testid="routes-table">
            <thead>
              <tr>
                <th>Prefix</th>
                <th>Cluster</th>
                <th>User</th>
                <th>Proxies</th>
                {canChange && <th></th>}
              </tr>
            </thead>
            <tbody>
              {routes.map((r) => {
                const st = routeStatus(r, proxies);
                return (
                  <tr key={r.prefix} data-testid={`route-row-${r.prefix}`}>
                    <td>
                      <code>{r.prefix}</code>
                    </td>
                    <td>{r.cluster}</td>
                    <td>{r.user ? r.user : <span className="muted">no AUTH</span>}</td>
                    <td>
                      <span data-testid={`route-status-${r.prefix}`} data-routing={st.routing} data-proxies={st.total}>
                        <Badge ok={st.total === 0 ? null : st.routing === st.total}>
                          {st.total === 0 ? 'no proxy' : `${st.routing}/${st.total} proxies routing`}
                        </Badge>
                      </span>
                      {st.lines.map((l) => (
                        <div key={l.addr} className={l.target ? 'small muted' : 'small error-text'} data-testid={`route-proxy-${r.prefix}-${l.addr}`}>
                          {l.addr} {l.text}
                        </div>
                      ))}
                    </td>
                    {canChange && (
                      <td className="actions">
                        <button className="danger-outline" onClick={() => remove(r)} disabled={busy} data-testid={`route-remove-${r.prefix}`}>
                          Remove
                        </button>
                      </td>
                    )}
                  </tr>
                );
              })}
              {routes.length === 0 && (
                <tr>
                  <td colSpan={canChange ? 5 : 4} className="muted">
                    No route: every key is served by this cluster.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        )}
        {poll.data &&
          (canChange ? (
            <AddRoute clusters={clusters} busy={busy} onAdd={(r) => put([...latest().map(resend), r], `${r.prefix} routed to ${r.cluster}`)} />
          ) : (
            <p className="muted small" data-testid="routes-readonly">
              Routes are changed by admins (your role here: {role ?? 'unknown'}).
            </p>
          ))}
      </div>
    </section>
  );
}

function AddRoute({ clusters, busy, onAdd }: { clusters: string[]; busy: boolean; onAdd: (r: PrefixRouteChange) => Promise<boolean> }) {
  const [prefix, setPrefix] = useState('');
  const [cluster, setCluster] = useState('');
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const u = user.trim();
  const problem = password && !u ? 'a password goes with a user' : null;
  const ready = prefix !== '' && cluster !== '' && !problem && !busy;

  const add = async () => {
    const r: PrefixRouteChange = { prefix, cluster };
    if (u) r.user = u;
    if (u && password) r.password = password;
    if (await onAdd(r)) {
      setPrefix('');
      setUser('');
      setPassword('');
    }
  };

  return (
    <form
      className="toolbar"
      onSubmit={(e) => {
        e.preventDefault();
        if (ready) void add();
      }}
    >
      <label>
        Prefix <input value={prefix} onChange={(e) => setPrefix(e.target.value)} placeholder="user:" size={14} data-testid="route-prefix" />
      </label>
      <label>
        to cluster{' '}
        <select value={cluster} onChange={(e) => setCluster(e.target.value)} data-testid="route-cluster">
          <option value="">{clusters.length ? 'choose…' : 'no other cluster in the store'}</option>
          {clusters.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </label>
      <label>
        User <input value={user} onChange={(e) => setUser(e.target.value)} placeholder="optional" size={12} autoComplete="off" data-testid="route-user" />
      </label>
      <label>
        Password <input type="password" value={password} onChange={(e) => setPassword(e.target.value)} size={12} autoComplete="new-password" data-testid="route-password" />
      </label>
      <button type="submit" className="primary" disabled={!ready} data-testid="route-add">
        Apply
      </button>
      {problem && <span className="error-text small">{problem}</span>}
    </form>
  );
}
