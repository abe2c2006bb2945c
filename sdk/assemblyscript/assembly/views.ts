// Reading the host's tables (sdk/ABI.md, "Command table", "Reply table"): a command's
// arguments and the replies of an observed command or a rewrite. One view object of each is
// reused for every call, so reading a command allocates nothing; every offset is checked
// against the table's size (out of range reads as absent).
import { layout, COMMAND_NAMES } from "./abi";

/** One client command: argument 0 is its name as the client sent it. */
export class Command {
  /** Where the table is, and its size. */
  ptr: usize = 0;
  size: u32 = 0;
  /** The ABI command id (`cmd.*`), 0 for a command the proxy does not know. */
  id: u16 = 0;
  /** `klass.*` bits. */
  classBits: u32 = 0;
  /** Number of arguments, the name included. */
  nargs: u32 = 0;

  /** Whether the command has any of these class bits. */
  hasClass(bits: u32): bool {
    return (this.classBits & bits) != 0;
  }

  private entry(i: u32): u64 {
    if (i >= this.nargs) return u64.MAX_VALUE;
    const e = this.ptr + layout.CMD_HEADER + i * layout.ARG_ENTRY;
    return (<u64>load<u32>(e, 4) << 32) | load<u32>(e);
  }

  /** Argument i's real length (also when elided; 0 past the end). */
  argLen(i: u32): u32 {
    const e = this.entry(i);
    return e == u64.MAX_VALUE ? 0 : <u32>(e >> 32) & layout.LEN_MASK;
  }

  /** Whether argument i's bytes are here (not elided, inside the table). */
  hasBytes(i: u32): bool {
    return this.argPtr(i) != 0;
  }

  /** Address of argument i's bytes, 0 if elided or out of range. */
  argPtr(i: u32): usize {
    const e = this.entry(i);
    if (e == u64.MAX_VALUE) return 0;
    const lf = <u32>(e >> 32);
    const off = <u32>e;
    const len = lf & layout.LEN_MASK;
    if (lf & <u32>layout.ARG_ELIDED) return 0;
    if (off > this.size || len > this.size - off) return 0;
    return this.ptr + off;
  }

  /** Whether argument i is a key (keys and the name are always copied). */
  isKey(i: u32): bool {
    const e = this.entry(i);
    return e != u64.MAX_VALUE && ((<u32>(e >> 32)) & layout.ARG_KEY) != 0;
  }

  /** Argument i equals `s` (ASCII, case-insensitive); false if elided. */
  argIs(i: u32, s: string): bool {
    const p = this.argPtr(i);
    return p != 0 && bytesEqNoCase(p, this.argLen(i), s);
  }

  /** A copy of argument i (allocates: for init-time or rare paths), null if elided. */
  arg(i: u32): Uint8Array | null {
    const p = this.argPtr(i);
    if (p == 0) return null;
    const n = this.argLen(i);
    const a = new Uint8Array(n);
    memory.copy(a.dataStart, p, n);
    return a;
  }

  /** Index of the first key, or -1. */
  firstKey(): i32 {
    for (let i: u32 = 1; i < this.nargs; i++) if (this.isKey(i)) return <i32>i;
    return -1;
  }

  /** The longest argument that is neither the name nor a key (elided or not). */
  maxValueLen(): u32 {
    let max: u32 = 0;
    for (let i: u32 = 1; i < this.nargs; i++) {
      if (!this.isKey(i) && this.argLen(i) > max) max = this.argLen(i);
    }
    return max;
  }
}

/** The replies of an observed command (one) or of a rewrite with merge PLUGIN (in order). */
export class Replies {
  ptr: usize = 0;
  size: u32 = 0;
  n: u32 = 0;
  /** Each entry is the reply's head (first line, at most 64 bytes): the manifest asked. */
  heads: bool = false;

  /** Address of reply i's bytes as the table holds them, 0 if out of range. */
  replyPtr(i: u32): usize {
    if (i >= this.n) return 0;
    const e = this.ptr + layout.REPLIES_HEADER + i * layout.ARG_ENTRY;
    const off = load<u32>(e);
    const len = load<u32>(e, 4);
    if (off > this.size || len > this.size - off) return 0;
    return this.ptr + off;
  }

  replyLen(i: u32): u32 {
    return i < this.n ? load<u32>(this.ptr + layout.REPLIES_HEADER + i * layout.ARG_ENTRY, 4) : 0;
  }

  /** Reply i's full size, whole or head. */
  replySize(i: u32): u32 {
    if (!this.heads) return this.replyLen(i);
    if (i >= this.n) return 0;
    return load<u32>(this.ptr + layout.REPLIES_HEADER + this.n * layout.ARG_ENTRY + i * 4);
  }

  /** Whether reply i is an error reply (`-…` or RESP3 `!…`). */
  isError(i: u32): bool {
    const p = this.replyPtr(i);
    if (p == 0 || this.replyLen(i) == 0) return false;
    const b = load<u8>(p);
    return b == 0x2d || b == 0x21;
  }
}

function upper(c: u32): u32 {
  return c >= 0x61 && c <= 0x7a ? c - 32 : c;
}

/** Bytes at p (len) equal the ASCII string s, case-insensitive. */
export function bytesEqNoCase(p: usize, len: u32, s: string): bool {
  if (<u32>s.length != len) return false;
  for (let i: u32 = 0; i < len; i++) {
    if (upper(load<u8>(p + i)) != upper(<u32>s.charCodeAt(i))) return false;
  }
  return true;
}

/** Bytes at p (len) equal the bytes of b. */
export function bytesEq(p: usize, len: u32, b: Uint8Array): bool {
  return <u32>b.length == len && memory.compare(p, b.dataStart, len) == 0;
}

/** The ABI id of a command name (case-insensitive; "CONFIG|GET" gives CONFIG's), 0 if unknown. */
export function commandId(name: string): u16 {
  const bar = name.indexOf("|");
  const top = (bar < 0 ? name : name.substring(0, bar)).toUpperCase();
  let lo = 1;
  let hi = COMMAND_NAMES.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const c = compareBytes(top, COMMAND_NAMES[mid]);
    if (c == 0) return <u16>mid;
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return 0;
}

/** Byte order of two ASCII strings (the names table is sorted by bytes). */
function compareBytes(a: string, b: string): i32 {
  const n = min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = a.charCodeAt(i) - b.charCodeAt(i);
    if (d != 0) return d;
  }
  return a.length - b.length;
}
