/**
 * Admission of an authenticated route's request (spec §5, §8; C-32, C-33, C-36, C-50) through the
 * core's one admission module: it parses the key, looks the credential up once, checks it, and
 * counts the request once (against its organisation, or, for a key that does not authenticate,
 * against the source address, so that key guessing is throttled). This step only answers what the
 * core decided: the decision goes to `state.decision` (the X-RateLimit-* headers), 429 when it does
 * not allow the request, else 401 for a refused key; an admitted request's principal and the
 * organisation record read with its key go to the request state (`state.organisation` is handed to
 * the core's `Organisations.get` in the same request). A key restricted to networks is then
 * checked against the source address (403, after 401 and 429, before any scope check; the request
 * has been counted). The adapter keeps nothing across requests.
 */
import type Koa from 'koa';
import { networkRefusal, type AdmissionCount, type Core, type KeyPrincipal } from '@cos/core';
import type { CosRequestState } from '../state.js';
import type { RateLimitResponder } from './errors.js';
import type { SourceAddress } from './source-address.js';
import type { TokenAhead } from '../routes/route.js';

/**
 * The admitted principal, or undefined once the request has been answered with 429; throws the 401.
 * `tokenAhead`: the route's token to look up alongside (C-274), its lookup put in `state.lookAhead`.
 */
export type AdmitStep = (ctx: Koa.Context, state: CosRequestState, counts?: AdmissionCount, tokenAhead?: TokenAhead) => Promise<KeyPrincipal | undefined>;

export function admitStep(core: Core, sourceAddress: SourceAddress, refuse: RateLimitResponder): AdmitStep {
  const admission = core.admission;
  return async (ctx, state, counts, tokenAhead) => {
    // The address only for a refused key or a key restricted to networks (source-address.ts).
    const answer = await admission.admit(
      ctx.req.headers.authorization,
      () => sourceAddress(ctx),
      counts,
      tokenAhead === undefined ? undefined : () => tokenAhead(ctx, state),
    );
    const decision = answer.decision;
    state.decision = decision;
    if (!decision.allowed) {
      refuse(ctx, state, decision);
      return undefined;
    }
    if (!answer.admitted) throw answer.refusal;
    const outside = networkRefusal(answer.principal, () => sourceAddress(ctx));
    if (outside !== null) throw outside;
    state.principal = answer.principal;
    state.organisation = answer.organisation;
    if (answer.lookAhead !== undefined) state.lookAhead = answer.lookAhead;
    return answer.principal;
  };
}
