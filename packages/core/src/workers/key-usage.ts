/**
 * `last_used_at` and the usage counts without a write on the request path. Admission calls
 * `record(keyId, at, outcome)` for each request of a key that authenticates (the Authenticator
 * `record(keyId, at)`: a last use, no count): a Map lookup and an
 * increment, nothing else (a key's first request since the last flush allocates its entry). Uses
 * are written in batches, one `ApiKeyStore.recordUses` statement per flush, in the background; the
 * store keeps the latest time, so several instances flushing in any order agree. The counts per
 * key and hour (requests answered, requests refused with 429) ride along in the same flush, one
 * `UsageStore.add` statement adding them to what is stored; a flush that wrote its counts forgets
 * them, so each request is counted once whichever instance served it.
 *
 * The rule, per key, with I = `flushIntervalMs` (60 s by default) and W = the use this instance
 * last wrote for the key (none since start, or W older than I - margin, count as none):
 *  - a use with no W (the first use after start, or after a quiet period) is due at once;
 *  - any other use is due at W + I - margin: it rides along with the write that keeps the stored
 *    value from falling more than I behind.
 * A due flush starts at once, or at most `minGapMs` later when one has just started. So a use is
 * written at most I - margin + minGapMs after it happened (56 s by default), and once a use is
 * minGapMs old the stored value is at most I - margin behind it, however long the key was quiet
 * before; `margin` (I / 12, at most 5 s) is time kept for the write itself to land before the I is
 * up. A key used all the time is written about once per I - margin; a crash (SIGKILL) loses only
 * uses that were not yet due, so the stored value then stays within I of the last use.
 *
 * A flush writes every pending use, not only the due ones, and starts at most once per `minGapMs`
 * (1 s at most): one statement carries all the keys that turned due meanwhile. When it is due is
 * decided by the Clock: `record()` starts a due flush itself (the request never waits for it), and
 * `start()` adds a timer that asks every `minGapMs` so that uses that turn due later are written
 * without any further request. A failed flush puts its uses back (the later time wins when a key
 * was used again meanwhile), logs a warning at most once per KEY_USAGE_WARN_INTERVAL_MS and is
 * retried after `margin`; it never fails a request. `stop()` (graceful shutdown) ends the timer and
 * flushes what is left.
 *
 * Every counted request is also a use, so its counts are written with that use: at most
 * I - margin + minGapMs after the request, which bounds what a crash loses to one interval of counts.
 * Counts whose write failed while the uses' write succeeded are retried after `margin`, like a
 * failed flush.
 */
import type { Clock } from '../ports/clock.js';
import type { KeyUse, ApiKeyStore } from '../ports/api-key-store.js';
import type { Logger } from '../ports/logger.js';
import type { UsageCount, UsageStore } from '../ports/usage-store.js';
import { HOUR_MS, type UsageOutcome } from '../domain/usage.js';
import { LogThrottle } from '../log-throttle.js';

export const DEFAULT_KEY_USAGE_FLUSH_MS = 60_000;
/** At most one "flush failed" warning this often; the next one says how many were left out. */
export const KEY_USAGE_WARN_INTERVAL_MS = 60_000;
/** The part of the interval kept for the write itself: I / 12, at most this. */
const MAX_MARGIN_MS = 5_000;
/** Flushes start at most this often (and the timer asks this often), at most a quarter of the margin. */
const MAX_MIN_GAP_MS = 1_000;

/**
 * What a request of an authenticated key came to: `answered` (anything but a 429) or
 * `rate_limited` (refused with 429). Without an outcome, `record` notes the use (last_used_at) only.
 */

/** One key's pending use and counts (mutated in place by record(): no allocation per request). */
interface Pending {
  /** Epoch ms of the latest use not yet written; -1 when only counts wait (their use was written). */
  lastUseMs: number;
  /** The hour the counts below belong to (epoch ms of its start). */
  hourMs: number;
  requests: number;
  rateLimited: number;
  /** Counts of other hours (the key's requests crossed an hour between two flushes), or null. */
  other: UsageCount[] | null;
}

export interface KeyUsageDeps {
  readonly apiKeys: Pick<ApiKeyStore, 'recordUses'>;
  readonly usage: Pick<UsageStore, 'add'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Default DEFAULT_KEY_USAGE_FLUSH_MS. */
  readonly flushIntervalMs?: number;
}

