// Validation of a plugin's JSON config as the operator types it: parse errors are shown
// inline with line and column. Browsers word JSON.parse's errors differently (and some give
// no position), so a small scanner of our own finds where the text stops being JSON.

export type ConfigCheck =
  | { ok: true; value: unknown }
  | { ok: false; message: string; line?: number; column?: number };

/** Line and column (1-based) of a character offset. */
export function lineCol(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const lines = before.split('\n');
  return { line: lines.length, column: lines[lines.length - 1].length + 1 };
}

class JsonSyntax extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

/** Scans JSON (RFC 8259) and throws JsonSyntax at the first error. */
export function scanJson(text: string): void {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const what = () => (i >= text.length ? 'end of input' : `${JSON.stringify(text[i])}`);
  const fail = (expected: string): never => {
    throw new JsonSyntax(`expected ${expected}, found ${what()}`, i);
  };
  const lit = (word: string) => {
    if (text.startsWith(word, i)) i += word.length;
    else fail('a value');
  };
  const str = () => {
    i++; // opening quote
    while (i < text.length) {
      const ch = text[i];
      if (ch === '"') {
        i++;
        return;
      }
      if (ch === '\\') {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
            i += 2;
            throw new JsonSyntax('bad \\u escape: four hex digits expected', i);
          }
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else {
          i++;
          throw new JsonSyntax(`bad escape \\${e ?? ''}`, i);
        }
      } else if (ch < ' ') throw new JsonSyntax('control character in a string (use \\n, \\t …)', i);
      else i++;
    }
    throw new JsonSyntax('unterminated string', i);
  };
  const num = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) fail('a number');
    i += m![0].length;
  };
  const value = (): void => {
    ws();
    const ch = text[i];
    if (ch === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('a property name in double quotes');
        str();
        ws();
        if (text[i] !== ':') fail("':' after the property name");
        i++;
        value();
        ws();
        if (text[i] === ',') {
          i++;
          ws();
          if (text[i] === '}') throw new JsonSyntax('trailing comma before }', i);
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail("',' or '}'");
      }
    }
    if (ch === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (;;) {
        value();
        ws();
        if (text[i] === ',') {
          i++;
          ws();
          if (text[i] === ']') throw new JsonSyntax('trailing comma before ]', i);
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail("',' or ']'");
      }
    }
    if (ch === '"') return str();
    if (ch === 't') return lit('true');
    if (ch === 'f') return lit('false');
    if (ch === 'n') return lit('null');
    if (ch === '-' || (ch >= '0' && ch <= '9')) return num();
    fail('a value');
  };
  value();
  ws();
  if (i < text.length) fail('end of input');
}

export function validateConfig(text: string): ConfigCheck {
  if (!text.trim()) return { ok: false, message: 'the config is empty: use {} or null for none' };
  try {
    scanJson(text);
  } catch (e) {
    if (e instanceof JsonSyntax) {
      const { line, column } = lineCol(text, e.offset);
      return { ok: false, message: e.message, line, column };
    }
    throw e;
  }
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, message: (e as Error).message };
  }
}

/** Pretty JSON for the editor. */
export function formatConfig(v: unknown): string {
  return JSON.stringify(v === undefined ? null : v, null, 2);
}

/** A plugin's resource limits as the config form takes them (the CLI's `--cpu-budget-ms`, `--memory-mb`, `--max-input-kb`). */
export interface PluginLimits {
  cpu_budget_ms?: number;
  memory_mb?: number;
  max_input_kb?: number;
}

/**
 * The limits typed in the form: each a whole number of at least 1, an empty field left out
 * (the plugin keeps what it has: the default, or the last set); the first field that is not
 * one, with why.
 */
export function parseLimits(fields: Record<keyof PluginLimits, string>): PluginLimits | { error: string } {
  const names: Record<keyof PluginLimits, string> = {
    cpu_budget_ms: 'the CPU budget (ms per call)',
    memory_mb: 'the memory limit (MiB)',
    max_input_kb: 'the input limit (KiB)',
  };
  const out: PluginLimits = {};
  for (const k of Object.keys(names) as (keyof PluginLimits)[]) {
    const t = fields[k].trim();
    if (t === '') continue;
    const n = Number(t);
    if (!Number.isInteger(n) || n < 1) return { error: `${names[k]} is a whole number of at least 1, or empty to keep it` };
    out[k] = n;
  }
  return out;
}
