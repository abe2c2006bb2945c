// A cluster whose dashboard is down, said once: the cluster page shows the console's reason
// (GET /api/clusters, `error`) in one banner, and every call of its tabs that failed for that
// same reason (the relay's 503 `unavailable` or 502 `bad_gateway`) stays quiet under it
// instead of repeating it. A call that fails so while the banner is not up asks the console
// again, so that the banner comes instead of one box per call.

import { createContext, useContext } from 'react';
import { ApiError } from '../api/error';
import type { ClusterSummary } from '../api/shapes';

export interface DashboardDownState {
  /** The banner is up: the cluster's dashboard does not serve the relay. */
  down: boolean;
  /** A call failed at the relay while the banner is not up: read the clusters again. */
  sawRelayDown: () => void;
}

export const DashboardDownContext = createContext<DashboardDownState>({ down: false, sawRelayDown: () => {} });

export function useDashboardDown(): DashboardDownState {
  return useContext(DashboardDownContext);
}

/** Whether `e` is the console's answer for a cluster whose dashboard cannot be reached. */
export function isRelayDown(e: unknown): boolean {
  return e instanceof ApiError && ((e.status === 503 && e.code === 'unavailable') || (e.status === 502 && e.code === 'bad_gateway'));
}

/** Why the cluster's dashboard serves nothing now, or null when it answers (or is not known yet). */
export function downReason(summary: ClusterSummary | undefined): string | null {
  if (!summary || summary.reachable) return null;
  return summary.error ?? 'its dashboard does not answer';
}

/** The one place the page says why its dashboard is down (the console's words: who last held
 * the cluster's lock and whether it answers, or how to start one), and that what the tabs
 * still show from before is not live. */
export function DashboardDownBanner({ reason }: { reason: string }) {
  return (
    <div className="error-box" role="alert" data-testid="cluster-down">
      {reason}
      <div className="small" data-testid="cluster-down-stale">
        Figures shown below are the last the dashboard gave before it stopped answering; they are not refreshed until it answers again.
      </div>
    </div>
  );
}
