// Whole answers of the dashboard's routes for the tests' fake consoles, every field the server
// sends present: a test spells out only what it looks at.

import type { MigrationRun, MigrationStatus, Server, SlotProgress } from '../src/api/shapes';

/** A migration's speed cap when none is set. */
export const noCap = { max_keys_per_sec: null, max_bytes_per_sec: null };

/** `GET /api/migrations` of an idle dashboard, with `over` replacing fields. */
export function migrationStatus(over: Partial<MigrationStatus> = {}): MigrationStatus {
  return {
    slots: [],
    pending: 0,
    in_flight: 0,
    keys_moved: 0,
    bytes_moved: 0,
    keys_per_sec: 0,
    bytes_per_sec: 0,
    run_keys_moved: 0,
    run_bytes_moved: 0,
    keys_left: null,
    eta_secs: null,
    run: null,
    throttle: noCap,
    slowest_command: null,
    blocked: null,
    max_slots_in_flight: 4,
    abort_pending: false,
    write_pause: null,
    holds: [],
    ...over,
  };
}

/** A running migration's `run`, with `over` replacing fields. */
export function migrationRun(over: Partial<MigrationRun> = {}): MigrationRun {
  return {
    running: true,
    started_unix_ms: 1_000,
    ended_unix_ms: null,
    slots: 1,
    slots_done: 0,
    slots_aborted: 0,
    keys_total: 100,
    keys_copied: 0,
    keys_left: 100,
    keys_recopy: 0,
    percent_done: 0,
    keys_moved: 0,
    bytes_moved: 0,
    ...over,
  };
}

/** A slot of a migration status, copying in its first round, with `over` replacing fields. */
export function slotProgress(over: Partial<SlotProgress> = {}): SlotProgress {
  return {
    slot: 0,
    state: 'copying',
    phase: 'copying',
    source: 1,
    target: 2,
    aborting: false,
    keys_moved: 0,
    round: 0,
    changed_last_round: 0,
    converged: false,
    ...over,
  };
}

/** A server of `GET /api/groups` as its last health check left it, with `over` replacing fields. */
export function server(over: Partial<Server> & Pick<Server, 'addr' | 'role'>): Server {
  return {
    up: true,
    role_reported: null,
    master_link: null,
    repl_offset: null,
    memory_bytes: null,
    keys: null,
    error: null,
    lag_bytes: null,
    ...over,
  };
}
