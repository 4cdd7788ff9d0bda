import type { Stores } from '../../ports/unit-of-work.js';
import type { Session } from '../in-memory-session.js';
import { InMemoryApiKeyStore } from './api-key-store.js';
import { InMemoryAuditLog } from './audit-log.js';
import { InMemoryIdempotencyStore } from './idempotency-store.js';
import { InMemoryMemberStore } from './member-store.js';
import { InMemoryOrganisationStore } from './organisation-store.js';
import { InMemoryOutbox } from './outbox.js';
import { InMemoryUsageStore } from './usage-store.js';
import { InMemoryWebhookStore } from './webhook-store.js';

/** The stores over one session (auto-commit, or a unit of work's transaction). */
export function storesOver(session: Session): Stores {
  return Object.freeze({
    organisations: new InMemoryOrganisationStore(session),
    members: new InMemoryMemberStore(session),
    apiKeys: new InMemoryApiKeyStore(session),
    audit: new InMemoryAuditLog(session),
    webhooks: new InMemoryWebhookStore(session),
    outbox: new InMemoryOutbox(session),
    idempotency: new InMemoryIdempotencyStore(session),
    usage: new InMemoryUsageStore(session),
  });
}
