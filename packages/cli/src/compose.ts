/**
 * The factories the container (container.ts) binds: each builds one component from the parts it is
 * given (the SQL store, the rate counter, the Core, the Koa app, the webhook sender; the credential
 * fence's are in instance-registration.ts) and none knows how the others are chosen or wired. The
 * container is the one place that wires them; operator commands go through it as `serve` does.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  createCore,
  InProcessRateCounter,
  type Clock,
  type Core,
  type CoreConfig,
  type CredentialCacheLease,
  type CredentialFreshness,
  type FenceMode,
  type HealthProbe,
  type Logger,
  type Metrics,
  type Random,
  type RateCounter,
  type ScannerKeySet,
  type OuterStores,
  type UnitOfWork,
  type WebhookDeliveryOptions,
  type WebhookHostResolver,
  type WebhookSecretCipher,
  type WebhookSender,
} from '@cos/core';
import { createSqlStore, parseDatabaseUrl, type SqlStore } from '@cos/store-sql';
import type { AppConfig } from './config.js';
import { counterTarget } from './redis-target.js';

export type StoreKind = 'sqlite' | 'postgres';
export type LimiterKind = 'in-process' | 'redis';

/** The rate counter together with what it is and how to release it. */
export interface LimiterHandle {
  readonly kind: LimiterKind;
  readonly counter: RateCounter;
  /**
   * The Redis counter's credential freshness when the store is Postgres and REDIS_URL is
   * set: every instance and operator command then fences its credential writes in Redis, and caches
   * credentials unless CREDENTIAL_CACHE=off. Null otherwise (SQLite keeps its own freshness check).
   */
  readonly freshness: CredentialFreshness | null;
  /** The Redis counter's identity (created when absent), which a caching instance records; absent for any other counter. */
  readonly redisIdentity?: () => Promise<string | null>;
  close(): Promise<void>;
}

/** How long an instance's heartbeat waits for its Redis connection before reading the identity (at start it is still connecting). */
const INSTANCE_IDENTITY_CONNECT_MS = 2_000;

/** What a Koa application offers that the HTTP server needs (structural: no Koa import here). */
export interface HttpApp {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * Answers what Node's HTTP parser refuses before the app sees it (the server's `clientError`
   * event): adapter-koa's createClientErrorResponder. Absent: Node's bare answer.
   */
  clientError?(err: Error & { code?: string }, socket: Duplex): void;
  /**
   * Answers a CONNECT request (the server's `connect` event): adapter-koa's createConnectResponder.
   * Absent: Node closes the connection without a word.
   */
  connect?(req: IncomingMessage, socket: Duplex): void;
}

/** The SQL store chosen by DATABASE_URL (connects lazily; does not migrate). */
export function createStore(
  config: AppConfig,
  logger: Logger,
  { poolMax, metrics, statementTimeoutMs }: { readonly poolMax?: number; readonly metrics?: Metrics; readonly statementTimeoutMs?: number } = {},
): SqlStore {
  return createSqlStore({
    databaseUrl: config.databaseUrl,
    logger,
    preparedStatements: config.databasePreparedStatements,
    ...(poolMax !== undefined ? { poolMax } : {}),
    ...(metrics !== undefined ? { metrics } : {}),
    ...(statementTimeoutMs !== undefined ? { statementTimeoutMs } : {}),
  });
}

/**
 * Redis when REDIS_URL or REDIS_CLUSTER_NODES is set (shared by every instance), else the in-process counter (C-55). The
 * counter logs nothing of its own: the core's RateLimiter logs its health (C-54).
 */
export async function createLimiter(config: AppConfig, clock: Clock): Promise<LimiterHandle> {
  return buildLimiter(config, clock, config.redisUrl === null ? null : await import('@cos/limiter-redis'));
}

/**
 * The one limiter factory (createLimiter and the container's binding): `counter` (with its
 * `freshness`) when a host gave one, else the Redis counter of REDIS_URL (or the cluster's seed
 * nodes) from the loaded limiter-redis module (it connects in the background), else the in-process counter.
 */
