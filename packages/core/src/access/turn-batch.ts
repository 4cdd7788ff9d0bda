/**
 * One call to the shared counter store (Redis) per organisation per event-loop turn, instead of one
 * per request (C-200, C-201). The credential cache's freshness checks and the rate limiter's counter
 * hits are queued as they are made; in the check phase that follows the poll phase they were made in
 * (`setImmediate`), the queue is grouped and each group sent as ONE call that counts all its requests
 * at once (the ports' `hits` / `n`): a freshness check per counter key (one organisation and window),
 * tag and count mode, and a counter hit per counter key. Each request then gets its own count, in
 * the order the calls were made: the group's answer `total` counted `n` hits, so the i-th request
 * (from 0) gets `total − n + 1 + i`. Every request of a group shares the group's token, settled and
 * fresh answer, and its bounded outcome: one bounded wait per group (BoundedCalls: decided after the
 * poll phase), not per request.
 *
 * Why a check phase and not a microtask: Node drains microtasks after each socket's callback, so a
 * microtask would hold one connection's requests; the check phase comes after the whole poll phase,
 * so every request read in it shares the group (the reasoning of the SQLite reader's one read per
 * poll phase). Why it stays exact: every call of a group is made before the group is sent (a
 * `setImmediate` callback never runs in the phase that scheduled it), so the store answers each
 * request with a read made after the request's own call, never before; see the decision record
 * "one shared-store call per organisation per turn".
 */
import type { CredentialFreshness, FreshnessCheck, FreshnessReply } from '../ports/credential-freshness.js';
import type { GuardedCount, KeyCounter, RateCounter } from '../ports/rate-counter.js';
import { keyAdmitted } from '../domain/rate-window.js';
import { BoundedCalls, type Bounded } from './timeout.js';

type Waiter<T> = (outcome: Bounded<T>) => void;
/** A hit's waiter: its organisation count, and its key's count when it came with a key window. */
type HitWaiter = (outcome: Bounded<number>, keyCount?: number) => void;

interface CheckGroup {
  readonly request: FreshnessCheck;
  readonly waiters: Waiter<FreshnessReply>[];
  /** Per waiter, its key's own window (C-292; null: none); null while no waiter of the group has one. */
  guards: (KeyCounter | null)[] | null;
}

interface HitGroup {
  readonly key: string;
  readonly ttlMs: number;
  readonly waiters: HitWaiter[];
  /** As CheckGroup's. */
  guards: (KeyCounter | null)[] | null;
}

/**
 * The key windows of a group's requests (C-292), one counter per key with the number of its
 * requests, and for each request the index of its key's counter (-1: none).
 */
function keyCounters(guards: readonly (KeyCounter | null)[]): { counters: { counterKey: string; limit: number; hits: number }[]; index: number[] } {
  const counters: { counterKey: string; limit: number; hits: number }[] = [];
  const index: number[] = [];
  // A turn's requests of one organisation are mostly of one key: the last key's counter is tried
  // first, and a map is built only when a second key shows up.
  let byName: Map<string, number> | null = null;
  let last = -1;
  for (const guard of guards) {
    if (guard === null) {
      index.push(-1);
      continue;
    }
    let j = last >= 0 && counters[last]!.counterKey === guard.counterKey ? last : (byName?.get(guard.counterKey) ?? -1);
    if (j < 0) {
      if (byName === null && counters.length > 0) byName = new Map([[counters[0]!.counterKey, 0]]);
      j = counters.length;
      byName?.set(guard.counterKey, j);
      counters.push({ counterKey: guard.counterKey, limit: guard.limit, hits: 0 });
    }
    counters[j]!.hits++;
    index.push((last = j));
  }
  return { counters, index };
}

/**
 * Each request's counts of a guarded step (C-292), in call order, as n sequential requests would
 * have had them: the i-th request of a key gets that key's count total − hits + 1 + i; a request
 * under its key's limit (or without one) gets the organisation's next count, one refused by its key
 * the organisation's count so far (it was not counted there). Handed to `deliver` request by request
 * (its index in the group), with no object per request.
 */
