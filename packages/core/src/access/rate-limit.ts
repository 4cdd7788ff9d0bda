import { RateLimitedError } from '../domain/errors.js';
import { noopMetrics } from '../defaults.js';
import type { Metrics } from '../ports/metrics.js';
import { WINDOW_MS, decide, failOpen, windowAt, type RateDecision, type RateWindow } from '../domain/rate-window.js';
import type { GuardedCount } from '../ports/rate-counter.js';
import { counterKey, introspectionCounterKey, keyCounterKey } from './counter-keys.js';
import type { CoreDeps } from '../deps.js';
import { withTimeout, type Bounded } from './timeout.js';
import type { TurnBatch } from './turn-batch.js';
import { LogThrottle } from '../log-throttle.js';

/**
 * What is counted (C-50): an organisation, the global unauthenticated counter, a source address
 * (401s), the secret-scanning alerts whose signature verified (their own global counter, so a
 * burst of alerts never competes with /health and /version), or the introspection calls of a
 * system organisation's keys (C-271: their own counter, never the organisation's), or a key with a
 * limit of its own (C-290: counted together with its organisation, checkPairAt).
 */
export type RateScope =
  | {
      readonly kind: 'organisation';
      readonly organisationId: string;
      /**
       * The organisation's own limit as read with its record (`Organisation.rateLimitPerMinute`; null:
       * the default). Omitted: check() and enforce() read the organisation record to learn it.
       */
      readonly limitPerMinute?: number | null;
    }
  | { readonly kind: 'unauthenticated' }
  | { readonly kind: 'source'; readonly address: string }
  | { readonly kind: 'secret_scanning' }
  | { readonly kind: 'introspection'; readonly organisationId: string }
  | KeyScope;

/** A key's own window (C-290): its limit as read with its record. */
export interface KeyScope {
  readonly kind: 'key';
  readonly organisationId: string;
  readonly keyId: string;
  readonly limitPerMinute: number;
}

/** An organisation's scope. */
export type OrganisationScope = Extract<RateScope, { kind: 'organisation' }>;

/** Counters outlive their window a little so that a late hit still lands in the right window. */
export const COUNTER_TTL_MS = 2 * WINDOW_MS;
/**
 * At most one fail-open warning per this many ms (C-54), also when the counter flaps (recovers and
 * fails again in between); the "available again" line is likewise at most one per this many ms.
 */
export const FAIL_OPEN_WARN_INTERVAL_MS = 10_000;

/** The key of a scope: `org:<id>`, `unauth`, `src:<address>`, `scan`, `intro:<id>`, `key:<id>` (its counters' names: counter-keys.ts). */
export function scopeKey(scope: RateScope): string {
  switch (scope.kind) {
    case 'organisation':
      return `org:${scope.organisationId}`;
    case 'unauthenticated':
      return 'unauth';
    case 'source':
      return `src:${scope.address}`;
    case 'secret_scanning':
      return 'scan';
    case 'introspection':
      return `intro:${scope.organisationId}`;
    case 'key':
      return `key:${scope.keyId}`;
  }
}

/** The name of `scope`'s counter in the window starting at `windowStartMs` (counter-keys.ts). */
function scopeCounterKey(scope: RateScope, windowStartMs: number): string {
  if (scope.kind === 'introspection') return introspectionCounterKey(scope.organisationId, windowStartMs);
  if (scope.kind === 'key') return keyCounterKey(scope.organisationId, scope.keyId, windowStartMs);
  return counterKey(scopeKey(scope), windowStartMs);
}

/**
 * A refusal of a request counted in two windows (a key with its own limit) says which refused it
 * (C-293); a request counted in one window gets the v1 answer as it was.
 */
function refusedIn(window: 'organisation' | 'key', decision: RateDecision): RateDecision {
  return { ...decision, limitScope: window };
}

