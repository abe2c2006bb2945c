// Tessera plugin SDK for AssemblyScript (ABI v1, sdk/ABI.md). A plugin extends Plugin,
// registers it, and re-exports the ABI exports:
//
//   import { Plugin, Manifest, Command, Out, Action, PASS, cmd, register } from "<sdk>/assembly";
//   class NoKeys extends Plugin {
//     init(config: Uint8Array, m: Manifest): string | null { m.hook(cmd.KEYS); return null; }
//     onCommand(conn: u64, c: Command, out: Out): Action {
//       return c.argIs(1, "*") ? out.deny("ERR KEYS * is disabled, use SCAN") : PASS;
//     }
//   }
//   register(() => new NoKeys());
//   export * from "<sdk>/assembly/exports";
//
// Layout: abi (generated constants), arena (the shared buffers), views (Command, Replies),
// out (answers), manifest, host (imports), json (configs), plugin (the base class), exports.
export { abi, action, reply_action, merge, status, level, metric, layout, mf, hook, klass, cmd, CLASS_NAMES, COMMAND_NAMES } from "./abi";
export { Command, Replies, bytesEq, bytesEqNoCase, commandId } from "./views";
export { Action, PASS, Out } from "./out";
export { Manifest } from "./manifest";
export { Plugin, register } from "./plugin";
export { Json, Kind, parseJson } from "./json";
export {
  Metric, Series, counterAdd, gaugeSet, gaugeAdd, histogramObserve, log, logEnabled,
  stateGet, stateSet, stateIncr, ratelimitAcquire, clientInfoRaw, nowMs, nowUs, stageUs,
} from "./host";
