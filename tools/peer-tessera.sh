#!/usr/bin/env bash
# peer-tessera.sh — stands in for codis-proxy in ../shared/bench/peerbench.sh (`--codis-bin`), so
# that one interleaved run measures two Tessera proxies side by side: the one given by
# `--proxy-cmd`, and this one (e.g. the same binary without plugins, or an older binary).
#
#   PEER_TESSERA_BIN=target/release/tessera PEER_TESSERA_ARGS='--config X.toml' \
#     peerbench.sh --codis-bin tools/peer-tessera.sh --proxy-cmd '...' 127.0.0.1:19001
#
# peerbench asks codis-proxy for `--default-config` (answered with an empty config) and then
# starts it with `--host-proxy=ADDR` among codis's flags; this script execs Tessera's proxy on
# ADDR in front of peerbench's backends (PB_REDIS_PORTS, default 7001 7002), so the PID
# peerbench measures is the proxy's own. The column is still labelled `codis` in the table.
set -euo pipefail
bin="${PEER_TESSERA_BIN:?set PEER_TESSERA_BIN to a tessera binary}"
listen=""
for a in "$@"; do
  case "$a" in
    --default-config) exit 0 ;;
    --host-proxy=*) listen="${a#--host-proxy=}" ;;
  esac
done
[ -n "$listen" ] || { echo "peer-tessera: no --host-proxy=ADDR given" >&2; exit 2; }
backends=""
for p in ${PB_REDIS_PORTS:-7001 7002}; do backends="${backends:+$backends,}127.0.0.1:$p"; done
# PEER_TESSERA_ARGS is split on spaces on purpose (e.g. '--config X.toml').
# shellcheck disable=SC2086
exec "$bin" proxy --listen "$listen" --backends "$backends" ${PEER_TESSERA_ARGS:-}
