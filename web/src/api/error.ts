// API failures: the error envelope every Tessera API answers with, `{"error":{"code","message"}}`
// (docs/api.md, docs/console.md), checked for its shape before it is believed.

/** An API failure: the envelope's code and message, or what stood in for them. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** The envelope in a parsed body, or null when the body is something else. */
export function envelopeOf(v: unknown): { code: string; message: string } | null {
  if (!v || typeof v !== 'object' || !('error' in v)) return null;
  const e = v.error;
  if (!e || typeof e !== 'object' || !('code' in e) || !('message' in e)) return null;
  return typeof e.code === 'string' && typeof e.message === 'string' ? { code: e.code, message: e.message } : null;
}

/** Turns a failed response into an ApiError, whatever its body. */
export async function errorFrom(resp: Response): Promise<ApiError> {
  const text = await resp.text().catch(() => '');
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON (a proxy in front, a crash page): the text itself is the message.
  }
  const env = envelopeOf(parsed);
  if (env) return new ApiError(resp.status, env.code, env.message);
  const msg = text.trim() || resp.statusText || `HTTP ${resp.status}`;
  return new ApiError(resp.status, `http_${resp.status}`, msg.slice(0, 500));
}
