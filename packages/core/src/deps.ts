import type { CoreConfig } from './config.js';
import type { Clock } from './ports/clock.js';
import type { HealthProbe } from './ports/health-probe.js';
import type { Logger } from './ports/logger.js';
import type { Metrics } from './ports/metrics.js';
import type { Random } from './ports/random.js';
import type { RateCounter } from './ports/rate-counter.js';
import type { OuterStores, UnitOfWork } from './ports/unit-of-work.js';
import type { WebhookHostResolver } from './ports/webhook-sender.js';
import type { WebhookSecretCipher } from './domain/webhook-secret-cipher.js';

/** Everything the use cases need, passed to their constructors (no container in core). */
export interface CoreDeps {
  /** Each call its own transaction; credential-affecting writes only through `unitOfWork` (declared). */
  readonly stores: OuterStores;
  readonly unitOfWork: UnitOfWork;
  readonly counter: RateCounter;
  readonly health: HealthProbe;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  /** Counters for operators (noopMetrics unless the composition root gives one). */
  readonly metrics: Metrics;
  readonly config: CoreConfig;
  /** Resolves a webhook endpoint's host name when it is set (null: literal hosts and names only). */
  readonly webhookHosts: WebhookHostResolver | null;
  /** Seals webhook signing secrets before they are stored and opens them to sign (default: stored in clear). */
  readonly webhookSecrets?: WebhookSecretCipher;
  /**
   * The closed set of scopes of this process (C-60): the built-in ones plus those the embedding
   * service declared (CreateCoreOptions.scopes), sorted. Omitted: the built-in scopes.
   */
  readonly scopes?: readonly string[];
}
