/**
 * Idempotency keys (Stripe's semantics) for every POST, PUT, PATCH and DELETE: the HTTP adapter
 * starts a request that carries `Idempotency-Key` here once the operation is about to run (after
 * authorisation, with its body read), and finishes it with the answer it sent.
 *
 * - The first answer is kept for 24 h per (organisation of the calling key, idempotency key), in
 *   the shared store: a repeat on any instance by the same key with the same method, path and body
 *   gets the same status and body (the adapter adds `Idempotent-Replayed: true`).
 * - The answer belongs to the calling key (C-131): the fingerprint covers the key's id, so another
 *   key of the organisation sending the same request under the same value is a different request
 *   (422) and never sees the answer. A replay reaches only a caller that passed authorisation for
 *   this very request (the adapter starts after it, C-130) and that made the first request.
 * - The same key with a different request is 422 IDEMPOTENCY_KEY_REUSED; a repeat while the first
 *   request still runs is 409 IDEMPOTENCY_KEY_IN_USE. A 5xx answer is not kept (the claim is
 *   released, so a retry runs again), nor a 403 (the operation refused the caller: it did not pass
 *   authorisation, so nothing is kept for it, C-130), nor a request that never answered: its claim
 *   lapses after IDEMPOTENCY_LOCK_MS and a retry then runs it.
 * - A raw API key is never kept: the answer of an issue or roll is kept without `key` and with
 *   `"key_replay_unavailable": true`, since a raw key is shown once and only its digest is stored
 *   (C-22, C-31). A replay answers the same record, so a client learns the key exists and its id.
 *   A webhook signing secret likewise (`secret`, `"secret_replay_unavailable": true`).
 */
import { createHash } from 'node:crypto';
import { IdempotencyKeyInUseError, IdempotencyKeyReusedError } from '../domain/errors.js';
import type { KeyPrincipal } from '../domain/principal.js';
import type { IdempotentResponse } from '../ports/idempotency-store.js';
import { checkIdempotencyKey } from '../validation/idempotency.js';
import { unwrap } from '../validation/issues.js';
import type { CoreDeps } from '../deps.js';

/** How long an answer is kept. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * How long a running request holds its key: longer than any request may run (the server's request
 * timeout, the store's and Redis's budgets), so a live request is never run twice; a request whose
 * instance died lets a retry through after it.
 */
export const IDEMPOTENCY_LOCK_MS = 2 * 60 * 1000;

/** The request as the fingerprint sees it. */
export interface IdempotentRequest {
  readonly method: string;
  /** The path (and query string, if any) relative to the API's mount point. */
  readonly path: string;
  /** The parsed JSON body, or undefined for a request without one. */
  readonly body: unknown;
}

/** A running request's hold on its key. */
export interface IdempotencyTicket {
  readonly organisationId: string;
  readonly key: string;
  readonly token: string;
}

export type IdempotencyStart =
  | { readonly kind: 'started'; readonly ticket: IdempotencyTicket }
  | { readonly kind: 'replay'; readonly response: IdempotentResponse };

/**
 * The answer to keep, and the field of its body that holds a secret shown once, if any: `key` (an
 * issued or rolled key) or `secret` (a webhook signing secret); it is never kept.
 */
export interface FinishedResponse extends IdempotentResponse {
  readonly withheld?: 'key' | 'secret' | undefined;
}

/** A value still to write, or text to emit as it is (a bracket, a comma, an object key). */
type Pending = { readonly value: unknown } | string;

/**
 * JSON with object keys sorted, so the same body written in another key order is the same request.
 * Written with an explicit stack, not by recursion: however deeply a value nests, this never
 * exhausts the call stack (the HTTP adapter refuses bodies nested deeper than it allows first).
 * A value JSON cannot write (undefined, a function) is written as `null`.
 */
