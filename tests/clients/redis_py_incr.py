# redis-py INCRs one counter through a Tessera proxy until a stop file appears, with the
# retry settings applications use against a server that restarts (retry on connection
# errors, exponential backoff). Run by tests/suite/up.rs:
#   python3 tests/clients/redis_py_incr.py HOST:PORT KEY STOPFILE
# Prints `answered N failed M`: INCRs answered, and those that failed even after retries.
import os
import sys

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, TimeoutError
from redis.retry import Retry

host, port = sys.argv[1].rsplit(":", 1)
key, stop = sys.argv[2], sys.argv[3]
r = redis.Redis(
    host=host,
    port=int(port),
    retry=Retry(ExponentialBackoff(cap=0.5, base=0.01), 20),
    retry_on_error=[ConnectionError, TimeoutError],
    socket_timeout=5,
)
answered = failed = 0
while not os.path.exists(stop) and answered + failed < 1_000_000:
    try:
        r.incr(key)
        answered += 1
    except redis.RedisError as e:
        failed += 1
        print(f"error {e}", flush=True)
print(f"answered {answered} failed {failed}", flush=True)