/**
 * The rate-limit decision (spec §8, C-50..C-55). Counts one hit of the scope in the current UTC
 * minute through the RateCounter port, bounded by config.rateCounterTimeoutMs: on failure or
 * timeout it fails open (allowed, remaining = limit, degraded) and logs a warning at most once per
 * 10 s, however often the counter recovers and fails again in between (a flapping Redis); after a
 * warning, the first answer at least 10 s after the previous such line logs one "available again"
 * info line, so warnings and recoveries alternate, each at most once per 10 s. Scopes already over their
 * limit are remembered locally until their window ends, so a flooding scope costs no counter call;
 * each with the limit it went over, so that an organisation whose limit is raised meanwhile is counted
 * again at once.
 */
export class RateLimiter {
  /** scope key -> the window in which that scope is already over its limit, and that limit. */
  private readonly blocked = new Map<string, Blocked>();
  private blockedWindowStart = Number.NEGATIVE_INFINITY;
  /** The fail-open warning's window; never reset by a recovery (C-54). */
  private readonly failOpenWarnings = new LogThrottle(FAIL_OPEN_WARN_INTERVAL_MS, () => this.deps.clock.now().getTime());
  /** The "available again" line's window. */
  private readonly recoveryLines = new LogThrottle(FAIL_OPEN_WARN_INTERVAL_MS, () => this.deps.clock.now().getTime());
  /** A warning was logged and no "available again" line since. */
  private recoveryUnannounced = false;
  /** Fail-open decisions since the last "available again" line (shown on that line). */
  private failedOpen = 0;
  /** Every decision is counted by scope kind and outcome; a fail-open also on its own. */
  private readonly metrics: Metrics;

  /** The counter answered with a promise once (a shared store): hits go through the turn's batch from then on. */
  private countsLater = false;

  /**
   * `batch`: once the counter has answered a hit with a promise (a shared counter store, Redis), hits
   * go through it: one call per counter key per event-loop turn (C-200) instead of one call each. A
   * counter that answers synchronously (in-process) is always called directly, its answer used at once.
   */
  constructor(
    private readonly deps: Pick<CoreDeps, 'counter' | 'clock' | 'logger' | 'config'> & Partial<Pick<CoreDeps, 'metrics' | 'stores'>>,
    private readonly batch: TurnBatch | null = null,
  ) {
    this.metrics = deps.metrics ?? noopMetrics;
  }

  /**
   * Limit for a scope: organisation -> its own limit when it has one (C-240), else
   * rateLimitPerMinute; source -> rateLimitPerMinute; unauthenticated -> unauthRateLimitPerMinute;
   * secret_scanning -> secretScanningRateLimitPerMinute; introspection ->
   * introspectionRateLimitPerMinute.
   */
  limitFor(scope: RateScope): number {
    const config = this.deps.config;
    if (scope.kind === 'organisation') return scope.limitPerMinute ?? config.rateLimitPerMinute;
    if (scope.kind === 'unauthenticated') return config.unauthRateLimitPerMinute;
    if (scope.kind === 'secret_scanning') return config.secretScanningRateLimitPerMinute;
    if (scope.kind === 'introspection') return config.introspectionRateLimitPerMinute;
    if (scope.kind === 'key') return scope.limitPerMinute;
    return config.rateLimitPerMinute;
  }

  /**
   * Counts the hit and returns the decision. An organisation scope without its limit (an embedder's
   * `enforce({ kind: 'organisation', organisationId })`) is counted against the limit of the
   * organisation record read from the store first (C-243; a limiter built without stores uses the
   * default), so it rejects only when that read fails; otherwise it never throws.
   */
  async check(scope: RateScope): Promise<RateDecision> {
    // Without a read to make, the count starts (and arms its timeout) before check() returns.
    const stores = this.deps.stores;
    const known = scope.kind === 'organisation' && scope.limitPerMinute === undefined && stores !== undefined ? await withOwnLimit(stores, scope) : scope;
    return this.checkAt(known, this.deps.clock.now().getTime());
  }

