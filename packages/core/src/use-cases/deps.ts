import type { CoreConfig } from '../config.js';
import type { Clock } from '../ports/clock.js';
import type { HealthProbe } from '../ports/health-probe.js';
import type { Logger } from '../ports/logger.js';
import type { Metrics } from '../ports/metrics.js';
import type { Random } from '../ports/random.js';
import type { RateCounter } from '../ports/rate-counter.js';
import type { Stores, UnitOfWork } from '../ports/unit-of-work.js';

/** Everything the use cases need, passed to their constructors (no container in core). */
export interface CoreDeps {
  readonly stores: Stores;
  readonly unitOfWork: UnitOfWork;
  readonly counter: RateCounter;
  readonly health: HealthProbe;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  /** Counters for operators (noopMetrics unless the composition root gives one). */
  readonly metrics: Metrics;
  readonly config: CoreConfig;
  /**
   * The closed set of scopes of this process (C-60): the built-in ones plus those the embedding
   * service declared (CreateCoreOptions.scopes), sorted. Omitted: the built-in scopes.
   */
  readonly scopes?: readonly string[];
}
