// The dashboard API's routes as types, read from the types generated from its OpenAPI document
// (src/generated/api.d.ts, `npm run gen`): what each route takes and answers. The names the
// views use for the answers are in ./shapes.ts.

import type { paths } from '../generated/api';

/** A route of the dashboard API, as its document names it ("/api/groups/{id}/servers"). */
export type Route = keyof paths;
export type Method = 'get' | 'put' | 'post' | 'delete';

type Operation<P extends Route, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;

/** The JSON body of a route's success answer (200, or 201 for a creation). */
export type Answer<P extends Route, M extends Method> =
  Operation<P, M> extends { responses: infer R }
    ? R extends { 200: infer A }
      ? JsonOf<A>
      : R extends { 201: infer A }
        ? JsonOf<A>
        : never
    : never;

/** The JSON body a route takes. */
export type RequestBody<P extends Route, M extends Method> =
  Operation<P, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

/** The `{name}` parameters in a route's path. */
export type PathParams<P extends Route, M extends Method> =
  Operation<P, M> extends { parameters: { path: infer A } } ? A : Record<string, never>;

/** `route` with its `{name}` parameters filled in, each percent-encoded. */
export function fillPath(route: string, params: Record<string, string | number>): string {
  return route.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`no value for {${name}} in ${route}`);
    return encodeURIComponent(String(v));
  });
}
