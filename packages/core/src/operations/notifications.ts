/**
 * Reading, retrying and purging the webhook outbox (operator: `cos-admin notifications
 * list|retry|purge`, C-59). A retry writes a `notification_retried` audit entry in its unit of work.
 */
import { ConflictError, NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import type { Notification, NotificationStatus } from '../domain/webhook.js';
import type { OutboxFilter } from '../ports/outbox.js';
import { checkUuid } from '../validation/ids.js';
import { all, valid, type Checked } from '../validation/issues.js';
import { checkListQuery } from '../validation/query.js';
import { checkNotificationStatus } from '../validation/webhook.js';
import { auditEntry } from './audit-entry.js';
import { actorOf, authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';

export const NOTIFICATION_NOT_FOUND_MESSAGE = 'Notification not found';
export const NOTIFICATION_DELIVERED_MESSAGE = 'The notification was delivered already';

function optional<T>(value: unknown, check: (v: unknown) => Checked<T>): Checked<T | undefined> {
  return value === undefined ? valid(undefined) : check(value);
}

/** Rows deleted per statement by `purge`: each statement is short, however many rows are old. */
export const PURGE_BATCH = 1_000;

/** What a purge did: the cut-off (completed before it) and how many notifications were deleted. */
export interface PurgeReport {
  readonly before: Date;
  readonly purged: number;
}

export class Notifications {
  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'unitOfWork' | 'clock' | 'random'>) {}

  /** Query {org?, status?, limit?, cursor?}; oldest first. */
  async list(principal: Principal, query: Readonly<Record<string, unknown>>): Promise<Page<Notification>> {
    authorise(principal, 'notifications.manage');
    const [page, org, status] = all(
      checkListQuery({ limit: query['limit'], cursor: query['cursor'] }),
      optional(query['org'], (v) => checkUuid(v, 'org')),
      optional<NotificationStatus>(query['status'], (v) => checkNotificationStatus(v)),
    );
    const filter: OutboxFilter = { ...(org !== undefined ? { organisationId: org } : {}), ...(status !== undefined ? { status } : {}) };
    return paginate(page, (p) => this.deps.stores.outbox.list(filter, p), (n) => n);
  }

  /** A failed (or pending) notification is due again now with a fresh attempt count. */
  async retry(principal: Principal, id: unknown): Promise<Notification> {
    authorise(principal, 'notifications.manage');
    const [nid] = all(checkUuid(id, 'id'));
    return this.deps.unitOfWork.run(async (stores) => {
      const existing = await stores.outbox.findById(nid);
      if (existing === null) throw new NotFoundError(NOTIFICATION_NOT_FOUND_MESSAGE, { resource: 'notification' });
      const now = this.deps.clock.now();
      if (!(await stores.outbox.retry(nid, now))) {
        if (existing.status === 'delivered') throw new ConflictError(NOTIFICATION_DELIVERED_MESSAGE);
        throw new NotFoundError(NOTIFICATION_NOT_FOUND_MESSAGE, { resource: 'notification' });
      }
      await stores.audit.append(
        auditEntry(this.deps.random, 'notification_retried', now, actorOf(principal), existing.organisationId, null, undefined, {
          notification: { id: existing.id, type: existing.type },
        }),
      );
      return (await stores.outbox.findById(nid)) ?? existing;
    });
  }

  /**
   * Deletes delivered and failed notifications completed more than `olderThanMs` ago (never a
   * pending one), in batches of PURGE_BATCH. Used by `serve` (NOTIFICATION_RETENTION) and
   * `cos-admin notifications purge --older-than`.
   */
  async purge(principal: Principal, olderThanMs: number): Promise<PurgeReport> {
    authorise(principal, 'notifications.manage');
    if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 1) throw new RangeError('olderThanMs must be a positive whole number of milliseconds');
    const before = new Date(this.deps.clock.now().getTime() - olderThanMs);
    let purged = 0;
    for (;;) {
      const n = await this.deps.stores.outbox.purgeCompleted(before, PURGE_BATCH);
      purged += n;
      if (n < PURGE_BATCH) break;
    }
    return { before, purged };
  }
}
