// The filter plugin in AssemblyScript (the core of plugins/filter, same config keys and error
// texts): denies commands by name, subcommand or class, refuses writes to read-only keys and
// values over a size. Client rules (allow_addrs, allow_users, rate_limit) are not in this port.
import {
  Plugin, Manifest, Command, Out, Action, PASS, Json, Kind, parseJson, register,
  klass, commandId, CLASS_NAMES, COMMAND_NAMES,
} from "../../sdk/assemblyscript/assembly";

class Sub {
  constructor(public id: u16, public name: string) {}
}

/** `*` any run of bytes, `?` one byte; one backtrack point (the last `*`). */
function globMatch(g: Uint8Array, p: usize, n: u32): bool {
  let pi = 0, si: u32 = 0, sp = 0, ss: u32 = 0, star = false;
  while (si < n) {
    const c = load<u8>(p + si);
    if (pi < g.length && g[pi] == 0x2a) {
      star = true; sp = pi; ss = si; pi++;
    } else if (pi < g.length && (g[pi] == 0x3f || g[pi] == c)) {
      pi++; si++;
    } else if (star) {
      pi = sp + 1; si = ++ss;
    } else {
      return false;
    }
  }
  while (pi < g.length && g[pi] == 0x2a) pi++;
  return pi == g.length;
}

/** `prefix*` with no other wildcard: the host can select such keys itself. */
function globPrefix(g: string): bool {
  if (!g.endsWith("*")) return false;
  const head = g.substring(0, g.length - 1);
  return !head.includes("*") && !head.includes("?");
}

/** A message: custom or default; one that does not start with an upper-case code gets "ERR ". */
function text(custom: Json | null, def: string): string | null {
  let t = def;
  if (custom != null) {
    if (!custom.isString()) return null;
    t = custom.str;
  }
  const sp = t.indexOf(" ");
  const word = sp < 0 ? t : t.substring(0, sp);
  let code = word.length > 0;
  for (let i = 0; i < word.length; i++) {
    const c = word.charCodeAt(i);
    if (c < 0x41 || c > 0x5a) code = false;
  }
  return code ? t : "ERR " + t;
}

function classByName(name: string): u32 {
  for (let i = 0; i < CLASS_NAMES.length; i++) if (CLASS_NAMES[i] == name.toLowerCase()) return 1 << i;
  return 0;
}

class Filter extends Plugin {
  denyIds: StaticArray<bool> = new StaticArray<bool>(COMMAND_NAMES.length);
  subs: Array<Sub> = [];
  denyClasses: u32 = 0;
  globs: Array<Uint8Array> = [];
  maxValue: u64 = 0;
  denied: string = "";
  readOnly: string = "";
  tooLarge: string = "";

  init(config: Uint8Array, m: Manifest): string | null {
    let cfg = new Json();
    cfg.kind = Kind.Object; // a blank config is an empty object
    if (String.UTF8.decode(config.buffer).trim().length > 0) cfg = parseJson(config);
    if (!cfg.isObject()) return "filter: bad config: not a JSON object";
    let messages: Json | null = null;
    const raw = new Array<string>();
    for (let i = 0; i < cfg.keys.length; i++) {
      const k = cfg.keys[i];
      const v = cfg.items[i];
      if (k == "deny_commands") {
        for (let j = 0; j < v.items.length; j++) {
          if (!v.items[j].isString()) return "filter: bad command";
          const e = this.command(v.items[j].str);
          if (e != null) return e;
        }
      } else if (k == "deny_classes") {
        for (let j = 0; j < v.items.length; j++) {
          const bit = v.items[j].isString() ? classByName(v.items[j].str) : 0;
          if (bit == 0) return "filter: unknown class \"" + v.items[j].str + "\"";
          this.denyClasses |= bit;
        }
      } else if (k == "read_only_keys") {
        for (let j = 0; j < v.items.length; j++) {
          if (!v.items[j].isString() || v.items[j].str.length == 0) return "filter: empty key pattern";
          raw.push(v.items[j].str);
          this.globs.push(Uint8Array.wrap(String.UTF8.encode(v.items[j].str)));
        }
      } else if (k == "max_value_bytes") {
        if (!v.isNumber() || v.num < 1) return "filter: max_value_bytes must be at least 1";
        this.maxValue = <u64>v.num;
      } else if (k == "messages") {
        messages = v;
      } else {
        return "filter: unknown config key (not in the AssemblyScript port) \"" + k + "\"";
      }
    }
    const m1 = text(messages == null ? null : messages.get("denied"), "ERR command '{command}' is not allowed");
    const m2 = text(messages == null ? null : messages.get("read_only"), "ERR key '{key}' is read-only");
    const m3 = text(messages == null ? null : messages.get("too_large"), "ERR value is larger than {max} bytes");
    if (m1 == null || m2 == null || m3 == null) return "filter: messages must be strings";
    this.denied = m1;
    this.readOnly = m2;
    this.tooLarge = m3;

    // Hook only what the rules need, and declare what every client is refused.
    for (let id = 1; id < this.denyIds.length; id++) {
      if (!this.denyIds[id]) continue;
      m.hook(<u16>id).denyToAll(COMMAND_NAMES[id]);
    }
    for (let i = 0; i < this.subs.length; i++) {
      m.hookValues(this.subs[i].id).denyToAll(COMMAND_NAMES[this.subs[i].id] + "|" + this.subs[i].name);
    }
    m.hookClass(this.denyClasses).denyClassesToAll(this.denyClasses);
    if (raw.length > 0 || this.maxValue > 0) {
      // Read-only `prefix*` patterns and the value bound are checked by the host (the gate):
      // a write no rule touches never enters the plugin.
      m.hookClass(klass.WRITE);
      let gate = (this.denyClasses & klass.WRITE) == 0;
      for (let i = 0; i < raw.length; i++) if (!globPrefix(raw[i])) gate = false;
      if (gate) {
        m.gateClass(klass.WRITE);
        for (let i = 0; i < raw.length; i++) m.gatePrefix(raw[i].substring(0, raw[i].length - 1));
        if (this.maxValue > 0) m.gateMaxValueBytes(this.maxValue >= 0xffffffff ? 0xffffffff : <u32>this.maxValue);
      }
    }
    return null;
  }

