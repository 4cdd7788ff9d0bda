/**
 * `last_used_at` without a write on the request path. Admission and the Authenticator call `record(keyId, at)`
 * after each successful authentication: a Map update, nothing else. Uses are written in batches,
 * one `ApiKeyStore.recordUses` statement per flush, in the background; the store keeps the latest
 * time, so several instances flushing in any order agree.
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
 */
import type { Clock } from '../ports/clock.js';
import type { KeyUse, ApiKeyStore } from '../ports/api-key-store.js';
import type { Logger } from '../ports/logger.js';
import { LogThrottle } from '../log-throttle.js';

export const DEFAULT_KEY_USAGE_FLUSH_MS = 60_000;
/** At most one "flush failed" warning this often; the next one says how many were left out. */
export const KEY_USAGE_WARN_INTERVAL_MS = 60_000;
/** The part of the interval kept for the write itself: I / 12, at most this. */
const MAX_MARGIN_MS = 5_000;
/** Flushes start at most this often (and the timer asks this often), at most a quarter of the margin. */
const MAX_MIN_GAP_MS = 1_000;

export interface KeyUsageDeps {
  readonly apiKeys: Pick<ApiKeyStore, 'recordUses'>;
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
  /** Key id -> epoch ms of its latest use not yet written. */
  private pending = new Map<string, number>();
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

  /** A successful authentication with `keyId` at `at`. Synchronous, never throws. */
  record(keyId: string, at: Date): void {
    const ms = at.getTime();
    const known = this.pending.get(keyId);
    if (known === undefined || known < ms) this.pending.set(keyId, ms);
    if (known === undefined) {
      // The first pending use of this key: due at once unless a recent write of it covers it.
      const keyDue = this.dueOf(keyId, ms);
      if (keyDue < this.dueMs) this.dueMs = keyDue;
    }
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
   * Writes every pending use now in one statement (waits for a flush in progress first). Resolves
   * even when the write fails: the uses are kept for the next flush and a throttled warning logged.
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
    for (const [keyId, ms] of batch) uses.push({ keyId, at: new Date(ms) });
    this.flushing = this.deps.apiKeys.recordUses(uses).then(
      () => this.wrote(batch),
      (e: unknown) => this.keep(batch, e),
    );
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

  /** A written batch: each key's written use moves on; a key used again meanwhile is due from it. */
  private wrote(batch: Map<string, number>): void {
    for (const [keyId, ms] of batch) {
      const w = this.written.get(keyId);
      if (w === undefined || w < ms) this.written.set(keyId, ms);
    }
    // Uses recorded while the write was in flight were given a due time from the older write.
    this.recomputeDue();
  }

  /** A written use older than interval - margin no longer defers anything: the same as none. */
  private forgetOldWrites(now: number): void {
    const horizon = now - (this.flushIntervalMs - this.marginMs);
    for (const [keyId, w] of this.written) if (w <= horizon) this.written.delete(keyId);
  }

  /** When a pending use of `keyId` at `ms` is due: at once without a written use, else written + interval - margin. */
  private dueOf(keyId: string, ms: number): number {
    const w = this.written.get(keyId);
    return w === undefined ? ms : w + this.flushIntervalMs - this.marginMs;
  }

  private recomputeDue(): void {
    let due = Number.POSITIVE_INFINITY;
    for (const [keyId, ms] of this.pending) due = Math.min(due, this.dueOf(keyId, ms));
    this.dueMs = due;
  }

  /** A failed flush: its uses go back (a later use of the same key wins) and a warning is logged, throttled. */
  private keep(batch: Map<string, number>, e: unknown): void {
    for (const [keyId, ms] of batch) {
      const known = this.pending.get(keyId);
      if (known === undefined || known < ms) this.pending.set(keyId, ms);
    }
    this.recomputeDue();
    const now = this.deps.clock.now().getTime();
    this.retryAtMs = now + this.marginMs;
    const suppressed = this.warnings.pass();
    if (suppressed === null) return;
    this.deps.logger.warn(
      { err: e instanceof Error ? e.message : String(e), pending_keys: this.pending.size, suppressed },
      'last_used_at flush failed; the uses are kept and written at the next flush',
    );
  }
}
