/**
 * The rate limit (spec §8, C-50..C-54) through the core's RateLimiter: authenticated requests count
 * against their organisation, `/health` and `/version` against the one global unauthenticated
 * counter. enforce() throws RateLimitedError (429) over the limit and fails open by itself (C-54).
 */
import type { Core, KeyPrincipal, RateScope } from '@cos/core';
import type { CosRequestState } from '../state.js';

const UNAUTHENTICATED: RateScope = Object.freeze({ kind: 'unauthenticated' });

export interface RateLimitSteps {
  organisation(principal: KeyPrincipal, state: CosRequestState): Promise<void>;
  unauthenticated(state: CosRequestState): Promise<void>;
}

export function rateLimitSteps(core: Core): RateLimitSteps {
  const limiter = core.rateLimiter;
  return {
    async organisation(principal, state) {
      state.decision = await limiter.enforce({ kind: 'organisation', organisationId: principal.organisationId });
    },
    async unauthenticated(state) {
      state.decision = await limiter.enforce(UNAUTHENTICATED);
    },
  };
}
