// The host functions (sdk/ABI.md, "Imports", module "tessera") and thin wrappers: metric
// definitions and series from string arrays, negative series ignored, clocks.

// @ts-ignore: decorator
@external("tessera", "log") declare function host_log(level: i32, ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("tessera", "log_enabled") declare function host_log_enabled(level: i32): i32;
// @ts-ignore: decorator
@external("tessera", "metric_define")
declare function host_metric_define(kind: i32, name: usize, nameLen: i32, help: usize, helpLen: i32,
  labels: usize, labelsLen: i32, buckets: usize, nbuckets: i32): i64;
// @ts-ignore: decorator
@external("tessera", "metric_series") declare function host_metric_series(metric: i32, values: usize, len: i32): i64;
// @ts-ignore: decorator
@external("tessera", "counter_add") declare function host_counter_add(series: i32, delta: i64): void;
// @ts-ignore: decorator
@external("tessera", "gauge_set") declare function host_gauge_set(series: i32, v: i64): void;
// @ts-ignore: decorator
@external("tessera", "gauge_add") declare function host_gauge_add(series: i32, v: i64): void;
// @ts-ignore: decorator
@external("tessera", "histogram_observe") declare function host_histogram_observe(series: i32, v: f64): void;
// @ts-ignore: decorator
@external("tessera", "state_get") declare function host_state_get(k: usize, kl: i32, dst: usize, cap: i32): i64;
// @ts-ignore: decorator
@external("tessera", "state_set") declare function host_state_set(k: usize, kl: i32, v: usize, vl: i32, ttl: i64): i32;
// @ts-ignore: decorator
@external("tessera", "state_incr") declare function host_state_incr(k: usize, kl: i32, d: i64, ttl: i64): i64;
// @ts-ignore: decorator
@external("tessera", "ratelimit_acquire")
declare function host_ratelimit(b: usize, bl: i32, cost: i32, perSecond: i32, burst: i32): i32;
// @ts-ignore: decorator
@external("tessera", "client_info") declare function host_client_info(conn: i64, dst: usize, cap: i32): i32;
// @ts-ignore: decorator
@external("tessera", "now_ms") declare function host_now_ms(): i64;
// @ts-ignore: decorator
@external("tessera", "now_us") declare function host_now_us(): i64;
// @ts-ignore: decorator
@external("tessera", "stage_us") declare function host_stage_us(): i64;

function utf8(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s));
}

/** `{u32 len, bytes}*` of the strings. */
function stringList(items: Array<string>): Uint8Array {
  let total = 0;
  const enc = new Array<Uint8Array>(items.length);
  for (let i = 0; i < items.length; i++) {
    enc[i] = utf8(items[i]);
    total += 4 + enc[i].length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (let i = 0; i < enc.length; i++) {
    store<u32>(out.dataStart + at, <u32>enc[i].length);
    memory.copy(out.dataStart + at + 4, enc[i].dataStart, enc[i].length);
    at += 4 + enc[i].length;
  }
  return out;
}

export function log(level: i32, msg: string): void {
  const b = utf8(msg);
  host_log(level, b.dataStart, b.length);
}

export function logEnabled(level: i32): bool {
  return host_log_enabled(level) != 0;
}

/** A metric, defined in init (exported as tessera_plugin_<plugin>_<name>); id < 0 if refused. */
export class Metric {
  constructor(public id: i32) {}

  static define(kind: i32, name: string, help: string, labels: Array<string>, buckets: Array<f64> | null = null): Metric {
    const n = utf8(name);
    const h = utf8(help);
    const l = stringList(labels);
    const b = buckets == null ? new Float64Array(0) : new Float64Array(buckets.length);
    if (buckets != null) for (let i = 0; i < buckets.length; i++) b[i] = buckets[i];
    const r = host_metric_define(kind, n.dataStart, n.length, h.dataStart, h.length, l.dataStart, l.length,
      b.dataStart, b.length);
    return new Metric(<i32>r);
  }

  /** The series of these label values (one per label); resolve once and keep it. */
  series(values: Array<string>): Series {
    if (this.id < 0) return -1;
    const v = stringList(values);
    return <i32>host_metric_series(this.id, v.dataStart, v.length);
  }
}

/** A series handle; negative (a refused definition or series) updates nothing. */
export type Series = i32;

export function counterAdd(s: Series, delta: i64): void {
  if (s >= 0) host_counter_add(s, delta);
}
export function gaugeSet(s: Series, v: i64): void {
  if (s >= 0) host_gauge_set(s, v);
}
export function gaugeAdd(s: Series, v: i64): void {
  if (s >= 0) host_gauge_add(s, v);
}
export function histogramObserve(s: Series, v: f64): void {
  if (s >= 0) host_histogram_observe(s, v);
}

/** Shared state: the value, or null if missing. */
export function stateGet(key: string): Uint8Array | null {
  const k = utf8(key);
  let buf = new Uint8Array(64);
  let n = host_state_get(k.dataStart, k.length, buf.dataStart, buf.length);
  if (n < 0) return null;
  if (n > buf.length) {
    buf = new Uint8Array(<i32>n);
    n = host_state_get(k.dataStart, k.length, buf.dataStart, buf.length);
  }
  return buf.subarray(0, <i32>n);
}
export function stateSet(key: string, value: Uint8Array, ttlMs: i64 = 0): bool {
  const k = utf8(key);
  return host_state_set(k.dataStart, k.length, value.dataStart, value.length, ttlMs) == 0;
}
export function stateIncr(key: string, delta: i64, ttlMs: i64 = 0): i64 {
  const k = utf8(key);
  return host_state_incr(k.dataStart, k.length, delta, ttlMs);
}
/** Token bucket in the host: whether `cost` tokens were taken. */
export function ratelimitAcquire(bucket: string, cost: u32, perSecond: u32, burst: u32): bool {
  const b = utf8(bucket);
  return host_ratelimit(b.dataStart, b.length, cost, perSecond, burst) == 1;
}
/** Client facts, serialized as sdk/ABI.md says (null if the host does not know the client). */
export function clientInfoRaw(conn: u64): Uint8Array | null {
  let buf = new Uint8Array(256);
  let n = host_client_info(<i64>conn, buf.dataStart, buf.length);
  if (n < 0) return null;
  if (n > buf.length) {
    buf = new Uint8Array(n);
    n = host_client_info(<i64>conn, buf.dataStart, buf.length);
  }
  return buf.subarray(0, n);
}
/** Wall clock, Unix ms. */
export function nowMs(): i64 {
  return host_now_ms();
}
/** Monotonic µs. */
export function nowUs(): i64 {
  return host_now_us();
}
/** The proxy's reading of the stage (no clock read): see sdk/ABI.md. */
export function stageUs(): i64 {
  return host_stage_us();
}
