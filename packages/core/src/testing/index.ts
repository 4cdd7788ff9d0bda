/**
 * @cos/core/testing: real in-memory adapters, test doubles for time/randomness/logging, and the
 * contract suites every port implementation runs unchanged.
 */
export type { CounterHarness, StoreHarness, StoreHarnessFactory } from './harness.js';
export { createInMemoryStore } from './in-memory-store.js';
export { InMemoryRateCounter } from './in-memory-rate-counter.js';
export { FakeClock, FAKE_CLOCK_START } from './fake-clock.js';
export { seededRandom } from './seeded-random.js';
export { CapturingLogger, type LogEntry } from './capturing-logger.js';
export { createTestCore, type TestCore, type TestCoreOptions } from './test-core.js';
export {
  describeApiKeyStore,
  describeAuditLog,
  describeHealthProbe,
  describeMemberStore,
  describeOrganisationStore,
  describeRateCounter,
  describeStoreContract,
  describeUnitOfWork,
  expectApiKey,
  expectAuditEntry,
  expectMember,
  expectOrganisation,
} from './contracts/index.js';
