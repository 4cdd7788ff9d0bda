/**
 * Writes the response for anything the dispatch threw, and for the rate-limit refusals it decides
 * without throwing, as errors.ts prescribes. The status code comes from ERROR_TABLE only; this file
 * only applies the rendering.
 */
import type Koa from 'koa';
import { rateLimitExceededMessage, type RateDecision } from '@cos/core';
import { renderError, renderRateLimited, type RenderedError } from '../errors.js';
import { originalPath } from '../paths.js';
import type { CosRequestState } from '../state.js';

export type ErrorResponder = (ctx: Koa.Context, state: CosRequestState, err: unknown) => void;
/** Answers 429 for a refused decision (C-51). */
export type RateLimitResponder = (ctx: Koa.Context, state: CosRequestState, decision: RateDecision) => void;

function write(ctx: Koa.Context, state: CosRequestState, rendered: RenderedError, err: unknown): void {
  state.errorCode = rendered.code;
  if (rendered.decision !== undefined) state.decision = rendered.decision;
  if (rendered.status >= 500) state.failure = err;
  const res = ctx.res;
  if (res.headersSent) return; // nothing can be said any more; the access log still has the status
  // Headers a route may have set before failing (Location, Cache-Control) do not belong to an error.
  res.removeHeader('Location');
  res.removeHeader('Cache-Control');
  ctx.status = rendered.status;
  for (const name in rendered.headers) res.setHeader(name, rendered.headers[name]!);
  res.setHeader('Content-Type', rendered.contentType);
  ctx.body = rendered.body;
}

export function createErrorResponder(errorsUrl: string): ErrorResponder {
  return (ctx, state, err) => {
    write(ctx, state, renderError(err, { requestId: state.requestId, instance: originalPath(ctx), errorsUrl }), err);
  };
}

export function createRateLimitResponder(errorsUrl: string): RateLimitResponder {
  // The last answer rendered: a flood of refused requests (one organisation's path, the same second)
  // asks for the same body again and again. Kept only while everything it was made from is the same.
  let last: { instance: string; limit: number; retryAfter: number; scope: RateDecision['limitScope']; rendered: RenderedError } | null = null;
  return (ctx, state, decision) => {
    const instance = originalPath(ctx);
    if (
      last === null ||
      last.instance !== instance ||
      last.limit !== decision.limit ||
      last.retryAfter !== decision.retryAfterSeconds ||
      last.scope !== decision.limitScope
    ) {
      const rc = { requestId: state.requestId, instance, errorsUrl };
      const rendered = renderRateLimited(decision, rateLimitExceededMessage(decision), rc);
      last = { instance, limit: decision.limit, retryAfter: decision.retryAfterSeconds, scope: decision.limitScope, rendered };
    }
    // The kept rendering as it is (no copy per request); the headers' numbers are this decision's.
    write(ctx, state, last.rendered, undefined);
    state.decision = decision;
  };
}
