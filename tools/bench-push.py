#!/usr/bin/env python3
"""Topology push benchmark (not a test): one cluster on a real etcd with --groups groups (one
redis-server each) and N real proxy processes (one worker thread each), for each N of
--proxies; per N, --pushes topology changes (each assigns one free slot, so every proxy gets a
new table), timed at the API (persist + push to every proxy + every acknowledgement), and the
CPU the dashboard and the proxies used for them (from /proc, less what they use idle over the
same time). Prints one markdown table row per N, then a least-squares fit push = a + b*N.

Then, per N: the store's writes per second at idle (etcd revisions over --idle seconds, and
the keys written), a migration of --move-slots slots holding --keys keys between two groups
(its handoffs' write pause, p50 and p99 per slot, as GET /api/migrations reports it), and a
store blip: etcd frozen (SIGSTOP) for --blip seconds, longer than a proxy's 10 s registration,
so that every proxy fences itself; the time from SIGCONT until every proxy serves a GET again.

  tools/bench-push.py [--proxies 50,100,200] [--groups 8] [--pushes 60] [--keys 20000]
                      [--move-slots 32] [--blip 12] [--bin PATH]

Needs a release build (cargo build --release -p tessera; TESSERA_BIN or --bin overrides),
etcd and redis-server on PATH. Everything runs on 127.0.0.1 and is stopped at exit."""

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "bench"
CLK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(pred, what, within=60.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {what}")


def http(method, addr, path, body=None, token=TOKEN):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def etcd_call(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def b64(s):
    return base64.b64encode(s.encode()).decode()


def etcd_revision(port):
    return int(etcd_call(port, "/v3/kv/range", {"key": b64("\0")})["header"]["revision"])


def etcd_written_since(port, rev):
    """The keys last written after revision `rev` (a key written twice is listed once)."""
    r = etcd_call(port, "/v3/kv/range", {"key": b64("\0"), "range_end": b64("\0"),
                                         "keys_only": True, "min_mod_revision": rev + 1})
    return sorted(base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", []))


def resp_get(port, key="probe", timeout=1.0):
    """The first line of GET's answer through the proxy at `port`, or the error."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout) as c:
            c.settimeout(timeout)
            c.sendall(f"*2\r\n$3\r\nGET\r\n${len(key)}\r\n{key}\r\n".encode())
            return c.recv(256).split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        return f"-{e}"


def fill(port, n):
    """n small keys through the proxy at `port`, pipelined."""
    with socket.create_connection(("127.0.0.1", port), 10) as c:
        c.settimeout(60)
        for start in range(0, n, 1000):
            batch = "".join(
                f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n$2\r\nxx\r\n"
                for k in (f"bench:{i}" for i in range(start, min(n, start + 1000))))
            c.sendall(batch.encode())
            want, got = min(n, start + 1000) - start, b""
            while got.count(b"\r\n") < want:
                chunk = c.recv(65536)
                if not chunk:
                    sys.exit("the proxy closed the fill connection")
                got += chunk
            # A key of the one slot left free for later is refused; every other is written.
            assert got.count(b"+OK") >= want - 10, got[:200]


def cpu_secs(pid):
    """User + system CPU seconds of a process, children excluded."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Procs:
    """Every child, stopped (SIGTERM, then SIGKILL) at exit."""

    def __init__(self):
        self.children = []

    def start(self, args, log, env=None):
        out = open(log, "wb")
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.children.append(p)
        return p

    def stop(self, procs=None):
        procs = self.children if procs is None else procs
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.children = [p for p in self.children if p not in procs]


def run_one(args, n, procs, tmp):
    """One cluster with n proxies: returns the row's numbers."""
    etcd_c, etcd_p = free_port(), free_port()
    etcd = procs.start(
        [
            "etcd",
            "--data-dir", f"{tmp}/etcd-{n}",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_c}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_c}",
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_p}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_p}",
            "--initial-cluster", f"default=http://127.0.0.1:{etcd_p}",
        ],
        f"{tmp}/etcd-{n}.log",
    )
    store = f"etcd://127.0.0.1:{etcd_c}"
    cluster = f"bench{n}"
    servers = []
    for g in range(args.groups):
        port = free_port()
        servers.append(
            procs.start(
                ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                 "--appendonly", "no", "--dir", tmp],
                f"{tmp}/redis-{n}-{g}.log",
            )
        )
        servers[-1].port = port
    dport = free_port()
    daddr = f"127.0.0.1:{dport}"
    env = dict(os.environ, RUST_LOG="warn")
    wait(lambda: socket.create_connection(("127.0.0.1", etcd_c), 1).close() or True, "etcd")
    dashboard = procs.start(
        [args.bin, "dashboard", "--cluster", cluster, "--store", store, "--listen", daddr,
         "--admin-token", TOKEN, "--token-key-file", f"{tmp}/token-key-{n}"],
        f"{tmp}/dashboard-{n}.log",
        env,
    )
    wait(lambda: http("GET", daddr, "/health", token=None)[0] == 200, "the dashboard")
    for g, s in enumerate(servers, start=1):
        assert http("POST", daddr, "/api/groups", {"id": g})[0] < 300
        st, body = http("POST", daddr, f"/api/groups/{g}/servers", {"addr": f"127.0.0.1:{s.port}"})
        assert st < 300, body
    # Every slot but the last `pushes` + 1, spread over the groups; each push assigns one more,
    # and the change after the blip the last one.
    assigned = 1024 - args.pushes - 1
    per = assigned // args.groups
    for g in range(args.groups):
        lo = g * per
        hi = assigned - 1 if g == args.groups - 1 else lo + per - 1
        st, body = http("POST", daddr, "/api/slots/assign", {"from": lo, "to": hi, "group": g + 1})
        assert st < 300, body
    def start_proxy(i):
        port, admin = free_port(), free_port()
        p = procs.start(
            [args.bin, "proxy", "--cluster", cluster, "--store", store, "--threads", "1",
             "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}"],
            f"{tmp}/proxy-{n}-{i}.log",
            env,
        )
        p.port = port
        return p

    proxies = [start_proxy(i) for i in range(n)]
    registered = lambda: len(json.loads(http("GET", daddr, "/api/proxies")[1]))
    deadline = time.monotonic() + 180
    restarts = 0
    while time.monotonic() < deadline:
        # A free port can be taken by another process before the proxy binds it: such a
        # proxy exits at once, and is started again on new ports.
        for i, p in enumerate(proxies):
            if p.poll() is not None and restarts < n:
                print(f"proxy {i} exited ({p.returncode}); starting it again", file=sys.stderr)
                proxies[i] = start_proxy(i)
                restarts += 1
        if registered() == n and all(p.poll() is None for p in proxies):
            break
        time.sleep(0.5)
    else:
        dead = [(i, p.returncode) for i, p in enumerate(proxies) if p.poll() is not None]
        sys.exit(f"{registered()} of {n} proxies registered; exited: {dead}; logs in {tmp}")
    pids = [dashboard.pid] + [p.pid for p in proxies]
    # Start-up settles (registrations, catch-up pushes, first health rounds): until the
    # processes use less than a fifth of a core together over a second, at most a minute.
    for _ in range(60):
        before = sum(cpu_secs(p) for p in pids)
        time.sleep(1)
        if sum(cpu_secs(p) for p in pids) - before < 0.2:
            break
    else:
        print("start-up did not settle within a minute; measuring anyway", file=sys.stderr)
    # Idle: what the dashboard and proxies use with no change (health checks, renewals), and
    # what they write to the store.
    rev0 = etcd_revision(etcd_c)
    t0, c0 = time.monotonic(), [cpu_secs(p) for p in pids]
    time.sleep(args.idle)
    t1, c1 = time.monotonic(), [cpu_secs(p) for p in pids]
    idle_rate = [(b - a) / (t1 - t0) for a, b in zip(c0, c1)]
    idle_writes = (etcd_revision(etcd_c) - rev0) / (t1 - t0)
    written = etcd_written_since(etcd_c, rev0)
    kinds = sorted({k.split("/")[3] if k.count("/") >= 3 else k for k in written})
    print(f"N={n}: idle store writes {idle_writes:.2f}/s; keys written: {kinds}", file=sys.stderr)

    times = []
    c2, t2 = [cpu_secs(p) for p in pids], time.monotonic()
    for k in range(args.pushes):
        slot = assigned + k
        started = time.monotonic()
        st, body = http("POST", daddr, "/api/slots/assign",
                        {"from": slot, "to": slot, "group": 1 + k % args.groups})
        times.append((time.monotonic() - started) * 1000)
        assert st == 200, body
    t3, c3 = time.monotonic(), [cpu_secs(p) for p in pids]
    spent = [(b - a) - r * (t3 - t2) for a, b, r in zip(c2, c3, idle_rate)]
    dash_ms = max(0.0, spent[0]) / args.pushes * 1000
    proxy_ms = max(0.0, sum(spent[1:])) / args.pushes * 1000
    # A migration's handoffs: --move-slots slots of group 1 (holding a share of --keys keys)
    # to group 2.
    fill(proxies[0].port, args.keys)
    st, body = http("POST", daddr, "/api/migrations",
                    {"from": 0, "to": args.move_slots - 1, "group": 2})
    assert st < 300, body
    status = {}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = json.loads(http("GET", daddr, "/api/migrations")[1])
        if not status.get("slots"):
            break
        time.sleep(0.2)
    else:
        sys.exit(f"the migration did not finish in 10 min: {status}")
    pause = status.get("write_pause") or {}

    dash_rss = rss_mb(dashboard.pid)
    # A store blip longer than a registration: every proxy fences; how long until all serve.
    etcd.send_signal(signal.SIGSTOP)
    time.sleep(args.blip)
    fenced = sum(1 for p in proxies if resp_get(p.port).startswith("-TRYAGAIN"))
    etcd.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    pending = list(proxies)
    back_at = []
    while pending and time.monotonic() - resumed < 180:
        still = []
        for p in pending:
            if resp_get(p.port).startswith("-"):
                still.append(p)
            else:
                back_at.append(time.monotonic() - resumed)
        pending = still
        if pending:
            time.sleep(0.1)
    if pending:
        print(f"N={n}: {len(pending)} proxies still refuse 180 s after the blip", file=sys.stderr)
    back_at.sort()
    # The dashboard's lock may have lapsed too; then it stops (it must not act on a lock it
    # may have lost) and is started again here, as a supervisor would. The time from SIGCONT
    # until a change succeeds.
    dashboard_stopped = False
    change_after = float("nan")
    last_refusal = "no answer"
    while time.monotonic() - resumed < 180:
        if dashboard.poll() is not None and not dashboard_stopped:
            dashboard_stopped = True
            dashboard = procs.start(
                [args.bin, "dashboard", "--cluster", cluster, "--store", store, "--listen", daddr,
                 "--admin-token", TOKEN, "--token-key-file", f"{tmp}/token-key-{n}"],
                f"{tmp}/dashboard-{n}-again.log",
                env,
            )
        try:
            st, body = http("POST", daddr, "/api/slots/assign", {"from": 1023, "to": 1023, "group": 1})
            if st == 200:
                change_after = time.monotonic() - resumed
                break
            last_refusal = f"{st} {body[:300]!r}"
        except OSError:
            pass
        time.sleep(0.2)
    else:
        print(f"N={n}: no change succeeded within 180 s of the blip: {last_refusal}", file=sys.stderr)

    row = {
        "n": n,
        "p50": statistics.median(times),
        "p99": sorted(times)[min(len(times) - 1, int(len(times) * 0.99))],
        "mean": statistics.mean(times),
        "dash_cpu_ms": dash_ms,
        "proxy_cpu_ms_each": proxy_ms / n,
        "dash_idle_pct": idle_rate[0] * 100,
        "dash_rss_mb": dash_rss,
        "idle_writes": idle_writes,
        "pause_p50": pause.get("p50_ms", float("nan")),
        "pause_p99": pause.get("p99_ms", float("nan")),
        "pause_max": pause.get("max_ms", float("nan")),
        "handoffs": pause.get("handoffs", 0),
        "fenced": fenced,
        "back_p50": statistics.median(back_at) if back_at else float("nan"),
        "back_all": back_at[-1] if back_at and not pending else float("nan"),
        "dashboard_stopped": 1.0 if dashboard_stopped else 0.0,
        "change_after": change_after,
    }
    procs.stop(proxies)
    procs.stop([dashboard])
    procs.stop(servers + [etcd])
    shutil.rmtree(f"{tmp}/etcd-{n}", ignore_errors=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxies", default="50,100")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--pushes", type=int, default=60)
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of idle CPU measured")
    ap.add_argument("--keys", type=int, default=20000, help="keys written before the migration")
    ap.add_argument("--move-slots", type=int, default=32, help="slots migrated, from slot 0")
    ap.add_argument("--blip", type=float, default=12.0, help="seconds etcd is frozen")
    ap.add_argument("--bin", default=os.environ.get("TESSERA_BIN", "target/release/tessera"))
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit("build first: cargo build --release -p tessera")
    for tool in ("etcd", "redis-server"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found on PATH")
    procs = Procs()
    tmp = tempfile.mkdtemp(prefix="tessera-pushbench.")
    rows = []
    try:
        for n in [int(x) for x in args.proxies.split(",")]:
            rows.append(run_one(args, n, procs, tmp))
            r = rows[-1]
            print(f"N={n}: {json.dumps({k: round(v, 2) for k, v in r.items()})}", file=sys.stderr)
    finally:
        procs.stop()
        if not os.environ.get("KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"| proxies | push p50 ms | push p99 ms | dashboard CPU ms / push | proxy CPU ms / push, each | dashboard idle CPU % | dashboard RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['p50']:.1f} | {r['p99']:.1f} | {r['dash_cpu_ms']:.2f} | "
              f"{r['proxy_cpu_ms_each']:.3f} | {r['dash_idle_pct']:.1f} | {r['dash_rss_mb']:.0f} |")
    print()
    print("| proxies | idle store writes/s | handoffs | handoff pause p50 / p99 / max ms | "
          "fenced by the blip | back after the blip: p50 / all s | first change after it s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['idle_writes']:.2f} | {r['handoffs']} | {r['pause_p50']:.1f} / "
              f"{r['pause_p99']:.1f} / {r['pause_max']:.1f} | {r['fenced']} of {r['n']} | "
              f"{r['back_p50']:.2f} / {r['back_all']:.2f} | "
              f"{r['change_after']:.2f}{' (dashboard restarted)' if r['dashboard_stopped'] else ''} |")
    if len(rows) >= 2:
        xs = [r["n"] for r in rows]
        for key in ("p50", "dash_cpu_ms", "pause_p99", "back_all"):
            ys = [r[key] for r in rows]
            mx, my = statistics.mean(xs), statistics.mean(ys)
            b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            print(f"fit {key}: {my - b * mx:.2f} + {b:.4f}*N ms")


if __name__ == "__main__":
    main()
