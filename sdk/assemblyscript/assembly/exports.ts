// The ABI's exports (sdk/ABI.md, "Exports") and their dispatch to the registered plugin.
// A plugin's entry file re-exports them: `export * from "<sdk>/assembly/exports";`.
import { init as INIT, action, reply_action, layout } from "./abi";
import { DESC, ensureArena, inCap, inPtr, outPtr, reserve, reserveOut } from "./arena";
import { Command, Replies } from "./views";
import { Action, Out, pack } from "./out";
import { Manifest } from "./manifest";
import { Plugin, create } from "./plugin";

let plugin: Plugin | null = null;
const cmd = new Command();
const replies = new Replies();
const out = new Out();

export function tessera_plugin_abi_v1(): void {}

export function tp_arena(): i32 {
  ensureArena();
  return <i32>DESC;
}

export function tp_reserve(inLen: i32, outLen: i32): i32 {
  return reserve(inLen, outLen);
}

function fail(act: i32, msg: string): Action {
  out.reset(0);
  out.writeString(msg);
  return pack(act, 0, out.len);
}

export function tp_init(cfgLen: i32): i64 {
  ensureArena();
  if (cfgLen < 0 || <u32>cfgLen > inCap) return fail(INIT.ERROR, "plugin: config length out of range");
  const config = new Uint8Array(cfgLen);
  memory.copy(config.dataStart, inPtr, cfgLen);
  const p = create();
  const m = new Manifest();
  const err = p.init(config, m);
  if (err != null) return fail(INIT.ERROR, err);
  plugin = p;
  out.reset(0);
  m.encode(out);
  return pack(INIT.OK, 0, out.len);
}

/** Points the reused view at a command table; false if its entries do not fit. */
function view(ptr: usize, size: u32, id: u32): bool {
  if (size < <u32>layout.CMD_HEADER) return false;
  const nargs = load<u32>(ptr);
  if (nargs > (size - <u32>layout.CMD_HEADER) / <u32>layout.ARG_ENTRY) return false;
  cmd.ptr = ptr;
  cmd.size = size;
  cmd.nargs = nargs;
  cmd.classBits = load<u32>(ptr, 8);
  cmd.id = <u16>id;
  return true;
}

export function tp_on_command(conn: i64, id: i32, nargs: i32): i64 {
  if (plugin == null) return fail(action.DENY, "ERR plugin is not initialized");
  if (!view(inPtr, inCap, <u32>id) || cmd.nargs != <u32>nargs) {
    return fail(action.DENY, "ERR plugin received a malformed command");
  }
  return plugin!.onCommand(<u64>conn, cmd, out.reset(0));
}

/** A batch (sdk/ABI.md, "Batches"): each command through onCommand in order, its result in
 * out's result array and its output right after the earlier ones (its Out window starts
 * there), then `done` advanced, so a fault is charged to the command that was running. */
export function tp_on_commands(conn: i64, n: i32): i64 {
  if (plugin == null || n <= 0) return 0;
  const count = <u32>n;
  if (inCap < <u32>layout.BATCH_HEADER || load<u32>(inPtr) != count) return 0;
  if (count > (inCap - <u32>layout.BATCH_HEADER) / <u32>layout.BATCH_ENTRY) return 0;
  let used = count * <u32>layout.BATCH_RESULT;
  reserveOut(used);
  const p = plugin!;
  for (let i: u32 = 0; i < count; i++) {
    const e = inPtr + layout.BATCH_HEADER + i * layout.BATCH_ENTRY;
    const off = load<u32>(e);
    const len = load<u32>(e, 4);
    out.reset(used);
    let r: Action;
    if (off <= inCap && len <= inCap - off && view(inPtr + off, len, load<u32>(e, 8))) {
      r = p.onCommand(<u64>conn, cmd, out);
    } else {
      r = out.deny("ERR plugin received a malformed command");
    }
    used += <u32>r;
    store<i64>(outPtr + i * layout.BATCH_RESULT, r);
    store<u32>(inPtr + layout.BATCH_DONE, i + 1);
  }
  return pack(0, count, used);
}

export function tp_on_reply(conn: i64, ctx: i64, n: i32): i64 {
  if (plugin == null) return fail(reply_action.ERROR, "ERR plugin is not initialized");
  replies.ptr = inPtr;
  replies.size = inCap;
  replies.n = load<u32>(inPtr);
  replies.heads = (load<u32>(inPtr, 4) & <u32>layout.REPLIES_HEADS) != 0;
  const table = <u64>layout.REPLIES_HEADER + <u64>replies.n * <u64>(layout.ARG_ENTRY + 4);
  if (replies.n != <u32>n || table > <u64>inCap) return fail(reply_action.ERROR, "ERR plugin received malformed replies");
  return plugin!.onReply(<u64>conn, <u64>ctx, replies, out.reset(0));
}

export function tp_on_close(conn: i64): void {
  if (plugin != null) plugin!.onClose(<u64>conn);
}

export function tp_on_tick(): void {
  if (plugin != null) plugin!.onTick();
}
