/**
 * C-52 / spec §8.5: every response the surface answers, success or error, carries X-RateLimit-Limit,
 * -Remaining and -Reset. The numbers come from the decision of the scope this request was counted
 * in (organisation, global unauthenticated, or the source address on a 401). A request that was
 * never counted (unknown path 404, 405, a failure before the count) shows the source-address
 * scope's current window via RateLimiter.peek, which counts nothing.
 */
import type Koa from 'koa';
import type { Core } from '@cos/core';
import type { CosRequestState } from '../state.js';
import type { SourceAddress } from './source-address.js';

export type RateHeaderWriter = (ctx: Koa.Context, state: CosRequestState) => void;

export function createRateHeaderWriter(core: Core, sourceAddress: SourceAddress): RateHeaderWriter {
  const limiter = core.rateLimiter;
  return (ctx, state) => {
    const res = ctx.res;
    if (res.headersSent) return;
    const decision = state.decision ?? limiter.peek({ kind: 'source', address: sourceAddress(ctx) });
    res.setHeader('X-RateLimit-Limit', String(decision.limit));
    res.setHeader('X-RateLimit-Remaining', String(decision.remaining));
    res.setHeader('X-RateLimit-Reset', String(decision.resetEpochSeconds));
  };
}