  /**
   * check() for a caller that has just read the clock (`nowMs`): the decision itself when the
   * counter answers synchronously (the in-process counter: no promise, no clock read of its own),
   * else a promise of it, decided when the counter's answer arrives. Never throws or rejects.
   */
  checkAt(scope: RateScope, nowMs: number): RateDecision | Promise<RateDecision> {
    const limit = this.limitFor(scope);
    const window = windowAt(nowMs);
    this.forgetEndedWindows(window.startMs);
    if (this.over(scope, limit, window.startMs)) {
      this.metrics.rateLimitDecision(scope.kind, 'limited');
      return decide(limit + 1, limit, window, nowMs);
    }
    const outcome = this.count(scope, window.startMs);
    if (!(outcome instanceof Promise)) return this.decideAfter(scope, limit, window, outcome, nowMs);
    return outcome.then((answer) => this.decideAfter(scope, limit, window, answer));
  }

  /**
   * checkAt() for a request counted against its organisation and its key's own window (C-292): the
   * key's window first, and the organisation's only when the key's admits, in one atomic step of the
   * counter (hitGuarded; through the turn's batch on a shared store). A window known exhausted
   * refuses from memory, counting nothing. The answer is the refusing window's decision, or when
   * both admit the one with fewer requests remaining (C-293). Never throws or rejects.
   */
  checkPairAt(organisation: OrganisationScope, key: KeyScope, nowMs: number): RateDecision | Promise<RateDecision> {
    const window = windowAt(nowMs);
    this.forgetEndedWindows(window.startMs);
    const keyLimit = key.limitPerMinute;
    if (this.over(key, keyLimit, window.startMs)) {
      this.metrics.rateLimitDecision('key', 'limited');
      return refusedIn('key', decide(keyLimit + 1, keyLimit, window, nowMs));
    }
    const limit = this.limitFor(organisation);
    if (this.over(organisation, limit, window.startMs)) {
      this.metrics.rateLimitDecision('organisation', 'limited');
      return refusedIn('organisation', decide(limit + 1, limit, window, nowMs));
    }
    const outcome = this.countPair(organisation, key, window.startMs);
    if (!(outcome instanceof Promise)) return this.concludeGuarded(organisation, key, window, outcome, nowMs);
    return outcome.then((answer) => this.concludeGuarded(organisation, key, window, answer));
  }

  /**
   * conclude() for a request counted against its organisation and its key's window in the same
   * round trip (the credential cache's freshness call): `keyCount` is the key window's count, absent
   * when the store did not count it (the key's window then fails open).
   */
  concludePair(organisation: OrganisationScope, key: KeyScope, window: RateWindow, outcome: Bounded<number | null>, keyCount: number | undefined): RateDecision {
    if (outcome.kind !== 'value' || typeof outcome.value !== 'number' || keyCount === undefined) return this.conclude(organisation, window, outcome);
    return this.decidePair(organisation, key, window, outcome.value, keyCount, this.deps.clock.now().getTime());
  }

  private concludeGuarded(organisation: OrganisationScope, key: KeyScope, window: RateWindow, outcome: Bounded<GuardedCount>, nowMs: number = this.deps.clock.now().getTime()): RateDecision {
    if (outcome.kind !== 'value') return this.decideAfter(organisation, this.limitFor(organisation), window, outcome, nowMs);
    return this.decidePair(organisation, key, window, outcome.value.count, outcome.value.keyCounts[0] ?? null, nowMs);
  }

  /** The decision of a request counted in both windows (C-293): the key's window decides first. */
  private decidePair(organisation: OrganisationScope, key: KeyScope, window: RateWindow, count: number, keyCount: number | null, nowMs: number): RateDecision {
    const byKey = this.decideCounted(key, key.limitPerMinute, window, keyCount, nowMs);
    if (!byKey.allowed) return refusedIn('key', byKey);
    const byOrganisation = this.decideCounted(organisation, this.limitFor(organisation), window, count, nowMs);
    if (!byOrganisation.allowed) return refusedIn('organisation', byOrganisation);
    return byKey.remaining < byOrganisation.remaining ? byKey : byOrganisation;
  }