export function buildLimiter(
  config: AppConfig,
  clock: Clock,
  redis: typeof import('@cos/limiter-redis') | null,
  given: { readonly counter?: RateCounter; readonly freshness?: CredentialFreshness } = {},
): LimiterHandle {
  if (given.counter !== undefined) {
    return { kind: config.redisUrl === null ? 'in-process' : 'redis', counter: given.counter, freshness: given.freshness ?? null, close: () => Promise.resolve() };
  }
  if (redis === null || config.redisUrl === null) return { kind: 'in-process', counter: new InProcessRateCounter(clock), freshness: null, close: () => Promise.resolve() };
  const counter = redis.createRedisCounter(redisCounterConfig(config, config.redisUrl));
  const redisIdentity = async (): Promise<string | null> => {
    // The counter connects in the background: the first heartbeat, at start, waits for it.
    await counter.whenReady(INSTANCE_IDENTITY_CONNECT_MS);
    return counter.identity({ create: true });
  };
  return { kind: 'redis', counter, freshness: usesFreshness(config) ? counter : null, redisIdentity, close: () => counter.close() };
}

/** The limiter-redis configuration of a Redis reference (REDIS_URL, a cluster's seed nodes, or a recorded location). */
export function redisCounterConfig(config: AppConfig, ref: string): import('@cos/limiter-redis').RedisCounterConfig {
  return {
    ...counterTarget(ref),
    timeoutMs: config.redisTimeoutMs,
    ...(config.redisMinReplicasAcked === null ? {} : { minReplicasAcked: config.redisMinReplicasAcked }),
  };
}

/** Postgres with a Redis: credential writes are fenced in Redis (and credentials cached unless CREDENTIAL_CACHE=off). */
function usesFreshness(config: AppConfig): boolean {
  return config.redisUrl !== null && parseDatabaseUrl(config.databaseUrl).dialect === 'postgres';
}

/** What a host may bind in place of the defaults before anything is built (buildContainer's overrides). */
export interface PortOverrides {
  readonly clock?: Clock;
  readonly random?: Random;
  /** Default: pino, JSON lines on stdout at LOG_LEVEL. */
  readonly logger?: Logger;
  /** Default: the Redis counter when REDIS_URL is set, else the in-process counter. */
  readonly counter?: RateCounter;
  /** Postgres pool size (default: the store's). */
  readonly poolMax?: number;
  /** The store's answer budget in ms (default: the store's 2000, C-17). */
  readonly statementTimeoutMs?: number;
  /** With `counter`: the credential freshness to use with it (default none). */
  readonly freshness?: CredentialFreshness;
  /** Default: Prometheus metrics when OPS_PORT is set, else none (noopMetrics). */
  readonly metrics?: Metrics;
}

export interface CorePorts {
  readonly stores: OuterStores;
  readonly unitOfWork: UnitOfWork;
  readonly health: HealthProbe;
  readonly counter: RateCounter;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  readonly config: Partial<CoreConfig>;
  /** See LimiterHandle.freshness. */
  readonly freshness?: CredentialFreshness | null;
  /** How credential changes are fenced in `freshness` (default 'cache': strict, credentials cached; CREDENTIAL_CACHE=off: 'best-effort'). */
  readonly fenceMode?: FenceMode;
  /** How `org webhook set` resolves an endpoint's host name (default: the system resolver). */
  readonly webhookHosts?: WebhookHostResolver;
  /** The instance's registration, when its cache is on (createInstanceRegistrar). */
  readonly credentialCacheLease?: CredentialCacheLease | null;
  /** WEBHOOK_SECRET_ENCRYPTION_KEY and WEBHOOK_SECRET_PREVIOUS_KEYS (AppConfig.webhookSecrets); default: secrets in clear. */
  readonly webhookSecrets?: WebhookSecretCipher;
  /** Given: `core.webhookDelivery` delivers the outbox through it (webhookSenderOf); absent: the core has no delivery. */
  readonly webhookSender?: WebhookSender;
  /** WEBHOOK_* settings of the delivery (webhookDeliveryOptionsOf). */
  readonly webhookDelivery?: Partial<WebhookDeliveryOptions>;
  /** NOTIFICATION_RETENTION (AppConfig.notificationRetentionMs). */
  readonly notificationRetentionMs?: number;
  /** USAGE_RETENTION (AppConfig.usageRetentionMs). */
  readonly usageRetentionMs?: number;
}

/**
 * The system resolver for webhook endpoints' host names (@cos/webhook-sender's, the one deliveries
 * use), loaded on first use: only setting an endpoint resolves anything.
 */
