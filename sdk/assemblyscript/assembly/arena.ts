// The arena the host reads and writes (sdk/ABI.md): `in` (the host writes), `out` (the guest
// writes) and the 16-byte descriptor {u32 in_off, in_cap, out_off, out_cap} at a fixed
// address. The buffers are raw heap blocks (heap.alloc), outside the garbage collector.
import { layout } from "./abi";

const IN_INITIAL: u32 = 16 * 1024;
const OUT_INITIAL: u32 = 4 * 1024;

/** The descriptor's address (static memory). */
export const DESC: usize = memory.data(16, 8);

export let inPtr: usize = 0;
export let inCap: u32 = 0;
export let outPtr: usize = 0;
export let outCap: u32 = 0;

function sync(): void {
  store<u32>(DESC, <u32>inPtr);
  store<u32>(DESC, inCap, 4);
  store<u32>(DESC, <u32>outPtr, 8);
  store<u32>(DESC, outCap, 12);
}

/** Allocates the buffers once. */
export function ensureArena(): void {
  if (inPtr != 0) return;
  inPtr = heap.alloc(IN_INITIAL);
  inCap = IN_INITIAL;
  outPtr = heap.alloc(OUT_INITIAL);
  outCap = OUT_INITIAL;
  sync();
}

function grown(cap: u32, need: u32): u32 {
  while (cap < need && cap < 0x40000000) cap <<= 1;
  return cap < need ? need : cap;
}

/** Makes `out` hold at least `need` bytes, keeping its contents (the descriptor follows). */
export function reserveOut(need: u32): void {
  if (need <= outCap) return;
  const cap = grown(outCap, need);
  outPtr = heap.realloc(outPtr, cap);
  outCap = cap;
  sync();
}

/** `tp_reserve`: `in` need not keep its contents (the host writes it next). */
export function reserve(inLen: i32, outLen: i32): i32 {
  ensureArena();
  if (inLen < 0 || outLen < 0 || <u32>inLen > layout.LEN_MASK || <u32>outLen > layout.LEN_MASK) return -2;
  if (<u32>inLen > inCap) {
    heap.free(inPtr);
    inCap = grown(inCap, <u32>inLen);
    inPtr = heap.alloc(inCap);
  }
  reserveOut(<u32>outLen);
  sync();
  return 0;
}
