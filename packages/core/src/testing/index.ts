/**
 * @cos/core/testing: real in-memory adapters and test doubles for time, randomness and logging.
 * No test framework is needed to use them. The contract suites every port implementation runs
 * unchanged are at @cos/core/testing/contracts (they need mocha and chai).
 */
export type { CounterHarness, StoreHarness, StoreHarnessFactory } from './harness.js';
export { createInMemoryStore } from './in-memory-store.js';
export { InMemoryRateCounter } from './in-memory-rate-counter.js';
export { InMemoryFreshCounter, IN_MEMORY_CHANGE_BOUND_MS } from './in-memory-freshness.js';
export { InMemoryInstanceRegistry } from './in-memory-instance-registry.js';
export { FakeClock, FAKE_CLOCK_START } from './fake-clock.js';
export { seededRandom } from './seeded-random.js';
export { CapturingLogger, type LogEntry } from './capturing-logger.js';
export { RecordingMetrics, type MetricEvent } from './recording-metrics.js';
export { StaticHostResolver } from './static-host-resolver.js';
export { createTestCore, type TestCore, type TestCoreOptions } from './test-core.js';
