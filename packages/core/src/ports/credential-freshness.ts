import type { KeyCounter } from './rate-counter.js';

/**
 * The freshness of cached credentials (C-36, C-57): one token per organisation in the
 * shared counter store (Redis), replaced by every change that can affect an authentication or the
 * organisation record, and read in the same call that counts the request.
 *
 * - `check` answers the organisation's current token, whether it is *settled* (no change of that
 *   organisation in progress, and the store was not just emptied: see below) and whether `tag`
 *   is still *fresh* (equal to the current token, and settled). It counts a hit of the
 *   organisation's rate-limit scope (the same counter RateCounter.hit counts as `org:<id>`)
 *   according to `count`: 'always', 'if-fresh' (only when fresh), or 'never'.
 * - `beginChange` registers a change in progress (a marker that expires after the
 *   implementation's change bound, well above the store's transaction bound) and replaces the
 *   token; `endChange` replaces the token again and removes the marker. Writers call them around
 *   the write (credential-fence.ts).
 * - A token is never reused (each is random), so a store that lost its data (FLUSHALL, a restart)
 *   cannot make an old tag match again. When an implementation finds its data gone, it answers
 *   "not settled" for the change bound, because the markers of changes in flight were lost too.
 *
 * Calls reject (or throw) when the backing store fails; the caller bounds them in time. An
 * implementation that carries the caller's deadline into the store (so that a call reaching it after
 * the caller stopped waiting counts nothing) rejects such a call with an error whose `late` property
 * is `true`: the call was late, the store is fine, and the caller treats it as its own timeout.
 */
/**
 * An organisation's credential freshness keys, named by the core (access/counter-keys.ts's
 * freshnessKeys): an implementation uses them as given, behind its own namespace at most.
 */
export interface FreshnessKeys {
  /** The organisation's current token. */
  readonly token: string;
  /** The organisation's changes in progress. */
  readonly changes: string;
  /** Set while the store holds the data of the organisation's slot; absent: it was lost (or never there). */
  readonly alive: string;
  /** Set for the change bound after the slot's data was found lost: nothing in it counts as settled meanwhile. */
  readonly unsettled: string;
}

export interface FreshnessReply {
  /**
   * The organisation scope's count including this check's hits (all `hits` of them, less those its
   * `keyCounters` refused), or null when nothing was counted.
   */
  readonly count: number | null;
  /** When the check counted with `keyCounters`: each key counter's count after it, in their order. */
  readonly keyCounts?: readonly number[];
  /** The organisation's current token. */
  readonly token: string;
  /** No change of the organisation in progress (and none can have been lost). */
  readonly settled: boolean;
  /** `tag` equals `token` and the organisation is settled: a cache filled under `tag` may be used. */
  readonly fresh: boolean;
}

export type FreshnessCount = 'always' | 'if-fresh' | 'never';

export interface FreshnessCheck {
  /** The organisation's freshness keys (counter-keys.ts's freshnessKeys). */
  readonly keys: FreshnessKeys;
  /** The token the caller's cache entry was filled under; null: none (never fresh). */
  readonly tag: string | null;
  readonly count: FreshnessCount;
  /** The organisation's rate-limit counter of the current window (counterKey), and its TTL (as RateCounter.hit). */
  readonly counterKey: string;
  readonly ttlMs: number;
  /**
   * How many requests this check stands for (a whole number ≥ 1, default 1): when it counts, it
   * counts that many hits in one atomic increment, and `count` includes them all.
   */
  readonly hits?: number;
  /**
   * Keys among the check's requests that have a limit of their own (C-292): when it counts, each is
   * counted first and only its hits under its limit count against the organisation, in the same
   * atomic step (RateCounter.hitGuarded). `hits` then includes theirs.
   */
  readonly keyCounters?: readonly KeyCounter[];
}

/**
 * Key names come from the core (counter-keys.ts: freshnessKeys, with the data-loss markers of the
 * organisation's hash slot, and counterKey); an implementation uses them as given, behind its own
 * namespace at most. Nothing is global: a Redis Cluster serves every call from one slot.
 */
export interface CredentialFreshness {
  check(request: FreshnessCheck): Promise<FreshnessReply>;
  beginChange(keys: FreshnessKeys, changeId: string): Promise<void>;
  endChange(keys: FreshnessKeys, changeId: string): Promise<void>;
}