function canonicalJson(root: unknown): string {
  const out: string[] = [];
  const pending: Pending[] = [{ value: root }];
  while (pending.length > 0) {
    const next = pending.pop()!;
    if (typeof next === 'string') {
      out.push(next);
      continue;
    }
    const value = next.value;
    if (Array.isArray(value)) {
      // Pushed in reverse, so that they are popped in order.
      pending.push(']');
      for (let i = value.length - 1; i >= 0; i--) {
        pending.push({ value: value[i] });
        if (i > 0) pending.push(',');
      }
      out.push('[');
    } else if (value !== null && typeof value === 'object') {
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      pending.push('}');
      for (let i = keys.length - 1; i >= 0; i--) {
        pending.push({ value: record[keys[i]!] });
        pending.push(`${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:`);
      }
      out.push('{');
    } else {
      out.push(JSON.stringify(value) ?? 'null');
    }
  }
  return out.join('');
}

/**
 * The digest a repeat must match: the calling key's id (C-131), the method, the path (with query)
 * and the body as canonical JSON.
 */
export function requestFingerprint(callerKeyId: string, request: IdempotentRequest): string {
  const body = request.body === undefined ? '' : canonicalJson(request.body);
  return createHash('sha256').update(`${callerKeyId}\n${request.method.toUpperCase()}\n${request.path}\n${body}`).digest('hex');
}

/**
 * The body kept for an answer that carried a secret shown once: the same record without it, and
 * `key_replay_unavailable` / `secret_replay_unavailable` true.
 */
function withoutSecret(body: string, field: 'key' | 'secret'): string {
  const record = JSON.parse(body) as Record<string, unknown>;
  if (!(field in record)) return body;
  const { [field]: _shownOnce, ...rest } = record;
  return JSON.stringify({ ...rest, [`${field}_replay_unavailable`]: true });
}

export class Idempotency {
  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'clock' | 'random'>) {}

  /**
   * Starts `request` under the caller's `Idempotency-Key` header value: 400 when it is not 1 to 255
   * printable ASCII characters, 422 / 409 as above, a replay of the kept answer, or a ticket.
   */
  async begin(principal: KeyPrincipal, header: unknown, request: IdempotentRequest): Promise<IdempotencyStart> {
    const key = unwrap(checkIdempotencyKey(header));
    const fingerprint = requestFingerprint(principal.keyId, request);
    const now = this.deps.clock.now();
    const token = this.deps.random.uuid();
    const organisationId = principal.organisationId;
    const claim = await this.deps.stores.idempotency.claim({
      organisationId,
      key,
      fingerprint,
      token,
      now,
      expiresAt: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
      lockedUntil: new Date(now.getTime() + IDEMPOTENCY_LOCK_MS),
    });
    if (claim.kind === 'claimed') return { kind: 'started', ticket: { organisationId, key, token } };
    const { record } = claim;
    if (record.fingerprint !== fingerprint) throw new IdempotencyKeyReusedError();
    if (record.response === null) throw new IdempotencyKeyInUseError();
    return { kind: 'replay', response: record.response };
  }

  /**
   * Keeps the answer. A 5xx releases the key instead, so a retry runs again; so does a 403, the
   * operation's refusal of the caller (C-130): only a request that passed authorisation keeps one.
   */
  async finish(ticket: IdempotencyTicket, response: FinishedResponse): Promise<void> {
    const { organisationId, key, token } = ticket;
    if (response.status >= 500 || response.status === 403) {
      await this.deps.stores.idempotency.release(organisationId, key, token);
      return;
    }
    const body = response.withheld !== undefined && response.status < 300 ? withoutSecret(response.body, response.withheld) : response.body;
    await this.deps.stores.idempotency.complete(organisationId, key, token, { status: response.status, headers: response.headers, body });
  }

  /** Releases the key of a request that ended without an answer to keep (the client hung up). */
  async abandon(ticket: IdempotencyTicket): Promise<void> {
    await this.deps.stores.idempotency.release(ticket.organisationId, ticket.key, ticket.token);
  }

  /** Deletes every expired answer; `serve` calls it periodically. */
  async sweep(): Promise<number> {
    return this.deps.stores.idempotency.sweep(this.deps.clock.now());
  }
}
