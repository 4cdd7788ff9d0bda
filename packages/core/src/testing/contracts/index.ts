/**
 * @cos/core/testing/contracts: the contract suite of every port (mocha `describe`/`it`, chai
 * `expect`), run unchanged against each implementation: in-memory, SQLite, Postgres, Redis.
 */
export type { CounterHarness, StoreHarness, StoreHarnessFactory } from '../harness.js';
export { describeApiKeyStore, expectApiKey } from './api-key-store.js';
export { describeAuditLog, expectAuditEntry } from './audit-log.js';
export { describeHealthProbe } from './health-probe.js';
export { describeInstanceRegistry, type InstanceRegistryHarness } from './instance-registry.js';
export { describeIdempotencyStore } from './idempotency-store.js';
export { describeMemberStore, expectMember } from './member-store.js';
export { describeOrganisationStore, expectOrganisation } from './organisation-store.js';
export { describeOutbox, expectNotification } from './outbox.js';
export { describeRateCounter } from './rate-counter.js';
export { describeStoreContract } from './store.js';
export { describeUnitOfWork } from './unit-of-work.js';
export { describeUsageStore } from './usage-store.js';
export { describeWebhookStore, expectWebhookEndpoint } from './webhook-store.js';
export { describeWebhookHostResolver, describeWebhookSender } from './webhook-sender.js';
export { describeCredentialFreshness, type FreshnessHarness } from './credential-freshness.js';
export {
  T0,
  at,
  newApiKey,
  newAuditEntry,
  newDigest,
  newMember,
  newOrganisation,
  newOutboxNotification,
  newWebhookEndpoint,
  storePorts,
} from './fixtures.js';
