/**
 * The request's way to its route: match it (404 / 405 + Allow for no match, C-9), then in C-33
 * order: authenticate (401) -> rate limit (429) -> the route, whose use case authorises (403),
 * validates (400) and acts (404/409/...). Public routes go straight to the global
 * unauthenticated rate limit; signed routes (secret-scanning alerts) verify and count on their own.
 * A refusal by the rate limit is answered (429) and ends the dispatch;
 * anything else that fails is thrown, and the pipeline renders it.
 */
import type Koa from 'koa';
import { methodNotAllowed, unknownPath } from '../errors.js';
import type { RouteMatch } from '../routes/route.js';
import type { CosRequestState } from '../state.js';
import type { AuthenticateStep } from './authenticate.js';
import type { RateLimitSteps } from './rate-limit.js';

export type Dispatch = (ctx: Koa.Context, state: CosRequestState) => Promise<void>;

export function createDispatch(
  match: (method: string, path: string) => RouteMatch,
  authenticate: AuthenticateStep,
  rateLimit: RateLimitSteps,
): Dispatch {
  return async (ctx, state) => {
    const found = match(ctx.method, ctx.path);
    if (found.kind === 'unknown-path') throw unknownPath();
    if (found.kind === 'method-not-allowed') {
      state.route = found.template;
      throw methodNotAllowed(ctx.method, found.allow);
    }
    const route = found.route;
    state.route = route.template;
    if (route.access === 'public') {
      if (await rateLimit.unauthenticated(ctx, state)) await route.handle(ctx);
      return;
    }
    if (route.access === 'signed') {
      await route.handle(ctx, state);
      return;
    }
    const principal = await authenticate(ctx, state);
    if (await rateLimit.organisation(ctx, principal, state)) await route.handle(ctx, found.params, principal);
  };
}
