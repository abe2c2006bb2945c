#!/usr/bin/env bash
# Migration benchmark (not a test): moves half the slots of a cluster holding N small keys
# (plus, with --big, big hashes and lists) while redis-benchmark runs through both proxies
# (c25 each, c50 in all, P1, SET and GET of random keys), and prints per command the rps, p50
# and p99 before, during and after the move with the ratios, keys/s and bytes/s, the write
# pause, and what the servers recorded as blocking (LATENCY LATEST with a 5 ms threshold,
# SLOWLOG over 5 ms).
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
R1=$(port) R2=$(port) D=$(port) P=$(port) A=$(port) P2=$(port) A2=$(port)
for r in $R1 $R2; do
  redis-server --bind 127.0.0.1 --port "$r" --save '' --appendonly no --enable-debug-command yes --dir "$DIR" --logfile "$DIR/r$r.log" &
  PIDS+=($!)
done
until redis-cli -p "$R1" ping >/dev/null 2>&1 && redis-cli -p "$R2" ping >/dev/null 2>&1; do sleep 0.1; done
TOKEN=bench
RUST_LOG=${RUST_LOG:-info,tessera_control::migrate=debug,tessera_control::dashboard::migration=debug} "$BIN" dashboard --cluster bench --store "fs://$DIR/store" --listen 127.0.0.1:$D --admin-token $TOKEN > "$DIR/dashboard.log" 2>&1 &
PIDS+=($!)
until curl -sf 127.0.0.1:$D/health >/dev/null; do sleep 0.1; done
api() { curl -sf -X "$1" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "127.0.0.1:$D$2" ${3:+-d "$3"}; }
api POST /api/groups '{"id":1}' >/dev/null; api POST /api/groups/1/servers "{\"addr\":\"127.0.0.1:$R1\"}" >/dev/null
api POST /api/groups '{"id":2}' >/dev/null; api POST /api/groups/2/servers "{\"addr\":\"127.0.0.1:$R2\"}" >/dev/null
api POST /api/slots/assign '{"from":0,"to":1023,"group":1}' >/dev/null
"$BIN" proxy --cluster bench --store "fs://$DIR/store" --listen 127.0.0.1:$P --admin-listen 127.0.0.1:$A > "$DIR/proxy.log" 2>&1 &
PIDS+=($!)
"$BIN" proxy --cluster bench --store "fs://$DIR/store" --listen 127.0.0.1:$P2 --admin-listen 127.0.0.1:$A2 > "$DIR/proxy2.log" 2>&1 &
PIDS+=($!)
until redis-cli -p "$P" ping >/dev/null 2>&1 && redis-cli -p "$P2" ping >/dev/null 2>&1; do sleep 0.1; done

redis-cli -p "$R1" debug populate "$KEYS" key 32 >/dev/null
if [ "$BIG" = 1 ]; then
  for i in $(seq 1 10); do
    redis-cli -p "$R1" eval "for i=1,50000,1000 do local a={} for j=i,i+999 do a[#a+1]='f'..j a[#a+1]='v'..j end redis.call('HSET', KEYS[1], unpack(a)) end" 1 "bighash:$i" >/dev/null
    redis-cli -p "$R1" eval "for i=1,50000,1000 do local a={} for j=i,i+999 do a[#a+1]='e'..j end redis.call('RPUSH', KEYS[1], unpack(a)) end" 1 "biglist:$i" >/dev/null
  done
fi
TOTAL=$(redis-cli -p "$R1" dbsize)
# One load run: N requests of each of SET and GET through each proxy at once, c25 each;
# appends "test,rps,p50,p99" per proxy to $1.
bench() {
  local out=$1 n=$2 pids=()
  for p in $P $P2; do
    ( timeout 300 redis-benchmark -p "$p" -c 25 -n "$n" -t get,set -r 1000000 --csv 2>/dev/null \
        | tail -n +2 | tr -d '"' | awk -F, '{print $1","$2","$5","$7}' >> "$out.$p" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  # The two proxies' runs of one command: rps summed, p50 and p99 the worse of the two.
  paste -d, "$out.$P" "$out.$P2" | awk -F, '{r=$2+$6; p50=($3>$7?$3:$7); p99=($4>$8?$4:$8); print $1","r","p50","p99}' >> "$out"
  rm -f "$out.$P" "$out.$P2"
}
# Medians over the runs in $1, per command: "test rps p50 p99".
medians() {
  python3 - "$1" <<'PY'
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, rps, p50, p99 = line.strip().split(",")
    runs[t].append((float(rps), float(p50), float(p99)))
for t, r in sorted(runs.items()):
    print(t, len(r), *(statistics.median(x[i] for x in r) for i in range(3)))
PY
}
echo "load: redis-benchmark -c 25 -t get,set -r 1000000 through each of the two proxies at once (c50 in all)"
for i in 1 2 3; do bench "$DIR/before.csv" 50000; done
for r in $R1 $R2; do
  redis-cli -p "$r" config set latency-monitor-threshold 5 >/dev/null
  redis-cli -p "$r" config set slowlog-log-slower-than 5000 >/dev/null
  redis-cli -p "$r" latency reset >/dev/null; redis-cli -p "$r" slowlog reset >/dev/null
done
# CPU seconds (user + system) of each process of the cluster, to say where a move's cost goes.
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo 0; }
cpu_all() { for p in "${PIDS[@]}"; do printf '%s ' "$(cpu "$p")"; done; }
CPU0=$(cpu_all)
START=$(date +%s.%N)
api POST /api/migrations "{\"from\":0,\"to\":511,\"group\":2${CAP:+,\"max_keys_per_sec\":$CAP}}" >/dev/null
LOADPID=
if [ "$LOAD" = 1 ]; then
  ( while :; do bench "$DIR/during.csv" 20000; done ) &
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
# Handed off: every moving slot routed to group 2 (its keys copied); idle: the source's copies
# deleted too (the cleanup runs in the background at a bounded rate).
HANDED= HANDED_KEYS=
until api GET /api/migrations | python3 -c 'import json,sys; sys.exit(0 if not json.load(sys.stdin)["slots"] else 1)'; do
  if [ -z "$HANDED" ] && api GET /api/slots | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if all(x.get("group")==2 for x in s[:512]) else 1)'; then
    HANDED=$(date +%s.%N) HANDED_KEYS=$(redis-cli -p "$R2" dbsize)
  fi
  sleep 0.2
