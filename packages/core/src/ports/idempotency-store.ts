/**
 * Idempotency keys: the first answer to a request made with an `Idempotency-Key`, kept per
 * (organisation of the calling key, idempotency key) until it expires, so that a retry gets the
 * same answer instead of doing the work again. Kept in the shared store, so every instance sees
 * every claim.
 */

/** The answer kept for replay. Never a raw API key (the core removes it before it is kept). */
export interface IdempotentResponse {
  readonly status: number;
  /** The response headers to replay (lower-case names: content-type, location, cache-control). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface IdempotencyRecord {
  readonly organisationId: string;
  readonly key: string;
  /** Digest of the request (calling key, method, path, body): a repeat must match it. */
  readonly fingerprint: string;
  readonly createdAt: Date;
  /** After this instant the record no longer exists for claims, and a sweep deletes it. */
  readonly expiresAt: Date;
  /** While `response` is null: the request is running until then (after it, it is taken as abandoned). */
  readonly lockedUntil: Date;
  /** Null while the first request is still running. */
  readonly response: IdempotentResponse | null;
}

/** A new claim: the record to write, and the token that finishes or releases it. */
export interface IdempotencyClaimRequest {
  readonly organisationId: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly token: string;
  readonly now: Date;
  readonly expiresAt: Date;
  readonly lockedUntil: Date;
}

export type IdempotencyClaim = { readonly kind: 'claimed' } | { readonly kind: 'existing'; readonly record: IdempotencyRecord };

export interface IdempotencyStore {
  /**
   * Claims (organisationId, key) atomically: an expired record, or a running one whose lock ended
   * before `now`, is replaced; any other record is answered as `existing` and nothing is written.
   * Of concurrent claims of one free key exactly one is `claimed`.
   */
  claim(request: IdempotencyClaimRequest): Promise<IdempotencyClaim>;
  /** Keeps the answer of the claim `token` holds; false when the claim is no longer held. */
  complete(organisationId: string, key: string, token: string, response: IdempotentResponse): Promise<boolean>;
  /** Removes the running claim `token` holds (the request failed and is not kept); false when not held. */
  release(organisationId: string, key: string, token: string): Promise<boolean>;
  /** Deletes every record expired at `now`; answers how many. */
  sweep(now: Date): Promise<number>;
}
