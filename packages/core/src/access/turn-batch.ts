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
import type { RateCounter } from '../ports/rate-counter.js';
import { BoundedCalls, type Bounded } from './timeout.js';

type Waiter<T> = (outcome: Bounded<T>) => void;

interface CheckGroup {
  readonly request: FreshnessCheck;
  readonly waiters: Waiter<FreshnessReply>[];
}

interface HitGroup {
  readonly key: string;
  readonly ttlMs: number;
  readonly waiters: Waiter<number>[];
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
   * count when it counted. Never rejects.
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
    if (group === undefined) groups.push((group = { request, waiters: [] }));
    const waiters = group.waiters;
    this.schedule();
    return new Promise((resolve) => waiters.push(resolve));
  }

  /** One hit of the counter `key` (RateCounter.hit), answered with its own count. Never rejects. */
  hit(key: string, ttlMs: number): Promise<Bounded<number>> {
    let group = this.hits.get(key);
    if (group === undefined) this.hits.set(key, (group = { key, ttlMs, waiters: [] }));
    const waiters = group.waiters;
    this.schedule();
    return new Promise((resolve) => waiters.push(resolve));
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

  private sendHit(group: HitGroup): void {
    const counter = this.counter;
    const waiters = group.waiters;
    const n = waiters.length;
    this.sent++;
    if (counter === null) {
      for (const waiter of waiters) waiter({ kind: 'error', error: new Error('TurnBatch: no counter port') });
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
}
