// The metrics plugin in AssemblyScript (the core of plugins/metrics, same metric names,
// labels and config keys): counts commands and error replies and records latency by command
// and tenant (the first key up to a delimiter), blocking commands' waits apart. The `client`
// label is `all`: labelling by client name (client_names: true) is not in this port.
import {
  Plugin, Manifest, Command, Replies, Out, Action, PASS, Json, Kind, parseJson, register,
  Metric, Series, counterAdd, histogramObserve, stageUs, metric, klass, cmd, COMMAND_NAMES, bytesEq,
} from "../../sdk/assemblyscript/assembly";

const BLOCKED: u64 = 1 << 63;
const NONE: u16 = 0;
const OTHER: u16 = 1;

/** The series of one (command, tenant). */
class Slot {
  constructor(public count: Series, public errors: Series, public duration: Series, public blocked: Series) {}
}

function hash(p: usize, n: u32): u32 {
  let h: u32 = 2166136261;
  for (let i: u32 = 0; i < n; i++) h = (h ^ load<u8>(p + i)) * 16777619;
  return h;
}

/** A command that waits for something: the blocking class, WAIT, XREAD(GROUP) with BLOCK. */
function blocks(c: Command): bool {
  if (c.id == cmd.XREAD || c.id == cmd.XREADGROUP) {
    for (let i: u32 = 1; i < c.nargs; i++) {
      if (!c.hasBytes(i) || c.argIs(i, "STREAMS")) return false;
      if (c.argIs(i, "BLOCK")) return true;
    }
    return false;
  }
  return c.hasClass(klass.BLOCKING) || c.id == cmd.WAIT;
}

class Metrics extends Plugin {
  delim: Uint8Array = Uint8Array.wrap(String.UTF8.encode(":"));
  maxTenants: i32 = 100;
  commands: Metric = new Metric(-1);
  errors: Metric = new Metric(-1);
  duration: Metric = new Metric(-1);
  blocked: Metric = new Metric(-1);
  /** Tenant label values (0 "none", 1 "other"), and an index by the bytes' hash. */
  tenantNames: Array<string> = ["none", "other"];
  tenantBytes: Array<Uint8Array> = [new Uint8Array(0), new Uint8Array(0)];
  tenantIndex: Map<u32, Array<u16>> = new Map();
  /** (command id << 16 | tenant) → slot index. */
  slotOf: Map<u32, i32> = new Map();
  slots: Array<Slot> = [];

