// Where the e2e finds what it runs and puts what it makes.

import fs from 'node:fs';
import path from 'node:path';

export const WEB = path.resolve(import.meta.dirname, '..', '..');
// The cargo target directory: CARGO_TARGET_DIR when cargo was told to build elsewhere.
const TARGET = process.env.CARGO_TARGET_DIR ? path.resolve(WEB, '..', process.env.CARGO_TARGET_DIR) : path.resolve(WEB, '../target');
/** The tessera binary (TESSERA_BIN overrides). */
export const BIN = process.env.TESSERA_BIN ?? path.join(TARGET, 'debug/tessera');
/** The plugins' wasm32 builds (TESSERA_PLUGIN_DIR overrides). */
export const PLUGIN_DIR = process.env.TESSERA_PLUGIN_DIR ?? path.join(TARGET, 'wasm32-unknown-unknown/release');
export const FILTER_WASM = path.join(PLUGIN_DIR, 'tessera_plugin_filter.wasm');
/** redis-benchmark (REDIS_BENCHMARK overrides). */
export const BENCH = process.env.REDIS_BENCHMARK ?? 'redis-benchmark';
/** A screenshot of every view (ignored by git). */
export const SHOTS = path.join(WEB, 'e2e', 'screenshots');

/**
 * The OpenAPI document the console's types and answer schemas were generated from: the
 * argument of package.json's `gen` script, where its path is written once.
 */
export function apiDocument(): string {
  const pkg = JSON.parse(fs.readFileSync(path.join(WEB, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const arg = /gen-api\.mjs\s+(\S+)/.exec(pkg.scripts.gen)?.[1];
  if (!arg) throw new Error(`package.json's gen script names no document: ${pkg.scripts.gen}`);
  return path.resolve(WEB, arg);
}
