/**
 * Authentication (spec §5, C-32, C-36) through the core's Authenticator. A rejected key (401) is
 * counted in the per-source-address scope (C-50) so that key guessing is throttled: once that scope
 * is over its limit the answer is 429 instead of 401 (RateLimiter.enforce throws it). With the
 * core's credential cache (production, issue 14) the key is confirmed and the request counted
 * against its organisation in one Redis call: the decision is left in `state.decision`. The
 * organisation record authentication read with the key goes to `state.organisation`, for the core's
 * `Organisations.get` in the same request; the adapter keeps nothing across requests.
 */
import type Koa from 'koa';
import { isDomainErrorWithCode, type Core, type KeyPrincipal } from '@cos/core';
import type { CosRequestState } from '../state.js';
import type { SourceAddress } from './source-address.js';

export type AuthenticateStep = (ctx: Koa.Context, state: CosRequestState) => Promise<KeyPrincipal>;

export function authenticateStep(core: Core, sourceAddress: SourceAddress): AuthenticateStep {
  return async (ctx, state) => {
    try {
      const { principal, organisation, decision } = await core.authenticator.admit(ctx.req.headers.authorization);
      state.principal = principal;
      state.organisation = organisation;
      // Already counted against the organisation in the same call (the credential cache):
      // the rate-limit step uses this decision instead of counting again.
      if (decision !== undefined) state.decision = decision;
      return principal;
    } catch (err) {
      // by code, not instanceof: the Core may come from another copy of @cos/core
      if (isDomainErrorWithCode(err, 'UNAUTHORIZED')) {
        state.decision = await core.rateLimiter.enforce({ kind: 'source', address: sourceAddress(ctx) });
      }
      throw err;
    }
  };
}
