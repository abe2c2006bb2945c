#!/usr/bin/env bash
# Prefix-route benchmark (not a test): what the extra hop of a key prefix routed to another
# cluster costs (docs/prefix-routes.md). Two clusters in one fs store, one redis-server and
# one proxy each; cluster A routes `key:` (every key redis-benchmark makes) to cluster B.
# redis-benchmark (SET and GET of random `key:<n>` keys) runs, interleaved round by round,
# against B's redis-server (direct), B's proxy (one hop), and A's proxy (two hops: A's proxy
# → B's proxy → redis); a fourth column, A's proxy on `own:<n>` keys (outside the route),
# shows A's own path with a route configured, and a fifth, A-none, the same without one.
# Prints the median rps and p50 of each and the ratios to B's proxy.
#   tools/bench-routes.sh [--rounds 3] [--configs 'c50p16n1000000 c50p1n200000']
# Needs a release build (cargo build --release -p tessera; TESSERA_BIN=path overrides),
# redis-server, redis-cli, redis-benchmark. Everything runs on 127.0.0.1, stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 CONFIGS='c50p16n1000000 c50p1n200000'
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${TESSERA_BIN:-$PWD/target/release/tessera}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p tessera" >&2; exit 1; }
DIR=$(mktemp -d /tmp/tessera-routebench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RA=$(port) RB=$(port) DA=$(port) DB=$(port) PA=$(port) PB=$(port) AA=$(port) AB=$(port)
for r in $RA $RB; do
  redis-server --bind 127.0.0.1 --port "$r" --save '' --appendonly no --dir "$DIR" --logfile "$DIR/r$r.log" &
  PIDS+=($!)
done
until redis-cli -p "$RA" ping >/dev/null 2>&1 && redis-cli -p "$RB" ping >/dev/null 2>&1; do sleep 0.1; done
TOKEN=bench STORE="fs://$DIR/store"
start_cluster() { # name dashboard-port redis-port
  "$BIN" dashboard --cluster "$1" --store "$STORE" --listen "127.0.0.1:$2" --admin-token $TOKEN --token-key-file "$DIR/$1.key" > "$DIR/d-$1.log" 2>&1 &
  PIDS+=($!)
  until curl -sf "127.0.0.1:$2/health" >/dev/null; do sleep 0.1; done
  api "$2" POST /api/groups '{"id":1}' >/dev/null
  api "$2" POST /api/groups/1/servers "{\"addr\":\"127.0.0.1:$3\"}" >/dev/null
  api "$2" POST /api/slots/assign '{"from":0,"to":1023,"group":1}' >/dev/null
}
api() { curl -sf -X "$2" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "127.0.0.1:$1$3" ${4:+-d "$4"}; }
start_cluster a "$DA" "$RA"
start_cluster b "$DB" "$RB"
"$BIN" proxy --cluster a --store "$STORE" --listen 127.0.0.1:$PA --admin-listen 127.0.0.1:$AA > "$DIR/pa.log" 2>&1 &
PIDS+=($!)
"$BIN" proxy --cluster b --store "$STORE" --listen 127.0.0.1:$PB --admin-listen 127.0.0.1:$AB > "$DIR/pb.log" 2>&1 &
PIDS+=($!)
until redis-cli -p "$PA" ping >/dev/null 2>&1 && redis-cli -p "$PB" ping >/dev/null 2>&1; do sleep 0.1; done
api "$DA" PUT /api/routes '{"routes":[{"prefix":"key:","cluster":"b"}]}' >/dev/null
until redis-cli -p "$PA" set key:probe 1 2>/dev/null | grep -q OK; do sleep 0.1; done
redis-cli -p "$RA" exists key:probe | grep -q 0 || { echo "the route did not take: key:probe is in A" >&2; exit 1; }
redis-cli -p "$PA" set own:probe 1 >/dev/null
redis-cli -p "$RA" exists own:probe | grep -q 1 || { echo "own:probe did not stay in A" >&2; exit 1; }

route() { # on|off
  if [ "$1" = on ]; then
    api "$DA" PUT /api/routes '{"routes":[{"prefix":"key:","cluster":"b"}]}' >/dev/null
    until redis-cli -p "$PA" set key:probe 1 2>/dev/null | grep -q OK; do sleep 0.1; done
  else
    api "$DA" PUT /api/routes '{"routes":[]}' >/dev/null
  fi
}
# column name, port, key prefix; A-none is A's own path with no route configured (the route
# is removed for it and put back after)
COLS=("A-none $PA own:" "redis-B $RB key:" "proxy-B $PB key:" "routed-A $PA key:" "A-own $PA own:")
for cfg in $CONFIGS; do
  c=${cfg#c}; c=${c%%p*}; p=${cfg#*p}; p=${p%%n*}; n=${cfg#*n}
  for round in $(seq 1 "$ROUNDS"); do
    for col in "${COLS[@]}"; do
      set -- $col
      case $1 in A-none) route off ;; redis-B) route on ;; esac
      for t in SET GET; do
        if [ $t = SET ]; then args=(SET "$3__rand_int__" xxx); else args=(GET "$3__rand_int__"); fi
        redis-benchmark -p "$2" -c "$c" -P "$p" -n "$n" -r 1000000 --csv "${args[@]}" 2>/dev/null | tail -n +2 | tr -d '"' |
          awk -F, -v cfg="$cfg" -v col="$1" -v t=$t '{print cfg, col, t, $2, $5}' >> "$DIR/results"
      done
    done
  done
done
python3 - "$DIR/results" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    cfg, col, test, rps, p50 = line.split()
    rows[(cfg, test, col)].append((float(rps), float(p50)))
cols = ["redis-B", "proxy-B", "routed-A", "A-own", "A-none"]
for cfg in dict.fromkeys(k[0] for k in rows):
    print(f"\n{cfg}   median rps (p50 ms), ratio to proxy-B")
    for test in ("SET", "GET"):
        base = statistics.median(r for r, _ in rows[(cfg, test, "proxy-B")])
        cells = []
        for col in cols:
            v = rows[(cfg, test, col)]
            rps = statistics.median(r for r, _ in v); p50 = statistics.median(p for _, p in v)
            cells.append(f"{col} {rps:>9.0f} ({p50:.3f}) {rps / base:.2f}")
        print(f"  {test:<4} " + " | ".join(cells))
EOF
