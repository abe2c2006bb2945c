// The console's own API (docs/console.md): the session, the clusters it federates, the merged
// audit log and its login log; and, through `cluster(name)`, each cluster's dashboard API.
// Each answer is checked against its route's schema, as the dashboard's are.

import { checkAnswer, fitsAnswer } from './check';
import { ClusterApi } from './cluster';
import { relayed } from './contract';
import type { AuditEntry, ClusterSummary, LoginEvent, Session } from './shapes';
import { Transport, type Answered } from './transport';

/** The answer of the console's own `route` ("GET /auth/me"), once it fits its schema. */
function own<T>(route: string, r: Answered): T {
  return checkAnswer<T>('the console', route, r.status, r.body);
}

/**
 * A cluster entry whose overview this console cannot read (a dashboard of another version)
 * keeps its place in the list, without the overview and saying why: one odd cluster must not
 * hide the others.
 */
function withReadableOverview(c: ClusterSummary): ClusterSummary {
  // An entry that is no object is left for the list's check to refuse.
  if (typeof c !== 'object' || c === null || c.overview == null) return c;
  const misfit = fitsAnswer(`GET ${relayed('/api/overview')}`, c.overview);
  if (!misfit) return c;
  return { ...c, overview: null, error: `its dashboard's overview is of a shape this console does not know (${misfit})` };
}

export class Client extends Transport {
  // === session ===

  async login(user: string, password: string): Promise<Session> {
    const r = await this.send('POST', '/auth/login', { body: { user, password } });
    const s = own<Session>('POST /auth/login', r);
    this.csrf = s.csrf;
    return s;
  }
  async me(): Promise<Session> {
    const r = await this.send('GET', '/auth/me');
    const s = own<Session>('GET /auth/me', r);
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
    // Each overview is checked on its own first, so that one odd cluster keeps the list.
    const listed = Array.isArray(r.body) ? (r.body as ClusterSummary[]).map(withReadableOverview) : r.body;
    return own<ClusterSummary[]>('GET /api/clusters', { status: r.status, body: listed });
  }
  async audit(limit = 200, signal?: AbortSignal): Promise<AuditEntry[]> {
    const r = await this.send('GET', `/api/audit?limit=${limit}`, { signal });
    return own<AuditEntry[]>('GET /api/audit', r);
  }
  /** The console's login log, kept apart from the audit of changes. */
  async logins(limit = 200, signal?: AbortSignal): Promise<LoginEvent[]> {
    const r = await this.send('GET', `/api/logins?limit=${limit}`, { signal });
    return own<LoginEvent[]>('GET /api/logins', r);
  }

  /** The dashboard API of one cluster, relayed by the console. */
  cluster(name: string): ClusterApi {
    return new ClusterApi(this, name);
  }
}

/** One client for the whole app. */
export const api = new Client();
