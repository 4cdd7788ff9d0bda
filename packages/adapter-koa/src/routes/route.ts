/**
 * The route table's shape and its matcher. Routes are matched before anything else runs so that the
 * pipeline knows whether a request needs a key; the matcher is a precompiled segment comparison
 * (no regular expressions, no per-route allocation), and it tells an unknown path (404, C-9) from a
 * known path with another method (405 + `Allow`, C-9).
 */
import type Koa from 'koa';
import type { AdmissionCount, KeyPrincipal } from '@cos/core';
import type { CosRequestState } from '../state.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Handler of a route that needs no key (`/health`, `/version`). */
export type PublicHandler = (ctx: Koa.Context) => Promise<void>;
/** Handler of a route that needs a key; `params` are the decoded path parameters in template order. */
export type KeyHandler = (ctx: Koa.Context, params: readonly string[], principal: KeyPrincipal, state: CosRequestState) => Promise<void>;

/**
 * A route's token to look up alongside its caller's admission (C-274: POST /v1/introspect), read
 * from what has arrived of the request; null for none. Called only for a known introspector.
 */
export type TokenAhead = (ctx: Koa.Context, state: CosRequestState) => string | null;

/**
 * Handler of a route authenticated by a signature over its body rather than a key (the
 * secret-scanning alerts): it authenticates and counts the request itself.
 */
export type SignedHandler = (ctx: Koa.Context, state: CosRequestState) => Promise<void>;

export type Route =
  | { readonly access: 'public'; readonly method: HttpMethod; readonly template: string; readonly handle: PublicHandler }
  | {
      readonly access: 'key';
      readonly method: HttpMethod;
      readonly template: string;
      readonly handle: KeyHandler;
      /** What the admitted request counts against (the organisation's limit unless said otherwise). */
      readonly counts: AdmissionCount;
      /** A token to look up alongside admission (C-274); undefined for every route but the introspection. */
      readonly tokenAhead?: TokenAhead | undefined;
    }
  | { readonly access: 'signed'; readonly method: HttpMethod; readonly template: string; readonly handle: SignedHandler };

export const publicRoute = (method: HttpMethod, template: string, handle: PublicHandler): Route => ({
  access: 'public',
  method,
  template,
  handle,
});

export const keyRoute = (method: HttpMethod, template: string, handle: KeyHandler, counts: AdmissionCount = 'organisation', tokenAhead?: TokenAhead): Route =>
  tokenAhead === undefined ? { access: 'key', method, template, handle, counts } : { access: 'key', method, template, handle, counts, tokenAhead };

export const signedRoute = (method: HttpMethod, template: string, handle: SignedHandler): Route => ({
  access: 'signed',
  method,
  template,
  handle,
});

export type RouteMatch =
  | { readonly kind: 'route'; readonly route: Route; readonly params: readonly string[] }
  | { readonly kind: 'method-not-allowed'; readonly template: string; readonly allow: string }
  | { readonly kind: 'unknown-path' };

interface PathEntry {
  readonly template: string;
  /** Literal segment, or null for a parameter. */
  readonly segments: readonly (string | null)[];
  readonly hasParams: boolean;
  readonly byMethod: ReadonlyMap<string, Route>;
  /** Prebuilt matches of a path without parameters, so matching it allocates nothing. */
  readonly staticMatches: ReadonlyMap<string, RouteMatch>;
  /** The 405 answer of this path (its `Allow` header lists the methods it has). */
  readonly notAllowed: RouteMatch;
}

const UNKNOWN_PATH: RouteMatch = Object.freeze({ kind: 'unknown-path' });
const NO_PARAMS: readonly string[] = Object.freeze([]);

function decodeParam(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw; // not decodable: handed on as sent, the use case rejects it as not a UUID (C-8)
  }
}

/** Templates use `:name` for a parameter, e.g. `/v1/organisations/:org_id`. Paths match exactly. */
export function compileRoutes(routes: readonly Route[]): (method: string, path: string) => RouteMatch {
  const byTemplate = new Map<string, Route[]>();
  for (const route of routes) {
    const list = byTemplate.get(route.template) ?? [];
    if (list.some((r) => r.method === route.method)) throw new Error(`duplicate route ${route.method} ${route.template}`);
    list.push(route);
    byTemplate.set(route.template, list);
  }
  const entries: PathEntry[] = [...byTemplate].map(([template, list]) => {
    const segments = template.split('/').map((s) => (s.startsWith(':') ? null : s));
    const hasParams = segments.includes(null);
    return {
      template,
      segments,
      hasParams,
      byMethod: new Map(list.map((r) => [r.method, r])),
      staticMatches: new Map(
        hasParams ? [] : list.map((route): [string, RouteMatch] => [route.method, Object.freeze({ kind: 'route', route, params: NO_PARAMS })]),
      ),
      notAllowed: Object.freeze({ kind: 'method-not-allowed', template, allow: list.map((r) => r.method).join(', ') }),
    };
  });

  // Templates by their number of segments: a path is compared only with those of its own length.
  const byLength = new Map<number, PathEntry[]>();
  for (const entry of entries) {
    const list = byLength.get(entry.segments.length) ?? [];
    list.push(entry);
    byLength.set(entry.segments.length, list);
  }
  /** Where each segment of `path` ends (its `/` or the end), without splitting the path into strings. */
  const ends: number[] = [];

  return (method, path) => {
    ends.length = 0;
    for (let at = path.indexOf('/'); at !== -1; at = path.indexOf('/', at + 1)) ends.push(at);
    ends.push(path.length);
    const candidates = byLength.get(ends.length);
    if (candidates === undefined) return UNKNOWN_PATH;
    for (const entry of candidates) {
      const segments = entry.segments;
      let ok = true;
      let start = 0;
      for (let i = 0; i < segments.length; i++) {
        const literal = segments[i]!;
        const end = ends[i]!;
        if (literal === null ? end === start : end - start !== literal.length || !path.startsWith(literal, start)) {
          ok = false;
          break;
        }
        start = end + 1;
      }
      if (!ok) continue;
      const route = entry.byMethod.get(method);
      if (route === undefined) return entry.notAllowed;
      if (!entry.hasParams) return entry.staticMatches.get(method)!;
      const params: string[] = [];
      start = 0;
      for (let i = 0; i < segments.length; i++) {
        if (segments[i] === null) params.push(decodeParam(path.slice(start, ends[i])));
        start = ends[i]! + 1;
      }
      return { kind: 'route', route, params };
    }
    return UNKNOWN_PATH;
  };
}
