/**
 * `last_used_at` without a write on the request path (issue 16). The authenticator calls
 * `record(keyId, at)` after each successful authentication: a Map update, nothing else. Uses are
 * written in batches, one `ApiKeyStore.recordUses` statement per flush, at most once per
 * `flushIntervalMs` (60 s by default) on each instance, so at most one write per key per interval;
 * the store keeps the latest time, so several instances flushing in any order agree.
 *
 * When a flush is due is decided by the Clock: a use that arrives once the interval has passed
 * starts the flush (in the background: the request never waits for it), and `start()` adds a timer
 * so that the last uses before a quiet period are written too. A failed flush puts its uses back
 * (the later time wins when a key was used again meanwhile), logs a warning at most once per
 * KEY_USAGE_WARN_INTERVAL_MS and is retried at the next interval; it never fails a request.
 * `stop()` (graceful shutdown) ends the timer and flushes what is left; a crash loses at most the
 * uses of the last interval, so a key's last_used_at is then at most one interval early.
 */
import type { Clock } from '../ports/clock.js';
import type { KeyUse, ApiKeyStore } from '../ports/api-key-store.js';
import type { Logger } from '../ports/logger.js';

export const DEFAULT_KEY_USAGE_FLUSH_MS = 60_000;
/** At most one "flush failed" warning this often; the next one says how many were left out. */
export const KEY_USAGE_WARN_INTERVAL_MS = 60_000;
/** How often the timer started by start() asks whether a flush is due (real time). */
const TICK_MS = 1_000;

export interface KeyUsageDeps {
  readonly apiKeys: Pick<ApiKeyStore, 'recordUses'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Default DEFAULT_KEY_USAGE_FLUSH_MS. */
  readonly flushIntervalMs?: number;
}

export class KeyUsage {
  readonly flushIntervalMs: number;
  /** Key id -> epoch ms of its latest use not yet written. */
  private pending = new Map<string, number>();
  private lastFlushMs: number;
  private flushing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastWarnMs = Number.NEGATIVE_INFINITY;
  private suppressed = 0;

  constructor(private readonly deps: KeyUsageDeps) {
    this.flushIntervalMs = deps.flushIntervalMs ?? DEFAULT_KEY_USAGE_FLUSH_MS;
    this.lastFlushMs = deps.clock.now().getTime();
  }

  /** A successful authentication with `keyId` at `at`. Synchronous, never throws. */
  record(keyId: string, at: Date): void {
    const ms = at.getTime();
    const known = this.pending.get(keyId);
    if (known === undefined || known < ms) this.pending.set(keyId, ms);
    if (ms - this.lastFlushMs >= this.flushIntervalMs) void this.flushIfDue();
  }

  /** Uses waiting for the next flush (one per key). */
  get pendingKeys(): number {
    return this.pending.size;
  }

  /** Flushes when an interval has passed since the last flush (by the Clock); otherwise nothing. */
  flushIfDue(): Promise<void> {
    if (this.flushing !== null || this.deps.clock.now().getTime() - this.lastFlushMs < this.flushIntervalMs) {
      return this.flushing ?? Promise.resolve();
    }
    return this.flush();
  }

  /**
   * Writes every pending use now in one statement (waits for a flush in progress first). Resolves
   * even when the write fails: the uses are kept for the next flush and a throttled warning logged.
   */
  async flush(): Promise<void> {
    while (this.flushing !== null) await this.flushing;
    this.lastFlushMs = this.deps.clock.now().getTime();
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const uses: KeyUse[] = [];
    for (const [keyId, ms] of batch) uses.push({ keyId, at: new Date(ms) });
    this.flushing = this.deps.apiKeys.recordUses(uses).then(
      () => undefined,
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
    this.timer = setInterval(() => void this.flushIfDue(), Math.min(TICK_MS, this.flushIntervalMs));
    this.timer.unref();
  }

  /** Stops the timer and writes what is left (graceful shutdown). Idempotent. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }

  /** A failed flush: its uses go back (a later use of the same key wins) and a warning is logged, throttled. */
  private keep(batch: Map<string, number>, e: unknown): void {
    for (const [keyId, ms] of batch) {
      const known = this.pending.get(keyId);
      if (known === undefined || known < ms) this.pending.set(keyId, ms);
    }
    const now = this.deps.clock.now().getTime();
    if (now - this.lastWarnMs < KEY_USAGE_WARN_INTERVAL_MS) {
      this.suppressed += 1;
      return;
    }
    this.deps.logger.warn(
      { err: e instanceof Error ? e.message : String(e), pending_keys: this.pending.size, suppressed: this.suppressed },
      'last_used_at flush failed; the uses are kept and written at the next flush',
    );
    this.lastWarnMs = now;
    this.suppressed = 0;
  }
}