  /**
   * True when `scope` is already known (locally) to be over its limit in the window starting at
   * `windowStartMs`: check() would answer 429 without a counter call.
   */
  isBlocked(scope: RateScope, windowStartMs: number): boolean {
    this.forgetEndedWindows(windowStartMs);
    return this.over(scope, this.limitFor(scope), windowStartMs);
  }

  /**
   * Known over `limit` in the window: it went over a limit at least as high in this window (a limit
   * raised since must count again, C-242; a lowered one is still exceeded).
   */
  private over(scope: RateScope, limit: number, windowStartMs: number): boolean {
    // Nothing is known over its limit most of the time: no scope key to build then.
    if (this.blocked.size === 0) return false;
    const blocked = this.blocked.get(scopeKey(scope));
    return blocked !== undefined && blocked.windowStartMs === windowStartMs && limit <= blocked.limit;
  }

  /**
   * The decision for a hit of `scope` in `window` that was counted elsewhere in the same round trip
   * (the credential cache's freshness call): `outcome` is its bounded result. Fails open and logs
   * exactly as check() does when it is not a count.
   */
  conclude(scope: RateScope, window: RateWindow, outcome: Bounded<number | null>): RateDecision {
    return this.decideAfter(scope, this.limitFor(scope), window, outcome);
  }

  private decideAfter(
    scope: RateScope,
    limit: number,
    window: RateWindow,
    outcome: Bounded<number | null>,
    nowMs: number = this.deps.clock.now().getTime(),
  ): RateDecision {
    if (outcome.kind !== 'value' || typeof outcome.value !== 'number' || !Number.isFinite(outcome.value)) {
      const reason =
        outcome.kind === 'error'
          ? describe(outcome.error)
          : outcome.kind === 'timeout'
            ? `no answer within ${this.deps.config.rateCounterTimeoutMs} ms`
            : 'the counter returned no count';
      this.counterFailed(scopeKey(scope), reason, nowMs);
      this.metrics.rateLimitDecision(scope.kind, 'allowed');
      return failOpen(limit, window, nowMs);
    }
    return this.decideCount(scope, limit, window, outcome.value, nowMs);
  }

  /** decideAfter() of a count as a number, or null when the store returned none (fails open). */
  private decideCounted(scope: RateScope, limit: number, window: RateWindow, count: number | null, nowMs: number): RateDecision {
    if (count === null || !Number.isFinite(count)) return this.decideAfter(scope, limit, window, { kind: 'value', value: count }, nowMs);
    return this.decideCount(scope, limit, window, count, nowMs);
  }

  /** The decision of the `count`-th request of `scope`'s window; a refused scope is remembered until the window ends. */
  private decideCount(scope: RateScope, limit: number, window: RateWindow, count: number, nowMs: number): RateDecision {
    if (this.recoveryUnannounced) this.counterAnswered(nowMs);
    const decision = decide(count, limit, window, nowMs);
    this.metrics.rateLimitDecision(scope.kind, decision.allowed ? 'allowed' : 'limited');
    if (!decision.allowed) {
      this.forgetEndedWindows(window.startMs);
      this.blocked.set(scopeKey(scope), { windowStartMs: window.startMs, limit });
    }
    return decision;
  }

  /** check(), then throws RateLimitedError(decision) when not allowed; returns the decision otherwise. */
  async enforce(scope: RateScope): Promise<RateDecision> {
    const decision = await this.check(scope);
    if (!decision.allowed) throw new RateLimitedError(decision);
    return decision;
  }

  /**
   * Headers-only view of a scope without counting a hit (for a 401 whose source counter is
   * not incremented, etc.): the current window with remaining = limit.
   */
  peek(scope: RateScope): RateDecision {
    const nowMs = this.deps.clock.now().getTime();
    const limit = this.limitFor(scope);
    return decide(0, limit, windowAt(nowMs), nowMs);
  }

