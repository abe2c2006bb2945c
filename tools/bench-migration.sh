#!/usr/bin/env bash
# Migration benchmark (not a test): moves half the slots of a cluster holding N small keys
# (plus, with --big, big hashes and lists) while redis-benchmark runs through a proxy, and
# prints keys/s, client latency with and without migration, and what the servers recorded
# as blocking (LATENCY LATEST with a 5 ms threshold, SLOWLOG over 5 ms).
#   tools/bench-migration.sh [--keys 1000000] [--big] [--no-load] [--abort-after SECS]
#                            [--max-keys-per-sec N]
# --abort-after: SECS into the move, POST /api/migrations/abort, and print how long it took to
# answer (the slots then move back). Needs a release build (cargo build --release -p tessera;
# TESSERA_BIN=path overrides), redis-server, redis-cli, redis-benchmark. Everything runs on
# 127.0.0.1 and is stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=1000000 BIG=0 LOAD=1 ABORT= CAP=
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) KEYS=$2; shift 2 ;;
    --big) BIG=1; shift ;;
    --no-load) LOAD=0; shift ;;
    --abort-after) ABORT=$2; shift 2 ;;
    --max-keys-per-sec) CAP=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${TESSERA_BIN:-$PWD/target/release/tessera}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p tessera" >&2; exit 1; }
