# redis-py's RedisCluster pointed at one Tessera proxy, as applications that use a cluster
# client by default do: it learns every proxy from CLUSTER SLOTS, spreads its commands over
# them, and reads back what it wrote. Run by tests/suite/cluster_clients.rs:
#   python3 tests/clients/redis_py_cluster.py HOST:PORT
# Prints one line per check, then the nodes it knows; exits non-zero on the first failure.
import sys

from redis.cluster import RedisCluster


def check(what, ok, detail=""):
    if not ok:
        print(f"FAIL {what} {detail}")
        sys.exit(1)
    print(f"ok   {what}")


host, port = sys.argv[1].rsplit(":", 1)
rc = RedisCluster(host=host, port=int(port), decode_responses=True)
nodes = sorted(f"{n.host}:{n.port}" for n in rc.get_nodes())
check("every proxy found", len(nodes) >= 2, str(nodes))
keys = [f"rc:{i}" for i in range(300)]
for k in keys:
    rc.set(k, k.upper())
check("300 SETs", True)
check("GETs read them back", all(rc.get(k) == k.upper() for k in keys))
check("MGET across slots", rc.mget_nonatomic(keys[:50]) == [k.upper() for k in keys[:50]])
check("a hash tag keeps keys together", rc.mset_nonatomic({"{u1}a": "1", "{u1}b": "2"}) is not None)
pipe = rc.pipeline()
for k in keys[:20]:
    pipe.incr(f"{k}:n")
check("a cluster pipeline", pipe.execute() == [1] * 20)
print("nodes " + " ".join(nodes))
