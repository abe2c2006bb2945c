#!/usr/bin/env bash
# Runs every Tessera test on a Debian 12 machine, installing what the tests need first:
#   tools/test.sh
# (CI runs exactly this through .ci/run.) Set TESSERA_SKIP_INSTALL=1 to skip the apt step.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pair in redis-server:redis-server redis-cli:redis-tools etcd:etcd-server protoc:protobuf-compiler \
            nutcracker:nutcracker promtool:prometheus; do
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

# The plugins as the proxy loads them (wasm32, release): the tests run the real modules. A
# separate target triple, so this does not rebuild the workspace.
cargo build --locked --release --target wasm32-unknown-unknown \
  -p tessera-plugin-filter -p tessera-plugin-bucket -p tessera-plugin-metrics \
  -p tessera-plugin-faulty -p tessera-plugin-template

# One build of everything (lib, bin, tests, benches in test mode), then every test.
cargo test --workspace --all-targets --locked
