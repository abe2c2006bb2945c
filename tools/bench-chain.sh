#!/usr/bin/env bash
# CPU per request of every process in the chain (redis-benchmark, the proxy, the servers) for
# GETs, direct to one Redis and through a proxy over two, three interleaved rounds:
#   tools/bench-chain.sh target/release/tessera
# Environment: N (requests, default 1000000), P (pipeline, 16), T (proxy threads, 1).
# Ports 17100-17102 on 127.0.0.1; every process it starts is stopped at exit.
set -euo pipefail
bin=$1
n=${N:-1000000}; p=${P:-16}; t=${T:-1}
out=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$out"' EXIT
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for port in 17101 17102; do
  redis-server --bind 127.0.0.1 --port $port --save "" --appendonly no >/dev/null 2>&1 &
  pids+=($!)
done
r1=${pids[0]}; r2=${pids[1]}
"$bin" proxy --listen 127.0.0.1:17100 --backends 127.0.0.1:17101,127.0.0.1:17102 \
  --threads "$t" >"$out/proxy.log" 2>&1 &
px=$!; pids+=($px)
for _ in $(seq 1 100); do redis-cli -p 17100 ping >/dev/null 2>&1 && break; sleep 0.1; done
for port in 17100 17101; do
  redis-benchmark -p $port -t set -n 200000 -r 100000 -P 16 -q >/dev/null 2>&1
done
tick=$(getconf CLK_TCK)
run() { # port label
  local a1 a2 ap t0 t1 b bcpu=0
  a1=$(cpu $r1); a2=$(cpu $r2); ap=$(cpu $px); t0=$(date +%s.%N)
  timeout 300 redis-benchmark -p "$1" -t get -n "$n" -r 100000 -P "$p" -c 50 --csv \
    >"$out/$2.csv" 2>/dev/null &
  b=$!
  local rb=""
  # The CPU of redis-benchmark itself, the child of `timeout`.
  while kill -0 $b 2>/dev/null; do
    [ -n "$rb" ] || rb=$(pgrep -P $b redis-benchmark || true)
    [ -z "$rb" ] || bcpu=$(cpu "$rb" 2>/dev/null || echo "$bcpu")
    sleep 0.05
  done
  wait $b || true
  t1=$(date +%s.%N)
  awk -v l="$2" -v n="$n" -v t="$tick" -v w="$(echo "$t1-$t0" | bc)" -v bench="$bcpu" \
    -v r=$(( $(cpu $r1) - a1 + $(cpu $r2) - a2 )) -v px=$(( $(cpu $px) - ap )) \
    'BEGIN{printf "%-7s rps=%.0f  us/req: bench=%.2f redis=%.2f proxy=%.2f total=%.2f  cores=%.2f\n",
      l, n/w, bench/t/n*1e6, r/t/n*1e6, px/t/n*1e6, (bench+r+px)/t/n*1e6, (bench+r+px)/t/w}'
}
for _ in 1 2 3; do run 17101 direct; run 17100 proxy; done
