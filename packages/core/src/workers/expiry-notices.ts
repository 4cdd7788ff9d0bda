/**
 * Expiry notices (C-280..C-282): a long-running host scans once a minute, with one indexed query,
 * for the active keys that have their organisation's `expiry_notice_seconds` or less left and no
 * notice yet, and sends each one `api_key.expiring` through the webhook outbox (its retries and
 * per-endpoint delivery). Nothing is done per request.
 *
 * Every instance (every `serve` process) may scan: for each key found, one unit of work records the
 * notice with a conditional write (ApiKeyStore.claimExpiryNotice) and, only when that write was
 * this one's, enqueues the event. Of scans running at once exactly one claims a key, so a key gets
 * one notice. A key is claimed even when its organisation has no endpoint that wants the event (the
 * notice is then not written): the moment for it has passed, and an endpoint added later is not
 * sent notices for keys already within their period.
 */
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { Random } from '../ports/random.js';
import type { OuterStores, UnitOfWork } from '../ports/unit-of-work.js';
import { notifyKeyExpiring } from '../operations/key-events.js';
import { PeriodicTask } from './periodic-task.js';

const DEFAULT_EXPIRY_NOTICE_SCAN_INTERVAL_MS = 60_000;
/** Keys read per scan: a larger backlog (the first scan after an upgrade) drains over the next minutes. */
const EXPIRY_NOTICE_SCAN_LIMIT = 500;

export interface ExpiryNoticesDeps {
  readonly stores: Pick<OuterStores, 'apiKeys'>;
  readonly unitOfWork: UnitOfWork;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  /** Time between two scans (default one minute). */
  readonly intervalMs?: number;
  /** Keys read per scan (default EXPIRY_NOTICE_SCAN_LIMIT). */
  readonly limit?: number;
}

/** What one scan did: keys whose notice it recorded, and of those the events it enqueued. */
export interface ExpiryScan {
  readonly claimed: number;
  readonly enqueued: number;
}

export class ExpiryNotices {
  readonly intervalMs: number;
  private readonly limit: number;
  private readonly task: PeriodicTask;

  constructor(private readonly deps: ExpiryNoticesDeps) {
    this.intervalMs = deps.intervalMs ?? DEFAULT_EXPIRY_NOTICE_SCAN_INTERVAL_MS;
    this.limit = deps.limit ?? EXPIRY_NOTICE_SCAN_LIMIT;
    this.task = new PeriodicTask(() => this.scanOnce(), this.intervalMs, deps.logger, 'expiry notices scan failed; trying again at the next interval');
  }

  /** One scan at the clock's now. */
  async scanOnce(): Promise<ExpiryScan> {
    const { clock, random, stores, unitOfWork } = this.deps;
    const now = clock.now();
    const due = await stores.apiKeys.listExpiryNoticesDue(now, this.limit);
    let claimed = 0;
    let enqueued = 0;
    for (const key of due) {
      const outcome = await unitOfWork.run(async (s) => {
        // Another instance's scan, a revocation or a policy change since the read: nothing to send.
        if (!(await s.apiKeys.claimExpiryNotice(key.id, now))) return 'skipped';
        return (await notifyKeyExpiring(s, random, now, { ...key, expiresAt: key.expiresAt! })) ? 'enqueued' : 'claimed';
      });
      if (outcome !== 'skipped') claimed += 1;
      if (outcome === 'enqueued') enqueued += 1;
    }
    if (claimed > 0) this.deps.logger.info({ claimed, enqueued }, 'expiry notices: keys noticed, api_key.expiring events enqueued');
    return { claimed, enqueued };
  }

  /** Scans now, then every intervalMs until stop(). */
  start(): void {
    this.task.start();
  }

  /** Stops the timer and waits for a scan in progress. */
  stop(): Promise<void> {
    return this.task.stop();
  }
}
