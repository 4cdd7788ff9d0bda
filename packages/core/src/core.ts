import { DEFAULT_CORE_CONFIG, type CoreConfig } from './config.js';
import type { Clock } from './ports/clock.js';
import type { CredentialFreshness } from './ports/credential-freshness.js';
import type { HealthProbe } from './ports/health-probe.js';
import type { Logger } from './ports/logger.js';
import type { Metrics } from './ports/metrics.js';
import type { Random } from './ports/random.js';
import type { RateCounter } from './ports/rate-counter.js';
import type { Stores, UnitOfWork } from './ports/unit-of-work.js';
import type { WebhookHostResolver, WebhookSender } from './ports/webhook-sender.js';
import { systemClock, cryptoRandom, silentLogger, noopMetrics } from './defaults.js';
import { ApiKeys } from './operations/api-keys.js';
import { AuditTrail } from './operations/audit-trail.js';
import { Admission } from './access/admission.js';
import { Bootstrap } from './operations/bootstrap.js';
import { CredentialCache, type CredentialCacheLease } from './access/credential-cache.js';
import { FENCE_WARN_INTERVAL_MS, FencedUnitOfWork } from './access/credential-fence.js';
import { LogThrottle } from './log-throttle.js';
import type { CoreDeps } from './deps.js';
import { Health } from './operations/health.js';
import { Idempotency } from './operations/idempotency.js';
import { KeyUsage } from './workers/key-usage.js';
import { DEFAULT_NOTIFICATION_RETENTION_MS, NotificationRetention } from './workers/notification-retention.js';
import { DEFAULT_USAGE_RETENTION_MS, UsageRetention } from './workers/usage-retention.js';
import { WebhookDelivery, type WebhookDeliveryOptions } from './workers/webhook-delivery.js';
import { Members } from './operations/members.js';
import { Organisations } from './operations/organisations.js';
import { Usage } from './operations/usage.js';
import { Notifications } from './operations/notifications.js';
import { RateLimiter } from './access/rate-limit.js';
import { SecretScanning } from './operations/secret-scanning.js';
import { Webhooks } from './operations/webhooks.js';
import type { WebhookSecretCipher } from './domain/webhook-secret-cipher.js';
import { KeyPolicies } from './operations/key-policies.js';
import { knownScopes } from './domain/scopes.js';

