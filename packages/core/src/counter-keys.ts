/**
 * The names of the shared counter store's keys (C-50, C-55; the credential freshness of C-36,
 * C-57). The core names every key; an implementation of RateCounter or CredentialFreshness uses the
 * names it is given and only puts its own namespace in front (limiter-redis: `<keyPrefix>:`), so
 * every instance, whatever its version of an adapter, counts and fences under the same names.
 *
 * - a rate-limit counter: `{<scope>}:<windowStartMs>` with the scope `org:<id>`, `unauth`,
 *   `src:<address>` or `scan` (RateLimiter's scopeKey);
 * - an organisation's freshness token and changes in progress: `{org:<id>}:cc:token`,
 *   `{org:<id>}:cc:changes` (next to its counters: one hash tag, one Redis Cluster slot);
 * - the global markers `cc:alive` and `cc:unsettled` (whether the store lost its data).
 */

/** The counter of `scope` (a scope key, e.g. `org:<id>`) in the window starting at `windowStartMs`. */
export function counterKey(scope: string, windowStartMs: number): string {
  return `{${scope}}:${windowStartMs}`;
}

/** An organisation's credential freshness keys. */
export interface FreshnessKeys {
  /** The organisation's current token. */
  readonly token: string;
  /** The organisation's changes in progress. */
  readonly changes: string;
}

/** Set while the store holds its data; absent: it was lost (or never there). */
export const FRESHNESS_ALIVE_KEY = 'cc:alive';
/** Set for the change bound after the data was found lost: nothing counts as settled meanwhile. */
export const FRESHNESS_UNSETTLED_KEY = 'cc:unsettled';

/** The freshness keys of `organisationId`. */
export function freshnessKeys(organisationId: string): FreshnessKeys {
  return { token: `{org:${organisationId}}:cc:token`, changes: `{org:${organisationId}}:cc:changes` };
}
