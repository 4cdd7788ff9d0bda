/**
 * The production hot path's credential cache (C-36, C-57): keys and their organisation
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
 * - A late call (no answer by the first poll phase after REDIS_TIMEOUT_MS: timeout.ts; or one the
 *   shared store refused for reaching it after its deadline, `lateCall`) costs only the lookup it
 *   covers: that request reads the store and its count fails open (C-54), and nothing else is
 *   dropped. Its entry stays, to be trusted again only when a later call answers it fresh; every
 *   other entry and observation stays too, since each is trusted only by a fresh answer of its own.
 * - The requests of a late or failed call that ask for the same key share one store read, but only a
 *   read that started after the request began (storeRead): a burst's late call, which covers every
 *   request of its organisation in that turn, costs one read per key instead of one per request.
 * - Any other failed call (the store unreachable, a command refused): the whole cache is dropped and
 *   not filled from anything observed before the failure (a generation number), so it is bypassed
 *   until a later reply; every request then reads the store and counting fails open as without the
 *   cache (C-54).
 * - An organisation over its limit (known locally) is checked with a call that counts nothing, so
 *   a revoked key still gets its 401 (C-33) and a valid one its 429 without a store read. A lookup
 *   that counts nothing ('confirm': that organisation, or an introspection) and misses makes such a
 *   call after its store read, so that the organisation's token is observed and its next miss fills.
 * - A lease (optional) gates the whole cache: while it is not held nothing is trusted or filled
 *   (every request reads the store and is counted as on a miss), and whenever it is lost or taken
 *   anew the cache starts empty. Writers that fence only when they know caches are in use (operator
 *   commands reading the instance registry) rely on it: an instance that cannot prove it is
 *   registered must not trust entries such a writer may have changed unseen.
 */
import type { RateWindow } from '../domain/rate-window.js';
import type { Credential } from '../ports/api-key-store.js';
import type { CredentialFreshness, FreshnessCount, FreshnessKeys, FreshnessReply } from '../ports/credential-freshness.js';
import type { CoreDeps } from '../deps.js';
import type { KeyCounter } from '../ports/rate-counter.js';
import { counterKey, freshnessKeys, introspectionCounterKey, keyCounterKey } from './counter-keys.js';
import { COUNTER_TTL_MS, scopeKey, type RateScope } from './rate-limit.js';
import type { Bounded } from './timeout.js';
import { TurnBatch } from './turn-batch.js';

/** Entries kept at most (oldest filled goes first), as the SQLite reader's READ_CACHE_MAX_ENTRIES. */
export const CREDENTIAL_CACHE_MAX_ENTRIES = 5_000;

interface Entry {
  readonly credential: Credential;
  /** The organisation's token the entry was filled under. */
  readonly tag: string;
  /** The key's own window last counted through this entry (C-292), as a call's key counters, kept for the rest of that window; null: none yet. */
  guards: readonly KeyCounter[] | null;
  /** The start of `guards`' window. */
  guardWindowMs: number;
}

/** An organisation's key names, built once: its freshness keys, and its counter of the window last used. */
interface OrganisationKeys {
  readonly keys: FreshnessKeys;
  windowStartMs: number;
  counterKey: string;
  /** Its introspection counter (C-271) of that window, built on first use; null until then. */
  introspectionKey: string | null;
}

/** A store read in flight: the lookups begun, the replies processed and the generation when it started. */
interface StoreRead {
  readonly credential: Promise<Credential | null>;
  readonly begun: number;
  readonly seq: number;
  readonly generation: number;
}

/** The last settled token seen for an organisation, and when (`seq`: replies processed before it). */
interface Observation {
  readonly token: string;
  readonly seq: number;
}

/**
 * What the caller (the admission) will do with a credential, so that the one round trip that
 * confirms a cached copy also counts the request when, and only when, it is to be counted:
 * 'count' (an active key whose organisation is not known to be over its limit), 'confirm' (an active
 * key whose organisation is over its limit: confirm the copy, count nothing, the answer is 429), or
 * 'refuse' (not a valid key: no call, nothing counted, the answer is 401).
 */
