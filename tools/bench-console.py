#!/usr/bin/env python3
"""Console fan-out benchmark (not a test): K clusters in one fs store, each a real dashboard
with one redis-server (every slot on it) and --proxies real proxies, and one console over the
store with a token for each; for each K of --clusters, the latency of the console's overview
(`GET /api/clusters`, which asks every cluster's dashboard for its overview in parallel) and
of one cluster's relayed overview, --requests times each, one after another, logged in.
Prints one markdown row per K and a least-squares fit latency = a + b*K.

  tools/bench-console.py [--clusters 1,5,20] [--proxies 1] [--requests 100] [--bin PATH]

Needs a release build (TESSERA_BIN or --bin overrides) and redis-server on PATH. Everything
runs on 127.0.0.1 and is stopped at exit."""

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

# The import below must not leave bytecode in tools/.
sys.dont_write_bytecode = True

# The process handling and HTTP helpers of the push benchmark.
_spec = importlib.util.spec_from_file_location(
    "bench_push", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-push.py"))
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

PASSWORD = "bench-console-password"


def console_get(addr, path, cookie):
    req = urllib.request.Request(f"http://{addr}{path}")
    req.add_header("cookie", cookie)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.read()


def login(addr):
    req = urllib.request.Request(
        f"http://{addr}/auth/login", method="POST",
        data=json.dumps({"user": "admin", "password": PASSWORD}).encode())
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers["set-cookie"].split(";", 1)[0]


def timed(f, n):
    out = []
    for _ in range(n):
        t = time.monotonic()
        f()
        out.append((time.monotonic() - t) * 1000)
    return out


def p99(xs):
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]


def run_one(args, k, procs, tmp):
    store_dir = f"{tmp}/store-{k}"
    store = f"fs://{store_dir}"
    env = dict(os.environ, RUST_LOG="warn")
    started = []
    tokens = {}
    for i in range(k):
        name = f"c{i}"
        port = bp.free_port()
        server = procs.start(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
             "--appendonly", "no", "--dir", tmp],
            f"{tmp}/redis-{k}-{i}.log")
        daddr = f"127.0.0.1:{bp.free_port()}"
        token = f"bench-token-{i}"
        dashboard = procs.start(
            [args.bin, "dashboard", "--cluster", name, "--store", store, "--listen", daddr,
             "--admin-token", token, "--token-key-file", f"{tmp}/token-key-{k}-{i}"],
            f"{tmp}/dashboard-{k}-{i}.log", env)
        tokens[name] = token
        started.append((name, port, daddr, token, server, dashboard))
    proxies = []
    for name, port, daddr, token, _, _ in started:
        bp.wait(lambda: bp.http("GET", daddr, "/health", token=None)[0] == 200, f"dashboard {name}")
        assert bp.http("POST", daddr, "/api/groups", {"id": 1}, token=token)[0] < 300
        st, body = bp.http("POST", daddr, "/api/groups/1/servers", {"addr": f"127.0.0.1:{port}"},
                           token=token)
        assert st < 300, body
        st, body = bp.http("POST", daddr, "/api/slots/assign", {"from": 0, "to": 1023, "group": 1},
                           token=token)
        assert st < 300, body
        for j in range(args.proxies):
            proxies.append(procs.start(
                [args.bin, "proxy", "--cluster", name, "--store", store, "--threads", "1",
                 "--listen", f"127.0.0.1:{bp.free_port()}",
                 "--admin-listen", f"127.0.0.1:{bp.free_port()}"],
                f"{tmp}/proxy-{k}-{name}-{j}.log", env))
    hashed = subprocess.run([args.bin, "console", "hash-password"], input=PASSWORD.encode(),
                            capture_output=True, check=True).stdout.decode().strip()
    caddr = f"127.0.0.1:{bp.free_port()}"
    with open(f"{tmp}/console-{k}.toml", "w") as f:
        f.write(f'stores = ["{store}"]\n[[users]]\nname = "admin"\n'
                f'password_hash = "{hashed}"\nrole = "admin"\n[tokens]\n')
        for name, token in tokens.items():
            f.write(f'{name} = "{token}"\n')
    console = procs.start([args.bin, "console", "--config", f"{tmp}/console-{k}.toml",
                           "--listen", caddr], f"{tmp}/console-{k}.log", env)
    bp.wait(lambda: bp.http("GET", caddr, "/health", token=None)[0] == 200, "the console")
    cookie = login(caddr)

    def every_cluster_reachable():
        views = json.loads(console_get(caddr, "/api/clusters", cookie)[1])
        return len(views) == k and all(v["reachable"] for v in views)

    bp.wait(every_cluster_reachable, f"{k} clusters reachable through the console", within=120)
    # Start-up settles (proxies registering, first health rounds) before anything is timed.
    time.sleep(5)
    overview = timed(lambda: console_get(caddr, "/api/clusters", cookie), args.requests)
    one = timed(lambda: console_get(caddr, "/api/clusters/c0/overview", cookie), args.requests)
    row = {"k": k, "p50": statistics.median(overview), "p99": p99(overview),
           "one_p50": statistics.median(one), "one_p99": p99(one),
           "console_rss_mb": bp.rss_mb(console.pid)}
    procs.stop()
    shutil.rmtree(store_dir, ignore_errors=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", default="1,5,20")
    ap.add_argument("--proxies", type=int, default=1, help="proxies per cluster")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--bin", default=os.environ.get("TESSERA_BIN", "target/release/tessera"))
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit("build first: cargo build --release -p tessera")
    if not shutil.which("redis-server"):
        sys.exit("redis-server not found on PATH")
    procs = bp.Procs()
    tmp = tempfile.mkdtemp(prefix="tessera-consolebench.")
    rows = []
    try:
        for k in [int(x) for x in args.clusters.split(",")]:
            rows.append(run_one(args, k, procs, tmp))
            print(f"K={k}: {json.dumps({x: round(v, 2) for x, v in rows[-1].items()})}",
                  file=sys.stderr)
    finally:
        procs.stop()
        if not os.environ.get("KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    print("| clusters | GET /api/clusters p50 / p99 ms | one cluster's overview p50 / p99 ms "
          "| console RSS MB |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['k']} | {r['p50']:.1f} / {r['p99']:.1f} | {r['one_p50']:.1f} / "
              f"{r['one_p99']:.1f} | {r['console_rss_mb']:.0f} |")
    if len(rows) >= 2:
        xs = [r["k"] for r in rows]
        ys = [r["p50"] for r in rows]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"fit GET /api/clusters p50: {my - b * mx:.2f} + {b:.3f}*K ms")


if __name__ == "__main__":
    main()
