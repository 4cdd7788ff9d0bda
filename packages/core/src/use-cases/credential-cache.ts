/**
 * The production hot path's credential cache (issue 14, C-36, C-57): keys and their organisation
 * records kept in memory, trusted only when the shared counter store (Redis) confirms their
 * freshness in the same call that counts the request, so an authenticated request costs one Redis
 * round trip and no store read in the common case. One owner: this class holds every entry; the
 * write side is credential-fence.ts.
 *
 * The rule (per organisation, CredentialFreshness):
 * - **Trust** an entry only when the call answers `fresh`: the token it was filled under is still
 *   the organisation's current token, and no change of the organisation is in progress. Key expiry
 *   needs no token: it is checked against the clock on every use.
 * - **Fill** an entry only under a token that was observed *settled* in a reply received *before*
 *   the store read started. A reader that read the row before a change committed thus holds a
 *   token the change's begin (which precedes its write) replaced, so the entry is never trusted;
 *   and while a change is in progress nobody fills (not settled), so the reader that reads between
 *   the writer's two calls fills nothing.
 * - A miss, a stale entry or an unsettled organisation: the entry is dropped, the store decides
 *   (unknown, revoked or expired → 401, counted by the caller in the source scope, never 429), and
 *   the request is counted once: the freshness call counts only when it answers fresh, otherwise the
 *   organisation's hit is made after the store read (a second round trip, misses only).
 * - Any failed or late call: the whole cache is dropped and not filled from anything observed
 *   before the failure (a generation number), so it is bypassed until a later reply; every request
 *   then reads the store and counting fails open as without the cache (C-54).
 * - An organisation over its limit (known locally) is checked with a call that counts nothing, so
 *   a revoked key still gets its 401 (C-33) and a valid one its 429 without a store read.
 * - A lease (optional) gates the whole cache: while it is not held nothing is trusted or filled
 *   (every request reads the store and is counted as on a miss), and whenever it is lost or taken
 *   anew the cache starts empty. Writers that fence only when they know caches are in use (operator
 *   commands reading the instance registry) rely on it: an instance that cannot prove it is
 *   registered must not trust entries such a writer may have changed unseen.
 */
import { digestsEqual, keyStatus } from '../domain/api-key.js';
import { windowAt, type RateDecision, type RateWindow } from '../domain/rate-window.js';
import type { Credential } from '../ports/api-key-store.js';
import type { CredentialFreshness, FreshnessCount, FreshnessReply } from '../ports/credential-freshness.js';
import type { CoreDeps } from './deps.js';
import { COUNTER_TTL_MS, type RateLimiter, type RateScope } from './rate-limit.js';
import { BoundedCalls, type Bounded } from './timeout.js';

/** Entries kept at most (oldest filled goes first), as the SQLite reader's READ_CACHE_MAX_ENTRIES. */
export const CREDENTIAL_CACHE_MAX_ENTRIES = 5_000;

interface Entry {
  readonly credential: Credential;
  /** The organisation's token the entry was filled under. */
  readonly tag: string;
}

/** The last settled token seen for an organisation, and when (`seq`: replies processed before it). */
interface Observation {
  readonly token: string;
  readonly seq: number;
}

/** What admit() found: the valid credential and the organisation scope's decision, or null (401). */
export interface Admission {
  readonly credential: Credential;
  readonly decision: RateDecision;
}

/**
 * When the cache may be used: `epoch()` is null while it may not, otherwise a number that changes
 * every time the lease is taken anew (the cache is emptied then, since changes may have been made
 * unfenced while it was not held). Called on every request: it must be cheap and never block.
 */
export interface CredentialCacheLease {
  epoch(): number | null;
}

export interface CredentialCacheOptions {
  readonly freshness: CredentialFreshness;
  readonly limiter: RateLimiter;
  readonly maxEntries?: number;
  /** Default: always held. */
  readonly lease?: CredentialCacheLease;
}

