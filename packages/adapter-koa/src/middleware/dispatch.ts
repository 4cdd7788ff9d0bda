/**
 * The request's way to its route: match it (404 / 405 + Allow for no match, C-9), then in C-33
 * order: admission (the core's: 401, or 429 for the organisation or, after a 401, the source
 * address) -> the route, whose use case authorises (403), validates (400) and acts (404/409/...).
 * Public routes go straight to the global unauthenticated rate limit; signed routes
 * (secret-scanning alerts) verify and count on their own. A refusal by a rate limit is answered
 * (429) and ends the dispatch; anything else that fails is thrown, and the pipeline renders it.
 *
 * Before all of that, requests the service refuses whatever their route (client-error.ts's
 * refusedRequestAnswer: a Transfer-Encoding other than chunked, no Host, an unmet Expect) are
 * answered; and a route that takes no body runs only once a body sent anyway has fully arrived, so
 * a framing error in that body is the answer and the route never acts.
 */
import type Koa from 'koa';
import { awaitBodyEnd } from '../body.js';
import { refusedRequestAnswer } from '../http-refusals.js';
import { methodNotAllowed, RefusedRequestError, unknownPath } from '../errors.js';
import type { RouteMatch } from '../routes/route.js';
import type { CosRequestState } from '../state.js';
import type { AdmitStep } from './authenticate.js';
import type { PublicRateLimitStep } from './rate-limit.js';

/** Methods whose routes read a body (through the route kit, after authorisation). */
const TAKES_BODY: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH']);

export type Dispatch = (ctx: Koa.Context, state: CosRequestState) => Promise<void>;

export function createDispatch(
  match: (method: string, path: string) => RouteMatch,
  admit: AdmitStep,
  publicRateLimit: PublicRateLimitStep,
): Dispatch {
  return async (ctx, state) => {
    const refused = refusedRequestAnswer(ctx.req);
    if (refused !== undefined) throw new RefusedRequestError(refused);
    const found = match(ctx.method, ctx.path);
    if (found.kind === 'unknown-path') throw unknownPath();
    if (found.kind === 'method-not-allowed') {
      state.route = found.template;
      throw methodNotAllowed(ctx.method, found.allow);
    }
    const route = found.route;
    state.route = route.template;
    if (!TAKES_BODY.has(route.method)) {
      const arrived = awaitBodyEnd(ctx.req);
      if (arrived !== undefined) await arrived;
    }
    if (route.access === 'public') {
      if (await publicRateLimit(ctx, state)) await route.handle(ctx);
      return;
    }
    if (route.access === 'signed') {
      await route.handle(ctx, state);
      return;
    }
    const principal = await admit(ctx, state);
    if (principal === undefined) return;
    // The route starts its Idempotency-Key through the route kit once the caller may perform the
    // operation (reads take none: nothing to start on the hot path).
    await route.handle(ctx, found.params, principal);
  };
}