  /**
   * One hit through the port. A synchronous answer (in-process counter) is used as it is (no timer, no
   * promise); the first promise is raced against rateCounterTimeoutMs, and from then on hits go
   * through the turn's batch, bounded once per call.
   */
  private count(scope: RateScope, windowStartMs: number): Bounded<number> | Promise<Bounded<number>> {
    if (this.countsLater && this.batch !== null) return this.batch.hit(scopeCounterKey(scope, windowStartMs), COUNTER_TTL_MS);
    let answer: number | Promise<number>;
    try {
      answer = this.deps.counter.hit(scopeCounterKey(scope, windowStartMs), COUNTER_TTL_MS);
    } catch (error) {
      return { kind: 'error', error };
    }
    if (typeof answer !== 'object' || answer === null) return { kind: 'value', value: answer };
    this.countsLater = true;
    const pending = answer;
    return withTimeout(() => pending, this.deps.config.rateCounterTimeoutMs);
  }

  /** One hit of an organisation and its key's window (C-292), as count() makes one hit. */
  private countPair(organisation: OrganisationScope, key: KeyScope, windowStartMs: number): Bounded<GuardedCount> | Promise<Bounded<GuardedCount>> {
    const organisationCounter = scopeCounterKey(organisation, windowStartMs);
    const guard = { counterKey: scopeCounterKey(key, windowStartMs), limit: key.limitPerMinute, hits: 1 };
    if (this.countsLater && this.batch !== null) return this.batch.hitGuarded(organisationCounter, COUNTER_TTL_MS, guard);
    const counter = this.deps.counter;
    let answer: GuardedCount | Promise<GuardedCount>;
    try {
      if (counter.hitGuarded === undefined) throw new Error('the rate counter cannot count a key window');
      answer = counter.hitGuarded(organisationCounter, COUNTER_TTL_MS, 1, [guard]);
    } catch (error) {
      return { kind: 'error', error };
    }
    if (!(answer instanceof Promise)) return { kind: 'value', value: answer };
    this.countsLater = true;
    const pending = answer;
    return withTimeout(() => pending, this.deps.config.rateCounterTimeoutMs);
  }

  /** Blocked scopes are remembered only for their own window. */
  private forgetEndedWindows(currentStartMs: number): void {
    if (currentStartMs === this.blockedWindowStart) return;
    for (const [key, blocked] of this.blocked) if (blocked.windowStartMs < currentStartMs) this.blocked.delete(key);
    this.blockedWindowStart = currentStartMs;
  }

  /** At most one warning per 10 s, whether the counter stayed down or recovered in between (C-54). */
  private counterFailed(scope: string, reason: string, nowMs: number): void {
    this.failedOpen++;
    this.metrics.rateCounterFailOpen();
    if (this.failOpenWarnings.pass('', nowMs) === null) return;
    this.recoveryUnannounced = true;
    this.deps.logger.warn({ scope, reason }, 'Rate counter unavailable; failing open, rate limits are not enforced');
  }

  /**
   * Called on an answer while a warning is unannounced: one info line, at most once per 10 s. An
   * answer too soon after the previous info line leaves it to a later answer, so the log still
   * ends with the recovery once the counter stays up.
   */
  private counterAnswered(nowMs: number): void {
    if (this.recoveryLines.pass('', nowMs) === null) return;
    this.recoveryUnannounced = false;
    const failedOpen = this.failedOpen;
    this.failedOpen = 0;
    this.deps.logger.info({ failedOpen }, 'Rate counter available again; rate limits enforced');
  }
}

/** The organisation scope with the limit of its stored record (an organisation not found: the default). */
async function withOwnLimit(stores: Pick<CoreDeps['stores'], 'organisations'>, scope: Extract<RateScope, { kind: 'organisation' }>): Promise<RateScope> {
  const organisation = await stores.organisations.findById(scope.organisationId);
  return { ...scope, limitPerMinute: organisation?.rateLimitPerMinute ?? null };
}

interface Blocked {
  readonly windowStartMs: number;
  readonly limit: number;
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
