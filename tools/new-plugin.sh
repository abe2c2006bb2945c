#!/usr/bin/env bash
# Starts a Tessera plugin outside this repository from examples/plugin-template, and builds it:
#   tools/new-plugin.sh DIR [NAME]      (NAME defaults to DIR's last component)
# DIR gets the template's code as package NAME, its SDK dependency pointed at this checkout's
# sdk/ by absolute path, this checkout's toolchain pin, wasm32 stack flags and Cargo.lock (the
# versions the repository is tested with), and a release profile with LTO. Then it builds the
# .wasm (wasm32-unknown-unknown, release) and runs the plugin's native tests.
# Set NEW_PLUGIN_NO_BUILD=1 to only write the files.
set -euo pipefail

usage() { echo "usage: ${0##*/} DIR [NAME]   (DIR must not exist yet)" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
dest=$1
name=${2:-$(basename -- "$dest")}
root=$(cd "$(dirname -- "$0")/.." && pwd -P)
template=$root/examples/plugin-template

# Cargo's own rule for a package name, kept strict (lower case) so the .wasm name is predictable.
if ! [[ $name =~ ^[a-z][a-z0-9_-]*$ ]]; then
  echo "${0##*/}: '$name' is not a usable package name (lower-case letters, digits, - and _, starting with a letter); give NAME" >&2
  exit 2
fi
if [ -e "$dest" ]; then
  echo "${0##*/}: $dest already exists; give a new directory" >&2
  exit 1
fi
lib=${name//-/_}

mkdir -p -- "$dest"
dest=$(cd -- "$dest" && pwd -P)
cp -R -- "$template/src" "$dest/src"
# The template's manifest, with only what must change outside the repository changed: the
# package name, and the SDK's relative path (../../sdk) made absolute. The SDK's own path
# dependency on sdk/abi then resolves inside this checkout.
# (`&`, `|` and `\` in the checkout's path are escaped for sed's replacement.)
root_sed=$(printf '%s' "$root" | sed 's/[&|\\]/\\&/g')
sed -e "s|^name = \"tessera-plugin-template\"|name = \"$name\"|" \
    -e "s|path = \"\\.\\./\\.\\./sdk\"|path = \"$root_sed/sdk\"|g" \
    -e "s|^# Out of the Tessera repository, point this at your copy of the SDK.*|# The Tessera SDK of the checkout this plugin was made from (tools/new-plugin.sh).|" \
    "$template/Cargo.toml" >"$dest/Cargo.toml"
if ! grep -q "^name = \"$name\"" "$dest/Cargo.toml" || ! grep -qF "path = \"$root/sdk\"" "$dest/Cargo.toml" \
   || grep -q '\.\./\.\./sdk' "$dest/Cargo.toml"; then
  echo "${0##*/}: $template/Cargo.toml no longer has the lines this script rewrites; update the script" >&2
  exit 1
fi
# A workspace's profile applies only at its root, and the plugin is its own root now; the
# profile and its measured effect are in examples/plugin-template/README.md.
cat >>"$dest/Cargo.toml" <<'EOF'

# Fat LTO and one codegen unit: the optimizer sees the plugin and the SDK whole. opt-level = "s"
# gives a smaller module (Tessera's examples/plugin-template/README.md has the sizes).
[profile.release]
lto = true
codegen-units = 1
opt-level = 3
EOF
# The repository's wasm32 flags (a 64 KiB stack instead of 1 MiB in every instance's initial
# memory, no debug info), its toolchain pin (which names the wasm32 target, so rustup adds it)
# and its lock file (the dependency versions it is tested with; cargo prunes the rest).
mkdir -p "$dest/.cargo"
cp -- "$root/.cargo/config.toml" "$dest/.cargo/config.toml"
cp -- "$root/rust-toolchain.toml" "$dest/rust-toolchain.toml"
cp -- "$root/Cargo.lock" "$dest/Cargo.lock"
printf '/target\n' >"$dest/.gitignore"
echo "new-plugin: wrote $name in $dest (from $template)"

[ -z "${NEW_PLUGIN_NO_BUILD:-}" ] || exit 0
cd -- "$dest"
# The plugin's own target/ (as its README's paths say), whatever the caller's environment.
unset CARGO_TARGET_DIR
cargo build --release --target wasm32-unknown-unknown
cargo test
wasm=$dest/target/wasm32-unknown-unknown/release/$lib.wasm
echo "new-plugin: built $wasm"
echo "new-plugin: try it in a proxy in front of a local redis-server (README.md, \"A tour for plugin authors\"):"
echo "  tessera proxy --listen 127.0.0.1:19100 --backends 127.0.0.1:6379 --plugin $wasm --plugin-config '{\"deny\":\"DEL\"}'"
