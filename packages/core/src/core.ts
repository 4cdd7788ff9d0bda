import { DEFAULT_CORE_CONFIG, type CoreConfig } from './config.js';
import type { Clock } from './ports/clock.js';
import type { HealthProbe } from './ports/health-probe.js';
import type { Logger } from './ports/logger.js';
import type { Metrics } from './ports/metrics.js';
import type { Random } from './ports/random.js';
import type { RateCounter } from './ports/rate-counter.js';
import type { Stores, UnitOfWork } from './ports/unit-of-work.js';
import { systemClock, cryptoRandom, silentLogger, noopMetrics } from './defaults.js';
import { ApiKeys } from './use-cases/api-keys.js';
import { AuditTrail } from './use-cases/audit-trail.js';
import { Authenticator } from './use-cases/authenticate.js';
import { Bootstrap } from './use-cases/bootstrap.js';
import type { CoreDeps } from './use-cases/deps.js';
import { Health } from './use-cases/health.js';
import { KeyUsage } from './use-cases/key-usage.js';
import { Members } from './use-cases/members.js';
import { Organisations } from './use-cases/organisations.js';
import { Notifications } from './use-cases/notifications.js';
import { RateLimiter } from './use-cases/rate-limit.js';
import { SecretScanning } from './use-cases/secret-scanning.js';
import { Webhooks } from './use-cases/webhooks.js';

/** The whole core, ready to serve: what adapters (HTTP, CLI) and embedding services call. */
export interface Core {
  readonly organisations: Organisations;
  readonly members: Members;
  readonly apiKeys: ApiKeys;
  readonly audit: AuditTrail;
  readonly authenticator: Authenticator;
  /**
   * The uses of keys the authenticator records, written in batches (last_used_at, issue 16). A
   * long-running host calls `keyUsage.start()` once serving and `await keyUsage.stop()` on graceful
   * shutdown, before closing the store (it writes what is left).
   */
  readonly keyUsage: KeyUsage;
  readonly rateLimiter: RateLimiter;
  readonly health: Health;
  readonly bootstrap: Bootstrap;
  /** Leaked keys reported by the secret-scanning programme (the HTTP adapter verifies the alert). */
  readonly secretScanning: SecretScanning;
  /** Organisations' webhook endpoints (operator). */
  readonly webhooks: Webhooks;
  /** The webhook outbox (operator). */
  readonly notifications: Notifications;
  readonly clock: Clock;
  /** Where the HTTP adapter reports its requests (the port the use cases report to). */
  readonly metrics: Metrics;
  readonly config: CoreConfig;
}

export interface CreateCoreOptions {
  readonly stores: Stores;
  readonly unitOfWork: UnitOfWork;
  readonly counter: RateCounter;
  readonly health: HealthProbe;
  readonly clock?: Clock;
  readonly random?: Random;
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  readonly config?: Partial<CoreConfig>;
}

/** Builds every use case over the given ports; defaults: system clock, node:crypto, silent logger, no metrics. */
export function createCore(options: CreateCoreOptions): Core {
  const deps: CoreDeps = {
    stores: options.stores,
    unitOfWork: options.unitOfWork,
    counter: options.counter,
    health: options.health,
    clock: options.clock ?? systemClock,
    random: options.random ?? cryptoRandom,
    logger: options.logger ?? silentLogger,
    metrics: options.metrics ?? noopMetrics,
    config: { ...DEFAULT_CORE_CONFIG, ...options.config },
  };
  const keyUsage = new KeyUsage({
    apiKeys: deps.stores.apiKeys,
    clock: deps.clock,
    logger: deps.logger,
    flushIntervalMs: deps.config.keyUsageFlushIntervalMs,
  });
  return {
    organisations: new Organisations(deps),
    members: new Members(deps),
    apiKeys: new ApiKeys(deps),
    audit: new AuditTrail(deps),
    authenticator: new Authenticator(deps, keyUsage),
    keyUsage,
    rateLimiter: new RateLimiter(deps),
    health: new Health(deps),
    bootstrap: new Bootstrap(deps),
    secretScanning: new SecretScanning(deps),
    webhooks: new Webhooks(deps),
    notifications: new Notifications(deps),
    clock: deps.clock,
    metrics: deps.metrics,
    config: deps.config,
  };
}
