import type { ApiKeyStore } from './api-key-store.js';
import type { AuditLog } from './audit-log.js';
import type { IdempotencyStore } from './idempotency-store.js';
import type { MemberStore } from './member-store.js';
import type { OrganisationStore } from './organisation-store.js';
import type { Outbox } from './outbox.js';
import type { WebhookStore } from './webhook-store.js';

/** The stores, as one bundle. Outside a unit of work each call stands alone. */
export interface Stores {
  readonly organisations: OrganisationStore;
  readonly members: MemberStore;
  readonly apiKeys: ApiKeyStore;
  readonly audit: AuditLog;
  readonly webhooks: WebhookStore;
  readonly outbox: Outbox;
  /** Kept answers of requests made with an Idempotency-Key (outside any unit of work). */
  readonly idempotency: IdempotencyStore;
}

export interface UnitOfWork {
  /**
   * Runs `work` in one transaction: every write made through the given stores commits together,
   * or none does when `work` throws (the error is rethrown). Used for a revocation and its audit
   * entry (C-40), issuance with the active-key cap (C-25), and every other write + audit pair.
   */
  run<T>(work: (stores: Stores) => Promise<T>): Promise<T>;
}
