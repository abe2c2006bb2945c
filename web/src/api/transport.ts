// One HTTP call to the console (docs/console.md): JSON in and out, the session's CSRF token on
// every mutating call, failures as ApiError, and a 401 reported as the end of the session.
// What an answer must look like is checked by the callers (./client.ts, ./cluster.ts).

import { ApiError, errorFrom } from './error';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface RequestOptions {
  body?: unknown;
  /** Raw body (e.g. a .wasm module) sent as is, with this content type. */
  raw?: { data: BodyInit; contentType: string };
  signal?: AbortSignal;
}

/** A parsed JSON answer and the status it came with. */
export interface Answered {
  status: number;
  body: unknown;
}

export class Transport {
  csrf: string | null = null;
  /** Called on any 401 (the session ended): the app goes back to the login form. */
  onUnauthorized: (() => void) | null = null;
  private readonly fetchImpl: FetchLike;

  constructor(fetchImpl?: FetchLike) {
    this.fetchImpl = fetchImpl ?? ((input, init) => fetch(input, init));
  }

  /**
   * Sends `method path` and parses the answer as JSON (an empty body is `undefined`).
   *
   * @throws ApiError for a failure status (its envelope's code and message), for an answer
   * that is not JSON (`bad_answer`) and when the console cannot be reached (`network`); an
   * aborted call rejects with the AbortError.
   */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Answered> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    let body: BodyInit | undefined;
    if (opts.raw) {
      headers['Content-Type'] = opts.raw.contentType;
      body = opts.raw.data;
    } else if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const m = method.toUpperCase();
    if (MUTATING.has(m) && this.csrf) headers['X-CSRF-Token'] = this.csrf;
    let resp: Response;
    try {
      resp = await this.fetchImpl(path, { method: m, headers, body, credentials: 'same-origin', signal: opts.signal });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', `cannot reach the console: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (!resp.ok) {
      const err = await errorFrom(resp);
      if (resp.status === 401 && !path.startsWith('/auth/login')) this.onUnauthorized?.();
      throw err;
    }
    const text = await resp.text();
    if (!text) return { status: resp.status, body: undefined };
    try {
      return { status: resp.status, body: JSON.parse(text) as unknown };
    } catch {
      throw new ApiError(resp.status, 'bad_answer', `${m} ${path} answered no JSON: ${text.slice(0, 200)}`);
    }
  }
}
