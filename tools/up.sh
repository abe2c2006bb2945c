#!/usr/bin/env bash
# Brings up a local Tessera cluster on a Debian 12 machine:
#   tools/up.sh [tessera up options]
# Installs redis-server if it is missing (apt), builds the release binary, runs `tessera up`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    echo "up.sh: installing redis-server (apt)"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends redis-server >/dev/null
    $sudo_cmd service redis-server stop >/dev/null 2>&1 || true
  else
    echo "up.sh: redis-server is missing: install Redis 7 (or Valkey) so that redis-server is on PATH" >&2
    exit 1
  fi
fi
cargo build --release --locked -p tessera
exec target/release/tessera up "$@"
