import type { WebhookEndpoint } from '../domain/webhook.js';

/** Each organisation's optional webhook endpoint (at most one). The secret is stored as given. */
export interface WebhookStore {
  /** The organisation's endpoint, or null. */
  get(organisationId: string): Promise<WebhookEndpoint | null>;
  /** Sets (inserts or replaces) the organisation's endpoint. */
  put(endpoint: WebhookEndpoint): Promise<void>;
  /** Removes the organisation's endpoint; true when there was one. */
  remove(organisationId: string): Promise<boolean>;
  /**
   * Every endpoint, a page at a time: ordered by organisation id ascending (byte order), strictly
   * after `afterOrganisationId` (null: from the first), at most `limit`.
   */
  listAfter(afterOrganisationId: string | null, limit: number): Promise<WebhookEndpoint[]>;
  /**
   * Replaces the stored secret only while it is still `expected` (compare and set), leaving every
   * other field; false when it changed meanwhile or there is no endpoint. Re-encrypting secrets
   * under a new key uses it, so a rotation committed meanwhile is never overwritten.
   */
  replaceSecret(organisationId: string, expected: string, next: string): Promise<boolean>;
}
