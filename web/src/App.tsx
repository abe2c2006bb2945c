// The app's frame: the session (the login form until there is one), the top bar, and the
// page the hash route names; a cluster's page with its tabs.

import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useState } from 'react';
import { api } from './api/client';
import type { ClusterApi } from './api/cluster';
import { consoleKeys, consoleReads } from './api/queries';
import type { Role } from './api/shapes';
import { DashboardDownBanner, DashboardDownContext, downReason } from './components/DashboardDown';
import { ConfirmProvider, NoticesProvider } from './components/ui';
import { CLUSTER_TABS, hrefFor, navigate, useRoute, type ClusterTab } from './routing';
import { Audit } from './views/Audit';
import { BackupsView } from './views/Backups';
import { Clusters } from './views/Clusters';
import { Events } from './views/Events';
import { Groups } from './views/Groups';
import { HotKeysView } from './views/HotKeys';
import { Login } from './views/Login';
import { Migrations } from './views/Migrations';
import { MirrorView } from './views/Mirror';
import { OverviewView } from './views/Overview';
import { Plugins } from './views/Plugins';
import { Proxies } from './views/Proxies';
import { RoutesView } from './views/Routes';
import { SlotMap } from './views/SlotMap';
import { SlowLog } from './views/SlowLog';
import { ROLE_TEXT, Tokens } from './views/Tokens';

type Session = { state: 'checking' } | { state: 'out' } | { state: 'in'; user: string };

export function App() {
  const [session, setSession] = useState<Session>({ state: 'checking' });
  const route = useRoute();
  const queries = useQueryClient();

  useEffect(() => {
    api.onUnauthorized = () => setSession({ state: 'out' });
    api
      .me()
      .then((r) => setSession({ state: 'in', user: r.user }))
      .catch(() => setSession({ state: 'out' }));
    return () => {
      api.onUnauthorized = null;
    };
  }, []);

  if (session.state === 'checking') return <div className="loading">Loading…</div>;

  return (
    <NoticesProvider>
      <ConfirmProvider>
        {session.state === 'out' ? (
          <Login
            onLogin={(user) => {
              // A new session starts from an empty cache: nothing read in the last one (maybe
              // another user's, with another role) shows in this one.
              queries.clear();
              setSession({ state: 'in', user });
              if (route.page === 'login') navigate({ page: 'clusters' });
            }}
          />
        ) : (
          <Shell
            user={session.user}
            onLogout={async () => {
              await api.logout().catch(() => {});
              setSession({ state: 'out' });
              navigate({ page: 'login' });
            }}
          />
        )}
      </ConfirmProvider>
    </NoticesProvider>
  );
}

/** The Tokens tab: the tokens for an admin; why not otherwise. */
function TokensTab({ c, role, down }: { c: ClusterApi; role: Role | null; down: boolean }) {
  if (role === 'admin') return <Tokens c={c} />;
  if (down)
    return (
      <p className="muted" data-testid="tokens-unavailable">
        The tokens cannot be read while the dashboard is not answering the console (see above), and your role here is unknown until it does.
      </p>
    );
  return <p className="muted">Tokens are managed by admins (your role here: {role ?? 'unknown'}).</p>;
}

const TAB_LABELS: Record<ClusterTab, string> = {
  overview: 'Overview',
  groups: 'Groups & servers',
  slots: 'Slot map',
  hotkeys: 'Hot keys',
  migrations: 'Migrations',
  proxies: 'Proxies',
  plugins: 'Plugins',
  mirror: 'Mirror',
  routes: 'Routes',
  backups: 'Backups',
  slowlog: 'Slow log',
  events: 'Events',
  tokens: 'Tokens',
};

