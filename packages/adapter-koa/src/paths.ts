import type Koa from 'koa';

/**
 * The request path as the client sent it, without the query string. Under a host that strips a
 * mount prefix from `ctx.path` (see mountAt) `ctx.originalUrl` still has it, so `Location` and the
 * 429 `instance` name the address the client actually used.
 */
export function originalPath(ctx: Koa.Context): string {
  const url = ctx.originalUrl;
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}
