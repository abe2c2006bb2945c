#!/usr/bin/env bash
# Runs every Tessera test on a Debian 12 machine, installing what the tests need first:
#   tools/test.sh
# (CI runs exactly this through .ci/run.) Set TESSERA_SKIP_INSTALL=1 to skip the apt step.
# Order: the web console's front end is built first (the Rust tests serve its files), then one
# cargo build and test of everything, then the front end's unit tests and its end-to-end
# tests in headless Chromium, which drive the target/debug/tessera that cargo test built.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pair in redis-server:redis-server redis-cli:redis-tools etcd:etcd-server protoc:protobuf-compiler \
            nutcracker:nutcracker promtool:prometheus chromium:chromium; do
  cmd=${pair%%:*} pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ] && [ -z "${TESSERA_SKIP_INSTALL:-}" ]; then
  echo "test.sh: installing ${need_apt[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts these as services on install; the tests start their own on free ports.
  for svc in redis-server etcd prometheus; do $sudo_cmd service "$svc" stop >/dev/null 2>&1 || true; done
fi
# rustup does not add a missing target to an installed toolchain by itself.
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true

# Node.js >= 20.19 (Vite 8's floor); Debian 12's own nodejs package is 18.
node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || return 1
  local major minor
  IFS=. read -r major minor _ <<<"$(node -p 'process.versions.node')"
  [ "$major" -gt 20 ] || { [ "$major" -eq 20 ] && [ "$minor" -ge 19 ]; }
}

web=""
if [ -f web/package.json ]; then
  if ! node_ok; then
    echo "test.sh: the web console (web/) needs Node.js >= 20.19 with npm; found: $(node --version 2>/dev/null || echo 'no node')." >&2
    echo "test.sh: Debian 12's nodejs package is 18.x: install a Node.js 20.19+ (or 22.12+) nodejs package, e.g. NodeSource's nodejs 20.x .deb, then run again." >&2
    exit 1
  fi
  echo "test.sh: building the web console (web/: npm ci, npm run build)"
  (cd web && npm ci --no-audit --no-fund && npm run build)
  web=1
fi

# The plugins as the proxy loads them (wasm32, release): the tests run the real modules. A
# separate target triple, so this does not rebuild the workspace.
cargo build --locked --release --target wasm32-unknown-unknown \
  -p tessera-plugin-filter -p tessera-plugin-bucket -p tessera-plugin-metrics \
  -p tessera-plugin-faulty -p tessera-plugin-template

# One build of everything (lib, bin, tests, benches in test mode), then every test.
cargo test --workspace --all-targets --locked

if [ -n "$web" ]; then
  echo "test.sh: web console unit tests (npm test) and end-to-end tests (npm run e2e)"
  (cd web && npm test)
  (cd web && npm run e2e)
fi
