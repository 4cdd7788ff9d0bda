/**
 * mountAt(prefix, target): serve a middleware (e.g. createV1Router) or a whole Koa app (e.g.
 * createKoaApp) under a path prefix of a host Koa app, koa-mount style: inside, `ctx.path` has the
 * prefix stripped; `ctx.originalUrl` keeps it. Requests outside the prefix go on to the host's next
 * middleware untouched. A mounted app contributes its middleware only: its settings (`proxy`) and
 * 'error' listeners are the host's.
 */
import type Koa from 'koa';
import { compose } from './middleware/compose.js';

export function mountAt(prefix: string, target: Koa.Middleware | Koa): Koa.Middleware {
  if (!/^\/[^?#]*[^/?#]$/.test(prefix)) {
    throw new TypeError(`mount prefix must start with "/" and not end with "/": ${JSON.stringify(prefix)}`);
  }
  const downstream: Koa.Middleware = typeof target === 'function' ? target : compose(target.middleware);
  return async (ctx, next) => {
    const path = ctx.path;
    if (!path.startsWith(prefix)) return next();
    const rest = path.slice(prefix.length);
    if (rest.length > 0 && !rest.startsWith('/')) return next();
    const inner = rest.length === 0 ? '/' : rest;
    ctx.path = inner;
    try {
      await downstream(ctx, async () => {
        ctx.path = path;
        try {
          await next();
        } finally {
          ctx.path = inner;
        }
      });
    } finally {
      ctx.path = path;
    }
  };
}