export type CountPlan = 'count' | 'confirm' | 'refuse';

/**
 * Which of the credential's organisation's counters a 'count' plan counts: its rate limit, or its
 * introspection ceiling (C-271; the same slot, so the same round trip).
 */
export type CountAs = Extract<RateScope['kind'], 'organisation' | 'introspection'>;

/** A credential lookup's answer: what the store answers for the digest, and the count made with it. */
export interface CredentialRead {
  /** The store's record for the digest, or a copy of it the shared counter store confirmed current. */
  readonly credential: Credential | null;
  /**
   * The organisation's hit counted in the same round trip (its bounded outcome) when the plan was
   * 'count'; null when nothing was counted (the caller counts, or refuses).
   */
  readonly counted: Bounded<number | null> | null;
  /** With `counted`, for a key with a limit of its own (C-292): its window's count in the same step (absent: not counted). */
  readonly keyCount?: number | undefined;
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
  /**
   * The per-turn batch the calls go through (C-200): the core's, shared with the rate limiter.
   * Default: one of the cache's own over `freshness`.
   */
  readonly batch?: TurnBatch;
  readonly maxEntries?: number;
  /** Default: always held. */
  readonly lease?: CredentialCacheLease;
}

/**
 * A read-through cache in front of ApiKeyStore.findCredential: `find` answers what the store would
 * answer. It decides nothing about the key: the caller's plan says whether the credential is valid
 * and is to be counted.
 */
