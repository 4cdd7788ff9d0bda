import type { CoreConfig } from '../config.js';
import { createCore, type Core } from '../core.js';
import { cryptoRandom } from '../defaults.js';
import type { Metrics } from '../ports/metrics.js';
import type { Random } from '../ports/random.js';
import type { RateCounter } from '../ports/rate-counter.js';
import type { WebhookHostResolver, WebhookSender } from '../ports/webhook-sender.js';
import type { WebhookDeliveryOptions } from '../workers/webhook-delivery.js';
import { CapturingLogger } from './capturing-logger.js';
import { FakeClock } from './fake-clock.js';
import type { StoreHarness } from './harness.js';
import { InMemoryRateCounter } from './in-memory-rate-counter.js';
import { createInMemoryStore } from './in-memory-store.js';
import type { WebhookSecretCipher } from '../domain/webhook-secret-cipher.js';

/** A whole in-memory core for adapter tests: createCore over the in-memory adapters with a FakeClock. */
export interface TestCore<C extends RateCounter = InMemoryRateCounter> {
  core: Core;
  clock: FakeClock;
  store: StoreHarness;
  counter: C;
  logger: CapturingLogger;
}

export interface TestCoreOptions<C extends RateCounter = InMemoryRateCounter> {
  config?: Partial<CoreConfig>;
  clock?: FakeClock;
  store?: StoreHarness;
  /** Default: an InMemoryRateCounter on the same FakeClock. */
  counter?: C;
  /** Default: node:crypto (so two cores over one shared store never mint the same ids). */
  random?: Random;
  logger?: CapturingLogger;
  /** Default: none (noopMetrics); e.g. a RecordingMetrics. */
  metrics?: Metrics;
  /** Default: none (webhook hosts are checked as written, not resolved). */
  webhookHosts?: WebhookHostResolver;
  /** Default: webhook secrets stored in clear. */
  webhookSecrets?: WebhookSecretCipher;
  /** Scope names of the embedding service's own, as CreateCoreOptions.scopes (default: none). */
  scopes?: readonly string[];
  /** As CreateCoreOptions.webhookSender: given, `core.webhookDelivery` delivers through it (default: none, null). */
  webhookSender?: WebhookSender;
  /** As CreateCoreOptions.webhookDelivery. */
  webhookDelivery?: Partial<WebhookDeliveryOptions>;
}

export function createTestCore<C extends RateCounter = InMemoryRateCounter>(options: TestCoreOptions<C> = {}): TestCore<C> {
  const clock = options.clock ?? new FakeClock();
  const store = options.store ?? createInMemoryStore();
  const counter = options.counter ?? (new InMemoryRateCounter(clock) as RateCounter as C);
  const logger = options.logger ?? new CapturingLogger();
  const core = createCore({
    stores: store.stores,
    unitOfWork: store.unitOfWork,
    health: store.health,
    counter,
    clock,
    random: options.random ?? cryptoRandom,
    logger,
    ...(options.metrics !== undefined ? { metrics: options.metrics } : {}),
    ...(options.config !== undefined ? { config: options.config } : {}),
    ...(options.webhookHosts !== undefined ? { webhookHosts: options.webhookHosts } : {}),
    ...(options.webhookSecrets !== undefined ? { webhookSecrets: options.webhookSecrets } : {}),
    ...(options.scopes !== undefined ? { scopes: options.scopes } : {}),
    ...(options.webhookSender !== undefined ? { webhookSender: options.webhookSender } : {}),
    ...(options.webhookDelivery !== undefined ? { webhookDelivery: options.webhookDelivery } : {}),
  });
  return { core, clock, store, counter, logger };
}
