/**
 * The rate limit (spec §8, C-50..C-54) through the core's RateLimiter: authenticated requests count
 * against their organisation, `/health` and `/version` against the one global unauthenticated
 * counter. check() fails open by itself (C-54); a refusal is answered here with 429 (C-51) through
 * the error table's renderer, without making an error object.
 */
import type Koa from 'koa';
import type { Core, KeyPrincipal, RateDecision, RateScope } from '@cos/core';
import type { CosRequestState } from '../state.js';
import type { RateLimitResponder } from './errors.js';

const UNAUTHENTICATED: RateScope = Object.freeze({ kind: 'unauthenticated' });

export interface RateLimitSteps {
  /** Counts the request against its organisation; false once it has been answered with 429. */
  organisation(ctx: Koa.Context, principal: KeyPrincipal, state: CosRequestState): Promise<boolean>;
  /** Counts the request against the global unauthenticated counter; false once answered with 429. */
  unauthenticated(ctx: Koa.Context, state: CosRequestState): Promise<boolean>;
}

export function rateLimitSteps(core: Core, refuse: RateLimitResponder): RateLimitSteps {
  const limiter = core.rateLimiter;
  const counted = (ctx: Koa.Context, state: CosRequestState, decision: RateDecision): boolean => {
    state.decision = decision;
    if (decision.allowed) return true;
    refuse(ctx, state, decision);
    return false;
  };
  return {
    async organisation(ctx, principal, state) {
      // Counted already by the authentication step (the credential cache's one round trip).
      if (state.decision !== undefined) return counted(ctx, state, state.decision);
      return counted(ctx, state, await limiter.check({ kind: 'organisation', organisationId: principal.organisationId }));
    },
    async unauthenticated(ctx, state) {
      return counted(ctx, state, await limiter.check(UNAUTHENTICATED));
    },
  };
}
