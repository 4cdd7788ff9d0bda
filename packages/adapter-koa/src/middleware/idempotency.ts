/**
 * Idempotency keys over HTTP (the core's Idempotency use case decides; this file carries the
 * header in and the answer out). A POST, PUT, PATCH or DELETE with `Idempotency-Key` starts when
 * its operation is about to run, through the route kit: after authentication, the rate limit,
 * authorisation and, for a route with a body, the body (so the order 401 -> 429 -> 403 ->
 * 415/413/400 stays, and a caller refused on the way neither claims the key nor is replayed), then:
 * - a repeat of a kept answer is answered from it, with `Idempotent-Replayed: true`, and the
 *   route does not run;
 * - otherwise the route runs and its answer (status, body, Content-Type, Location, Cache-Control)
 *   is kept before it is sent, so a retry that follows the answer finds it on any instance; a 5xx,
 *   or a client that hung up, releases the key instead.
 */
import type Koa from 'koa';
import type { Core, IdempotentResponse, KeyPrincipal, Logger } from '@cos/core';
import { redact } from '../redact.js';
import type { CosRequestState } from '../state.js';

const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** The methods an Idempotency-Key applies to. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** The response headers a replay repeats (besides the ones every response gets anew). */
const KEPT_HEADERS = ['content-type', 'location', 'cache-control'] as const;

/** Thrown to end the dispatch with a kept answer: the pipeline writes it instead of an error. */
export class IdempotentReplay extends Error {
  constructor(readonly response: IdempotentResponse) {
    super('idempotent replay');
    this.name = 'IdempotentReplay';
  }
}

export interface IdempotencySteps {
  /** Starts the request under its Idempotency-Key, if it has one (throws IdempotentReplay, 400, 409, 422). */
  start(ctx: Koa.Context, principal: KeyPrincipal, body: unknown): Promise<void>;
  /** Writes a kept answer (after IdempotentReplay). */
  replay(ctx: Koa.Context, response: IdempotentResponse): void;
  /** Keeps (or releases) the answer of a started request; never changes the answer. */
  finish(ctx: Koa.Context, state: CosRequestState): Promise<void>;
}

function stateOf(ctx: Koa.Context): CosRequestState {
  return (ctx.state as { cos: CosRequestState }).cos;
}

/** Marks the answer of this request as one that carries a raw key (issue, roll): it is kept without it. */
export function markRawKeyAnswer(ctx: Koa.Context): void {
  stateOf(ctx).withheld = 'key';
}

/** Marks the answer of this request as one that carries a webhook secret: it is kept without it. */
export function markSecretAnswer(ctx: Koa.Context): void {
  stateOf(ctx).withheld = 'secret';
}

export function createIdempotencySteps(core: Core, logger: Logger): IdempotencySteps {
  return {
    async start(ctx, principal, body) {
      if (!IDEMPOTENT_METHODS.has(ctx.method)) return;
      const header = ctx.req.headers[IDEMPOTENCY_KEY_HEADER];
      if (header === undefined) return;
      const path = ctx.querystring.length > 0 ? `${ctx.path}?${ctx.querystring}` : ctx.path;
      const started = await core.idempotency.begin(principal, header, { method: ctx.method, path, body });
      if (started.kind === 'replay') throw new IdempotentReplay(started.response);
      stateOf(ctx).idempotency = started.ticket;
    },
    replay(ctx, response) {
      const res = ctx.res;
      ctx.status = response.status;
      for (const name of KEPT_HEADERS) {
        const value = response.headers[name];
        if (value !== undefined) res.setHeader(name, value);
      }
      res.setHeader(IDEMPOTENT_REPLAYED_HEADER, 'true');
      ctx.body = response.status === 204 ? null : response.body;
    },
    async finish(ctx, state) {
      const ticket = state.idempotency;
      if (ticket === undefined) return;
      state.idempotency = undefined;
      try {
        if (state.aborted) {
          await core.idempotency.abandon(ticket);
          return;
        }
        const headers: Record<string, string> = {};
        for (const name of KEPT_HEADERS) {
          const value = ctx.res.getHeader(name);
          if (value !== undefined) headers[name] = String(value);
        }
        const body = typeof ctx.body === 'string' ? ctx.body : '';
        await core.idempotency.finish(ticket, { status: ctx.status, headers, body, withheld: state.withheld });
      } catch (err) {
        // The answer stands; the key stays claimed until its lock ends, then a retry runs again.
        const e = err instanceof Error ? err : new Error(String(err));
        logger.warn({ requestId: state.requestId, err: { type: e.name, message: redact(e.message) } }, 'idempotency key answer not kept');
      }
    },
  };
}