function guardedCounts(
  answer: GuardedCount,
  counters: readonly KeyCounter[],
  index: readonly number[],
  deliver: (i: number, count: number, keyCount: number | undefined) => void,
): void {
  let admitted = index.length;
  // Per key counter, the count its next request gets.
  const next: number[] = [];
  for (let j = 0; j < counters.length; j++) {
    const c = counters[j]!;
    const total = answer.keyCounts[j] ?? 0;
    admitted -= c.hits - keyAdmitted(total, c.hits, c.limit);
    next.push(total - c.hits + 1);
  }
  let count = answer.count - admitted;
  for (let i = 0; i < index.length; i++) {
    const j = index[i]!;
    if (j < 0) {
      deliver(i, ++count, undefined);
      continue;
    }
    const keyCount = next[j]!++;
    deliver(i, keyCount <= counters[j]!.limit ? ++count : count, keyCount);
  }
}

export interface TurnBatchParts {
  /** The freshness port (null: check() is not used). */
  readonly freshness?: CredentialFreshness | null;
  /** The counter port (null: hit() is not used). */
  readonly counter?: RateCounter | null;
  /** The bound on one group's call (REDIS_TIMEOUT_MS). */
  readonly timeoutMs: number;
}

export class TurnBatch {
  /** counter key -> the groups of this turn with that key (by tag and count mode; nearly always one). */
  private checks = new Map<string, CheckGroup[]>();
  /** counter key -> this turn's hits of it. */
  private hits = new Map<string, HitGroup>();
  private scheduled: NodeJS.Immediate | null = null;
  private readonly bounded: BoundedCalls;
  private readonly freshness: CredentialFreshness | null;
  private readonly counter: RateCounter | null;
  /** Calls sent to the ports so far (tests, diagnostics). */
  sent = 0;

  constructor(parts: TurnBatchParts) {
    this.freshness = parts.freshness ?? null;
    this.counter = parts.counter ?? null;
    this.bounded = new BoundedCalls(parts.timeoutMs);
  }

  /**
   * The freshness check of one request (its `hits` ignored: one request), answered with its own
   * count when it counted. With one of `keyCounters` (its key's own window, C-292; `hits` ignored),
   * answered with that window's count for this request as `keyCounts[0]`. Never rejects.
   */
  check(request: FreshnessCheck): Promise<Bounded<FreshnessReply>> {
    let groups = this.checks.get(request.counterKey);
    if (groups === undefined) this.checks.set(request.counterKey, (groups = []));
    let group: CheckGroup | undefined;
    for (const g of groups) {
      if (g.request.tag === request.tag && g.request.count === request.count) {
        group = g;
        break;
      }
    }
    if (group === undefined) groups.push((group = { request, waiters: [], guards: null }));
    const waiters = group.waiters;
    const guard = request.keyCounters?.[0] ?? null;
    if (guard !== null || group.guards !== null) (group.guards ??= waiters.map(() => null)).push(guard);
    this.schedule();
    return new Promise((resolve) => waiters.push(resolve));
  }

  /** One hit of the counter `key` (RateCounter.hit), answered with its own count. Never rejects. */
  hit(key: string, ttlMs: number): Promise<Bounded<number>> {
    const group = this.hitGroup(key, ttlMs);
    const waiters = group.waiters;
    if (group.guards !== null) group.guards.push(null);
    this.schedule();
    return new Promise((resolve) => waiters.push(resolve));
  }

  /**
   * One hit of the organisation counter `key` by a request whose key has its own window `guard`
   * (its `hits` ignored: one request), counted as RateCounter.hitGuarded counts it, answered with
   * its own counts. Never rejects.
   */
  hitGuarded(key: string, ttlMs: number, guard: KeyCounter): Promise<Bounded<GuardedCount>> {
    const group = this.hitGroup(key, ttlMs);
    const waiters = group.waiters;
    (group.guards ??= waiters.map(() => null)).push(guard);
    this.schedule();
    return new Promise((resolve) =>
      waiters.push((outcome, keyCount) => resolve(outcome.kind === 'value' ? { kind: 'value', value: { count: outcome.value, keyCounts: [keyCount ?? 0] } } : outcome)),
    );
  }

  private hitGroup(key: string, ttlMs: number): HitGroup {
    let group = this.hits.get(key);
    if (group === undefined) this.hits.set(key, (group = { key, ttlMs, waiters: [], guards: null }));
    return group;
  }