export const systemWebhookHosts: WebhookHostResolver = {
  async resolve(hostname: string): Promise<readonly string[]> {
    const { dnsHostResolver } = await import('@cos/webhook-sender');
    return dnsHostResolver.resolve(hostname);
  },
};

/** The one function that builds the Core from ports: `serve`, embedders and operator commands all go through it. */
export function composeCore(ports: CorePorts): Core {
  return createCore({
    ...(ports.freshness ? { freshness: ports.freshness, ...(ports.fenceMode !== undefined ? { fenceMode: ports.fenceMode } : {}) } : {}),
    ...(ports.credentialCacheLease ? { credentialCacheLease: ports.credentialCacheLease } : {}),
    stores: ports.stores,
    unitOfWork: ports.unitOfWork,
    health: ports.health,
    counter: ports.counter,
    clock: ports.clock,
    random: ports.random,
    logger: ports.logger,
    ...(ports.metrics !== undefined ? { metrics: ports.metrics } : {}),
    ...(ports.webhookSecrets !== undefined ? { webhookSecrets: ports.webhookSecrets } : {}),
    ...(ports.webhookSender !== undefined ? { webhookSender: ports.webhookSender } : {}),
    ...(ports.webhookDelivery !== undefined ? { webhookDelivery: ports.webhookDelivery } : {}),
    ...(ports.notificationRetentionMs !== undefined ? { notificationRetentionMs: ports.notificationRetentionMs } : {}),
    ...(ports.usageRetentionMs !== undefined ? { usageRetentionMs: ports.usageRetentionMs } : {}),
    config: ports.config,
    webhookHosts: ports.webhookHosts ?? systemWebhookHosts,
  });
}

/**
 * The Koa application over the core (Koa is imported here, on first use). With the scanner's keys,
 * it also answers POST /v1/secret-scanning/alerts.
 */
export async function createHttpApp(
  core: Core,
  logger: Logger,
  config: AppConfig,
  serviceVersion: string,
  scannerKeys: { keys(): ScannerKeySet; refreshFor?(identifier: string): Promise<void> } | null = null,
): Promise<HttpApp> {
  const { createKoaApp, createClientErrorResponder, createConnectResponder } = await import('@cos/adapter-koa');
  const app = createKoaApp(
    { core, logger },
    {
      serviceVersion,
      errorsUrl: config.errorsUrl,
      trustProxy: config.trustProxy,
      ...(config.trustedProxies !== null ? { trustedProxies: config.trustedProxies } : {}),
      ...(scannerKeys !== null
        ? {
            secretScanning: {
              keys: () => scannerKeys.keys(),
              ...(scannerKeys.refreshFor !== undefined ? { refreshFor: scannerKeys.refreshFor } : {}),
            },
          }
        : {}),
    },
  );
  // The Koa application itself (its settings stay inspectable), with the parser-error answer attached.
  return Object.assign(app, { clientError: createClientErrorResponder({ core, logger }), connect: createConnectResponder({ core, logger }) });
}

/**
 * The webhook outbox's sender (C-59): Standard Webhooks over HTTP, with the same destination rules
 * as `org webhook set` applied to the address each attempt connects to. @cos/webhook-sender is
 * imported on the first attempt, so building a core that never delivers does not load it.
 */
export function webhookSenderOf(config: Pick<AppConfig, 'webhookAllowHttp' | 'webhookAllowPrivate'>): WebhookSender {
  let sender: Promise<WebhookSender> | undefined;
  return {
    async send(request) {
      sender ??= import('@cos/webhook-sender').then(({ createWebhookSender }) =>
        createWebhookSender({ allowHttp: config.webhookAllowHttp, allowPrivate: config.webhookAllowPrivate }),
      );
      return (await sender).send(request);
    },
  };
}

/** The delivery's settings from WEBHOOK_TIMEOUT_MS, WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_BASE_MS, WEBHOOK_POLL_INTERVAL_MS and WEBHOOK_CONCURRENCY. */
export function webhookDeliveryOptionsOf(config: AppConfig): Partial<WebhookDeliveryOptions> {
  return {
    timeoutMs: config.webhookTimeoutMs,
    maxAttempts: config.webhookMaxAttempts,
    retryBaseMs: config.webhookRetryBaseMs,
    pollIntervalMs: config.webhookPollIntervalMs,
    batchSize: config.webhookConcurrency,
  };
}
