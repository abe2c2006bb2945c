#!/usr/bin/env bash
# Transactions and PUBLISH fan-out, direct to one Redis against through the proxy over two,
# interleaved rounds, as ratios (tests/examples/sessbench.rs does the measuring):
#   tools/bench-sessions.sh target/release/tessera
# Environment: ROUNDS (3), SECS per run (5), CLIENTS for MULTI/INCR/EXEC (50), SUBS for
# PUBLISH (50), T (proxy threads, 1), MODES ("tx publish").
# Ports 17110-17112 on 127.0.0.1; every process it starts is stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
rounds=${ROUNDS:-3}; secs=${SECS:-5}; clients=${CLIENTS:-50}; subs=${SUBS:-50}; t=${T:-1}
modes=${MODES:-tx publish}
out=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$out"' EXIT
cargo build -q --release -p tessera-tests --example sessbench
bench=target/release/examples/sessbench
for port in 17111 17112; do
  redis-server --bind 127.0.0.1 --port $port --save "" --appendonly no >/dev/null 2>&1 &
  pids+=($!)
done
"$bin" proxy --listen 127.0.0.1:17110 --backends 127.0.0.1:17111,127.0.0.1:17112 \
  --threads "$t" >"$out/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p 17110 ping >/dev/null 2>&1 && break; sleep 0.1; done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for mode in $modes; do
  n=$clients; [ "$mode" = publish ] && n=$subs
  for r in $(seq 1 "$rounds"); do
    timeout 120 "$bench" "$mode" 127.0.0.1:17111 "$n" "$secs" >>"$out/$mode.direct"
    timeout 120 "$bench" "$mode" 127.0.0.1:17110 "$n" "$secs" >>"$out/$mode.proxy"
  done
  d=$(median <"$out/$mode.direct"); p=$(median <"$out/$mode.proxy")
  unit="transactions/s ($n clients)"; [ "$mode" = publish ] && unit="messages delivered/s ($n subscribers)"
  printf '%-8s direct %8s  proxy %8s  ratio %s   %s, median of %s rounds\n' "$mode" "$d" "$p" \
    "$(awk -v a="$p" -v b="$d" 'BEGIN {printf "%.2f", a / b}')" "$unit" "$rounds"
done