/** The whole core, ready to serve: what adapters (HTTP, CLI) and embedding services call. */
export interface Core {
  readonly organisations: Organisations;
  readonly members: Members;
  readonly apiKeys: ApiKeys;
  readonly audit: AuditTrail;
  /**
   * Admission of HTTP requests (admission.ts): `admit(authorization, sourceAddress)` parses the
   * key, looks the credential up once (through the credential cache when there is one), checks it,
   * and counts the request once (its organisation, or its source address when refused).
   */
  readonly admission: Admission;
  /** The same object as `admission`, under the name embedders use for `authenticate(header)`. */
  readonly authenticator: Admission;
  /**
   * The uses of keys the authenticator records, written in batches (last_used_at). A
   * long-running host calls `keyUsage.start()` once serving and `await keyUsage.stop()` on graceful
   * shutdown, before closing the store (it writes what is left).
   */
  readonly keyUsage: KeyUsage;
  /**
   * The webhook outbox's delivery (C-59), reporting each attempt to `metrics`; null when
   * CreateCoreOptions.webhookSender was not given (notifications then wait in the outbox for a host
   * that delivers). A long-running host calls `webhookDelivery.start()` once serving and
   * `await webhookDelivery.stop()` on graceful shutdown, before closing the store.
   */
  readonly webhookDelivery: WebhookDelivery | null;
  /**
   * The outbox's retention: purges delivered and failed notifications past
   * CreateCoreOptions.notificationRetentionMs. A long-running host calls `start()` once serving and
   * `await stop()` on graceful shutdown.
   */
  readonly notificationRetention: NotificationRetention;
  /** Usage counts per key (and summed per organisation), by hour or UTC day. */
  readonly usage: Usage;
  /**
   * The usage counts' retention: deletes the hours past CreateCoreOptions.usageRetentionMs. A
   * long-running host calls `start()` once serving and `await stop()` on graceful shutdown.
   */
  readonly usageRetention: UsageRetention;
  readonly rateLimiter: RateLimiter;
  readonly health: Health;
  readonly bootstrap: Bootstrap;
  /** Leaked keys reported by the secret-scanning programme (the HTTP adapter verifies the alert). */
  readonly secretScanning: SecretScanning;
  /** Organisations' webhook endpoints (operator). */
  readonly webhooks: Webhooks;
  /** The webhook outbox (operator). */
  readonly notifications: Notifications;
  /** Idempotency keys of POST/PUT/PATCH/DELETE requests (the HTTP adapter starts and finishes them). */
  readonly idempotency: Idempotency;
  readonly clock: Clock;
  /** Where the HTTP adapter reports its requests (the port the use cases report to). */
  readonly metrics: Metrics;
  readonly config: CoreConfig;
  /**
   * Every scope a key of this process can hold (C-60), sorted: the built-in ones and those declared
   * in CreateCoreOptions.scopes. A key is never issued with any other.
   */
  readonly scopes: readonly string[];
  /** Organisations' key policies (C-62). */
  readonly keyPolicies: KeyPolicies;
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
  /** Resolves a webhook endpoint's host name when it is set, to refuse names pointing inside (default: none). */
  readonly webhookHosts?: WebhookHostResolver;
  /**
   * The shared counter store's freshness tokens (Redis). Given: every credential write is
   * fenced (credential-fence.ts) and, unless `credentialCache` is false, the HTTP hot path keeps
   * credentials in memory and confirms them in the call that counts the request
   * (credential-cache.ts). With `credentialCache: false` the fence is best effort (a write never
   * fails because of Redis) and every request reads the store.
   */
  readonly freshness?: CredentialFreshness;
  /** Default true when `freshness` is given. */
  readonly credentialCache?: boolean;
  /**
   * When the credential cache may be trusted at all (see CredentialCacheLease): the composition
   * root's record of this instance in the shared database. Absent: always.
   */
  readonly credentialCacheLease?: CredentialCacheLease;
  /** Bound on the credential cache's entries (default CREDENTIAL_CACHE_MAX_ENTRIES). */
  readonly credentialCacheMaxEntries?: number;
  /**
   * Seals webhook signing secrets at rest (WEBHOOK_SECRET_ENCRYPTION_KEY) and opens them; the
   * WebhookDelivery of the same host needs the same cipher. Default: secrets stored in clear.
   */
  readonly webhookSecrets?: WebhookSecretCipher;
  /**
   * Scope names of the embedding service's own operations (`resource:action`, e.g. `reports:read`),
   * added to the built-in ones (C-60). The set stays closed per process: a key can be issued only
   * with scopes that are built in or declared here. Its routes check them with `requireScope`.
   */
  readonly scopes?: readonly string[];
  /**
   * Sends one signed notification to an endpoint (@cos/webhook-sender's createWebhookSender). Given:
   * `core.webhookDelivery` delivers the outbox; absent: it is null.
   */
  readonly webhookSender?: WebhookSender;
  /** The delivery's timeouts, attempts, backoff, polling and concurrency (default DEFAULT_WEBHOOK_DELIVERY). */
  readonly webhookDelivery?: Partial<WebhookDeliveryOptions>;
  /** How long delivered and failed notifications are kept (default DEFAULT_NOTIFICATION_RETENTION_MS). */
  readonly notificationRetentionMs?: number;
  /** How long usage counts are kept (default DEFAULT_USAGE_RETENTION_MS). */
  readonly usageRetentionMs?: number;
}