export class CredentialCache {
  private readonly entries = new Map<string, Entry>();
  private readonly observed = new Map<string, Observation>();
  /** Replies processed so far: an observation with seq <= the value at a read's start came before it. */
  private seq = 0;
  /** Bumped by every failed call: nothing observed before it may fill. */
  private generation = 0;
  private readonly freshness: CredentialFreshness;
  private readonly limiter: RateLimiter;
  private readonly maxEntries: number;
  private readonly bounded: BoundedCalls;
  private readonly lease: CredentialCacheLease | undefined;
  /** The lease's epoch last seen (undefined: never asked). */
  private leaseEpoch: number | null | undefined;

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'clock' | 'config'>,
    options: CredentialCacheOptions,
  ) {
    this.freshness = options.freshness;
    this.limiter = options.limiter;
    this.maxEntries = options.maxEntries ?? CREDENTIAL_CACHE_MAX_ENTRIES;
    this.bounded = new BoundedCalls(deps.config.rateCounterTimeoutMs);
    this.lease = options.lease;
  }

  /** Whether the lease is held now; any change of its epoch (lost, or taken anew) empties the cache first. */
  private leaseHeld(): boolean {
    if (this.lease === undefined) return true;
    const epoch = this.lease.epoch();
    if (epoch !== this.leaseEpoch) {
      this.leaseEpoch = epoch;
      this.clear();
    }
    return epoch !== null;
  }

  /** Entries held now (tests, metrics). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The credential of `digest` if it authenticates now, with the request counted against its
   * organisation (the decision); otherwise why not (nothing counted).
   */
  async admit(digest: string): Promise<Admission | 'unknown_key' | 'revoked' | 'expired'> {
    const now = this.deps.clock.now();
    const window = windowAt(now.getTime());
    let fillUnder: { organisationId: string; token: string; generation: number } | null = null;
    let failure: Bounded<number | null> | null = null;

    const leased = this.leaseHeld();
    const entry = leased ? this.entries.get(digest) : undefined;
    if (entry !== undefined) {
      const { key } = entry.credential;
      if (keyStatus(key, now) !== 'active') {
        this.entries.delete(digest);
      } else {
        const scope = organisationScope(key.organisationId);
        const blocked = this.limiter.isBlocked(scope, window.startMs);
        const generation = this.generation;
        const outcome = await this.call(key.organisationId, entry.tag, blocked ? 'never' : 'if-fresh', window);
        if (outcome.kind === 'value') {
          const reply = outcome.value;
          // A fresh answer is proof by itself (and has counted the hit): trusted even if another
          // request's call failed meanwhile.
          if (reply.fresh) {
            const decision = blocked ? await this.limiter.check(scope) : this.limiter.conclude(scope, window, { kind: 'value', value: reply.count });
            return { credential: entry.credential, decision };
          }
          this.entries.delete(digest);
          if (reply.settled && generation === this.generation) fillUnder = { organisationId: key.organisationId, token: reply.token, generation };
        } else {
          failure = outcome;
        }
      }
    }

    const readStartSeq = this.seq;
    const generationAtRead = this.generation;
    const credential = await this.deps.stores.apiKeys.findCredential(digest);
    if (credential === null || !digestsEqual(credential.key.digest, digest)) return 'unknown_key';
    const status = keyStatus(credential.key, this.deps.clock.now());
    if (status !== 'active') return status;
    const organisationId = credential.key.organisationId;
    const scope = organisationScope(organisationId);
    if (fillUnder === null && failure === null && leased) {
      const seen = this.observed.get(organisationId);
      if (seen !== undefined && seen.seq <= readStartSeq) fillUnder = { organisationId, token: seen.token, generation: generationAtRead };
    }

    let decision: RateDecision;
    if (failure !== null) {
      decision = this.limiter.conclude(scope, window, failure);
    } else if (this.limiter.isBlocked(scope, window.startMs)) {
      decision = await this.limiter.check(scope);
    } else {
      const outcome = await this.call(organisationId, null, 'always', window);
      decision = this.limiter.conclude(scope, window, outcome.kind === 'value' ? { kind: 'value', value: outcome.value.count } : outcome);
    }
    // leaseHeld() first: a lease lost or renewed since the read started bumps the generation.
    if (fillUnder !== null && this.leaseHeld() && fillUnder.organisationId === organisationId && fillUnder.generation === this.generation) {
      this.fill(digest, { credential, tag: fillUnder.token });
    }
    return { credential, decision };
  }

  /** Drops every entry and everything observed (a failed call; also for tests and operators). */
  clear(): void {
    this.generation++;
    this.entries.clear();
    this.observed.clear();
  }

  /** One bounded freshness call; records what it observed, or drops the cache when it failed. */
  private async call(organisationId: string, tag: string | null, count: FreshnessCount, window: RateWindow): Promise<Bounded<FreshnessReply>> {
    const generation = this.generation;
    const outcome = await this.bounded.run(() =>
      this.freshness.check({ organisationId, tag, count, windowStartMs: window.startMs, ttlMs: COUNTER_TTL_MS }),
    );
    if (outcome.kind !== 'value') {
      this.clear();
      return outcome;
    }
    if (generation === this.generation) this.observe(organisationId, outcome.value);
    return outcome;
  }

  private observe(organisationId: string, reply: FreshnessReply): void {
    this.seq++;
    if (!reply.settled) {
      this.observed.delete(organisationId);
      return;
    }
    this.observed.delete(organisationId); // re-inserted last: the map's order is the eviction order
    this.observed.set(organisationId, { token: reply.token, seq: this.seq });
    if (this.observed.size > this.maxEntries) this.observed.delete(this.observed.keys().next().value as string);
  }

  private fill(digest: string, entry: Entry): void {
    this.entries.delete(digest);
    this.entries.set(digest, entry);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }
}

function organisationScope(organisationId: string): RateScope {
  return { kind: 'organisation', organisationId };
}