DIR=$(mktemp -d /tmp/tessera-migbench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; cp "$DIR/dashboard.log" /tmp/tessera-migbench-dashboard.log 2>/dev/null; cp "$DIR/proxy.log" /tmp/tessera-migbench-proxy.log 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
R1=$(port) R2=$(port) D=$(port) P=$(port) A=$(port)
for r in $R1 $R2; do
  redis-server --bind 127.0.0.1 --port "$r" --save '' --appendonly no --enable-debug-command yes --dir "$DIR" --logfile "$DIR/r$r.log" &
  PIDS+=($!)
done
until redis-cli -p "$R1" ping >/dev/null 2>&1 && redis-cli -p "$R2" ping >/dev/null 2>&1; do sleep 0.1; done
TOKEN=bench
RUST_LOG=${RUST_LOG:-info,tessera::migrate=debug} "$BIN" dashboard --cluster bench --store "fs://$DIR/store" --listen 127.0.0.1:$D --admin-token $TOKEN > "$DIR/dashboard.log" 2>&1 &
PIDS+=($!)
until curl -sf 127.0.0.1:$D/health >/dev/null; do sleep 0.1; done
api() { curl -sf -X "$1" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "127.0.0.1:$D$2" ${3:+-d "$3"}; }
api POST /api/groups '{"id":1}' >/dev/null; api POST /api/groups/1/servers "{\"addr\":\"127.0.0.1:$R1\"}" >/dev/null
api POST /api/groups '{"id":2}' >/dev/null; api POST /api/groups/2/servers "{\"addr\":\"127.0.0.1:$R2\"}" >/dev/null
api POST /api/slots/assign '{"from":0,"to":1023,"group":1}' >/dev/null
"$BIN" proxy --cluster bench --store "fs://$DIR/store" --listen 127.0.0.1:$P --admin-listen 127.0.0.1:$A > "$DIR/proxy.log" 2>&1 &
PIDS+=($!)
until redis-cli -p "$P" ping >/dev/null 2>&1; do sleep 0.1; done

redis-cli -p "$R1" debug populate "$KEYS" key 32 >/dev/null
if [ "$BIG" = 1 ]; then
  for i in $(seq 1 10); do
    redis-cli -p "$R1" eval "for i=1,50000,1000 do local a={} for j=i,i+999 do a[#a+1]='f'..j a[#a+1]='v'..j end redis.call('HSET', KEYS[1], unpack(a)) end" 1 "bighash:$i" >/dev/null
    redis-cli -p "$R1" eval "for i=1,50000,1000 do local a={} for j=i,i+999 do a[#a+1]='e'..j end redis.call('RPUSH', KEYS[1], unpack(a)) end" 1 "biglist:$i" >/dev/null
  done
fi
TOTAL=$(redis-cli -p "$R1" dbsize)
bench() { timeout 300 redis-benchmark -p "$P" -c 50 -n "$1" -t get,set -r 1000000 --csv 2>/dev/null | tail -n +2 | tr -d '"'; }
echo "baseline (no migration), redis-benchmark -c 50 through the proxy:"
bench 200000 | awk -F, '{printf "  %-4s rps %8.0f  p50 %s ms  p99 %s ms\n", $1, $2, $5, $7}'
for r in $R1 $R2; do
  redis-cli -p "$r" config set latency-monitor-threshold 5 >/dev/null
  redis-cli -p "$r" config set slowlog-log-slower-than 5000 >/dev/null
  redis-cli -p "$r" latency reset >/dev/null; redis-cli -p "$r" slowlog reset >/dev/null
done
START=$(date +%s.%N)
api POST /api/migrations "{\"from\":0,\"to\":511,\"group\":2${CAP:+,\"max_keys_per_sec\":$CAP}}" >/dev/null
LOADPID=
if [ "$LOAD" = 1 ]; then
  ( while :; do bench 100000 >> "$DIR/during.csv"; done ) &
  LOADPID=$!
fi
if [ -n "$ABORT" ]; then
  sleep "$ABORT"
  STATES=$(api GET /api/migrations | python3 -c 'import json,sys,collections; print(dict(collections.Counter(s["state"] for s in json.load(sys.stdin)["slots"])))')
  A0=$(date +%s.%N)
  ABORTED=$(api POST /api/migrations/abort '{}')
  A1=$(date +%s.%N)
  echo "abort ${ABORT}s into the move (slots by state: $STATES): answered in $(python3 -c "print(round($A1-$A0,3))")s: $ABORTED"
fi
until api GET /api/migrations | python3 -c 'import json,sys; sys.exit(0 if not json.load(sys.stdin)["slots"] else 1)'; do sleep 0.2; done
END=$(date +%s.%N)
[ -n "$LOADPID" ] && { kill $LOADPID 2>/dev/null; wait $LOADPID 2>/dev/null || true; }
MOVED=$(redis-cli -p "$R2" dbsize)
SECS=$(python3 -c "print(round($END-$START,2))")
RATE=$(python3 -c "print(int($MOVED/($END-$START)))")
echo "migration: $MOVED of $TOTAL keys moved (slots 0-511 → group 2) in ${SECS}s = $RATE keys/s"
api GET /api/migrations | python3 -c 'import json,sys; s=json.load(sys.stdin); w=s.get("write_pause") or {}; c=s.get("slowest_command") or {}; print("  write pause per slot: p50 %s ms  p99 %s ms  max %s ms; slowest mover command: %s ms (%s); bytes moved %s" % (round(w.get("p50_ms",0),1), round(w.get("p99_ms",0),1), round(w.get("max_ms",0),1), round(c.get("ms",0),1), c.get("command"), s.get("bytes_moved")))'
echo "during migration:"
[ "$LOAD" = 1 ] && { awk -F, '{n[$1]++; rps[$1]+=$2; p50[$1]=p50[$1]" "$5; p99[$1]=p99[$1]" "$7} END {for (t in n) printf "  %-4s rps %8.0f  p50 per run:%s ms  p99 per run:%s ms\n", t, rps[t]/n[t], p50[t], p99[t]}' "$DIR/during.csv" 2>/dev/null || echo "  (migration ended before a benchmark run completed)"; }
for r in $R1 $R2; do
  echo "server $r: LATENCY LATEST (events ≥ 5 ms): $(redis-cli -p "$r" latency latest | tr '\n' ' ')"
  echo "server $r: SLOWLOG ≥ 5 ms: $(redis-cli -p "$r" slowlog len) entries; top: $(redis-cli -p "$r" slowlog get 3 | tr '\n' ' ' | cut -c1-300)"
done

# This machine's ceiling in the same run, on the same kind of servers: the keys now on group 2
# copied to a third server by a 1000-key MIGRATE loop (COPY, so the source keeps them), then by
# pipelined DUMP/RESTORE (1000 a round trip, redis-py).
R3=$(port)
redis-server --bind 127.0.0.1 --port "$R3" --save '' --appendonly no --dir "$DIR" --logfile "$DIR/r$R3.log" &
PIDS+=($!)
until redis-cli -p "$R3" ping >/dev/null 2>&1; do sleep 0.1; done
# redis-py: Debian's python3-redis (tools/test.sh installs it) under /usr/bin/python3.
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
"$PY" - "$R2" "$R3" "$RATE" <<'PY'
import sys, time, redis
src_port, dst_port, rate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
src = redis.Redis(port=src_port)
dst = redis.Redis(port=dst_port)
def batches():
    cursor = 0
    while True:
        cursor, keys = src.scan(cursor, count=1000)
        if keys:
            yield keys
        if cursor == 0:
            return
t = time.time(); n = 0
for keys in batches():
    src.execute_command("MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "COPY", "REPLACE", "KEYS", *keys)
    n += len(keys)
migrate = n / (time.time() - t)
dst.flushall()
t = time.time(); n = 0
for keys in batches():
    p = src.pipeline(transaction=False)
    for k in keys:
        p.pttl(k); p.dump(k)
    r = p.execute()
    q = dst.pipeline(transaction=False)
    for i, k in enumerate(keys):
        ttl, blob = r[2 * i], r[2 * i + 1]
        if blob is not None:
            q.restore(k, max(ttl, 0), blob, replace=True)
    q.execute()
    n += len(keys)
dump = n / (time.time() - t)
print(f"ceiling, same run: 1000-key MIGRATE loop {migrate:.0f} keys/s, pipelined DUMP/RESTORE {dump:.0f} keys/s; "
      f"the migration moved {rate:.0f} keys/s = {rate / migrate:.2f}x and {rate / dump:.2f}x of them")
PY