export class CredentialCache {
  private readonly entries = new Map<string, Entry>();
  private readonly observed = new Map<string, Observation>();
  private readonly keys = new Map<string, OrganisationKeys>();
  /** Replies processed so far: an observation with seq <= the value at a read's start came before it. */
  private seq = 0;
  /** Lookups begun so far (find() calls): a read started when this was n came after lookups 1..n began. */
  private lookups = 0;
  /** Store reads in flight, by digest. */
  private readonly reading = new Map<string, StoreRead>();
  /** Bumped by every failed (not late) call and lease change (clear()): nothing observed before it may fill. */
  private generation = 0;
  private readonly maxEntries: number;
  private readonly batch: TurnBatch;
  private readonly lease: CredentialCacheLease | undefined;
  /** The lease's epoch last seen (undefined: never asked). */
  private leaseEpoch: number | null | undefined;

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'config'>,
    options: CredentialCacheOptions,
  ) {
    this.maxEntries = options.maxEntries ?? CREDENTIAL_CACHE_MAX_ENTRIES;
    this.batch = options.batch ?? new TurnBatch({ freshness: options.freshness, timeoutMs: deps.config.rateCounterTimeoutMs });
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
   * The credential of `digest` as the store would answer it now, and, when `planFor` answers
   * 'count' for it, the request counted against its organisation (its counter `countAs`) in `window`. A key that is no
   * longer valid ('refuse') stays so (revocation and expiry are final), so a cached copy of it is
   * answered without a call.
   */
  async find(digest: string, window: RateWindow, planFor: (credential: Credential) => CountPlan, countAs: CountAs = 'organisation'): Promise<CredentialRead> {
    const arrival = ++this.lookups;
    let fillUnder: { organisationId: string; token: string; generation: number } | null = null;
    let failure: Bounded<number | null> | null = null;

    const leased = this.leaseHeld();
    const entry = leased ? this.entries.get(digest) : undefined;
    if (entry !== undefined) {
      const plan = planFor(entry.credential);
      if (plan === 'refuse') return { credential: entry.credential, counted: null };
      const organisationId = entry.credential.key.organisationId;
      const generation = this.generation;
      const guards = plan === 'count' ? entryGuards(entry, window, countAs) : null;
      const outcome = await this.call(organisationId, entry.tag, plan === 'count' ? 'if-fresh' : 'never', window, countAs, guards);
      if (outcome.kind === 'value') {
        const reply = outcome.value;
        // A fresh answer is proof by itself (and has counted the hit as planned): trusted even if
        // another request's call failed meanwhile.
        if (reply.fresh) {
          if (plan !== 'count') return { credential: entry.credential, counted: null };
          const counted: Bounded<number | null> = { kind: 'value', value: reply.count };
          return guards === null ? { credential: entry.credential, counted } : { credential: entry.credential, counted, keyCount: reply.keyCounts?.[0] };
        }
        this.entries.delete(digest);
        if (reply.settled && generation === this.generation) fillUnder = { organisationId, token: reply.token, generation };
      } else {
        // Late: the entry is not served this time but stays (a failure has dropped it with the rest).
        failure = outcome;
      }
    }

    const read = this.storeRead(digest, arrival);
    const credential = await read.credential;
    if (credential === null) return { credential, counted: null };
    const plan = planFor(credential);
    const organisationId = credential.key.organisationId;
    if (read.joined) {
      // Another lookup's read, started after this one began: its answer is this request's, but
      // what this lookup observed says nothing of when that read started, so nothing is filled.
      fillUnder = null;
    } else if (fillUnder === null && failure === null && leased) {
      const seen = this.observed.get(organisationId);
      if (seen !== undefined && seen.seq <= read.seq) fillUnder = { organisationId, token: seen.token, generation: read.generation };
    }

    let counted: Bounded<number | null> | null = null;
    let keyCount: number | undefined;
    if (plan === 'count') {
      if (failure !== null) {
        counted = failure;
      } else {
        const outcome = await this.call(organisationId, null, 'always', window, countAs, keyGuards(credential, window, countAs));
        counted = outcome.kind === 'value' ? { kind: 'value', value: outcome.value.count } : outcome;
        if (outcome.kind === 'value') keyCount = outcome.value.keyCounts?.[0];
      }
    } else if (plan === 'confirm' && fillUnder === null && failure === null && leased) {
      // Nothing to count, but the organisation's token observed now lets its next miss fill: a
      // caller that never counts (an introspection, C-271) would otherwise never be cached.
      await this.call(organisationId, null, 'never', window);
    }
    // leaseHeld() before the generation check: a lease lost or renewed since the read started bumps the generation.
    if (plan !== 'refuse' && fillUnder !== null && this.leaseHeld() && fillUnder.organisationId === organisationId && fillUnder.generation === this.generation) {
      this.fill(digest, { credential, tag: fillUnder.token, guards: null, guardWindowMs: 0 });
    }
    return keyCount === undefined ? { credential, counted } : { credential, counted, keyCount };
  }

  /**
   * The store's answer for `digest` to the lookup numbered `arrival`: a read already in flight for
   * that digest when it started after this lookup began (C-204: so it reads whatever changed before
   * the request was sent), else a new one. The requests of a late or failed call, whose lookups all
   * began before their call was answered, thus share one read per key instead of one each.
   */
  private storeRead(digest: string, arrival: number): StoreRead & { readonly joined: boolean } {
    const inFlight = this.reading.get(digest);
    if (inFlight !== undefined && inFlight.begun >= arrival) return { ...inFlight, joined: true };
    const read: StoreRead = { credential: this.deps.stores.apiKeys.findCredential(digest), begun: this.lookups, seq: this.seq, generation: this.generation };
    this.reading.set(digest, read);
    const done = (): void => {
      if (this.reading.get(digest) === read) this.reading.delete(digest);
    };
    read.credential.then(done, done);
    return { ...read, joined: false };
  }

  /** Drops every entry and everything observed (a failed call, a lease change; also for tests and operators). */
  clear(): void {
    this.generation++;
    this.entries.clear();
    this.observed.clear();
  }

  /**
   * One freshness check, sent with the other checks of this turn (TurnBatch: one call per
   * organisation and counter, one bounded wait per call); records what it observed, or drops the
   * cache when it failed (not when it was late). `countAs`: the counter a counted hit goes to, the
   * organisation's or its introspection counter (C-271), both in the organisation's slot.
   */
  private async call(
    organisationId: string,
    tag: string | null,
    count: FreshnessCount,
    window: RateWindow,
    countAs: CountAs = 'organisation',
    guards: readonly KeyCounter[] | null = null,
  ): Promise<Bounded<FreshnessReply>> {
    const generation = this.generation;
    const names = this.keysOf(organisationId, window.startMs);
    const counter = countAs === 'organisation' ? names.counterKey : (names.introspectionKey ??= introspectionCounterKey(organisationId, window.startMs));
    const outcome = await this.batch.check(
      guards === null
        ? { keys: names.keys, tag, count, counterKey: counter, ttlMs: COUNTER_TTL_MS }
        : { keys: names.keys, tag, count, counterKey: counter, ttlMs: COUNTER_TTL_MS, keyCounters: guards },
    );
    if (outcome.kind !== 'value') {
      if (outcome.kind === 'error' && !lateCall(outcome.error)) this.clear();
      return outcome;
    }
    if (generation === this.generation) this.observe(organisationId, outcome.value);
    return outcome;
  }

  /**
   * An organisation's freshness keys and its counters of the window starting at `windowStartMs`,
   * kept with its entries: the hot path builds key strings once per organisation and window.
   */
  private keysOf(organisationId: string, windowStartMs: number): OrganisationKeys {
    let names = this.keys.get(organisationId);
    if (names === undefined) {
      names = { keys: freshnessKeys(organisationId), windowStartMs, counterKey: organisationCounter(organisationId, windowStartMs), introspectionKey: null };
      if (this.keys.size >= this.maxEntries) this.keys.clear();
      this.keys.set(organisationId, names);
    } else if (names.windowStartMs !== windowStartMs) {
      names.windowStartMs = windowStartMs;
      names.counterKey = organisationCounter(organisationId, windowStartMs);
      names.introspectionKey = null;
    }
    return names;
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

/** The key's own window to count with its organisation's (C-292): only for a key with a limit of its own, counted against its organisation's limit. */
function keyGuard(credential: Credential, window: RateWindow, countAs: CountAs): KeyCounter | null {
  const limit = credential.key.rateLimitPerMinute;
  if (limit == null || countAs !== 'organisation') return null;
  return { counterKey: keyCounterKey(credential.key.organisationId, credential.key.id, window.startMs), limit, hits: 1 };
}

/** keyGuard() as the key counters of a call (null: none). */
function keyGuards(credential: Credential, window: RateWindow, countAs: CountAs): readonly KeyCounter[] | null {
  const guard = keyGuard(credential, window, countAs);
  return guard === null ? null : [guard];
}

/**
 * keyGuards() of a cached credential: built once per window and entry, so that a request through a
 * limited key builds neither a counter name nor an array of its own (the entry's credential, hence
 * its limit, never changes; a changed key is a new entry).
 */
function entryGuards(entry: Entry, window: RateWindow, countAs: CountAs): readonly KeyCounter[] | null {
  if (entry.credential.key.rateLimitPerMinute == null || countAs !== 'organisation') return null;
  if (entry.guards === null || entry.guardWindowMs !== window.startMs) {
    entry.guards = keyGuards(entry.credential, window, countAs);
    entry.guardWindowMs = window.startMs;
  }
  return entry.guards;
}

function organisationCounter(organisationId: string, windowStartMs: number): string {
  return counterKey(scopeKey({ kind: 'organisation', organisationId }), windowStartMs);
}

/** A rejection saying the call reached the shared store after its deadline (CredentialFreshness.check). */
function lateCall(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { late?: unknown }).late === true;
}
