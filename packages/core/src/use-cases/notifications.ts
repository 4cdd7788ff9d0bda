/** Reading and retrying the webhook outbox (operator: `cos-admin notifications list|retry`, C-59). */
import { ConflictError, NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import type { Notification, NotificationStatus } from '../domain/webhook.js';
import type { OutboxFilter } from '../ports/outbox.js';
import { checkUuid } from '../validation/ids.js';
import { all, valid, type Checked } from '../validation/issues.js';
import { checkListQuery } from '../validation/query.js';
import { checkNotificationStatus } from '../validation/webhook.js';
import { authorise } from './authorise.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';

export const NOTIFICATION_NOT_FOUND_MESSAGE = 'Notification not found';
export const NOTIFICATION_DELIVERED_MESSAGE = 'The notification was delivered already';

function optional<T>(value: unknown, check: (v: unknown) => Checked<T>): Checked<T | undefined> {
  return value === undefined ? valid(undefined) : check(value);
}

export class Notifications {
  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'clock'>) {}

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
    const existing = await this.deps.stores.outbox.findById(nid);
    if (existing === null) throw new NotFoundError(NOTIFICATION_NOT_FOUND_MESSAGE);
    if (!(await this.deps.stores.outbox.retry(nid, this.deps.clock.now()))) {
      if (existing.status === 'delivered') throw new ConflictError(NOTIFICATION_DELIVERED_MESSAGE);
      throw new NotFoundError(NOTIFICATION_NOT_FOUND_MESSAGE);
    }
    return (await this.deps.stores.outbox.findById(nid)) ?? existing;
  }
}
