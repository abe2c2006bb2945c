// A minimal Tessera plugin in AssemblyScript to copy: denies one configured command and
// counts, per command, what it saw. Build: `npm run build`; test without a proxy: `npm test`.
//
// Config (JSON): {"deny": "FLUSHALL"}; `deny` is optional.
// Out of the repository, point the two SDK paths below at your copy of sdk/assemblyscript.
import {
  Plugin, Manifest, Command, Out, Action, PASS, Metric, Series, counterAdd, parseJson,
  register, commandId, metric, COMMAND_NAMES,
} from "../../../sdk/assemblyscript/assembly";

class Template extends Plugin {
  deny: u16 = 0;
  seen: Metric = new Metric(-1);
  /** Series by command id, resolved on first use (the hot path is then one host call). */
  series: StaticArray<Series> = new StaticArray<Series>(COMMAND_NAMES.length);
  resolved: StaticArray<bool> = new StaticArray<bool>(COMMAND_NAMES.length);

  init(config: Uint8Array, m: Manifest): string | null {
    const cfg = parseJson(config);
    if (!cfg.isObject()) return "template: bad config: not a JSON object";
    const name = cfg.get("deny");
    if (name != null) {
      this.deny = name.isString() ? commandId(name.str) : 0;
      if (this.deny == 0) return "template: unknown command \"" + name.str + "\"";
    }
    // Metrics are defined in init; the proxy exports this one as
    // tessera_plugin_<plugin>_commands_seen_total{command="get"}.
    this.seen = Metric.define(metric.COUNTER, "commands_seen_total", "Commands seen", ["command"]);
    if (this.seen.id < 0) return "template: metric refused";
    // Hook every command (to count them): names and keys only, values are not copied.
    m.hookAll();
    return null;
  }

  onCommand(conn: u64, c: Command, out: Out): Action {
    const id = <i32>c.id < COMMAND_NAMES.length ? c.id : 0;
    if (!this.resolved[id]) {
      const name = id == 0 ? "unknown" : COMMAND_NAMES[id].toLowerCase();
      this.series[id] = this.seen.series([name]);
      this.resolved[id] = true;
    }
    counterAdd(this.series[id], 1);
    if (this.deny != 0 && c.id == this.deny) {
      return out.deny("ERR " + COMMAND_NAMES[this.deny] + " is disabled by the template plugin");
    }
    return PASS;
  }
}

register((): Plugin => new Template());

export * from "../../../sdk/assemblyscript/assembly/exports";
