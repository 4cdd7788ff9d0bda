import type { ApiKeyStore } from './api-key-store.js';
import type { AuditLog } from './audit-log.js';
import type { IdempotencyStore } from './idempotency-store.js';
import type { MemberStore } from './member-store.js';
import type { OrganisationStore } from './organisation-store.js';
import type { Outbox } from './outbox.js';
import type { UsageStore } from './usage-store.js';
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
  /** Usage counts per key and hour (written by KeyUsage outside any unit of work). */
  readonly usage: UsageStore;
}

/**
 * What a unit of work declares before it opens. `changesCredentialsOf`: the organisations whose
 * credentials it may change, that is every organisation passed to a credential-affecting write
 * (ApiKeyStore.revoke and shortenExpiry, OrganisationStore.update: what an authentication answers
 * or the organisation record a credential cache holds). The core announces these changes to every
 * instance before the transaction opens (credential-fence.ts).
 */
export interface WorkDeclaration {
  readonly changesCredentialsOf?: readonly string[];
}

export interface UnitOfWork {
  /**
   * Runs `work` in one transaction: every write made through the given stores commits together,
   * or none does when `work` throws (the error is rethrown). Used for a revocation and its audit
   * entry (C-40), issuance with the active-key cap (C-25), and every other write + audit pair.
   *
   * A credential-affecting write through the given stores for an organisation that `declaration`
   * does not list throws UndeclaredCredentialChangeError and writes nothing (so a use case that
   * forgets its declaration fails loudly instead of leaving stale credentials in caches).
   */
  run<T>(work: (stores: Stores) => Promise<T>, declaration?: WorkDeclaration): Promise<T>;
}

/**
 * The stores outside a unit of work, as the use cases get them: without the credential-affecting
 * writes, which only a unit of work that declares its organisation may make (so a use case cannot
 * write a credential past the fence: it does not compile).
 */
export type OuterStores = Omit<Stores, 'apiKeys' | 'organisations'> & {
  readonly apiKeys: Omit<ApiKeyStore, 'revoke' | 'shortenExpiry'>;
  readonly organisations: Omit<OrganisationStore, 'update' | 'putKeyPolicy'>;
};
