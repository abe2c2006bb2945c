#!/usr/bin/env bash
# What the converter costs in the proxy: redis-benchmark SET/GET through a proxy (release
# build) with no plugin, then with the converter in four situations. One redis-server; the
# variants run alternately, ROUNDS times. Printed per run: requests per second, and the proxy's
# CPU time per request (user + system, µs), which a busy shared machine disturbs far less.
#   plugins/converter/bench/run.sh [tessera binary] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=${1:-$root/target/release/tessera}
rounds=${2:-3}
wasm=$root/target/wasm32-unknown-unknown/release/tessera_plugin_converter.wasm
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
rport=$((20000 + RANDOM % 5000)); pport=$((25000 + RANDOM % 5000))
redis-server --port $rport --save '' --appendonly no --daemonize no >/dev/null &
pids+=($!)
sleep 0.5
hash=$(printf 'pw' | "$bin" hash-password)
users="[[users]]
name = \"alice\"
password = \"$hash\"
"
plugin() { printf '[[plugins]]\nname = "converter"\npath = "%s"\nconfig_json = %s\n' "$wasm" "'$1'"; }
ns='{"namespaces":[{"users":["alice"],"prefix":"app1:"}]}'
zip='{"compression":{"prefixes":["key:"],"min_bytes":1024}}'
zip_other='{"compression":{"prefixes":["other:"],"min_bytes":1024}}'
printf '%s' "$users" >"$dir/none.toml"
{ printf '%s' "$users"; plugin "$zip_other"; } >"$dir/zip_unhooked.toml"
{ printf '%s' "$users"; plugin "$ns"; } >"$dir/ns.toml"
{ printf '%s' "$users"; plugin "$zip"; } >"$dir/zip.toml"

bench() { # name config auth-args data-size
  local port=$pport
  "$bin" proxy --listen 127.0.0.1:$port --backends 127.0.0.1:$rport --config "$dir/$2.toml" \
    >"$dir/proxy.log" 2>&1 &
  local p=$!
  for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  local out
  local n=100000 cpu0 cpu1
  cpu0=$(awk '{print $14 + $15}' /proc/$p/stat)
  out=$(redis-benchmark -p $port $3 -c 50 -n $n -P 1 -d "$4" -r 10000 -t set,get -q 2>/dev/null \
    | tr '\r' '\n' | grep -E '^(SET|GET): [0-9]' | awk '{print $1 $2}' | tr '\n' ' ')
  cpu1=$(awk '{print $14 + $15}' /proc/$p/stat)
  kill $p; wait $p 2>/dev/null || true
  # Clock ticks (1/100 s) over 2n requests (SET and GET).
  echo "$1 d=$4 $out cpu_us_per_req=$(awk -v t=$((cpu1 - cpu0)) -v n=$n 'BEGIN { printf "%.1f", t * 10000 / (2 * n) }')"
}
for r in $(seq "$rounds"); do
  bench none none "" 64
  bench zip-unhooked zip_unhooked "" 64
  bench ns-unconfined ns "" 64
  bench ns-alice ns "--user alice -a pw" 64
  bench none none "" 4096
  bench zip zip "" 4096
done
