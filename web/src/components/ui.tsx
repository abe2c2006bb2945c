// The app's small shared pieces: error text and box, notices (results and errors of actions),
// the confirm dialog of destructive actions, stat cards and badges.

import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import { ApiError } from '../api/error';
import { isRelayDown, useDashboardDown } from './DashboardDown';

/** Operator-facing text of an error: the API's code and message. */
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.code && e.status ? `${e.message} (${e.status} ${e.code})` : e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}

/** An error of a read, in a box; quiet when it is the dashboard being down and the page's
 * banner already says so (`DashboardDown`). */
export function ErrorBox({ error, testid = 'error' }: { error: unknown; testid?: string }) {
  const { down, sawRelayDown } = useDashboardDown();
  const relayDown = isRelayDown(error);
  useEffect(() => {
    if (relayDown && !down) sawRelayDown();
  }, [relayDown, down, sawRelayDown]);
  if (!error || (down && relayDown)) return null;
  return (
    <div className="error-box" role="alert" data-testid={testid}>
      {errorText(error)}
    </div>
  );
}

// --- notices: results and errors of actions, shown at the top ---

interface Notice {
  id: number;
  kind: 'error' | 'ok';
  text: string;
}

interface Notices {
  notify: (kind: Notice['kind'], text: string) => void;
  /** Runs a mutating call; its error is shown and returned as undefined. */
  run: <T>(what: string, f: () => Promise<T>, ok?: (v: T) => string | null) => Promise<T | undefined>;
}

const NoticesCtx = createContext<Notices>({
  notify: () => {},
  run: (_w, f) => f(),
});

export function useNotices() {
  return useContext(NoticesCtx);
}

export function NoticesProvider({ children }: { children: ReactNode }) {
  const [notices, setNotices] = useState<Notice[]>([]);
  const next = useRef(1);
  const dismiss = (id: number) => setNotices((n) => n.filter((x) => x.id !== id));
  const notify = useCallback((kind: Notice['kind'], text: string) => {
    const id = next.current++;
    setNotices((n) => [...n.slice(-4), { id, kind, text }]);
    if (kind === 'ok') setTimeout(() => dismiss(id), 5000);
  }, []);
  const run = useCallback(
    async <T,>(what: string, f: () => Promise<T>, ok?: (v: T) => string | null) => {
      try {
        const v = await f();
        const msg = ok ? ok(v) : null;
        if (msg) notify('ok', msg);
        return v;
      } catch (e) {
        notify('error', `${what}: ${errorText(e)}`);
        return undefined;
      }
    },
    [notify],
  );
  return (
    <NoticesCtx.Provider value={{ notify, run }}>
      <div className="notices">
        {notices.map((n) => (
          <div
            key={n.id}
            className={`notice notice-${n.kind}`}
            role={n.kind === 'error' ? 'alert' : 'status'}
            data-testid={n.kind === 'error' ? 'notice-error' : 'notice-ok'}
          >
            <span>{n.text}</span>
            <button className="link" onClick={() => dismiss(n.id)} aria-label="dismiss">
              ×
            </button>
          </div>
        ))}
      </div>
      {children}
    </NoticesCtx.Provider>
  );
}

// --- confirm dialog for destructive actions ---

interface ConfirmRequest {
  title: string;
  body: ReactNode;
  confirmLabel: string;
  resolve: (ok: boolean) => void;
}

const ConfirmCtx = createContext<(title: string, body: ReactNode, confirmLabel?: string) => Promise<boolean>>(() =>
  Promise.resolve(true),
);

export function useConfirm() {
  return useContext(ConfirmCtx);
}

export function ConfirmProvider({ children }: { children: ReactNode }) {
  const [req, setReq] = useState<ConfirmRequest | null>(null);
  const ask = useCallback(
    (title: string, body: ReactNode, confirmLabel = 'Confirm') =>
      new Promise<boolean>((resolve) => setReq({ title, body, confirmLabel, resolve })),
    [],
  );
  const close = (ok: boolean) => {
    req?.resolve(ok);
    setReq(null);
  };
  // Focus goes to Cancel, never to the destructive button: Enter or Space on a dialog that
  // appeared under the keyboard must not confirm it.
  const cancelRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (req) cancelRef.current?.focus();
  }, [req]);
  return (
    <ConfirmCtx.Provider value={ask}>
      {children}
      {req && (
        <div className="modal-backdrop" onKeyDown={(e) => e.key === 'Escape' && close(false)}>
          <div className="modal" role="dialog" aria-modal="true" aria-labelledby="confirm-title" data-testid="confirm-dialog">
            <h3 id="confirm-title">{req.title}</h3>
            <div className="modal-body">{req.body}</div>
            <div className="modal-actions">
              <button ref={cancelRef} onClick={() => close(false)} data-testid="confirm-cancel">
                Cancel
              </button>
              <button className="danger" onClick={() => close(true)} data-testid="confirm-ok">
                {req.confirmLabel}
              </button>
            </div>
          </div>
        </div>
      )}
    </ConfirmCtx.Provider>
  );
}

export function Stat({ label, value, testid }: { label: string; value: ReactNode; testid?: string }) {
  return (
    <div className="stat">
      <div className="stat-label">{label}</div>
      <div className="stat-value" data-testid={testid}>
        {value}
      </div>
    </div>
  );
}

export function Badge({ ok, children, testid }: { ok: boolean | null; children: ReactNode; testid?: string }) {
  const cls = ok == null ? 'badge badge-muted' : ok ? 'badge badge-ok' : 'badge badge-bad';
  return (
    <span className={cls} data-testid={testid}>
      {children}
    </span>
  );
}
