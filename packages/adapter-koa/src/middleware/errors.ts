/**
 * Writes the response for anything the dispatch threw, as errors.ts prescribes. The status code
 * comes from ERROR_TABLE only; this file only applies the rendering.
 */
import type Koa from 'koa';
import { renderError } from '../errors.js';
import { originalPath } from '../paths.js';
import type { CosRequestState } from '../state.js';

export type ErrorResponder = (ctx: Koa.Context, state: CosRequestState, err: unknown) => void;

export function createErrorResponder(errorsUrl: string): ErrorResponder {
  return (ctx, state, err) => {
    const rendered = renderError(err, { requestId: state.requestId, instance: originalPath(ctx), errorsUrl });
    state.errorCode = rendered.code;
    if (rendered.decision !== undefined) state.decision = rendered.decision;
    if (rendered.status >= 500) state.failure = err;
    // Headers a route may have set before failing (Location, Cache-Control) do not belong to an error.
    ctx.remove('Location');
    ctx.remove('Cache-Control');
    ctx.status = rendered.status;
    for (const name in rendered.headers) ctx.set(name, rendered.headers[name]!);
    ctx.type = rendered.contentType;
    ctx.body = rendered.body;
  };
}
