#!/usr/bin/env bash
# Installs the pinned C and AssemblyScript toolchains (sdk/c/install-zig.sh,
# sdk/assemblyscript/install.sh) and builds the example plugins and templates written in those
# languages next to the Rust ones, as target/wasm32-unknown-unknown/release/tessera_plugin_<name>.wasm
# (the conformance suite and the proxy tests load them from there):
#   sdk/build-languages.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${CARGO_TARGET_DIR:-$root/target}/wasm32-unknown-unknown/release"
mkdir -p "$out"
"$root/sdk/c/install-zig.sh"
"$root/sdk/assemblyscript/install.sh"
for p in filter metrics; do
  "$root/sdk/c/tessera-cc" -o "$out/tessera_plugin_${p}_c.wasm" "$root/plugins/$p-c/$p.c"
  "$root/sdk/assemblyscript/tessera-asc" "$root/plugins/$p-as/$p.ts" -o "$out/tessera_plugin_${p}_as.wasm"
done
"$root/sdk/c/tessera-cc" -o "$out/tessera_plugin_template_c.wasm" "$root/examples/plugin-template-c/plugin.c"
"$root/sdk/assemblyscript/tessera-asc" "$root/examples/plugin-template-as/assembly/index.ts" \
  -o "$out/tessera_plugin_template_as.wasm"
echo "build-languages: C and AssemblyScript plugins in $out"
