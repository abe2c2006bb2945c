// A fixed-size ring buffer, the samples a chart draws (one per answered poll, as a store a view
// subscribes to), and the QPS series of the overview chart: the last five minutes, total and
// per proxy.

export class RingBuffer<T> {
  private buf: (T | undefined)[];
  private start = 0;
  private len = 0;
  constructor(readonly capacity: number) {
    if (capacity < 1) throw new Error('capacity must be at least 1');
    this.buf = new Array<T | undefined>(capacity);
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
    this.buf = new Array<T | undefined>(this.capacity);
  }
}

/**
 * Samples in time order, the newest `capacity` of them, as a store for useSyncExternalStore:
 * a view adds one per answer it gets (in an effect) and renders what `version` says is new.
 */
export class Samples<T extends { t: number }> {
  readonly ring: RingBuffer<T>;
  private version = 0;
  private snapshot: readonly T[] = [];
  private readonly listeners = new Set<() => void>();
  constructor(capacity: number) {
    this.ring = new RingBuffer(capacity);
  }
  /** Keeps `s` unless it is not newer than the last sample (a late reply); whether it did. */
  add(s: T): boolean {
    const prev = this.ring.last();
    if (prev && s.t <= prev.t) return false;
    this.ring.push(s);
    this.added(s);
    this.version++;
    this.snapshot = this.ring.toArray();
    for (const l of this.listeners) l();
    return true;
  }
  /** For subclasses: what else a new sample changes, before anyone is told. */
  protected added(_s: T): void {}
  readonly subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };
  /** Changes with every sample kept. */
  readonly getVersion = (): number => this.version;
  /** The samples, oldest first: a new array after every sample kept, the same one until then. */
  readonly getSnapshot = (): readonly T[] => this.snapshot;
  toArray(): T[] {
    return this.ring.toArray();
  }
  last(): T | undefined {
    return this.ring.last();
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

export class QpsSeries extends Samples<QpsSample> {
  private proxyOrder: string[] = [];
  constructor(capacity = QPS_WINDOW) {
    super(capacity);
  }
  protected override added(s: QpsSample) {
    for (const k of Object.keys(s.perProxy)) if (!this.proxyOrder.includes(k)) this.proxyOrder.push(k);
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
