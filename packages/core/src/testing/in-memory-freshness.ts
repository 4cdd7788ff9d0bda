import { systemClock } from '../defaults.js';
import type { Clock } from '../ports/clock.js';
import type { CredentialFreshness, FreshnessCheck, FreshnessKeys, FreshnessReply } from '../ports/credential-freshness.js';
import type { GuardedCount, KeyCounter, RateCounter } from '../ports/rate-counter.js';
import { InProcessRateCounter } from '../access/in-process-counter.js';
import { freshnessKeys } from '../access/counter-keys.js';

/** How long a change marker lives, and how long after losing its data the store answers "not settled". */
export const IN_MEMORY_CHANGE_BOUND_MS = 10_000;

/**
 * The shared counter store in memory, as Redis plays it in production (limiter-redis): the
 * RateCounter and the CredentialFreshness port over one set of counters, so a hit counted by a
 * freshness check is the same counter RateCounter.hit counts. Time is the given clock (a FakeClock
 * in tests). `flush()` plays FLUSHALL / a restart without persistence; `failing` makes every call
 * reject (a Redis that cannot be reached); `hold()` keeps the next calls' answers until released.
 * Several cores (instances) may share one.
 */
export class InMemoryFreshCounter implements RateCounter, CredentialFreshness {
  private counters: InProcessRateCounter;
  private readonly tokens = new Map<string, string>();
  /** changes key -> change id -> marker expiry (ms). */
  private readonly markers = new Map<string, Map<string, number>>();
  /** The slots' alive keys present (as Redis's per-slot `cc:alive`). */
  private readonly alive = new Set<string>();
  /** unsettled key of a slot -> until when (ms) its organisations are not settled after a loss. */
  private readonly unsettledUntilMs = new Map<string, number>();
  private nextToken = 0;
  /** Every call rejects while true. */
  failing = false;
  /** Calls made (tests count round trips). */
  calls = 0;

  constructor(
    private readonly clock: Clock = systemClock,
    readonly changeBoundMs: number = IN_MEMORY_CHANGE_BOUND_MS,
  ) {
    this.counters = new InProcessRateCounter(clock);
  }

  hit(key: string, ttlMs: number, n = 1): Promise<number> {
    return this.run(() => this.counters.hit(key, ttlMs, n));
  }

  hitGuarded(key: string, ttlMs: number, n: number, keys: readonly KeyCounter[]): Promise<GuardedCount> {
    return this.run(() => this.counters.hitGuarded(key, ttlMs, n, keys));
  }

  check(request: FreshnessCheck): Promise<FreshnessReply> {
    return this.run(() => {
      const nowMs = this.clock.now().getTime();
      const token = this.tokenOf(request.keys, nowMs);
      const settled = this.settled(request.keys, nowMs);
      const fresh = settled && request.tag === token;
      const counts = request.count === 'always' || (request.count === 'if-fresh' && fresh);
      const keys = request.keyCounters;
      if (counts && keys !== undefined && keys.length > 0) {
        const guarded = this.counters.hitGuarded(request.counterKey, request.ttlMs, request.hits ?? 1, keys);
        return { count: guarded.count, keyCounts: guarded.keyCounts, token, settled, fresh };
      }
      const count = counts ? this.counters.hit(request.counterKey, request.ttlMs, request.hits ?? 1) : null;
      return { count, token, settled, fresh };
    });
  }

  beginChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    return this.run(() => {
      const nowMs = this.clock.now().getTime();
      this.tokenOf(keys, nowMs);
      let live = this.markers.get(keys.changes);
      if (live === undefined) this.markers.set(keys.changes, (live = new Map()));
      live.set(changeId, nowMs + this.changeBoundMs);
      this.tokens.set(keys.token, this.newToken());
    });
  }

  endChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    return this.run(() => {
      this.tokenOf(keys, this.clock.now().getTime());
      this.tokens.set(keys.token, this.newToken());
      this.markers.get(keys.changes)?.delete(changeId);
    });
  }

  /** FLUSHALL: every token, marker and counter is gone. */
  flush(): void {
    this.tokens.clear();
    this.markers.clear();
    this.counters = new InProcessRateCounter(this.clock);
    this.alive.clear();
    this.unsettledUntilMs.clear();
  }

  /** The organisation's current token (tests). */
  tokenFor(organisationId: string): string | undefined {
    return this.tokens.get(freshnessKeys(organisationId).token);
  }

  private run<T>(work: () => T): Promise<T> {
    this.calls++;
    if (this.failing) return Promise.reject(new Error('in-memory freshness: unreachable'));
    try {
      return Promise.resolve(work());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The organisation's token (keys: its names from the core). */
  private tokenOf(keys: FreshnessKeys, nowMs: number): string {
    if (!this.alive.has(keys.alive)) {
      // The slot's data lost (or never there): changes in flight lost their markers, so nothing in
      // it is settled until any of them must have ended.
      this.alive.add(keys.alive);
      this.unsettledUntilMs.set(keys.unsettled, nowMs + this.changeBoundMs);
    }
    let token = this.tokens.get(keys.token);
    if (token === undefined) this.tokens.set(keys.token, (token = this.newToken()));
    return token;
  }

  private settled(keys: FreshnessKeys, nowMs: number): boolean {
    if (nowMs < (this.unsettledUntilMs.get(keys.unsettled) ?? Number.NEGATIVE_INFINITY)) return false;
    const live = this.markers.get(keys.changes);
    if (live === undefined) return true;
    for (const [id, until] of live) if (until <= nowMs) live.delete(id);
    return live.size === 0;
  }

  private newToken(): string {
    return `t${++this.nextToken}`;
  }
}
