/**
 * The rate limit of public routes (spec §8, C-50..C-54): `/health` and `/version` count against the
 * one global unauthenticated counter through the core's RateLimiter (authenticated routes are
 * counted by the core's admission, authenticate.ts). check() fails open by itself (C-54); a
 * refusal is answered here with 429 (C-51) through the error table's renderer, without making an
 * error object.
 */
import type Koa from 'koa';
import type { Core, RateScope } from '@cos/core';
import type { CosRequestState } from '../state.js';
import type { RateLimitResponder } from './errors.js';

const UNAUTHENTICATED: RateScope = Object.freeze({ kind: 'unauthenticated' });

/** Counts the request against the global unauthenticated counter; false once answered with 429. */
export type PublicRateLimitStep = (ctx: Koa.Context, state: CosRequestState) => Promise<boolean>;

export function publicRateLimitStep(core: Core, refuse: RateLimitResponder): PublicRateLimitStep {
  const limiter = core.rateLimiter;
  return async (ctx, state) => {
    const decision = await limiter.check(UNAUTHENTICATED);
    state.decision = decision;
    if (decision.allowed) return true;
    refuse(ctx, state, decision);
    return false;
  };
}