export class KeyUsage {
  readonly flushIntervalMs: number;
  /** Kept back from the interval for the write to land: a use is due at W + interval - margin. */
  readonly marginMs: number;
  /** Flushes start at most this often. */
  readonly minGapMs: number;
  /** Key id -> its latest use not yet written and its counts not yet written. */
  private pending = new Map<string, Pending>();
  /** Key id -> epoch ms of the use this instance last wrote for it (entries older than interval - margin are dropped). */
  private written = new Map<string, number>();
  /** Epoch ms at which the earliest pending use is due (Infinity: none pending). */
  private dueMs = Number.POSITIVE_INFINITY;
  private lastFlushMs = Number.NEGATIVE_INFINITY;
  /** After a failed flush, no retry before this (epoch ms). */
  private retryAtMs = Number.NEGATIVE_INFINITY;
  private flushing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly warnings = new LogThrottle(KEY_USAGE_WARN_INTERVAL_MS, () => this.deps.clock.now().getTime());

  constructor(private readonly deps: KeyUsageDeps) {
    this.flushIntervalMs = deps.flushIntervalMs ?? DEFAULT_KEY_USAGE_FLUSH_MS;
    this.marginMs = Math.min(MAX_MARGIN_MS, Math.floor(this.flushIntervalMs / 12));
    this.minGapMs = Math.max(1, Math.min(MAX_MIN_GAP_MS, Math.floor(this.marginMs / 4)));
  }

  /**
   * A request with `keyId` at `at`, authenticated: its use (last_used_at) and, given an outcome, one
   * more request answered or refused with 429 in the hour of `at`. Synchronous, never throws.
   */
  record(keyId: string, at: Date, outcome?: UsageOutcome): void {
    const ms = at.getTime();
    let p = this.pending.get(keyId);
    if (p === undefined) {
      p = { lastUseMs: ms, hourMs: ms - (ms % HOUR_MS), requests: 0, rateLimited: 0, other: null };
      this.pending.set(keyId, p);
      // The first pending use of this key: due at once unless a recent write of it covers it.
      const keyDue = this.dueOf(keyId, ms);
      if (keyDue < this.dueMs) this.dueMs = keyDue;
    } else if (p.lastUseMs < ms) {
      p.lastUseMs = ms;
    }
    if (outcome !== undefined) count(keyId, p, ms, outcome);
    if (this.isDue(this.deps.clock.now().getTime())) void this.flush();
  }

  /** Uses waiting for the next flush (one per key). */
  get pendingKeys(): number {
    return this.pending.size;
  }

  /** Flushes when a pending use is due (by the Clock) and no flush started within minGapMs; otherwise nothing. */
  flushIfDue(): Promise<void> {
    if (!this.isDue(this.deps.clock.now().getTime())) return this.flushing ?? Promise.resolve();
    return this.flush();
  }

  /**
   * Writes every pending use now in one statement, and every pending count in one more (waits for
   * a flush in progress first). Resolves even when a write fails: what it carried is kept for the
   * next flush and a throttled warning logged.
   */
  async flush(): Promise<void> {
    while (this.flushing !== null) await this.flushing;
    const now = this.deps.clock.now().getTime();
    this.lastFlushMs = now;
    this.forgetOldWrites(now);
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.dueMs = Number.POSITIVE_INFINITY;
    const uses: KeyUse[] = [];
    const counts: UsageCount[] = [];
    for (const [keyId, p] of batch) {
      if (p.lastUseMs >= 0) uses.push({ keyId, at: new Date(p.lastUseMs) });
      if (p.other !== null) counts.push(...p.other);
      if (p.requests > 0 || p.rateLimited > 0) counts.push({ keyId, hourStart: new Date(p.hourMs), requests: p.requests, rateLimited: p.rateLimited });
    }
    this.flushing = Promise.allSettled([
      uses.length > 0 ? this.deps.apiKeys.recordUses(uses) : undefined,
      counts.length > 0 ? this.deps.usage.add(counts) : undefined,
    ]).then(([u, c]) => this.settled(batch, u, counts, c));
    try {
      await this.flushing;
    } finally {
      this.flushing = null;
    }
  }

