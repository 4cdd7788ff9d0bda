import type { Notification, NotificationStatus } from '../domain/webhook.js';
import type { PageRequest } from './pagination.js';

export interface OutboxFilter {
  readonly organisationId?: string;
  readonly status?: NotificationStatus;
}

/** How one attempt ended, recorded by `complete` (only while the claim still holds). */
export type AttemptOutcome =
  | { readonly status: 'delivered'; readonly at: Date }
  | { readonly status: 'pending'; readonly nextAttemptAt: Date; readonly error: string }
  | { readonly status: 'failed'; readonly at: Date; readonly error: string };

/**
 * The webhook outbox (C-59). Events are enqueued in the unit of work of the change they report;
 * senders claim due ones with a lease, so two instances never start the same attempt (Postgres:
 * `FOR UPDATE SKIP LOCKED`), and a sender that dies leaves its claim to expire.
 *
 * Delivery is per endpoint (one endpoint per organisation): at most one notification of an
 * organisation is under a live claim at any time, and of its due notifications the one written
 * first is claimed first (write order: enqueue order, also within one unit of work). A
 * notification waiting for its next attempt (backing off) does not hold back the later ones.
 */
export interface Outbox {
  /** Adds a notification after every other one (its place in its organisation's write order). */
  enqueue(notification: Notification): Promise<void>;
  /**
   * Claims at most `limit` pending notifications due at `now` (nextAttemptAt <= now) that no live
   * claim holds (none, or one whose lease ended at or before `now`), at most one per organisation
   * and none of an organisation that has a notification under a live claim: per organisation the
   * due one written first; among organisations, oldest due first (nextAttemptAt, then id). Each
   * gets `claim` as its lease id until `leaseUntil`, and its attempts count goes up by one. Returns
   * them as claimed (attempts already counted), oldest due first. Concurrent claims (several
   * senders) never hand out one notification twice, nor two of one organisation.
   */
  claimDue(now: Date, leaseUntil: Date, limit: number, claim: string): Promise<Notification[]>;
  /**
   * Records how the attempt under `claim` ended and releases the lease. False (nothing changes) when
   * the notification is not pending under that claim any more (its lease expired and another sender
   * claimed it, or an operator changed it).
   */
  complete(id: string, claim: string, outcome: AttemptOutcome): Promise<boolean>;
  /**
   * Gives up the claim `claim` without an outcome (the attempt was abandoned, e.g. at shutdown): the
   * lease ends at once, so the notification is due again at its unchanged nextAttemptAt (another
   * sender may claim it right away); the started attempt stays counted and lastError is kept.
   * False (nothing changes) when the notification is not pending under that claim.
   */
  release(id: string, claim: string): Promise<boolean>;
  findById(id: string): Promise<Notification | null>;
  /** Ordered by (createdAt, id) ascending, strictly after `page.after`, at most `page.limit`. */
  list(filter: OutboxFilter, page: PageRequest): Promise<Notification[]>;
  /**
   * Makes a `failed` (or still pending) notification due again at `now` with a fresh attempt count,
   * dropping any claim. False when there is no such notification or it was delivered.
   */
  retry(id: string, now: Date): Promise<boolean>;
  /** Pending notifications (the outbox depth). */
  countPending(): Promise<number>;
  /**
   * Deletes at most `limit` delivered or failed notifications whose completedAt is before
   * `completedBefore` (oldest completed first); pending ones never. Returns how many it deleted.
   */
  purgeCompleted(completedBefore: Date, limit: number): Promise<number>;
}
