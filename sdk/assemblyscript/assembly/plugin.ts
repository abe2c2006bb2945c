// The plugin's side: a class extending Plugin, overriding the hooks it needs, registered once
// with register(() => new MyPlugin()). Every hook has a pass-through default.
import { Command, Replies } from "./views";
import { Action, Out, PASS } from "./out";
import { Manifest } from "./manifest";

export class Plugin {
  /** Called once per instance with the config (JSON by convention): fill `m`, and return
   * null, or a message for the operator to refuse the config. */
  init(config: Uint8Array, m: Manifest): string | null {
    return null;
  }
  /** Hot path: only for the commands the manifest selects. */
  onCommand(conn: u64, c: Command, out: Out): Action {
    return PASS;
  }
  /** An observed command's reply, or a rewrite's replies (merge PLUGIN). */
  onReply(conn: u64, ctx: u64, r: Replies, out: Out): Action {
    return PASS;
  }
  /** A client connection closed (manifest wantClose). */
  onClose(conn: u64): void {}
  /** Every tick of the manifest. */
  onTick(): void {}
}

let factory: (() => Plugin) | null = null;

/** Names the plugin class; call once at the top level of the plugin's module. */
export function register(f: () => Plugin): void {
  factory = f;
}

/** A new plugin object (each `tp_init`). */
export function create(): Plugin {
  if (factory == null) unreachable();
  return factory!();
}