  /** Flushes whenever due, until stop(). The timer does not keep the process alive. */
  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => void this.flushIfDue(), this.minGapMs);
    this.timer.unref();
  }

  /** Stops the timer and writes what is left (graceful shutdown). Idempotent. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }

  private isDue(now: number): boolean {
    return this.flushing === null && now >= this.dueMs && now - this.lastFlushMs >= this.minGapMs && now >= this.retryAtMs;
  }

  /** The end of a flush: what was written moves on, what failed goes back, and the due time is recomputed. */
  private settled(batch: Map<string, Pending>, uses: PromiseSettledResult<unknown>, counts: readonly UsageCount[], added: PromiseSettledResult<unknown>): void {
    if (uses.status === 'fulfilled') this.wrote(batch);
    else this.keepUses(batch);
    if (added.status === 'rejected') this.keepCounts(counts);
    // Uses recorded while the write was in flight were given a due time from the older write.
    this.recomputeDue();
    if (uses.status === 'rejected') this.failed(uses.reason, 'last_used_at flush failed; the uses are kept and written at the next flush');
    else if (added.status === 'rejected') this.failed(added.reason, 'usage counts flush failed; the counts are kept and added at the next flush');
  }

  /** A written batch: each key's written use moves on; a key used again meanwhile is due from it. */
  private wrote(batch: Map<string, Pending>): void {
    for (const [keyId, p] of batch) {
      if (p.lastUseMs < 0) continue;
      const w = this.written.get(keyId);
      if (w === undefined || w < p.lastUseMs) this.written.set(keyId, p.lastUseMs);
    }
  }

  /** A written use older than interval - margin no longer defers anything: the same as none. */
  private forgetOldWrites(now: number): void {
    const horizon = now - (this.flushIntervalMs - this.marginMs);
    for (const [keyId, w] of this.written) if (w <= horizon) this.written.delete(keyId);
  }

  /**
   * When a pending use of `keyId` at `ms` is due: at once without a written use, else written +
   * interval - margin. Counts alone (ms < 0: their use was written, their own write failed) are due
   * at once; the retry delay holds them back.
   */
  private dueOf(keyId: string, ms: number): number {
    if (ms < 0) return Number.NEGATIVE_INFINITY;
    const w = this.written.get(keyId);
    return w === undefined ? ms : w + this.flushIntervalMs - this.marginMs;
  }

  private recomputeDue(): void {
    let due = Number.POSITIVE_INFINITY;
    for (const [keyId, p] of this.pending) due = Math.min(due, this.dueOf(keyId, p.lastUseMs));
    this.dueMs = due;
  }

  /** The pending entry of `keyId`, created without a use or counts when there is none. */
  private entry(keyId: string, hourMs: number): Pending {
    let p = this.pending.get(keyId);
    if (p === undefined) {
      p = { lastUseMs: -1, hourMs, requests: 0, rateLimited: 0, other: null };
      this.pending.set(keyId, p);
    }
    return p;
  }

  /** Uses whose write failed go back (a later use of the same key wins). */
  private keepUses(batch: Map<string, Pending>): void {
    for (const [keyId, b] of batch) {
      if (b.lastUseMs < 0) continue;
      const p = this.entry(keyId, b.hourMs);
      if (p.lastUseMs < b.lastUseMs) p.lastUseMs = b.lastUseMs;
    }
  }

  /** Counts whose write failed go back, added to those counted meanwhile. */
  private keepCounts(counts: readonly UsageCount[]): void {
    for (const c of counts) {
      const p = this.entry(c.keyId, c.hourStart.getTime());
      (p.other ??= []).push(c);
    }
  }

  /** A failed flush: retried after the margin, with a warning logged, throttled. */
  private failed(e: unknown, message: string): void {
    const now = this.deps.clock.now().getTime();
    this.retryAtMs = now + this.marginMs;
    const suppressed = this.warnings.pass();
    if (suppressed === null) return;
    this.deps.logger.warn(
      { err: e instanceof Error ? e.message : String(e), pending_keys: this.pending.size, suppressed },
      message,
    );
  }
}

/** One more request of `keyId` at `ms` in its pending counts; another hour than the entry's moves the entry on. */
function count(keyId: string, p: Pending, ms: number, outcome: UsageOutcome): void {
  const hourMs = ms - (ms % HOUR_MS);
  if (hourMs !== p.hourMs) {
    if (hourMs < p.hourMs) {
      // A request that started before one already counted in a later hour: counted on its own.
      (p.other ??= []).push({ keyId, hourStart: new Date(hourMs), requests: outcome === 'answered' ? 1 : 0, rateLimited: outcome === 'rate_limited' ? 1 : 0 });
      return;
    }
    if (p.requests > 0 || p.rateLimited > 0) (p.other ??= []).push({ keyId, hourStart: new Date(p.hourMs), requests: p.requests, rateLimited: p.rateLimited });
    p.hourMs = hourMs;
    p.requests = 0;
    p.rateLimited = 0;
  }
  if (outcome === 'rate_limited') p.rateLimited += 1;
  else p.requests += 1;
}
