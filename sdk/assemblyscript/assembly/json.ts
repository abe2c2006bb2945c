// A small JSON reader for plugin configs: parses the whole text into a tree of Json values
// (init-time, so allocation is fine). Strings, numbers, booleans, null, arrays, objects;
// \uXXXX escapes for the Basic Multilingual Plane.

export enum Kind { Null, Bool, Number, String, Array, Object, Invalid }

export class Json {
  kind: Kind = Kind.Invalid;
  bool: bool = false;
  num: f64 = 0;
  str: string = "";
  items: Array<Json> = [];
  keys: Array<string> = [];

  /** The member named `name` of an object, or null. */
  get(name: string): Json | null {
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] == name) return this.items[i];
    return null;
  }

  isString(): bool { return this.kind == Kind.String; }
  isNumber(): bool { return this.kind == Kind.Number; }
  isArray(): bool { return this.kind == Kind.Array; }
  isObject(): bool { return this.kind == Kind.Object; }
}

class Reader {
  i: i32 = 0;
  constructor(public s: string) {}

  ws(): void {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c != 32 && c != 10 && c != 13 && c != 9) break;
      this.i++;
    }
  }

  value(depth: i32): Json {
    const v = new Json();
    this.ws();
    if (depth > 64 || this.i >= this.s.length) return v;
    const c = this.s.charCodeAt(this.i);
    if (c == 0x22) {
      const s = this.string();
      if (s != null) {
        v.kind = Kind.String;
        v.str = s;
      }
    } else if (c == 0x7b || c == 0x5b) {
      this.i++;
      const obj = c == 0x7b;
      const close = obj ? 0x7d : 0x5d;
      this.ws();
      if (this.i < this.s.length && this.s.charCodeAt(this.i) == close) {
        this.i++;
        v.kind = obj ? Kind.Object : Kind.Array;
        return v;
      }
      while (true) {
        this.ws();
        if (obj) {
          if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x22) return v;
          const k = this.string();
          this.ws();
          if (k == null || this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x3a) return v;
          this.i++;
          v.keys.push(k);
        }
        const item = this.value(depth + 1);
        if (item.kind == Kind.Invalid) return v;
        v.items.push(item);
        this.ws();
        if (this.i >= this.s.length) return v;
        const d = this.s.charCodeAt(this.i++);
        if (d == close) break;
        if (d != 0x2c) return v;
      }
      v.kind = obj ? Kind.Object : Kind.Array;
    } else if (this.s.startsWith("true", this.i)) {
      this.i += 4;
      v.kind = Kind.Bool;
      v.bool = true;
    } else if (this.s.startsWith("false", this.i)) {
      this.i += 5;
      v.kind = Kind.Bool;
    } else if (this.s.startsWith("null", this.i)) {
      this.i += 4;
      v.kind = Kind.Null;
    } else {
      const start = this.i;
      while (this.i < this.s.length) {
        const d = this.s.charCodeAt(this.i);
        if (!((d >= 0x30 && d <= 0x39) || d == 0x2d || d == 0x2b || d == 0x2e || d == 0x65 || d == 0x45)) break;
        this.i++;
      }
      if (this.i > start) {
        const n = parseFloat(this.s.substring(start, this.i));
        if (!isNaN(n)) {
          v.kind = Kind.Number;
          v.num = n;
        }
      }
    }
    return v;
  }

  string(): string | null {
    this.i++;
    let out = "";
    let from = this.i;
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c == 0x22) {
        out += this.s.substring(from, this.i);
        this.i++;
        return out;
      }
      if (c == 0x5c) {
        out += this.s.substring(from, this.i);
        const e = this.s.charCodeAt(this.i + 1);
        this.i += 2;
        if (e == 0x6e) out += "\n";
        else if (e == 0x74) out += "\t";
        else if (e == 0x72) out += "\r";
        else if (e == 0x62) out += "\b";
        else if (e == 0x66) out += "\f";
        else if (e == 0x75) {
          const code = I32.parseInt(this.s.substring(this.i, this.i + 4), 16);
          out += String.fromCharCode(code);
          this.i += 4;
        } else out += String.fromCharCode(e);
        from = this.i;
        continue;
      }
      this.i++;
    }
    return null;
  }
}

/** Parses a config; a value of kind Invalid if it is not one JSON value. */
export function parseJson(config: Uint8Array): Json {
  const r = new Reader(String.UTF8.decode(config.buffer));
  const v = r.value(0);
  r.ws();
  if (r.i != r.s.length) return new Json();
  return v;
}
