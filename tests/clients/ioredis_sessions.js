// ioredis through two Tessera proxies, as applications use it: defineCommand (EVALSHA, with
// its own fallback), multi().exec(), a WATCH conflict, and a BLPOP queue fed through one proxy
// and drained through the other. Run by tests/suite/sessions.rs:
//   node tests/clients/ioredis_sessions.js HOST:PORT HOST:PORT
// Prints one line per check; exits non-zero on the first failure.
'use strict';
const Redis = require('ioredis');
const { check } = require('./check');

function client(addr) {
  const [host, port] = addr.split(':');
  return new Redis({ host, port: Number(port), maxRetriesPerRequest: 1, lazyConnect: false });
}


async function main() {
  const a = client(process.argv[2]);
  const b = client(process.argv[3]);
  a.defineCommand('incrTwice', {
    numberOfKeys: 1,
    lua: "redis.call('INCR', KEYS[1]) return redis.call('INCR', KEYS[1])",
  });
  await a.del('io:n');
  check('defineCommand (EVALSHA)', (await a.incrTwice('io:n')) === 2 && (await a.incrTwice('io:n')) === 4);

  const r = await a.multi().set('io:{t}k', 'v').get('io:{t}k').incr('io:{t}c').exec();
  check('multi().exec()', JSON.stringify(r.map((x) => x[1])) === JSON.stringify(['OK', 'v', 1]), JSON.stringify(r));

  await a.set('io:w', '1');
  await a.watch('io:w');
  await b.set('io:w', '2');
  const conflicted = await a.multi().set('io:w', '3').exec();
  check('WATCH conflict aborts EXEC', conflicted === null && (await a.get('io:w')) === '2', JSON.stringify(conflicted));

  const items = 100;
  const got = [];
  const consumers = [0, 1].map(async () => {
    const c = client(process.argv[3]);
    for (;;) {
      const item = await c.blpop('io:jobs', 5);
      if (item === null || item[1] === 'stop') break;
      got.push(item[1]);
    }
    c.disconnect();
  });
  for (let i = 0; i < items; i++) await a.rpush('io:jobs', `job${i}`);
  await a.rpush('io:jobs', 'stop', 'stop');
  await Promise.all(consumers);
  check('BLPOP queue across proxies: every job exactly once', got.length === items && new Set(got).size === items, `${got.length}`);
  a.disconnect();
  b.disconnect();
}

main().catch((e) => {
  console.log(`FAIL ${e}`);
  process.exit(1);
});
