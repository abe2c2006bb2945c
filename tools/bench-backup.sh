#!/usr/bin/env bash
# Whole-cluster backup and restore benchmark (not a test; docs/backup.md, "Measured"): a
# two-group cluster (a master and a replica each) filled through its proxy with
# redis-benchmark (SET of 32-byte values over --keys random keys), backed up by its dashboard
# (plain, then one instant), and restored into a three-group cluster through its proxy.
#   tools/bench-backup.sh [--keys 1000000]
# TESSERA_BIN picks the binary (default target/debug/tessera). Needs redis-server,
# redis-cli, redis-benchmark, curl, python3. Everything runs on 127.0.0.1 and is stopped at
# exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=1000000
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) KEYS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${TESSERA_BIN:-$PWD/target/debug/tessera}
[ -x "$BIN" ] || { echo "build first: cargo build -p tessera" >&2; exit 1; }
DIR=$(mktemp -d /tmp/tessera-backupbench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TOKEN=bench-token
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }

servers=()
for i in 0 1 2 3 4 5 6; do
  p=$(port); servers+=("$p"); mkdir -p "$DIR/r$p"
  redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no --dir "$DIR/r$p" \
    --logfile "$DIR/r$p.log" &
  PIDS+=($!)
done
for p in "${servers[@]}"; do until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.1; done; done

# cluster NAME DASHBOARD_PORT PROXY_PORT EXTRA...: a dashboard and a proxy on an fs store.
cluster() {
  local name=$1 dport=$2 pport=$3; shift 3
  "$BIN" dashboard --cluster "$name" --store "fs://$DIR/store-$name" --listen 127.0.0.1:$dport \
    --admin-token $TOKEN "$@" > "$DIR/dash-$name.log" 2>&1 &
  PIDS+=($!)
  until curl -sf -H "Authorization: Bearer $TOKEN" http://127.0.0.1:$dport/api/overview >/dev/null; do sleep 0.2; done
  "$BIN" proxy --cluster "$name" --store "fs://$DIR/store-$name" --listen 127.0.0.1:$pport \
    --admin-listen 127.0.0.1:$(port) > "$DIR/proxy-$name.log" 2>&1 &
  PIDS+=($!)
  until redis-cli -p "$pport" ping >/dev/null 2>&1; do sleep 0.1; done
}
api() { curl -sf -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' "$@"; }
group() { # DASHBOARD_PORT ID SERVER_PORT...
  local d=$1 g=$2; shift 2
  api -X POST -d "{\"id\":$g}" http://127.0.0.1:$d/api/groups >/dev/null
  for s in "$@"; do api -X POST -d "{\"addr\":\"127.0.0.1:$s\"}" http://127.0.0.1:$d/api/groups/$g/servers >/dev/null; done
}
assign() { api -X POST -d "{\"from\":$2,\"to\":$3,\"group\":$4}" http://127.0.0.1:$1/api/slots/assign >/dev/null; }

SD=$(port) SP=$(port) TD=$(port) TP=$(port)
cluster src $SD $SP --backup-root "$DIR/backups"
group $SD 1 ${servers[0]} ${servers[1]}
group $SD 2 ${servers[2]} ${servers[3]}
assign $SD 0 511 1; assign $SD 512 1023 2
cluster dst $TD $TP
group $TD 1 ${servers[4]}; group $TD 2 ${servers[5]}; group $TD 3 ${servers[6]}
assign $TD 0 340 1; assign $TD 341 681 2; assign $TD 682 1023 3

redis-benchmark -p $SP -t set -n "$KEYS" -r "$KEYS" -d 32 -P 64 -c 4 -q > "$DIR/fill.txt"
held=$(redis-cli -p $SP dbsize)
until [ "$(api http://127.0.0.1:$SD/api/groups | grep -o '"master_link":"up"' | wc -l)" -ge 2 ]; do sleep 0.2; done
sleep 2 # the replicas' offsets catch up with the fill's last writes
echo "source: $held keys in 2 groups; fill: $(tr "\r" "\n" < "$DIR/fill.txt" | tail -1)"

for mode in plain instant; do
  extra=(); [ $mode = instant ] && extra=(--one-instant)
  t0=$(now)
  "$BIN" admin --dashboard 127.0.0.1:$SD --token $TOKEN backup --to $mode "${extra[@]}" > "$DIR/backup-$mode.txt"
  t1=$(now)
  bytes=$(du -sb "$DIR/backups/$mode" | cut -f1)
  pause=$(python3 -c "import json;print(json.load(open('$DIR/backups/$mode/manifest.json')).get('pause_ms'))")
  echo "backup $mode: $(secs $t0 $t1) s, $bytes bytes, pause_ms=$pause"
done
t0=$(now)
"$BIN" admin --dashboard 127.0.0.1:$TD --token $TOKEN restore --from "$DIR/backups/plain" --to 127.0.0.1:$TP | tail -1
t1=$(now)
echo "restore: $(secs $t0 $t1) s wall, target holds $(redis-cli -p $TP dbsize) keys in 3 groups"
