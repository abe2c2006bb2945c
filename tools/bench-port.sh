#!/usr/bin/env bash
# `tessera import` benchmark (not a test): keys/s of `restore` (an RDB file through a proxy)
# and of `sync` (its full load, then its command stream under redis-benchmark writes), into a
# proxy in front of two redis-servers.
#   tools/bench-port.sh [--keys 1000000] [--mix]
# --keys: small keys (DEBUG POPULATE, 32-byte values). --mix: instead, KEYS/10 keys of each
# of six kinds (so 0.6 × KEYS keys): 32-byte strings (a third with a TTL), integers, and
# lists, hashes, sets and sorted sets of 10 elements each.
# Needs a release build (cargo build --release -p tessera; TESSERA_BIN=path overrides),
# redis-server, redis-cli, redis-benchmark, python3. Everything runs on 127.0.0.1 and is
# stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=1000000 MIX=0
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) KEYS=$2; shift 2 ;;
    --mix) MIX=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${TESSERA_BIN:-$PWD/target/release/tessera}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p tessera" >&2; exit 1; }
DIR=$(mktemp -d /tmp/tessera-portbench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SRC=$(port) B1=$(port) B2=$(port) P=$(port)
for r in $SRC $B1 $B2; do
  mkdir -p "$DIR/$r"
  redis-server --bind 127.0.0.1 --port "$r" --save '' --appendonly no --enable-debug-command yes \
    --repl-diskless-sync-delay 0 --dir "$DIR/$r" --logfile "$DIR/r$r.log" &
  PIDS+=($!)
done
for r in $SRC $B1 $B2; do until redis-cli -p "$r" ping >/dev/null 2>&1; do sleep 0.1; done; done
"$BIN" proxy --listen 127.0.0.1:$P --backends 127.0.0.1:$B1,127.0.0.1:$B2 > "$DIR/proxy.log" 2>&1 &
PIDS+=($!)
until redis-cli -p "$P" ping >/dev/null 2>&1; do sleep 0.1; done

if [ "$MIX" = 1 ]; then
  python3 - "$KEYS" > "$DIR/mix.resp" <<'PY'
import sys
n = int(sys.argv[1]) // 10
out = sys.stdout.buffer
def cmd(*a):
    out.write(b"*%d\r\n" % len(a))
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
for i in range(n):
    cmd("SET", f"s:{i}", "v" * 32, *(["EX", 3600] if i % 3 == 0 else []))
    cmd("RPUSH", f"l:{i}", *[f"e{j}" for j in range(10)])
    cmd("HSET", f"h:{i}", *[x for j in range(10) for x in (f"f{j}", f"v{j}")])
    cmd("SADD", f"t:{i}", *[f"m{j}" for j in range(10)])
    cmd("ZADD", f"z:{i}", *[x for j in range(10) for x in (j, f"m{j}")])
    cmd("SET", f"n:{i}", i)
PY
  redis-cli -p "$SRC" --pipe < "$DIR/mix.resp" >/dev/null
else
  redis-cli -p "$SRC" debug populate "$KEYS" key 32 >/dev/null
fi
TOTAL=$(redis-cli -p "$SRC" dbsize)
redis-cli -p "$SRC" save >/dev/null
RDB="$DIR/$SRC/dump.rdb"
echo "source: $TOTAL keys, RDB $(stat -c %s "$RDB") bytes"

echo "== restore"
"$BIN" port restore --rdb "$RDB" --to 127.0.0.1:$P | tail -1
GOT=$(( $(redis-cli -p "$B1" dbsize) + $(redis-cli -p "$B2" dbsize) ))
[ "$GOT" = "$TOTAL" ] || { echo "restore wrote $GOT keys, the source holds $TOTAL" >&2; exit 1; }

echo "== sync: full load"
for b in $B1 $B2; do redis-cli -p "$b" flushall >/dev/null; done
"$BIN" port sync --from 127.0.0.1:$SRC --to 127.0.0.1:$P --state "$DIR/port.state" > "$DIR/sync.log" 2>&1 &
SYNC=$!
PIDS+=($SYNC)
until grep -q "port sync loaded" "$DIR/sync.log"; do sleep 0.2; kill -0 $SYNC || { cat "$DIR/sync.log"; exit 1; }; done
LOADED=$(grep "port sync loaded" "$DIR/sync.log")
SECS=$(sed -E 's/.*seconds=([0-9.]+).*/\1/' <<<"$LOADED")
echo "$LOADED"
GOT=$(( $(redis-cli -p "$B1" dbsize) + $(redis-cli -p "$B2" dbsize) ))
[ "$GOT" = "$TOTAL" ] || { echo "sync loaded $GOT keys, the source holds $TOTAL" >&2; exit 1; }
echo "full load: $(python3 -c "print(round($TOTAL / $SECS))") keys/s"

echo "== sync: command stream (redis-benchmark SET, 1000000 requests, 50 clients, pipeline 16)"
START=$(date +%s.%N)
redis-benchmark -p "$SRC" -t set -n 1000000 -r 1000000 -c 50 -P 16 -q | tr "\r" "\n" | grep -a "per second" | tail -1
TARGET=$(redis-cli -p "$SRC" info replication | sed -n 's/^master_repl_offset:\([0-9]*\).*/\1/p')
until [ -s "$DIR/port.state" ] && [ "$(python3 -c "import json; print(json.load(open('$DIR/port.state'))['offset'])")" -ge "$TARGET" ]; do sleep 0.05; done
END=$(date +%s.%N)
echo "stream: 1000000 SETs applied through the proxy in $(python3 -c "print(round($END - $START, 2))") s: $(python3 -c "print(round(1000000 / ($END - $START)))") commands/s (from the first write to caught up; the state file is saved once a second)"
tail -1 "$DIR/sync.log"
