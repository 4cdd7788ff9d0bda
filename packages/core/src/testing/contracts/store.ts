import type { StoreHarnessFactory } from '../harness.js';
import { describeApiKeyStore } from './api-key-store.js';
import { describeAuditLog } from './audit-log.js';
import { describeHealthProbe } from './health-probe.js';
import { describeIdempotencyStore } from './idempotency-store.js';
import { describeMemberStore } from './member-store.js';
import { describeOrganisationStore } from './organisation-store.js';
import { describeOutbox } from './outbox.js';
import { describeUnitOfWork } from './unit-of-work.js';
import { describeUsageStore } from './usage-store.js';
import { describeWebhookStore } from './webhook-store.js';

/** Every store contract: what a store implementation (in-memory, SQLite, Postgres) must pass. */
export function describeStoreContract(name: string, factory: StoreHarnessFactory): void {
  describe(`store contract: ${name}`, () => {
    describeOrganisationStore(name, factory);
    describeMemberStore(name, factory);
    describeApiKeyStore(name, factory);
    describeAuditLog(name, factory);
    describeWebhookStore(name, factory);
    describeOutbox(name, factory);
    describeIdempotencyStore(name, factory);
    describeUsageStore(name, factory);
    describeUnitOfWork(name, factory);
    describeHealthProbe(name, factory);
  });
}
