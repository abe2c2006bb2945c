#!/usr/bin/env bash
# Brings up a local Tessera cluster on a Debian 12 machine:
#   tools/up.sh [tessera up options]
# Installs redis-server and the build's protoc if they are missing (apt, tools/apt-install.sh),
# builds the web console's front end (npm), the example plugins (wasm32, release), then the
# release binary, which embeds the front end, and runs `tessera up` (which loads the plugins
# into each new cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/apt-install.sh
# redis-server: the cluster's backends; the rest is what building the binary needs.
apt_install redis-server:redis-server "${TESSERA_BUILD_PACKAGES[@]}"
if [ -f web/package.json ]; then
  node_version=$(node -p 'process.versions.node' 2>/dev/null || true)
  IFS=. read -r major minor _ <<<"${node_version:-0.0.0}"
  if ! command -v npm >/dev/null 2>&1 || [ "$major" -lt 20 ] || { [ "$major" -eq 20 ] && [ "$minor" -lt 19 ]; }; then
    echo "up.sh: the web console needs Node.js >= 20.19 with npm to build (found: ${node_version:-no node})." >&2
    echo "up.sh: install a Node.js 20.19+ nodejs package (Debian 12's own is 18), or skip the console's" >&2
    echo "up.sh: pages with: cargo build --release -p tessera && target/release/tessera up" >&2
    exit 1
  fi
  echo "up.sh: building the web console (web/: npm ci, npm run build)"
  (cd web && npm ci --no-audit --no-fund && npm run build)
fi
# The example plugins `tessera up` loads (from target/wasm32-unknown-unknown/release). Without
# them the cluster still runs: `tessera up` says which are missing.
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
echo "up.sh: building the example plugins (wasm32-unknown-unknown, release)"
if ! cargo build --release --locked --target wasm32-unknown-unknown \
     -p tessera-plugin-metrics -p tessera-plugin-filter; then
  echo "up.sh: the example plugins did not build; tessera up runs without the missing ones" >&2
fi
cargo build --release --locked -p tessera
exec target/release/tessera up "$@"
