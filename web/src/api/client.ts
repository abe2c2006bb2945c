// The console's own API (docs/console.md): the session, the clusters it federates, the merged
// audit log and its login log; and, through `cluster(name)`, each cluster's dashboard API.
// Its routes are in no OpenAPI document yet: their shapes are the Console* schemas of
// api/overlay.mjs, checked like the dashboard's answers.

import { checkShape, fitsAnswer } from './check';
import { ClusterApi } from './cluster';
import type { AuditEntry, ClusterSummary, LoginEvent, Overview, Session } from './shapes';
import { Transport } from './transport';

/**
 * A cluster entry whose overview this console cannot read (a dashboard of another version)
 * keeps its place in the list, without the overview and saying why: one odd cluster must not
 * hide the others.
 */
function withReadableOverview(c: ClusterSummary): ClusterSummary {
  if (c.overview === null) return c;
  const misfit = fitsAnswer('GET /api/overview', c.overview);
  if (!misfit) return c;
  return { ...c, overview: null, error: `its dashboard's overview is of a shape this console does not know (${misfit})` };
}

export class Client extends Transport {
  // === session ===

  async login(user: string, password: string): Promise<Session> {
    const r = await this.send('POST', '/auth/login', { body: { user, password } });
    const s = checkShape<Session>('ConsoleSession', 'POST /auth/login', r.status, r.body);
    this.csrf = s.csrf;
    return s;
  }
  async me(): Promise<Session> {
    const r = await this.send('GET', '/auth/me');
    const s = checkShape<Session>('ConsoleSession', 'GET /auth/me', r.status, r.body);
    this.csrf = s.csrf;
    return s;
  }
  /** Ends the session; the CSRF token is forgotten even when the call fails. */
  async logout(): Promise<void> {
    try {
      await this.send('POST', '/auth/logout');
    } finally {
      this.csrf = null;
    }
  }

  // === federation ===

  async clusters(signal?: AbortSignal): Promise<ClusterSummary[]> {
    const r = await this.send('GET', '/api/clusters', { signal });
    const list = checkShape<(Omit<ClusterSummary, 'overview'> & { overview: unknown })[]>('ConsoleClusters', 'GET /api/clusters', r.status, r.body);
    return list.map((c) => withReadableOverview({ ...c, overview: c.overview as Overview | null }));
  }
  async audit(limit = 200, signal?: AbortSignal): Promise<AuditEntry[]> {
    const r = await this.send('GET', `/api/audit?limit=${limit}`, { signal });
    return checkShape<AuditEntry[]>('ConsoleAudit', 'GET /api/audit', r.status, r.body);
  }
  /** The console's login log, kept apart from the audit of changes. */
  async logins(limit = 200, signal?: AbortSignal): Promise<LoginEvent[]> {
    const r = await this.send('GET', `/api/logins?limit=${limit}`, { signal });
    return checkShape<LoginEvent[]>('ConsoleLogins', 'GET /api/logins', r.status, r.body);
  }

  /** The dashboard API of one cluster, relayed by the console. */
  cluster(name: string): ClusterApi {
    return new ClusterApi(this, name);
  }
}

/** One client for the whole app. */
export const api = new Client();
