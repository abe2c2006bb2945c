// The manifest a plugin fills in init, and its encoding for the host (sdk/ABI.md,
// "Manifest"): hooked commands, classes, flags, key prefixes, and the optional sections of
// what the plugin denies to every client and of its gate.
import { abi, mf, hook, COMMAND_NAMES } from "./abi";
import { Out } from "./out";

export class Manifest {
  private hooks: StaticArray<u16> = new StaticArray<u16>(COMMAND_NAMES.length);
  flags: u32 = 0;
  classes: u32 = 0;
  tickMs: u32 = 0;
  prefixes: Array<string> = [];
  denied: Array<string> = [];
  deniedClasses: u32 = 0;
  gateClasses: u32 = 0;
  gateMaxValue: u32 = 0xffffffff;
  gatePrefixes: Array<string> = [];

  /** Hook one command (names and keys only). */
  hook(id: u16): Manifest {
    if (id > 0 && <i32>id < this.hooks.length) this.hooks[id] |= 0x8000;
    return this;
  }
  /** Hook one command with the bytes of every argument. */
  hookValues(id: u16): Manifest {
    if (id > 0 && <i32>id < this.hooks.length) this.hooks[id] |= 0x8000 | <u16>hook.VALUES;
    return this;
  }
  /** Hook every command of these classes (`klass.*`). */
  hookClass(bits: u32): Manifest {
    this.classes |= bits;
    return this;
  }
  hookAll(): Manifest {
    this.flags |= mf.ALL;
    return this;
  }
  /** Copy values for commands hooked by class or by hookAll. */
  classValues(): Manifest {
    this.flags |= mf.CLASS_VALUES;
    return this;
  }
  /** Only commands with a key under one of the prefixes reach the plugin. */
  prefix(p: string): Manifest {
    this.prefixes.push(p);
    return this;
  }
  wantClose(): Manifest {
    this.flags |= mf.WANT_CLOSE;
    return this;
  }
  observeHeads(): Manifest {
    this.flags |= mf.OBSERVE_HEADS;
    return this;
  }
  tick(ms: u32): Manifest {
    this.tickMs = ms;
    return this;
  }
  /** Declare a command refused to every client ("FLUSHALL", "CONFIG|SET"): unconditional rules only. */
  denyToAll(name: string): Manifest {
    this.denied.push(name);
    this.flags |= mf.DENIES;
    return this;
  }
  denyClassesToAll(bits: u32): Manifest {
    this.deniedClasses |= bits;
    if (bits != 0) this.flags |= mf.DENIES;
    return this;
  }

  /** The gate (sdk/ABI.md, "Manifest"): a command hooked only through these classes reaches
   * the plugin only when a key is under a gate prefix or a value is longer than the bound. */
  gateClass(bits: u32): Manifest {
    this.gateClasses |= bits;
    this.flags |= mf.GATE;
    return this;
  }
  gatePrefix(p: string): Manifest {
    this.gatePrefixes.push(p);
    this.flags |= mf.GATE;
    return this;
  }
  gateMaxValueBytes(bytes: u32): Manifest {
    this.gateMaxValue = bytes;
    this.flags |= mf.GATE;
    return this;
  }

  /** Writes the encoding into `o`. */
  encode(o: Out): void {
    let n: u32 = 0;
    for (let id = 1; id < this.hooks.length; id++) if (this.hooks[id] & 0x8000) n++;
    o.writeU32LE(abi.VERSION);
    o.writeU32LE(this.flags);
    o.writeU32LE(this.classes);
    o.writeU32LE(this.tickMs);
    o.writeU32LE(n);
    o.writeU32LE(<u32>this.prefixes.length);
    for (let id = 1; id < this.hooks.length; id++) {
      const h = this.hooks[id];
      if (h & 0x8000) o.writeU32LE(<u32>id | ((<u32>h & 0xff) << 16));
    }
    for (let i = 0; i < this.prefixes.length; i++) {
      o.writeU32LE(<u32>String.UTF8.byteLength(this.prefixes[i]));
      o.writeString(this.prefixes[i]);
    }
    if (this.flags & mf.DENIES) {
      o.writeU32LE(this.deniedClasses);
      o.writeU32LE(<u32>this.denied.length);
      for (let i = 0; i < this.denied.length; i++) {
        o.writeU32LE(<u32>String.UTF8.byteLength(this.denied[i]));
        o.writeString(this.denied[i]);
      }
    }
    if (this.flags & mf.GATE) {
      o.writeU32LE(this.gateClasses);
      o.writeU32LE(this.gateMaxValue);
      o.writeU32LE(<u32>this.gatePrefixes.length);
      for (let i = 0; i < this.gatePrefixes.length; i++) {
        o.writeU32LE(<u32>String.UTF8.byteLength(this.gatePrefixes[i]));
        o.writeString(this.gatePrefixes[i]);
      }
    }
  }
}
