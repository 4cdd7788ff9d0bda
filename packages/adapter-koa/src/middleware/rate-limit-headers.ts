/**
 * C-52 / spec §8.5: every response the surface answers, success or error, carries X-RateLimit-Limit,
 * -Remaining and -Reset. The numbers come from the decision of the scope this request was counted
 * in (organisation, global unauthenticated, or the source address on a 401). A request that was
 * never counted (unknown path 404, 405, a failure before the count) shows the source-address
 * scope's current window via RateLimiter.peek, which counts nothing.
 */
import type Koa from 'koa';
import type { Core, RateDecision } from '@cos/core';
import type { CosRequestState } from '../state.js';
import type { SourceAddress } from './source-address.js';

export type RateHeaderWriter = (ctx: Koa.Context, state: CosRequestState) => void;

/** The three C-52 headers of a decision, set on anything with `setHeader` (a response, or a raw answer being built). */
export function setRateLimitHeaders(decision: RateDecision, target: { setHeader(name: string, value: string): unknown }): void {
  target.setHeader('X-RateLimit-Limit', String(decision.limit));
  target.setHeader('X-RateLimit-Remaining', String(decision.remaining));
  target.setHeader('X-RateLimit-Reset', String(decision.resetEpochSeconds));
}

export function createRateHeaderWriter(core: Core, sourceAddress: SourceAddress): RateHeaderWriter {
  const limiter = core.rateLimiter;
  return (ctx, state) => {
    const res = ctx.res;
    if (res.headersSent) return;
    setRateLimitHeaders(state.decision ?? limiter.peek({ kind: 'source', address: sourceAddress(ctx) }), res);
  };
}
