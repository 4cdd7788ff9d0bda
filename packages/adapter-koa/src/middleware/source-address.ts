import type Koa from 'koa';

/** The client address keying the per-source rate scope (C-50). */
export type SourceAddress = (ctx: Koa.Context) => string;

/**
 * `ctx.ip`: the socket's address, or the first X-Forwarded-For entry when the Koa application that
 * runs the request trusts proxies (`app.proxy`, set from HttpOptions.trustProxy by createKoaApp; a
 * host app mounting createV1Router decides with its own `proxy` setting).
 */
export const koaSourceAddress: SourceAddress = (ctx) => ctx.ip || 'unknown';