  /** One deny_commands entry: "NAME", or "NAME SUB" / "NAME|SUB". */
  command(entry: string): string | null {
    const words = entry.replaceAll("|", " ").split(" ").filter((w: string) => w.length > 0);
    const id = words.length > 0 ? commandId(words[0]) : 0;
    if (id == 0) return "filter: unknown command \"" + entry + "\"";
    if (words.length == 1) this.denyIds[id] = true;
    else if (words.length == 2) this.subs.push(new Sub(id, words[1].toUpperCase()));
    else return "filter: bad command \"" + entry + "\"";
    return null;
  }

  onCommand(conn: u64, c: Command, out: Out): Action {
    let subDenied = false;
    for (let i = 0; i < this.subs.length; i++) {
      if (this.subs[i].id == c.id && c.argIs(1, this.subs[i].name)) subDenied = true;
    }
    if ((<i32>c.id < this.denyIds.length && this.denyIds[c.id]) || c.hasClass(this.denyClasses) || subDenied) {
      return this.deny(out, this.denied, c, -1);
    }
    if (c.hasClass(klass.WRITE)) {
      for (let i: u32 = 1; i < c.nargs; i++) {
        if (!c.isKey(i)) continue;
        for (let g = 0; g < this.globs.length; g++) {
          if (globMatch(this.globs[g], c.argPtr(i), c.argLen(i))) return this.deny(out, this.readOnly, c, <i32>i);
        }
      }
      if (this.maxValue > 0 && <u64>c.maxValueLen() > this.maxValue) return this.deny(out, this.tooLarge, c, -1);
    }
    return PASS;
  }

  /** The message with {command} (upper-cased), {key} and {max} filled in. */
  deny(out: Out, t: string, c: Command, key: i32): Action {
    out.len = 0;
    let from = 0;
    for (let i = 0; i < t.length; i++) {
      if (t.charCodeAt(i) != 0x7b) continue;
      const fill = t.startsWith("{command}", i) ? 1 : t.startsWith("{key}", i) ? 2 : t.startsWith("{max}", i) ? 3 : 0;
      if (fill == 0) continue;
      out.writeString(t.substring(from, i));
      if (fill == 1) {
        const p = c.argPtr(0);
        for (let j: u32 = 0; j < c.argLen(0); j++) {
          let b = load<u8>(p + j);
          if (b >= 0x61 && b <= 0x7a) b -= 32;
          store<u8>(scratch, b);
          out.writeRaw(scratch, 1);
        }
        i += 8;
      } else if (fill == 2) {
        if (key >= 0) out.writeRaw(c.argPtr(<u32>key), c.argLen(<u32>key));
        i += 4;
      } else {
        out.writeU64(this.maxValue);
        i += 4;
      }
      from = i + 1;
    }
    out.writeString(t.substring(from));
    return out.denyWritten();
  }
}

const scratch: usize = memory.data(8);

register((): Plugin => new Filter());

export * from "../../sdk/assemblyscript/assembly/exports";