function Shell({ user, onLogout }: { user: string; onLogout: () => void }) {
  const route = useRoute();
  return (
    <div className="shell">
      <header className="topbar">
        <a className="brand" href="#/clusters">
          Tessera console
        </a>
        <nav>
          <a href="#/clusters" className={route.page === 'clusters' || route.page === 'cluster' ? 'active' : ''} data-testid="nav-clusters">
            Clusters
          </a>
          <a href="#/audit" className={route.page === 'audit' ? 'active' : ''} data-testid="nav-audit">
            Audit log
          </a>
        </nav>
        <span className="spacer" />
        <span className="user" data-testid="current-user">
          {user}
        </span>
        <button onClick={onLogout} data-testid="logout">
          Log out
        </button>
      </header>
      <main>
        {route.page === 'audit' ? (
          <Audit />
        ) : route.page === 'cluster' ? (
          <ClusterPage name={route.name} tab={route.tab} />
        ) : (
          <Clusters />
        )}
      </main>
    </div>
  );
}

/** A cluster's page: its tabs, and one banner while its dashboard is down (the tabs' reads
 * that fail for that reason stay quiet under it, `DashboardDown`). */
export function ClusterPage({ name, tab }: { name: string; tab: ClusterTab }) {
  const c = useMemo(() => api.cluster(name), [name]);
  const queries = useQueryClient();
  const all = useQuery({ ...consoleReads.clusters(api), refetchInterval: 5000 });
  const names = all.data?.map((x) => x.name) ?? [name];
  const summary = all.data?.find((x) => x.name === name);
  // What this user may do here (its role and the console's token for the cluster, the lower):
  // unknown (null) while the dashboard does not answer.
  const role = summary?.role ?? null;
  const down = downReason(summary);
  // Tokens are for admins; while the dashboard is down the role is unknown and the tab stays,
  // saying why it is empty (tabs do not come and go with the dashboard).
  const tokensTab = role === 'admin' || (role === null && down !== null);
  const tabs = CLUSTER_TABS.filter((t) => t !== 'tokens' || tokensTab);
  const sawRelayDown = useCallback(() => void queries.invalidateQueries({ queryKey: consoleKeys.clusters }), [queries]);
  const downState = useMemo(() => ({ down: down !== null, sawRelayDown }), [down, sawRelayDown]);
  return (
    <div className="cluster-page">
      <div className="cluster-head">
        <h2 data-testid="cluster-name">{name}</h2>
        {names.length > 1 && (
          <select
            value={name}
            onChange={(e) => navigate({ page: 'cluster', name: e.target.value, tab })}
            aria-label="switch cluster"
            data-testid="cluster-switch"
          >
            {names.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        )}
        {role && (
          <span className="badge badge-muted" title={ROLE_TEXT[role]} data-testid="cluster-role">
            you: {role}
          </span>
        )}
        <nav className="tabs" role="tablist">
          {tabs.map((t) => (
            <a
              key={t}
              role="tab"
              aria-selected={t === tab}
              className={t === tab ? 'tab active' : 'tab'}
              href={hrefFor({ page: 'cluster', name, tab: t })}
              data-testid={`tab-${t}`}
            >
              {TAB_LABELS[t]}
            </a>
          ))}
        </nav>
      </div>
      {down !== null && <DashboardDownBanner reason={down} />}
      <DashboardDownContext.Provider value={downState}>
        {tab === 'overview' && <OverviewView key={name} c={c} />}
        {tab === 'groups' && <Groups key={name} c={c} />}
        {tab === 'slots' && <SlotMap key={name} c={c} />}
        {tab === 'hotkeys' && <HotKeysView key={name} c={c} />}
        {tab === 'migrations' && <Migrations key={name} c={c} />}
        {tab === 'proxies' && <Proxies key={name} c={c} />}
        {tab === 'plugins' && <Plugins key={name} c={c} />}
        {tab === 'mirror' && <MirrorView key={name} c={c} />}
        {tab === 'routes' && <RoutesView key={name} c={c} role={role} />}
        {tab === 'backups' && <BackupsView key={name} c={c} />}
        {tab === 'slowlog' && <SlowLog key={name} c={c} />}
        {tab === 'events' && <Events key={name} c={c} />}
        {tab === 'tokens' && <TokensTab key={name} c={c} role={role} down={down !== null} />}
      </DashboardDownContext.Provider>
    </div>
  );
}
