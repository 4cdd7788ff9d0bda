import type { ApiKeyStore } from './api-key-store.js';
import type { AuditLog } from './audit-log.js';
import type { IdempotencyStore } from './idempotency-store.js';
import type { MemberStore } from './member-store.js';
import type { OrganisationStore } from './organisation-store.js';
import type { Outbox } from './outbox.js';
import type { UsageStore } from './usage-store.js';
import type { WebhookStore } from './webhook-store.js';

/**
 * Every store port, as one bundle: what `UnitOfWork.changeCredentials` hands its work. Everywhere
 * else (outside a unit of work, where each call stands alone, and in `UnitOfWork.run`) the core and
 * its hosts hold OuterStores.
 */
export interface Stores {
  readonly organisations: OrganisationStore;
  readonly members: MemberStore;
  readonly apiKeys: ApiKeyStore;
  readonly audit: AuditLog;
  readonly webhooks: WebhookStore;
  readonly outbox: Outbox;
  /** Kept answers of requests made with an Idempotency-Key (outside any unit of work). */
  readonly idempotency: IdempotencyStore;
  /** Usage counts per key and hour (written by KeyUsage outside any unit of work). */
  readonly usage: UsageStore;
}

/**
 * The stores outside a unit of work, and inside one that changes no credential: without the
 * credential-affecting writes (ApiKeyStore.revoke, shortenExpiry and update, OrganisationStore.update and
 * putKeyPolicy: what an authentication answers, or the organisation record a credential cache
 * holds). Only `UnitOfWork.changeCredentials`, which names the organisations it changes, hands them
 * out, so a use case that forgets to name them does not compile.
 */
export type OuterStores = Omit<Stores, 'apiKeys' | 'organisations'> & {
  readonly apiKeys: Omit<ApiKeyStore, 'revoke' | 'shortenExpiry' | 'update'>;
  readonly organisations: Omit<OrganisationStore, 'update' | 'putKeyPolicy'>;
};

export interface UnitOfWork {
  /**
   * Runs `work` in one transaction: every write made through the given stores commits together,
   * or none does when `work` throws (the error is rethrown). Used for issuance with the active-key
   * cap (C-25) and every other write + audit pair that changes no credential.
   */
  run<T>(work: (stores: OuterStores) => Promise<T>): Promise<T>;
  /**
   * As `run`, for a unit of work that changes the credentials of `organisationIds` (a revocation
   * and its audit entry, C-40; an expiry shortened, an organisation updated, a key policy set): its
   * stores include the credential-affecting writes. The core announces these changes to every
   * instance before the transaction opens (credential-fence.ts).
   *
   * A second line of defence behind the types: a credential-affecting write for an organisation
   * not in `organisationIds` (or any such write reached through `run`'s stores by a cast) throws
   * UndeclaredCredentialChangeError and writes nothing, so it fails loudly instead of leaving stale
   * credentials in caches.
   */
  changeCredentials<T>(organisationIds: readonly string[], work: (stores: Stores) => Promise<T>): Promise<T>;
}