  private schedule(): void {
    if (this.scheduled === null) this.scheduled = setImmediate(() => this.flush());
  }

  /** Check phase: every group queued since the last flush goes out now, one call each, in the order they were queued. */
  private flush(): void {
    this.scheduled = null;
    const checks = this.checks;
    const hits = this.hits;
    this.checks = new Map();
    this.hits = new Map();
    for (const groups of checks.values()) for (const group of groups) this.sendCheck(group);
    for (const group of hits.values()) this.sendHit(group);
  }

  private sendCheck(group: CheckGroup): void {
    const freshness = this.freshness;
    const waiters = group.waiters;
    const n = waiters.length;
    this.sent++;
    if (freshness === null) {
      for (const waiter of waiters) waiter({ kind: 'error', error: new Error('TurnBatch: no freshness port') });
      return;
    }
    if (group.guards !== null) {
      this.sendGuardedCheck(freshness, group, group.guards);
      return;
    }
    const request = n === 1 ? group.request : { ...group.request, hits: n };
    void this.bounded
      .run(() => freshness.check(request))
      .then((outcome) => {
        if (outcome.kind !== 'value' || n === 1) {
          for (const waiter of waiters) waiter(outcome);
          return;
        }
        const reply = outcome.value;
        const total = reply.count;
        for (let i = 0; i < n; i++) waiters[i]!(total === null ? outcome : { kind: 'value', value: { ...reply, count: total - n + 1 + i } });
      });
  }

  /** A check group with key windows (C-292): one call carrying every key's counter, each request answered with its own counts. */
  private sendGuardedCheck(freshness: CredentialFreshness, group: CheckGroup, guards: readonly (KeyCounter | null)[]): void {
    const waiters = group.waiters;
    const { counters, index } = keyCounters(guards);
    const request: FreshnessCheck = { ...group.request, hits: waiters.length, keyCounters: counters };
    void this.bounded
      .run(() => freshness.check(request))
      .then((outcome) => {
        if (outcome.kind !== 'value' || outcome.value.count === null) {
          for (const waiter of waiters) waiter(outcome);
          return;
        }
        const reply = outcome.value;
        guardedCounts({ count: reply.count!, keyCounts: reply.keyCounts ?? [] }, counters, index, (i, count, keyCount) =>
          waiters[i]!({ kind: 'value', value: { ...reply, count, keyCounts: keyCount === undefined ? [] : [keyCount] } }),
        );
      });
  }

  private sendHit(group: HitGroup): void {
    const counter = this.counter;
    const waiters = group.waiters;
    const n = waiters.length;
    this.sent++;
    if (counter === null) {
      for (const waiter of waiters) waiter({ kind: 'error', error: new Error('TurnBatch: no counter port') });
      return;
    }
    if (group.guards !== null) {
      this.sendGuardedHit(counter, group, group.guards);
      return;
    }
    void this.bounded
      .run(async () => (n === 1 ? counter.hit(group.key, group.ttlMs) : counter.hit(group.key, group.ttlMs, n)))
      .then((outcome) => {
        if (outcome.kind !== 'value' || n === 1) {
          for (const waiter of waiters) waiter(outcome);
          return;
        }
        const total = outcome.value;
        for (let i = 0; i < n; i++) waiters[i]!({ kind: 'value', value: total - n + 1 + i });
      });
  }

  /** A hit group with key windows (C-292): one RateCounter.hitGuarded call, each request answered with its own counts. */
  private sendGuardedHit(counter: RateCounter, group: HitGroup, guards: readonly (KeyCounter | null)[]): void {
    const waiters = group.waiters;
    const { counters, index } = keyCounters(guards);
    void this.bounded
      .run(async () => {
        if (counter.hitGuarded === undefined) throw new Error('TurnBatch: the counter cannot count key windows');
        return counter.hitGuarded(group.key, group.ttlMs, waiters.length, counters);
      })
      .then((outcome) => {
        if (outcome.kind !== 'value') {
          for (const waiter of waiters) waiter(outcome);
          return;
        }
        guardedCounts(outcome.value, counters, index, (i, count, keyCount) => waiters[i]!({ kind: 'value', value: count }, keyCount));
      });
  }
}
