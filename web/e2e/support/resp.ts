// A one-command RESP client for the e2e: what a Redis client sends a proxy, without a client
// library. Replies: a string (simple, integer or bulk), null, an array of bulk strings, or
// { error } for an error reply (or one this reader does not handle).

import net from 'node:net';

export type Reply = string | null | string[] | { error: string };

/** Sends one command to `addr` (host:port) and resolves to its reply; 10 s at most. */
export function resp(addr: string, ...args: string[]): Promise<Reply> {
  const [host, port] = addr.split(':');
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), host);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply from ${addr} to ${args[0]} within 10 s`));
    }, 10_000);
    const done = (v: Reply) => {
      clearTimeout(timer);
      sock.end();
      resolve(v);
    };
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const nl = buf.indexOf('\r\n');
      if (nl < 0) return;
      const line = buf.subarray(1, nl).toString();
      switch (String.fromCharCode(buf[0])) {
        case '-':
          return done({ error: line });
        case '+':
        case ':':
          return done(line);
        case '$': {
          const n = Number(line);
          if (n < 0) return done(null);
          if (buf.length < nl + 2 + n + 2) return; // the rest is still coming
          return done(buf.subarray(nl + 2, nl + 2 + n).toString());
        }
        case '*': {
          // A flat array of bulk strings (KEYS); anything else is reported as unexpected.
          const n = Number(line);
          if (n <= 0) return done([]);
          const items: string[] = [];
          let at = nl + 2;
          for (let i = 0; i < n; i++) {
            const end = buf.indexOf('\r\n', at);
            if (end < 0) return;
            if (buf[at] !== 0x24) return done({ error: `unexpected array element ${JSON.stringify(buf.toString().slice(at, at + 20))}` });
            const len = Number(buf.subarray(at + 1, end).toString());
            if (buf.length < end + 2 + len + 2) return;
            items.push(buf.subarray(end + 2, end + 2 + len).toString());
            at = end + 2 + len + 2;
          }
          return done(items);
        }
        default:
          return done({ error: `unexpected reply ${JSON.stringify(buf.toString().slice(0, 80))}` });
      }
    });
    sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
  });
}

/** Whether `r` is an error reply. */
export const isError = (r: Reply): r is { error: string } => typeof r === 'object' && r !== null && !Array.isArray(r);
