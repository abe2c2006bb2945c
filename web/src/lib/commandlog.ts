// The command log's rows as the operator asks for them: filtered by text (command and
// arguments, client, proxy) and sorted newest first or by value (the slowest, the largest).

import type { CommandLogEntry } from '../api/shapes';

export type CommandLogSort = 'time' | 'value';

/** The entries matching `filter` (case-insensitive, every word must match), sorted by `sort`. */
export function arrangeEntries(entries: readonly CommandLogEntry[], sort: CommandLogSort, filter: string): CommandLogEntry[] {
  const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
  const text = (e: CommandLogEntry) =>
    `${e.args.join(' ')} ${e.client_addr} ${e.client_name ?? ''} ${e.proxy_addr} ${e.proxy}`.toLowerCase();
  const kept = words.length ? entries.filter((e) => words.every((w) => text(e).includes(w))) : [...entries];
  return kept.sort((a, b) => (sort === 'value' ? b.value - a.value || b.time - a.time : b.time - a.time || b.value - a.value));
}
