/** What every route handler needs: the core, and the few ways a successful response is written. */
import type Koa from 'koa';
import type { Core } from '@cos/core';
import { readJsonBody } from '../body.js';
import { JSON_CONTENT_TYPE } from '../errors.js';
import { originalPath } from '../paths.js';

export interface RouteKit {
  readonly core: Core;
  /** A JSON response. */
  json(ctx: Koa.Context, status: number, body: unknown): void;
  /** C-2: 201 Created with `Location` = the request path plus `/{id}` (so it is right under any mount prefix). */
  created(ctx: Koa.Context, id: string, body: unknown): void;
  /** 204 with an empty body. */
  noContent(ctx: Koa.Context): void;
  /** The request's JSON object body (C-10); only routes that take a body call it. */
  body(ctx: Koa.Context): Promise<Record<string, unknown>>;
}

export function createRouteKit(core: Core, bodyLimitBytes: number): RouteKit {
  const json = (ctx: Koa.Context, status: number, body: unknown): void => {
    ctx.status = status;
    ctx.type = JSON_CONTENT_TYPE;
    ctx.body = JSON.stringify(body);
  };
  return {
    core,
    json,
    created(ctx, id, body) {
      ctx.set('Location', `${originalPath(ctx)}/${encodeURIComponent(id)}`);
      json(ctx, 201, body);
    },
    noContent(ctx) {
      ctx.status = 204;
      ctx.body = null;
    },
    body: (ctx) => readJsonBody(ctx.req, bodyLimitBytes),
  };
}