  init(config: Uint8Array, m: Manifest): string | null {
    let cfg = new Json();
    cfg.kind = Kind.Object;
    if (config.length > 0) cfg = parseJson(config);
    if (!cfg.isObject()) return "metrics: bad config: not a JSON object";
    let buckets: Array<f64> = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];
    for (let i = 0; i < cfg.keys.length; i++) {
      const k = cfg.keys[i];
      const v = cfg.items[i];
      if (k == "tenant_delimiter") {
        if (!v.isString() || v.str.length == 0) return "metrics: tenant_delimiter must not be empty";
        this.delim = Uint8Array.wrap(String.UTF8.encode(v.str));
      } else if (k == "max_tenants") {
        if (!v.isNumber() || v.num < 0) return "metrics: bad max_tenants";
        this.maxTenants = <i32>v.num;
      } else if (k == "client_names") {
        if (v.kind != Kind.Bool || v.bool) return "metrics: client_names is not supported by the AssemblyScript port: set it to false";
      } else if (k == "max_clients") {
        if (!v.isNumber()) return "metrics: bad max_clients";
      } else if (k == "latency_buckets") {
        buckets = [];
        for (let j = 0; j < v.items.length; j++) {
          if (!v.items[j].isNumber()) return "metrics: bad latency_buckets";
          if (j > 0 && v.items[j].num <= buckets[j - 1]) return "metrics: latency_buckets must increase";
          buckets.push(v.items[j].num);
        }
      } else {
        return "metrics: unknown config key \"" + k + "\"";
      }
    }
    const labels = ["command", "tenant", "client"];
    const two = ["command", "tenant"];
    this.commands = Metric.define(metric.COUNTER, "commands_total", "Commands by command, tenant and client", labels);
    this.errors = Metric.define(metric.COUNTER, "command_errors_total", "Error replies by command, tenant and client", labels);
    this.duration = Metric.define(metric.HISTOGRAM, "command_duration_seconds",
      "Time from the plugin seeing a command to its reply, by command and tenant", two, buckets);
    this.blocked = Metric.define(metric.HISTOGRAM, "command_blocked_seconds",
      "Time a blocking command (BLPOP, XREAD BLOCK, WAIT …) waited for its reply, by command and tenant", two, buckets);
    if (this.commands.id < 0 || this.errors.id < 0 || this.duration.id < 0 || this.blocked.id < 0) {
      return "metrics: the host refused a metric definition";
    }
    // XREAD and XREADGROUP block only with BLOCK: their arguments are read.
    m.hookAll().hookValues(cmd.XREAD).hookValues(cmd.XREADGROUP).observeHeads();
    return null;
  }

  /** The tenant label of the key's first `len` bytes at `p`, capped (then "other"). */
  tenant(p: usize, len: u32): u16 {
    const h = hash(p, len);
    if (this.tenantIndex.has(h)) {
      const candidates = this.tenantIndex.get(h);
      for (let i = 0; i < candidates.length; i++) {
        if (bytesEq(p, len, this.tenantBytes[candidates[i]])) return candidates[i];
      }
    }
    if (this.tenantNames.length - 2 >= this.maxTenants) return OTHER;
    const b = new Uint8Array(len);
    memory.copy(b.dataStart, p, len);
    const t = <u16>this.tenantNames.length;
    this.tenantNames.push(String.UTF8.decode(b.buffer));
    this.tenantBytes.push(b);
    if (!this.tenantIndex.has(h)) this.tenantIndex.set(h, []);
    this.tenantIndex.get(h).push(t);
    return t;
  }

  /** The slot of (id, tenant), its series resolved on first use. */
  slot(id: u16, t: u16): i32 {
    const key = (<u32>id << 16) | t;
    if (this.slotOf.has(key)) return this.slotOf.get(key);
    const name = id == 0 ? "unknown" : COMMAND_NAMES[id].toLowerCase();
    const v = [name, this.tenantNames[t], "all"];
    const v2 = [name, this.tenantNames[t]];
    const s = new Slot(this.commands.series(v), this.errors.series(v), this.duration.series(v2), this.blocked.series(v2));
    this.slots.push(s);
    this.slotOf.set(key, this.slots.length - 1);
    return this.slots.length - 1;
  }

  onCommand(conn: u64, c: Command, out: Out): Action {
    const start = <u64>stageUs();
    let t = NONE;
    const k = c.firstKey();
    if (k >= 0) {
      const p = c.argPtr(<u32>k);
      const n = c.argLen(<u32>k);
      const d = <u32>this.delim.length;
      for (let i: u32 = 0; p != 0 && i + d <= n; i++) {
        if (memory.compare(p + i, this.delim.dataStart, d) == 0) {
          t = this.tenant(p, i);
          break;
        }
      }
    }
    const s = <u64>this.slot(c.id, t);
    return out.observe((blocks(c) ? BLOCKED : 0) | (s << 32) | (start & 0xffffffff));
  }

  onReply(conn: u64, ctx: u64, r: Replies, out: Out): Action {
    const i = <i32>((ctx & ~BLOCKED) >> 32);
    if (i >= this.slots.length) return PASS;
    // Microseconds modulo 2^32 (71 minutes): fine for a command's latency.
    const elapsed = <u32>stageUs() - <u32>ctx;
    const s = this.slots[i];
    counterAdd(s.count, 1);
    histogramObserve(ctx & BLOCKED ? s.blocked : s.duration, <f64>elapsed / 1e6);
    // An error reply starts with `-` (as plugins/metrics counts them).
    const head = r.replyPtr(0);
    if (head != 0 && r.replyLen(0) > 0 && load<u8>(head) == 0x2d) counterAdd(s.errors, 1);
    return PASS;
  }
}

register((): Plugin => new Metrics());

export * from "../../sdk/assemblyscript/assembly/exports";
