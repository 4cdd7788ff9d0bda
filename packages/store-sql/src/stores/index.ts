import type { Stores } from '@cos/core';
import type { StoreContext } from '../context.js';
import { SqlApiKeyStore } from './api-key-store.js';
import { SqlAuditLog } from './audit-log.js';
import { SqlIdempotencyStore } from './idempotency-store.js';
import { SqlMemberStore } from './member-store.js';
import { SqlOrganisationStore } from './organisation-store.js';
import { SqlOutbox } from './outbox.js';
import { SqlUsageStore } from './usage-store.js';
import { SqlWebhookStore } from './webhook-store.js';

/** The stores over one connection (the pool, or a unit of work's transaction). */
export function createStores(ctx: StoreContext): Stores {
  return Object.freeze({
    organisations: new SqlOrganisationStore(ctx),
    members: new SqlMemberStore(ctx),
    apiKeys: new SqlApiKeyStore(ctx),
    audit: new SqlAuditLog(ctx),
    webhooks: new SqlWebhookStore(ctx),
    outbox: new SqlOutbox(ctx),
    idempotency: new SqlIdempotencyStore(ctx),
    usage: new SqlUsageStore(ctx),
  });
}
