/**
 * Per-request state of the v1 surface, kept at `ctx.state.cos` (a host app mounting the surface can
 * read `requestId` and `principal` from it after the surface has run).
 */
import type { IdempotencyTicket, KeyPrincipal, LookAhead, Organisation, RateDecision } from '@cos/core';
import type { HttpErrorCode } from './errors.js';

export interface CosRequestState {
  readonly requestId: string;
  /** performance.now() when the request entered the surface. */
  readonly startedAt: number;
  /** Route template (e.g. `/v1/organisations/:org_id`) once matched; logged instead of the raw path. */
  route: string | undefined;
  /** The authenticated key, once authentication has passed. */
  principal: KeyPrincipal | undefined;
  /**
   * The key's organisation as authentication read it in this request (`Admitted.organisation`),
   * handed to the core's `Organisations.get` so that a GET of the caller's own organisation is not
   * read twice. Nothing is kept beyond the request.
   */
  organisation: Organisation | undefined;
  /** The rate decision whose numbers go into the X-RateLimit-* headers (C-52). */
  decision: RateDecision | undefined;
  /** Code of the error answered with, if any. */
  errorCode: HttpErrorCode | undefined;
  /** The thrown value behind a 5xx, for the log line (never sent to the client). */
  failure: unknown;
  /** The client hung up before its request was complete: nobody got an answer. */
  aborted: boolean;
  /** The claim of this request's Idempotency-Key, once started; its answer is kept at the end. */
  idempotency?: IdempotencyTicket | undefined;
  /** POST /v1/introspect: its token's lookup, begun with the caller's admission (C-274). */
  lookAhead?: LookAhead | undefined;
  /** POST /v1/introspect: its body as read before admission (C-274), the value (or its promise) or what reading it threw, for the route to take instead of reading it. */
  introspectionBody?: { readonly value: unknown } | { readonly thrown: unknown } | undefined;
  /** The answer carries a secret shown once (`key` of an issue or roll, a webhook `secret`): it is kept without it. */
  withheld?: 'key' | 'secret' | undefined;
}
