#!/usr/bin/env bash
# Runs every Tessera test on a Debian 12 machine, installing what the tests need first:
#   tools/test.sh
# (CI runs exactly this through .ci/run.) Set TESSERA_SKIP_INSTALL=1 to skip the apt step
# (tools/apt-install.sh).
# Order: the web console's front end is linted and built first (the Rust tests serve its
# files) and the Node clients the session tests drive (tests/clients) installed, then one
# cargo build, clippy and test of everything, then the front end's unit tests and its end-to-end
# tests in headless Chromium, which drive the target/debug/tessera that cargo test built.
set -euo pipefail
cd "$(dirname "$0")/.."

. tools/apt-install.sh
test_packages=(
  redis-server:redis-server  # the backends every cross-process test starts
  redis-cli:redis-tools      # redis-cli and redis-benchmark drive the proxy in tests
  etcd:etcd-server           # the etcd store's contract suite and clusters on etcd
  nutcracker:nutcracker      # twemproxy, for the side-by-side tests
  promtool:prometheus        # checks /metrics is valid Prometheus text; tests the alert rules (ops/prometheus)
  chromium:chromium          # the console's end-to-end test in headless Chromium
  /usr/bin/python3:python3   # runs the redis-py client tests (tests/clients)
  /usr/lib/python3/dist-packages/redis/__init__.py:python3-redis  # redis-py, as applications use it
  openssl:openssl            # the TLS tests make their CA and certificates, and read served ones
  curl:curl                  # the README's command lines, run as written (tests/suite/readme)
)
apt_install "${TESSERA_BUILD_PACKAGES[@]}" "${test_packages[@]}"
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
  echo "test.sh: linting and building the web console (web/: npm ci, npm run lint, npm run build)"
  (cd web && npm ci --no-audit --no-fund && npm run lint && npm run build)
  web=1
fi
# ioredis, which the session tests drive through the proxies (tests/clients).
node_ok || { echo "test.sh: tests/clients needs Node.js >= 20.19 with npm" >&2; exit 1; }
(cd tests/clients && npm ci --no-audit --no-fund)

# The plugins as the proxy loads them (wasm32, release): the tests run the real modules. A
# separate target triple, so this does not rebuild the workspace.
cargo build --locked --release --target wasm32-unknown-unknown \
  -p tessera-plugin-filter -p tessera-plugin-bucket -p tessera-plugin-metrics \
  -p tessera-plugin-faulty -p tessera-plugin-template -p tessera-plugin-converter
# The same examples in C and AssemblyScript (sdk/c, sdk/assemblyscript), next to them: installs
# the pinned Zig (pip, into sdk/c/.zig) and AssemblyScript (npm ci in sdk/assemblyscript) once.
sdk/build-languages.sh

# One build of everything (the tessera binary the suite drives, and lib, bin, tests, benches in
# test mode), then every test. `cargo test` alone does not build a package's binary unless that
# package has integration tests, and the suite runs the binary.
cargo build --workspace --locked
# Lints, warnings as errors, with the pinned toolchain's clippy (rust-toolchain.toml).
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked

if [ -n "$web" ]; then
  echo "test.sh: web console unit tests (npm test) and end-to-end tests (npm run e2e)"
  (cd web && npm test)
  (cd web && npm run e2e)
fi
