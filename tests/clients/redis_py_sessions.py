"""redis-py through two Tessera proxies, as applications use it: a Lock (EVALSHA scripts), a
WATCH/MULTI/EXEC optimistic counter with conflicts, pipeline(transaction=True), and a BLPOP
work queue fed through one proxy and drained through the other. Run by tests/suite/sessions.rs:

    /usr/bin/python3 tests/clients/redis_py_sessions.py HOST:PORT HOST:PORT

Prints one line per check and exits non-zero on the first failure.
"""

import sys
import threading

import redis


def client(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), decode_responses=True, socket_timeout=30)


def check(what, ok, detail=""):
    if not ok:
        print(f"FAIL {what} {detail}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


def lock(a, b):
    a.set("py:locked", 0)
    workers, rounds = 4, 25

    def work(r):
        for _ in range(rounds):
            with r.lock("py:lock", timeout=10, blocking_timeout=20):
                v = int(r.get("py:locked"))
                r.set("py:locked", v + 1)

    threads = [threading.Thread(target=work, args=(client_of,))
               for client_of in [a, b, a, b][:workers]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("Lock: increments under the lock are never lost",
          int(a.get("py:locked")) == workers * rounds, a.get("py:locked"))


def optimistic(a, b):
    a.set("py:counter", 0)
    results = []

    def work(r):
        done = conflicts = 0
        for _ in range(40):
            with r.pipeline() as p:
                try:
                    p.watch("py:counter")
                    v = int(p.get("py:counter"))
                    p.multi()
                    p.set("py:counter", v + 1)
                    p.execute()
                    done += 1
                except redis.WatchError:
                    conflicts += 1
        results.append((done, conflicts))

    threads = [threading.Thread(target=work, args=(r,)) for r in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = sum(d for d, _ in results)
    check("WATCH/MULTI/EXEC: the counter equals the successful EXECs",
          int(a.get("py:counter")) == done, f"{a.get('py:counter')} != {done}")


def transaction(a):
    p = a.pipeline(transaction=True)
    p.delete("py:{t}x")
    p.incr("py:{t}x")
    p.incrby("py:{t}x", 5)
    p.get("py:{t}x")
    check("pipeline(transaction=True)", p.execute() == [0, 1, 6, "6"])


def queue(a, b):
    items = 200
    got = []

    def consume():
        r = client_b()
        while True:
            item = r.blpop("py:jobs", timeout=5)
            if item is None or item[1] == "stop":
                return
            got.append(item[1])

    client_b = lambda: client(sys.argv[2])
    consumers = [threading.Thread(target=consume) for _ in range(3)]
    for t in consumers:
        t.start()
    for i in range(items):
        a.rpush("py:jobs", f"job{i}")
    for _ in consumers:
        a.rpush("py:jobs", "stop")
    for t in consumers:
        t.join()
    check("BLPOP queue across proxies: every job exactly once",
          sorted(got) == sorted(f"job{i}" for i in range(items)), f"{len(got)} popped")


def main():
    a, b = client(sys.argv[1]), client(sys.argv[2])
    lock(a, b)
    optimistic(a, b)
    transaction(a)
    queue(a, b)


if __name__ == "__main__":
    main()
