"""redis-py over TLS through a Tessera proxy's TLS listener: commands, a pipeline, a
transaction and a pub/sub round trip, the server's certificate verified against the test CA.
Run by tests/suite/tls.rs:

    /usr/bin/python3 tests/clients/redis_py_tls.py HOST:PORT CA.crt [CLIENT.crt CLIENT.key]

Prints one line per check and exits non-zero on the first failure.
"""

import sys

import redis


def check(what, ok, detail=""):
    if not ok:
        print(f"FAIL {what} {detail}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    extra = {}
    if len(sys.argv) > 4:
        extra = {"ssl_certfile": sys.argv[3], "ssl_keyfile": sys.argv[4]}
    r = redis.Redis(
        host=host,
        port=int(port),
        ssl=True,
        ssl_ca_certs=sys.argv[2],
        decode_responses=True,
        socket_timeout=30,
        **extra,
    )
    check("ping", r.ping())
    r.set("py:tls:k", "v" * 100_000)
    check("set/get of 100 kB", r.get("py:tls:k") == "v" * 100_000)
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set(f"py:tls:{i}", i)
    p.mget([f"py:tls:{i}" for i in range(200)])
    out = p.execute()
    check("pipeline of 201", out[-1] == [str(i) for i in range(200)], str(out[-1][:3]))
    t = r.pipeline(transaction=True)
    t.incr("{py:tls}:n").incr("{py:tls}:n")
    check("MULTI/EXEC", t.execute() == [1, 2])
    sub = r.pubsub()
    sub.subscribe("py:tls:chan")
    check("subscribe", sub.get_message(timeout=10)["type"] == "subscribe")
    r.publish("py:tls:chan", "hello")
    msg = sub.get_message(timeout=10)
    check("publish reaches the subscriber", msg and msg["data"] == "hello", str(msg))


main()
