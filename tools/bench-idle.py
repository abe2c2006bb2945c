#!/usr/bin/env python3
"""Memory per idle client: a static proxy's resident memory with N clients connected that have
each sent one PING and then wait, against the same proxy with none, per client in KiB.

    tools/bench-idle.py target/release/tessera [N]     (N: 5000 by default)

Several binaries may be given (comma-separated) to compare them in one run. Ports 17210-17212
on 127.0.0.1; every process it starts is stopped at exit.
"""
import os
import socket
import subprocess
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_port(port, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def measure(binary, n):
    procs = []
    try:
        for port in (17211, 17212):
            procs.append(subprocess.Popen(
                ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                 "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        proxy = subprocess.Popen(
            [binary, "proxy", "--listen", "127.0.0.1:17210", "--backends",
             "127.0.0.1:17211,127.0.0.1:17212", "--threads", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proxy)
        wait_port(17210)
        # Warm: the backend connections and the first session's allocations are not per client.
        warm = socket.create_connection(("127.0.0.1", 17210))
        warm.sendall(b"PING\r\nSET k v\r\nGET k\r\n")
        time.sleep(0.3)
        warm.recv(1024)
        time.sleep(0.5)
        before = rss_kib(proxy.pid)
        clients = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", 17210))
            s.sendall(b"PING\r\n")
            clients.append(s)
            if i % 500 == 499:
                for c in clients[-500:]:
                    c.recv(64)
        for c in clients[len(clients) - len(clients) % 500:]:
            c.recv(64)
        time.sleep(1.0)
        after = rss_kib(proxy.pid)
        for c in clients:
            c.close()
        warm.close()
        return (after - before) / n
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    for binary in sys.argv[1].split(","):
        runs = sorted(measure(binary, n) for _ in range(3))
        print(f"{binary}: {runs[1]:.1f} KiB per idle client (median of 3: "
              f"{', '.join(f'{r:.1f}' for r in runs)}; {n} clients, one PING each)")


if __name__ == "__main__":
    main()
