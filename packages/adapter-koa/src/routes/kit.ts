/** What every route handler needs: the core, and the few ways a successful response is written. */
import type Koa from 'koa';
import { authorise, type Core, type KeyPrincipal, type Operation, type OrganisationArgument } from '@cos/core';
import { readJsonBody, readOptionalJsonBody } from '../body.js';
import type { IdempotencySteps } from '../middleware/idempotency.js';
import { JSON_CONTENT_TYPE } from '../errors.js';
import { originalPath } from '../paths.js';

export interface RouteKit {
  readonly core: Core;
  /** Largest accepted request body in bytes (C-10), for a route that reads its body itself. */
  readonly bodyLimitBytes: number;
  /** A JSON response. */
  json(ctx: Koa.Context, status: number, body: unknown): void;
  /** A JSON response whose body is already serialised. */
  jsonText(ctx: Koa.Context, status: number, text: string): void;
  /** C-2: 201 Created with `Location` = the request path plus `/{id}` (so it is right under any mount prefix). */
  created(ctx: Koa.Context, id: string, body: unknown): void;
  /** 201 Created with `Location` = `collectionPath` (as the client addressed it) plus `/{id}`. */
  createdIn(ctx: Koa.Context, collectionPath: string, id: string, body: unknown): void;
  /** 204 with an empty body. */
  noContent(ctx: Koa.Context): void;
  /**
   * The request's JSON object body (C-10), read only once the core's `authorise` has let
   * `principal` perform `operation` (C-33: 403 comes before 415, 413 and 400). Only routes that
   * take a body call it; the use case they call next authorises again by the same rule.
   */
  body<O extends Operation>(
    ctx: Koa.Context,
    principal: KeyPrincipal,
    operation: O,
    ...organisation: OrganisationArgument<O>
  ): Promise<Record<string, unknown>>;
  /** `body` for a route whose body is optional: none at all (no Content-Type either) is `{}`. */
  optionalBody<O extends Operation>(
    ctx: Koa.Context,
    principal: KeyPrincipal,
    operation: O,
    ...organisation: OrganisationArgument<O>
  ): Promise<Record<string, unknown>>;
  /**
   * For a route that takes no body (DELETE): `authorise` is the core's check of the operation (it
   * throws the 403); once it has passed, the request starts under its Idempotency-Key, as `body`
   * does once the body is read. The use case the route calls next authorises again by the same rule.
   */
  withoutBody(ctx: Koa.Context, principal: KeyPrincipal, authorise: () => void): Promise<void>;
}

/**
 * `idempotency`: a request starts under its Idempotency-Key only once the caller may perform the
 * operation (and its body, if it takes one, is read and parsed), so a replay or a 422/409 comes
 * after 401/429/403/415/413/400 as every other answer does, and a refused caller never claims a
 * key nor gets an answer kept under it (C-130).
 */
export function createRouteKit(core: Core, bodyLimitBytes: number, idempotency?: IdempotencySteps): RouteKit {
  const jsonText = (ctx: Koa.Context, status: number, text: string): void => {
    ctx.status = status;
    // A constant type: no need for Koa's mime lookup behind ctx.type.
    ctx.res.setHeader('Content-Type', JSON_CONTENT_TYPE);
    ctx.body = text;
  };
  const json = (ctx: Koa.Context, status: number, body: unknown): void => jsonText(ctx, status, JSON.stringify(body));
  const createdIn = (ctx: Koa.Context, collectionPath: string, id: string, body: unknown): void => {
    ctx.set('Location', `${collectionPath}/${encodeURIComponent(id)}`);
    json(ctx, 201, body);
  };
  return {
    core,
    bodyLimitBytes,
    json,
    jsonText,
    created(ctx, id, body) {
      createdIn(ctx, originalPath(ctx), id, body);
    },
    createdIn,
    noContent(ctx) {
      ctx.status = 204;
      ctx.body = null;
    },
    async body(ctx, principal, operation, ...organisation) {
      authorise(principal, operation, ...organisation);
      const body = await readJsonBody(ctx.req, bodyLimitBytes);
      await idempotency?.start(ctx, principal, body);
      return body;
    },
    async optionalBody(ctx, principal, operation, ...organisation) {
      authorise(principal, operation, ...organisation);
      const body = await readOptionalJsonBody(ctx.req, bodyLimitBytes);
      await idempotency?.start(ctx, principal, body);
      return body;
    },
    async withoutBody(ctx, principal, authorise) {
      authorise();
      await idempotency?.start(ctx, principal, undefined);
    },
  };
}
