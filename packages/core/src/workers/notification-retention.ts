/**
 * The outbox's retention (NOTIFICATION_RETENTION): a long-running host purges delivered and failed
 * notifications completed longer ago than the retention, at start and then periodically (every
 * hour, or every retention period when that is shorter). Pending notifications are never purged.
 * Several instances may purge at once: each deletes what is still there.
 */
import { OPERATOR } from '../domain/principal.js';
import type { Logger } from '../ports/logger.js';
import { PeriodicTask } from './periodic-task.js';
import type { Notifications } from '../operations/notifications.js';

export const DEFAULT_NOTIFICATION_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
const MAX_PURGE_INTERVAL_MS = 60 * 60 * 1000;

export interface NotificationRetentionDeps {
  readonly notifications: Notifications;
  readonly logger: Logger;
  /** Delivered and failed notifications are kept this long after they completed. */
  readonly retentionMs: number;
  /** Time between two purges (default: the retention, at most one hour). */
  readonly intervalMs?: number;
}

export class NotificationRetention {
  readonly intervalMs: number;
  private readonly task: PeriodicTask;

  constructor(private readonly deps: NotificationRetentionDeps) {
    this.intervalMs = deps.intervalMs ?? Math.min(MAX_PURGE_INTERVAL_MS, deps.retentionMs);
    this.task = new PeriodicTask(() => this.purgeOnce(), this.intervalMs, deps.logger, 'webhook outbox purge failed; trying again at the next interval');
  }

  /** One purge; returns how many notifications it deleted. */
  async purgeOnce(): Promise<number> {
    const { before, purged } = await this.deps.notifications.purge(OPERATOR, this.deps.retentionMs);
    if (purged > 0) {
      this.deps.logger.info({ purged, completed_before: before.toISOString() }, 'purged delivered and failed webhook notifications past their retention');
    }
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
