// The API's routes as types, read from the types generated from the console's OpenAPI document
// (src/generated/api.d.ts, `npm run gen`): what each route takes and answers. The document has
// the console's own routes and each dashboard route as the console relays it,
// `/api/clusters/{cluster}/…`; a dashboard route is named here as the dashboard names it. The
// names the views use for the answers are in ./shapes.ts.

import type { paths } from '../generated/api';

/** Where the console relays a cluster's dashboard route (its path after `/api`). */
const RELAY = '/api/clusters/{cluster}';
type Relay = typeof RELAY;

/** A route of the console's API, as its document names it ("/auth/me", "/api/clusters"). */
export type ConsoleRoute = keyof paths;
/** A route of the dashboard API, as the dashboard names it ("/api/groups/{id}/servers"). */
export type Route = { [K in ConsoleRoute]: K extends `${Relay}/${infer R}` ? `/api/${R}` : never }[ConsoleRoute];
export type Method = 'get' | 'put' | 'post' | 'delete';

/** The console's route that relays `route` ("/api/clusters/{cluster}/groups/{id}/servers"). */
export type Relayed<P extends Route> = P extends `/api/${infer R}` ? `${Relay}/${R}` & ConsoleRoute : never;

/** `route` as the console relays it, `{cluster}` still to fill in. */
export function relayed<P extends Route>(route: P): Relayed<P> {
  return `${RELAY}${route.slice('/api'.length)}` as Relayed<P>;
}

type Operation<K extends ConsoleRoute, M extends Method> = NonNullable<paths[K][M]>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;

/** The JSON body of a console route's success answer (200, 201 for a creation, or 202 for a
 * job accepted, such as a backup). */
export type ConsoleAnswer<K extends ConsoleRoute, M extends Method> =
  Operation<K, M> extends { responses: infer R }
    ? R extends { 200: infer A }
      ? JsonOf<A>
      : R extends { 201: infer A }
        ? JsonOf<A>
        : R extends { 202: infer A }
          ? JsonOf<A>
          : never
    : never;

/** The JSON body of a dashboard route's success answer. */
export type Answer<P extends Route, M extends Method> = ConsoleAnswer<Relayed<P>, M>;

/** The JSON body a dashboard route takes. */
export type RequestBody<P extends Route, M extends Method> =
  Operation<Relayed<P>, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

/** The `{name}` parameters in a dashboard route's path (the relay's `{cluster}` is the client's). */
export type PathParams<P extends Route, M extends Method> =
  Operation<Relayed<P>, M> extends { parameters: { path: infer A } } ? Omit<A, 'cluster'> : Record<string, never>;

/** `route` with its `{name}` parameters filled in, each percent-encoded. */
export function fillPath(route: string, params: Record<string, string | number>): string {
  return route.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`no value for {${name}} in ${route}`);
    return encodeURIComponent(String(v));
  });
}
