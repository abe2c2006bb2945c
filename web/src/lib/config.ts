// Validation of a plugin's JSON config as the operator types it: parse errors are shown
// inline with line and column.

export type ConfigCheck =
  | { ok: true; value: unknown }
  | { ok: false; message: string; line?: number; column?: number };

/** Line and column (1-based) of a character offset. */
export function lineCol(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const lines = before.split('\n');
  return { line: lines.length, column: lines[lines.length - 1].length + 1 };
}

/** Finds where JSON.parse failed, from the messages V8 and others give. */
function errorOffset(text: string, message: string): number | null {
  let m = /at position (\d+)/i.exec(message);
  if (m) return Number(m[1]);
  m = /line (\d+) column (\d+)/i.exec(message);
  if (m) {
    const lines = text.split('\n');
    const line = Number(m[1]);
    let off = 0;
    for (let i = 0; i < line - 1 && i < lines.length; i++) off += lines[i].length + 1;
    return off + Number(m[2]) - 1;
  }
  if (/unexpected end/i.test(message)) return text.length;
  return null;
}

export function validateConfig(text: string): ConfigCheck {
  if (!text.trim()) return { ok: false, message: 'the config is empty: use {} or null for none' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    const message = (e as Error).message;
    const off = errorOffset(text, message);
    if (off == null) return { ok: false, message };
    const { line, column } = lineCol(text, off);
    return { ok: false, message: `${message.replace(/\s*\(line \d+ column \d+\)/, '')}`, line, column };
  }
}

/** Pretty JSON for the editor. */
export function formatConfig(v: unknown): string {
  return JSON.stringify(v === undefined ? null : v, null, 2);
}
