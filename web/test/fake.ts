// A fake console for view tests: each request is answered by the test's `route` (status and
// JSON body), and the URLs asked for are kept so a test can check what a view requested.

import { Client } from '../src/api/client';

/** The cluster `local` of a console whose every answer comes from `route`. */
export function fakeCluster(route: (url: string) => [number, unknown]) {
  const urls: string[] = [];
  const client = new Client(async (url: string) => {
    urls.push(url);
    const [status, body] = route(url);
    return new Response(JSON.stringify(body), { status });
  });
  return { c: client.cluster('local'), urls };
}
