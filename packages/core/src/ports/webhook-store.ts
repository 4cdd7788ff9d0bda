import type { WebhookEndpoint } from '../domain/webhook.js';

/** Each organisation's optional webhook endpoint (at most one). */
export interface WebhookStore {
  /** The organisation's endpoint, or null. */
  get(organisationId: string): Promise<WebhookEndpoint | null>;
  /** Sets (inserts or replaces) the organisation's endpoint. */
  put(endpoint: WebhookEndpoint): Promise<void>;
  /** Removes the organisation's endpoint; true when there was one. */
  remove(organisationId: string): Promise<boolean>;
}
