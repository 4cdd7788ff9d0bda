/** Step 1 of the pipeline: the request's id (C-15), echoed in `X-Request-Id`, and its state. */
import type Koa from 'koa';
import { performance } from 'node:perf_hooks';
import { trackResponse } from '../http-refusals.js';
import { REQUEST_ID_HEADER, requestIdFor } from '../request-id.js';
import type { CosRequestState } from '../state.js';

export function beginRequest(ctx: Koa.Context): CosRequestState {
  const requestId = requestIdFor(ctx.req.headers['x-request-id']);
  const state: CosRequestState = {
    requestId,
    startedAt: performance.now(),
    route: undefined,
    principal: undefined,
    organisation: undefined,
    decision: undefined,
    errorCode: undefined,
    failure: undefined,
    aborted: false,
  };
  (ctx.state as { cos?: CosRequestState }).cos = state;
  // Straight to Node's response (Koa's ctx.set adds two calls and checks a fresh response never needs).
  ctx.res.setHeader(REQUEST_ID_HEADER, requestId);
  // A parse error of this connection while the request is in flight reaches it (client-error.ts).
  trackResponse(ctx.res);
  return state;
}
