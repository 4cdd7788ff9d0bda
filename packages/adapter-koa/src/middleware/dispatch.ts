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
 * answered.
 *
 * A body sent anyway to a route that takes none (C-141): a read (GET, HEAD) does not wait for it
 * and reads none of it; a framing error the parser has already met in it is the 400, and when the
 * body is still arriving as the answer goes out, the answer closes the connection. A DELETE, which
 * acts, waits for that body after admission (401 and 429 are answered without it) and before it
 * acts, so a framing error in the body is the answer and the route never acts.
 */
import type { IncomingMessage } from 'node:http';
import type Koa from 'koa';
import { awaitBodyEnd } from '../body.js';
import { clientErrorAnswer, parserErrorOf, refusedRequestAnswer } from '../http-refusals.js';
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
    try {
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
      if (route.access === 'public') {
        const allowed = await publicRateLimit(ctx, state);
        if (!TAKES_BODY.has(route.method) && !ctx.req.complete) await refuseBrokenBody(ctx.req);
        if (allowed) await route.handle(ctx);
        return;
      }
      if (route.access === 'signed') {
        await route.handle(ctx, state);
        return;
      }
      const tokenAhead = route.tokenAhead;
      // A body that came with the headers is parsed once the request's first callback has returned:
      // one microtask later, a route looking a token up alongside admission (C-274) can read it.
      if (tokenAhead !== undefined) await undefined;
      const principal = await admit(ctx, state, route.counts, tokenAhead);
      if (principal === undefined) return;
      if (route.method === 'DELETE') {
        // It acts: it runs once a body sent anyway has arrived, so a framing error in it is the answer
        // (a parse error behind a request that has fully arrived is not this request's).
        const arrived = ctx.req.complete ? undefined : awaitBodyEnd(ctx.req);
        if (arrived !== undefined) await arrived;
      } else if (!TAKES_BODY.has(route.method) && !ctx.req.complete) await refuseBrokenBody(ctx.req);
      // The route starts its Idempotency-Key through the route kit once the caller may perform the
      // operation (reads take none: nothing to start on the hot path).
      await route.handle(ctx, found.params, principal, state);
    } finally {
      // A method that takes no body (C-141): whatever the answer, it closes the connection when a
      // body sent anyway is still arriving, so that body is never read.
      if (!ctx.req.complete && !TAKES_BODY.has(ctx.method)) ctx.res.shouldKeepAlive = false;
    }
  };
}

/**
 * A read runs without the body sent with it (C-141), but not on a request whose framing the parser
 * has refused in the bytes received with it: that is the 400. Those bytes are all parsed before the
 * event loop's next turn (the parser goes through each read it is given at once; only microtasks run
 * in between, from its body callbacks), so it waits for that turn (called only while the body has not ended).
 */
async function refuseBrokenBody(req: IncomingMessage): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  const parserError = parserErrorOf(req);
  if (parserError !== undefined) throw new RefusedRequestError(clientErrorAnswer(parserError.code));
}
