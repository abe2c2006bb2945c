// The plugin config editor's JSON checks: any JSON value, and where the text stops being JSON,
// as line and column.

import { describe, expect, it } from 'vitest';
import { formatConfig, lineCol, validateConfig } from '../src/lib/config';
import { moveInOrder, nameFromFile } from '../src/views/Plugins';

describe('plugin config validation', () => {
  it('accepts any JSON value', () => {
    expect(validateConfig('{"deny": ["FLUSHALL"], "limit": 10}')).toEqual({
      ok: true,
      value: { deny: ['FLUSHALL'], limit: 10 },
    });
    expect(validateConfig('null')).toEqual({ ok: true, value: null });
    expect(validateConfig('[1,2]')).toEqual({ ok: true, value: [1, 2] });
  });
  it('rejects empty text', () => {
    const r = validateConfig('  \n');
    expect(r.ok).toBe(false);
  });
  it('points at the line and column of a parse error', () => {
    const r = validateConfig('{\n  "a": 1,\n  "b": ,\n}');
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.line).toBe(3);
      expect(r.column).toBe(8);
      expect(r.message).toBe('expected a value, found ","');
    }
  });
  it('an unterminated object errs at the end', () => {
    const r = validateConfig('{"a": 1');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r).toMatchObject({ line: 1, column: 8, message: "expected ',' or '}', found end of input" });
  });
  it('names common mistakes', () => {
    const cases: [string, RegExp][] = [
      ['{a: 1}', /property name in double quotes/],
      ['[1, 2,]', /trailing comma/],
      ['{"a": 1,}', /trailing comma/],
      ["{'a': 1}", /property name/],
      ['"tab\\q"', /bad escape/],
      ['{"a": tru}', /expected a value/],
      ['{"a": 1} x', /end of input/],
      ['{"a" 1}', /':'/],
      ['"unterminated', /unterminated/],
      ['01', /end of input/],
    ];
    for (const [text, re] of cases) {
      const r = validateConfig(text);
      expect(r.ok, text).toBe(false);
      if (!r.ok) expect(r.message, text).toMatch(re);
    }
  });
  it('agrees with JSON.parse on valid documents', () => {
    for (const text of ['{"a": {"b": [1, -2.5e3, true, false, null, "x\\u00e9\\n"]}}', '  0 ', '"\\u0041"', '[]', '{}']) {
      expect(validateConfig(text), text).toEqual({ ok: true, value: JSON.parse(text) as unknown });
    }
  });
  it('lineCol counts 1-based', () => {
    expect(lineCol('ab\ncd', 0)).toEqual({ line: 1, column: 1 });
    expect(lineCol('ab\ncd', 4)).toEqual({ line: 2, column: 2 });
  });
  it('formats for the editor', () => {
    expect(formatConfig({ a: 1 })).toBe('{\n  "a": 1\n}');
    expect(formatConfig(undefined)).toBe('null');
  });
});

describe('plugin order', () => {
  it('moves one place up or down, not past the ends', () => {
    expect(moveInOrder(['a', 'b', 'c'], 'b', -1)).toEqual(['b', 'a', 'c']);
    expect(moveInOrder(['a', 'b', 'c'], 'b', 1)).toEqual(['a', 'c', 'b']);
    expect(moveInOrder(['a', 'b', 'c'], 'a', -1)).toEqual(['a', 'b', 'c']);
    expect(moveInOrder(['a', 'b', 'c'], 'c', 1)).toEqual(['a', 'b', 'c']);
    expect(moveInOrder(['a'], 'x', 1)).toEqual(['a']);
  });
});

describe('plugin name from a file name', () => {
  it('drops .wasm and the crate prefix, and keeps what the dashboard accepts', () => {
    expect(nameFromFile('tessera_plugin_filter.wasm')).toBe('filter');
    expect(nameFromFile('libtessera_plugin_bucket.wasm')).toBe('bucket');
    expect(nameFromFile('My Guard.WASM')).toBe('My-Guard');
    expect(nameFromFile(`${'x'.repeat(80)}.wasm`)).toHaveLength(64);
  });
});
