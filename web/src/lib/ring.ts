// A fixed-size ring buffer and the QPS series the overview chart draws: one sample a second,
// the last five minutes, total and per proxy.

export class RingBuffer<T> {
  private buf: (T | undefined)[];
  private start = 0;
  private len = 0;
  constructor(readonly capacity: number) {
    if (capacity < 1) throw new Error('capacity must be at least 1');
    this.buf = new Array(capacity);
  }
  get length() {
    return this.len;
  }
  push(v: T) {
    const i = (this.start + this.len) % this.capacity;
    this.buf[i] = v;
    if (this.len < this.capacity) this.len++;
    else this.start = (this.start + 1) % this.capacity;
  }
  /** Oldest first. */
  toArray(): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.len; i++) out.push(this.buf[(this.start + i) % this.capacity] as T);
    return out;
  }
  last(): T | undefined {
    return this.len ? this.buf[(this.start + this.len - 1) % this.capacity] : undefined;
  }
  clear() {
    this.start = 0;
    this.len = 0;
    this.buf = new Array(this.capacity);
  }
}

export interface QpsSample {
  /** Unix seconds. */
  t: number;
  total: number;
  /** ops/s per proxy token; a proxy missing from a sample has no value there. */
  perProxy: Record<string, number>;
}

/** Five minutes at one sample a second. */
export const QPS_WINDOW = 300;

export class QpsSeries {
  readonly ring: RingBuffer<QpsSample>;
  private proxyOrder: string[] = [];
  constructor(capacity = QPS_WINDOW) {
    this.ring = new RingBuffer(capacity);
  }
  add(s: QpsSample) {
    const prev = this.ring.last();
    // A sample older than or as old as the last one (a late reply) is dropped.
    if (prev && s.t <= prev.t) return false;
    this.ring.push(s);
    for (const k of Object.keys(s.perProxy)) if (!this.proxyOrder.includes(k)) this.proxyOrder.push(k);
    return true;
  }
  /** Proxies seen in the samples still held, in the order first seen. */
  proxies(): string[] {
    const held = new Set<string>();
    for (const s of this.ring.toArray()) for (const k of Object.keys(s.perProxy)) held.add(k);
    this.proxyOrder = this.proxyOrder.filter((k) => held.has(k));
    return [...this.proxyOrder];
  }
  latest(): number | null {
    return this.ring.last()?.total ?? null;
  }
  /** uPlot's columnar data: [times, total, …one column per proxy]; gaps are null. */
  toColumns(): [number[], ...(number | null)[][]] {
    const samples = this.ring.toArray();
    const proxies = this.proxies();
    const t = samples.map((s) => s.t);
    const total = samples.map((s) => s.total);
    const per = proxies.map((p) => samples.map((s) => (p in s.perProxy ? s.perProxy[p] : null)));
    return [t, total, ...per];
  }
}