done
END=$(date +%s.%N)
CPU1=$(cpu_all)
[ -n "$HANDED" ] || HANDED=$END HANDED_KEYS=$(redis-cli -p "$R2" dbsize)
[ -n "$LOADPID" ] && { kill $LOADPID 2>/dev/null; wait $LOADPID 2>/dev/null || true; pkill -f "redis-benchmark -p ($P|$P2) " 2>/dev/null || true; }
MOVED=$(redis-cli -p "$R2" dbsize)
SECS=$(python3 -c "print(round($END-$START,2))")
COPY_SECS=$(python3 -c "print(round($HANDED-$START,2))")
RATE=$(python3 -c "print(int($HANDED_KEYS/($HANDED-$START)))")
echo "migration: $HANDED_KEYS of $TOTAL keys copied and handed off (slots 0-511 → group 2) in ${COPY_SECS}s = $RATE keys/s; the source's copies deleted ${SECS}s after the start"
api GET /api/migrations | python3 -c 'import json,sys; s=json.load(sys.stdin); w=s.get("write_pause") or {}; c=s.get("slowest_command") or {}; print("  write pause per slot: p50 %s ms  p99 %s ms  max %s ms; slowest mover command: %s ms (%s); bytes moved %s" % (round(w.get("p50_ms",0),1), round(w.get("p99_ms",0),1), round(w.get("max_ms",0),1), round(c.get("ms",0),1), c.get("command"), s.get("bytes_moved")))'
python3 - "$CPU0" "$CPU1" "$START" "$END" <<'PY'
import sys
names = ["source redis", "target redis", "dashboard", "proxy 1", "proxy 2"]
a, b = (list(map(float, x.split())) for x in sys.argv[1:3])
wall = float(sys.argv[4]) - float(sys.argv[3])
used = [y - x for x, y in zip(a, b)]
print("  CPU seconds from the start to idle (%.1f s wall, 2 cores): " % wall
      + ", ".join(f"{n} {u:.1f}" for n, u in zip(names, used)))
PY
BYTES=$(api GET /api/migrations | python3 -c 'import json,sys; print(json.load(sys.stdin).get("bytes_moved") or 0)')
echo "  bytes moved $BYTES = $(python3 -c "print(round($BYTES/($HANDED-$START)/1e6,1))") MB/s until the handoff"
if [ "$LOAD" = 1 ]; then
  for i in 1 2 3; do bench "$DIR/after.csv" 50000; done
  python3 - <(medians "$DIR/before.csv") <(medians "$DIR/during.csv" 2>/dev/null || true) <(medians "$DIR/after.csv") <<'PY'
import sys
def read(p):
    return {f[0]: tuple(map(float, f[1:])) for f in (l.split() for l in open(p)) if f}
before, during, after = (read(p) for p in sys.argv[1:4])
print("client load, medians over the runs (runs, rps, p50 ms, p99 ms); ratios against the mean of before and after:")
for t in sorted(before):
    b, a = before[t], after.get(t, before[t])
    base = [(b[i] + a[i]) / 2 for i in range(4)]
    line = f"  {t:4} before {b[1]:8.0f} rps p50 {b[2]:.3f} p99 {b[3]:.3f} | after {a[1]:8.0f} rps p50 {a[2]:.3f} p99 {a[3]:.3f}"
    if t in during:
        d = during[t]
        line += (f" | during ({d[0]:.0f} runs) {d[1]:8.0f} rps p50 {d[2]:.3f} p99 {d[3]:.3f}"
                 f" → rps {d[1] / base[1]:.2f}×, p99 {d[3] / base[3]:.2f}×")
    else:
        line += " | during: the move ended before a load run did"
    print(line)
PY
fi
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
