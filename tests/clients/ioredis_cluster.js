// ioredis' Cluster pointed at one Tessera proxy: it learns every proxy from CLUSTER SLOTS,
// spreads its commands over them, and reads back what it wrote. Run by
// tests/suite/cluster_clients.rs:
//   node tests/clients/ioredis_cluster.js HOST:PORT
// Prints one line per check, then the nodes it knows; exits non-zero on the first failure.
'use strict';
const Redis = require('ioredis');
const { check } = require('./check');

async function main() {
  const [host, port] = process.argv[2].split(':');
  const cluster = new Redis.Cluster([{ host, port: Number(port) }], { redisOptions: { maxRetriesPerRequest: 1 } });
  await new Promise((resolve, reject) => {
    cluster.once('ready', resolve);
    cluster.once('error', reject);
  });
  const nodes = cluster.nodes('master').map((n) => `${n.options.host}:${n.options.port}`).sort();
  check('every proxy found', nodes.length >= 2, JSON.stringify(nodes));
  const keys = Array.from({ length: 300 }, (_, i) => `io-rc:${i}`);
  await Promise.all(keys.map((k) => cluster.set(k, k.toUpperCase())));
  const got = await Promise.all(keys.map((k) => cluster.get(k)));
  check('GETs read back 300 SETs', got.every((v, i) => v === keys[i].toUpperCase()));
  const tx = await cluster.multi().set('{t}a', '1').incr('{t}n').exec();
  check('a transaction on one slot', tx[1][1] === 1, JSON.stringify(tx));
  console.log(`nodes ${nodes.join(' ')}`);
  cluster.disconnect();
}

main().catch((e) => {
  console.log(`FAIL ${e}`);
  process.exit(1);
});
