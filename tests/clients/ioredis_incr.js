// ioredis INCRs one counter through a Tessera proxy until a stop file appears, with its
// default settings (reconnect, commands sent again after a reconnect). Run by
// tests/suite/up.rs:
//   node tests/clients/ioredis_incr.js HOST:PORT KEY STOPFILE
// Prints `answered N failed M`.
'use strict';
const fs = require('fs');
const Redis = require('ioredis');

async function main() {
  const [host, port] = process.argv[2].split(':');
  const [key, stop] = [process.argv[3], process.argv[4]];
  const r = new Redis({ host, port: Number(port) });
  r.on('error', () => {});
  let answered = 0;
  let failed = 0;
  while (!fs.existsSync(stop) && answered + failed < 1000000) {
    try {
      await r.incr(key);
      answered += 1;
    } catch (e) {
      failed += 1;
      console.log(`error ${e}`);
    }
  }
  console.log(`answered ${answered} failed ${failed}`);
  r.disconnect();
}

main().catch((e) => {
  console.log(`FAIL ${e}`);
  process.exit(1);
});
