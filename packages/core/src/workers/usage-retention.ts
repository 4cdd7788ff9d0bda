/**
 * The usage counts' retention (USAGE_RETENTION): a long-running host deletes the hours that started
 * longer ago than the retention, at start and then periodically (every hour, or every retention
 * period when that is shorter). Several instances may purge at once: each deletes what is still there.
 */
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import { PeriodicTask } from './periodic-task.js';
import type { UsageStore } from '../ports/usage-store.js';

export const DEFAULT_USAGE_RETENTION_MS = 90 * 24 * 60 * 60 * 1000;
const MAX_PURGE_INTERVAL_MS = 60 * 60 * 1000;

export interface UsageRetentionDeps {
  readonly usage: Pick<UsageStore, 'purge'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Hours of usage are kept this long after they started. */
  readonly retentionMs: number;
  /** Time between two purges (default: the retention, at most one hour). */
  readonly intervalMs?: number;
}

export class UsageRetention {
  readonly intervalMs: number;
  private readonly task: PeriodicTask;

  constructor(private readonly deps: UsageRetentionDeps) {
    this.intervalMs = deps.intervalMs ?? Math.min(MAX_PURGE_INTERVAL_MS, deps.retentionMs);
    this.task = new PeriodicTask(() => this.purgeOnce(), this.intervalMs, deps.logger, 'usage counts purge failed; trying again at the next interval');
  }

  /** One purge; returns how many (key, hour) rows it deleted. */
  async purgeOnce(): Promise<number> {
    const before = new Date(this.deps.clock.now().getTime() - this.deps.retentionMs);
    const purged = await this.deps.usage.purge(before);
    if (purged > 0) this.deps.logger.info({ purged, started_before: before.toISOString() }, 'purged usage counts past their retention');
    return purged;
  }

  /** Purges now, then every intervalMs until stop(). */
  start(): void {
    this.task.start();
  }

  /** Stops the timer and waits for a purge in progress. */
  stop(): Promise<void> {
    return this.task.stop();
  }
}
