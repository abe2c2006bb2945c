// Run-time checks of answers against the schemas generated from the API's document
// (src/generated/schemas.ts): an answer the console does not understand (a dashboard of
// another version, a field renamed) fails here, naming where, instead of showing up as a
// `null` or `undefined` deep inside a view. @cfworker/json-schema interprets the schemas, so
// nothing is compiled with eval in the browser, which the console's CSP forbids.

import { Validator, type Schema } from '@cfworker/json-schema';
import { answers, components } from '../generated/schemas';
import { ApiError } from './error';

const validators = new Map<string, Validator>();

/** The validator of `schema`, made once: each is checked in the root that holds the components. */
function validatorFor(key: string, schema: Schema): Validator {
  let v = validators.get(key);
  if (!v) {
    v = new Validator({ ...components, ...schema }, '2019-09');
    validators.set(key, v);
  }
  return v;
}

/** Where and how `value` departs from `schema` ("/0/group: …"), or null when it fits. */
function misfit(key: string, schema: Schema, value: unknown): string | null {
  const r = validatorFor(key, schema).validate(value);
  if (r.valid) return null;
  // The innermost error: the field itself rather than the objects around it. (Where a value
  // may be one of several shapes, or null, each alternative's errors are listed: the deepest
  // is the one that says what is wrong with the shape it nearly is.)
  const e = r.errors.reduce((a, b) => (b.instanceLocation.length >= a.instanceLocation.length ? b : a));
  return `${e.instanceLocation.replace(/^#/, '') || '/'}: ${e.error}`;
}

/**
 * Where `value` departs from the answer schema of `route` as the console's document names it
 * ("GET /auth/me", "GET /api/clusters/{cluster}/slots"), or null.
 */
export function fitsAnswer(route: string, value: unknown): string | null {
  const schema = answers[route];
  if (!schema) throw new Error(`no schema for the answer of ${route}: run npm run gen`);
  return misfit(route, schema, value);
}

/**
 * `value`, answered with `status`, as the answer of `route`, once it fits the schema of
 * `documented` (the route as the console's document names it; `route` itself by default).
 * (`T` is the route's type: it and the schema are generated from the same document, so what
 * fits the one is the other.)
 *
 * @throws ApiError `bad_answer` naming `who`, the route and the misfit.
 */
export function checkAnswer<T>(who: string, route: string, status: number, value: unknown, documented = route): T {
  const m = fitsAnswer(documented, value);
  if (m) throw new ApiError(status, 'bad_answer', `${who} answered ${route} in a shape this console does not know (${m})`);
  return value as T;
}
