import { DEFAULT_CORE_CONFIG, type CoreConfig } from './config.js';
import type { Clock } from './ports/clock.js';
import type { CredentialFreshness } from './ports/credential-freshness.js';
import type { HealthProbe } from './ports/health-probe.js';
import type { Logger } from './ports/logger.js';
import type { Metrics } from './ports/metrics.js';
import type { Random } from './ports/random.js';
import type { RateCounter } from './ports/rate-counter.js';
import type { OuterStores, UnitOfWork } from './ports/unit-of-work.js';
import type { WebhookHostResolver, WebhookSender } from './ports/webhook-sender.js';
import { systemClock, cryptoRandom, silentLogger, noopMetrics } from './defaults.js';
import { ApiKeys } from './operations/api-keys.js';
import { AuditTrail } from './operations/audit-trail.js';
import { Admission, Authenticator } from './access/admission.js';
import { Introspection } from './access/introspection.js';
import { Bootstrap } from './operations/bootstrap.js';
import { CredentialCache, type CredentialCacheLease } from './access/credential-cache.js';
import { FENCE_WARN_INTERVAL_MS, FencedUnitOfWork, type FenceMode } from './access/credential-fence.js';
import { LogThrottle } from './log-throttle.js';
import type { CoreDeps } from './deps.js';
import { Health } from './operations/health.js';
import { Idempotency } from './operations/idempotency.js';
import { IdempotencySweep } from './workers/idempotency-sweep.js';
import { KeyUsage } from './workers/key-usage.js';
import { DEFAULT_NOTIFICATION_RETENTION_MS, NotificationRetention } from './workers/notification-retention.js';
import { DEFAULT_USAGE_RETENTION_MS, UsageRetention } from './workers/usage-retention.js';
import { ExpiryNotices } from './workers/expiry-notices.js';
import { WebhookDelivery, type WebhookDeliveryOptions } from './workers/webhook-delivery.js';
import { Members } from './operations/members.js';
import { Organisations } from './operations/organisations.js';
import { Usage } from './operations/usage.js';
import { Notifications } from './operations/notifications.js';
import { RateLimiter } from './access/rate-limit.js';
import { TurnBatch } from './access/turn-batch.js';
import { SecretScanning } from './operations/secret-scanning.js';
import { Webhooks } from './operations/webhooks.js';
import type { WebhookSecretCipher } from './domain/webhook-secret-cipher.js';
import { KeyPolicies } from './operations/key-policies.js';
import { RateLimits } from './operations/rate-limits.js';
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
  /**
   * Authentication for embedders' own routes: `authenticate(header)` answers the key's principal
   * (or rejects with UnauthorizedError), read from the store, nothing counted; they then call
   * `rateLimiter.enforce`. It shares admission's lookup and records the key's use alike.
   */
  readonly authenticator: Authenticator;
  /**
   * The uses of keys admission and the authenticator record, written in batches (last_used_at). A
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
  /**
   * Deletes expired Idempotency-Key answers at start and then every
   * CreateCoreOptions.idempotencySweepIntervalMs. A long-running host calls `start()` once serving
   * and `await stop()` on graceful shutdown.
   */
  readonly idempotencySweep: IdempotencySweep;
  /** Usage counts per key (and summed per organisation), by hour or UTC day. */
  readonly usage: Usage;
  /**
   * The usage counts' retention: deletes the hours past CreateCoreOptions.usageRetentionMs. A
   * long-running host calls `start()` once serving and `await stop()` on graceful shutdown.
   */
  readonly usageRetention: UsageRetention;
  /**
   * The keys' expiry notices (`api_key.expiring`): scans once a minute. A long-running host calls
   * `start()` once serving and `await stop()` on graceful shutdown; several may run at once.
   */
  readonly expiryNotices: ExpiryNotices;
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
  /** Organisations' own rate limits, their plans (C-240). */
  readonly rateLimits: RateLimits;
  /** POST /v1/introspect (C-272): another service asks about a key, through `admission`'s own lookup. */
  readonly introspection: Introspection;
}

export interface CreateCoreOptions {
  /** The stores outside a unit of work (credential-affecting writes only through `unitOfWork.changeCredentials`). */
  readonly stores: OuterStores;
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
   * The shared counter store's freshness tokens (Redis). Given: every declared credential change
   * is fenced (credential-fence.ts) as `fenceMode` says, and in mode 'cache' the HTTP hot path keeps
   * credentials in memory and confirms them in the call that counts the request (credential-cache.ts).
   */
  readonly freshness?: CredentialFreshness;
  /** How credential changes are fenced in `freshness`, and whether credentials are cached (default 'cache'). */
  readonly fenceMode?: FenceMode;
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
  /** Time between two sweeps of expired Idempotency-Key answers (default DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS). */
  readonly idempotencySweepIntervalMs?: number;
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
  const mode = options.fenceMode ?? 'cache';
  const caching = freshness !== undefined && mode === 'cache';
  const fence =
    freshness === undefined
      ? undefined
      : { freshness, strict: mode !== 'best-effort', random, logger, timeoutMs: Math.max(FENCE_TIMEOUT_FLOOR_MS, config.rateCounterTimeoutMs), warnings: new LogThrottle(FENCE_WARN_INTERVAL_MS, () => clock.now().getTime()) };
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
  // With a shared counter store (Redis) every hit and freshness check of one event-loop turn goes
  // out as one call per organisation; the in-process counter answers at once, without the batch.
  const batch = new TurnBatch({ freshness: freshness ?? null, counter: options.counter, timeoutMs: config.rateCounterTimeoutMs });
  const rateLimiter = new RateLimiter(deps, batch);
  const cache =
    caching && freshness !== undefined
      ? new CredentialCache(deps, {
          freshness,
          batch,
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
  const authenticator = new Authenticator(deps, { usage: keyUsage });
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
  const idempotency = new Idempotency(deps);
  const idempotencySweep = new IdempotencySweep({
    idempotency,
    logger,
    ...(options.idempotencySweepIntervalMs !== undefined ? { intervalMs: options.idempotencySweepIntervalMs } : {}),
  });
  const usageRetention = new UsageRetention({
    usage: deps.stores.usage,
    clock,
    logger,
    retentionMs: options.usageRetentionMs ?? DEFAULT_USAGE_RETENTION_MS,
  });
  const expiryNotices = new ExpiryNotices({ stores: deps.stores, unitOfWork: deps.unitOfWork, clock, random, logger });
  return {
    organisations: new Organisations(deps),
    members: new Members(deps),
    apiKeys: new ApiKeys(deps),
    audit: new AuditTrail(deps),
    admission,
    authenticator,
    keyUsage,
    webhookDelivery,
    notificationRetention,
    idempotencySweep,
    usage: new Usage(deps),
    usageRetention,
    expiryNotices,
    rateLimiter,
    health: new Health(deps),
    bootstrap: new Bootstrap(deps),
    secretScanning: new SecretScanning(deps),
    webhooks: new Webhooks(deps),
    notifications,
    idempotency,
    clock: deps.clock,
    metrics: deps.metrics,
    config: deps.config,
    scopes,
    keyPolicies: new KeyPolicies(deps),
    rateLimits: new RateLimits(deps),
    introspection: new Introspection(admission),
  };
}