/** Bound on one fence call (begin/end of a credential change): a write may wait longer than a read. */
const FENCE_TIMEOUT_FLOOR_MS = 250;

/**
 * Builds every operation, the access machinery and the background workers over the given ports;
 * defaults: system clock, node:crypto, silent logger, no metrics. The workers are built stopped.
 */
export function createCore(options: CreateCoreOptions): Core {
  const config = { ...DEFAULT_CORE_CONFIG, ...options.config };
  const random = options.random ?? cryptoRandom;
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const scopes = knownScopes(options.scopes);
  const freshness = options.freshness;
  const caching = freshness !== undefined && options.credentialCache !== false;
  const fence =
    freshness === undefined
      ? undefined
      : { freshness, strict: caching, random, logger, timeoutMs: Math.max(FENCE_TIMEOUT_FLOOR_MS, config.rateCounterTimeoutMs), warnings: new LogThrottle(FENCE_WARN_INTERVAL_MS, () => clock.now().getTime()) };
  const deps: CoreDeps = {
    stores: options.stores,
    unitOfWork: fence === undefined ? options.unitOfWork : new FencedUnitOfWork(options.unitOfWork, fence),
    counter: options.counter,
    health: options.health,
    clock,
    random,
    logger,
    metrics: options.metrics ?? noopMetrics,
    config,
    webhookHosts: options.webhookHosts ?? null,
    ...(options.webhookSecrets !== undefined ? { webhookSecrets: options.webhookSecrets } : {}),
    scopes,
  };
  const rateLimiter = new RateLimiter(deps);
  const cache =
    caching && freshness !== undefined
      ? new CredentialCache(deps, {
          freshness,
          ...(options.credentialCacheLease !== undefined ? { lease: options.credentialCacheLease } : {}),
          ...(options.credentialCacheMaxEntries !== undefined ? { maxEntries: options.credentialCacheMaxEntries } : {}),
        })
      : null;
  const keyUsage = new KeyUsage({
    apiKeys: deps.stores.apiKeys,
    usage: deps.stores.usage,
    clock: deps.clock,
    logger: deps.logger,
    flushIntervalMs: deps.config.keyUsageFlushIntervalMs,
  });
  const admission = new Admission(deps, { limiter: rateLimiter, usage: keyUsage, cache });
  const webhookDelivery =
    options.webhookSender === undefined
      ? null
      : new WebhookDelivery({
          stores: options.stores,
          sender: options.webhookSender,
          clock,
          random,
          logger,
          metrics: deps.metrics,
          ...(options.webhookSecrets !== undefined ? { secrets: options.webhookSecrets } : {}),
          ...(options.webhookDelivery !== undefined ? { options: options.webhookDelivery } : {}),
        });
  const notifications = new Notifications(deps);
  const notificationRetention = new NotificationRetention({
    notifications,
    logger,
    retentionMs: options.notificationRetentionMs ?? DEFAULT_NOTIFICATION_RETENTION_MS,
  });
  const usageRetention = new UsageRetention({
    usage: deps.stores.usage,
    clock,
    logger,
    retentionMs: options.usageRetentionMs ?? DEFAULT_USAGE_RETENTION_MS,
  });
  return {
    organisations: new Organisations(deps),
    members: new Members(deps),
    apiKeys: new ApiKeys(deps),
    audit: new AuditTrail(deps),
    admission,
    authenticator: admission,
    keyUsage,
    webhookDelivery,
    notificationRetention,
    usage: new Usage(deps),
    usageRetention,
    rateLimiter,
    health: new Health(deps),
    bootstrap: new Bootstrap(deps),
    secretScanning: new SecretScanning(deps),
    webhooks: new Webhooks(deps),
    notifications,
    idempotency: new Idempotency(deps),
    clock: deps.clock,
    metrics: deps.metrics,
    config: deps.config,
    scopes,
    keyPolicies: new KeyPolicies(deps),
  };
}
