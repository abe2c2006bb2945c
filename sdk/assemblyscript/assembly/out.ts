// Writing answers into the arena's `out` buffer: deny texts, RESP replies, observe contexts,
// rewrite blocks (sdk/ABI.md, "Results", "Rewrite block"). An Out is a window of `out`, so a
// batch gives each command its own window without a copy. Strings are written as UTF-8
// straight into the buffer.
import { action, reply_action, layout } from "./abi";
import { outPtr, reserveOut } from "./arena";

/** A hook's answer: the ABI's packed i64 (action:8 | count:24 | out_len:32); PASS is 0. */
export type Action = i64;
export const PASS: Action = 0;

export function pack(act: i32, count: u32, len: u32): Action {
  return <i64>(((<u64>act) << 56) | ((<u64>(count & 0xffffff)) << 32) | <u64>len);
}

/** Where a hook writes its answer. */
export class Out {
  /** Offset of this answer in `out`. */
  start: u32 = 0;
  /** Bytes written so far. */
  len: u32 = 0;

  reset(start: u32): Out {
    this.start = start;
    this.len = 0;
    return this;
  }

  /** Appends `n` bytes from address `p`. */
  writeRaw(p: usize, n: u32): void {
    reserveOut(this.start + this.len + n);
    memory.copy(outPtr + this.start + this.len, p, n);
    this.len += n;
  }

  write(b: Uint8Array): void {
    this.writeRaw(b.dataStart, <u32>b.length);
  }

  /** Appends a string as UTF-8. */
  writeString(s: string): void {
    const n = <u32>String.UTF8.byteLength(s);
    reserveOut(this.start + this.len + n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, outPtr + this.start + this.len);
    this.len += n;
  }

  /** Appends a decimal number. */
  writeU64(v: u64): void {
    this.writeString(v.toString());
  }

  writeU32LE(v: u32): void {
    reserveOut(this.start + this.len + 4);
    store<u32>(outPtr + this.start + this.len, v);
    this.len += 4;
  }

  // === on_command answers ===

  /** Reply `-<text>` (text like "ERR not allowed"). */
  deny(text: string): Action {
    this.len = 0;
    this.writeString(text);
    return this.denyWritten();
  }

  /** Deny with what was written so far. */
  denyWritten(): Action {
    return pack(action.DENY, 0, this.len);
  }

  /** Reply with one complete RESP reply (validated by the host). */
  replyRaw(resp: string): Action {
    this.len = 0;
    this.writeString(resp);
    return pack(action.REPLY, 0, this.len);
  }

  /** Forward unchanged; call onReply with its reply and ctx. */
  observe(ctx: u64): Action {
    this.len = 0;
    reserveOut(this.start + 8);
    store<u64>(outPtr + this.start, ctx);
    this.len = 8;
    return pack(action.OBSERVE, 0, 8);
  }

  /** Starts a rewrite: then command(nargs), arg / argString / input, and end(count). */
  rewrite(merge: i32, ctx: u64): Out {
    this.len = 0;
    this.writeU32LE(<u32>merge);
    this.writeU32LE(0);
    this.writeU32LE(<u32>ctx);
    this.writeU32LE(<u32>(ctx >> 32));
    return this;
  }

  command(nargs: u32): Out {
    this.writeU32LE(nargs);
    return this;
  }

  arg(b: Uint8Array): Out {
    this.writeU32LE(<u32>b.length);
    this.write(b);
    return this;
  }

  argString(s: string): Out {
    this.writeU32LE(<u32>String.UTF8.byteLength(s));
    this.writeString(s);
    return this;
  }

  /** Reuses the client's argument i as is (even if it was elided). */
  input(i: u32): Out {
    this.writeU32LE(<u32>layout.ARG_REF | i);
    return this;
  }

  end(count: u32): Action {
    return pack(action.REWRITE, count, this.len);
  }

  // === on_reply answers (or PASS) ===

  /** Send this RESP reply instead. */
  replace(resp: string): Action {
    this.len = 0;
    this.writeString(resp);
    return pack(reply_action.REPLACE, 0, this.len);
  }

  /** Send `-<text>` instead. */
  error(text: string): Action {
    this.len = 0;
    this.writeString(text);
    return pack(reply_action.ERROR, 0, this.len);
  }
}
