// node-redis INCRs one counter through a Tessera proxy until a stop file appears, in RESP3
// with maintenance notifications on (CLIENT MAINT_NOTIFICATIONS) and no reconnect: a
// connection closed under it would fail its commands, so a proxy restart must move it by a
// MOVING push instead. Run by tests/suite/up.rs:
//   node tests/clients/node_redis_incr.js HOST:PORT KEY STOPFILE
// Prints `answered N failed M`, then `moved K` (the MOVING pushes it acted on).
'use strict';
process.env.REDIS_EMIT_DIAGNOSTICS = '1';
const fs = require('fs');
const diagnostics = require('node:diagnostics_channel');
const { createClient } = require('redis');

async function main() {
  const [host, port] = process.argv[2].split(':');
  const [key, stop] = [process.argv[3], process.argv[4]];
  let moved = 0;
  diagnostics.channel('redis.maintenance').subscribe((event) => {
    if (event && event.type === 'MOVING') moved += 1;
  });
  const r = createClient({
    socket: { host, port: Number(port), reconnectStrategy: false },
    RESP: 3,
    maintNotifications: 'enabled',
    maintEndpointType: 'internal-ip',
  });
  r.on('error', (e) => console.log(`client error ${e}`));
  await r.connect();
  let answered = 0;
  let failed = 0;
  while (!fs.existsSync(stop) && answered + failed < 1000000) {
    try {
      await r.incr(key);
      answered += 1;
    } catch (e) {
      failed += 1;
      console.log(`error ${e}`);
      if (!r.isOpen) break;
    }
  }
  console.log(`answered ${answered} failed ${failed}`);
  console.log(`moved ${moved}`);
  await r.close().catch(() => {});
}

main().catch((e) => {
  console.log(`FAIL ${e}`);
  process.exit(1);
});
