/**
 * The factories the container (container.ts) binds: each builds one component from the parts it is
 * given (the SQL store, the rate counter, the command's fence, the instance's registration, the
 * Core, the Koa app, the webhook sender) and none knows how the others are chosen or wired. The
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
  type Logger,
  type Metrics,
  type Random,
  type RateCounter,
  type ScannerKeySet,
  type WebhookDeliveryOptions,
  type WebhookHostResolver,
  type WebhookSecretCipher,
  type WebhookSender,
} from '@cos/core';
import { createSqlStore, InstanceRegistry, parseDatabaseUrl, type SqlStore } from '@cos/store-sql';
import type { AppConfig } from './config.js';
import { counterTarget } from './redis-target.js';
import { CommandFence, InstanceRegistrar, planCommandFence, redisLocationOf, REGISTRATION_LIVE_MS, type CommandRedis } from './instance-registration.js';

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

/** How long an operator command waits for its Redis connection before a fenced write would be 503. */
export const COMMAND_REDIS_CONNECT_MS = 2_000;
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
  if (config.redisUrl === null) {
    return { kind: 'in-process', counter: new InProcessRateCounter(clock), freshness: null, close: () => Promise.resolve() };
  }
  return redisLimiter(await import('@cos/limiter-redis'), config);
}

/** The Redis counter of REDIS_URL (or the cluster's seed nodes) from the loaded limiter-redis module; it connects in the background. */
export function redisLimiter(module: typeof import('@cos/limiter-redis'), config: AppConfig): LimiterHandle {
  const counter = module.createRedisCounter(redisCounterConfig(config, config.redisUrl!));
  const redisIdentity = async (): Promise<string | null> => {
    // The counter connects in the background: the first heartbeat, at start, waits for it.
    await counter.whenReady(INSTANCE_IDENTITY_CONNECT_MS);
    return counter.identity({ create: true });
  };
  return { kind: 'redis', counter, freshness: usesFreshness(config) ? counter : null, redisIdentity, close: () => counter.close() };
}

/** The limiter-redis configuration of a Redis reference (REDIS_URL, a cluster's seed nodes, or a recorded location). */
function redisCounterConfig(config: AppConfig, ref: string): import('@cos/limiter-redis').RedisCounterConfig {
  return {
    ...counterTarget(ref),
    timeoutMs: config.redisTimeoutMs,
    ...(config.redisMinReplicasAcked === null ? {} : { minReplicasAcked: config.redisMinReplicasAcked }),
  };
}

/** Postgres with a Redis: credential writes are fenced in Redis (and credentials cached unless CREDENTIAL_CACHE=off). */
export function usesFreshness(config: AppConfig): boolean {
  return config.redisUrl !== null && parseDatabaseUrl(config.databaseUrl).dialect === 'postgres';
}

/** An operator command's credential fence, and how to close its Redis connection. */
export interface CommandFreshness {
  readonly freshness: CredentialFreshness;
  close(): Promise<void>;
}

/**
 * The credential freshness of a one-shot operator command (`key revoke`, `key roll`, `org
 * classify`…) on Postgres: a CommandFence (instance-registration.ts) that fences every credential
 * change in the Redis of the caching instances registered in the database, or in REDIS_URL's Redis
 * when none is, or refuses the change. It connects now (or gives up after COMMAND_REDIS_CONNECT_MS:
 * its changes are then refused) to the Redis the registrations or REDIS_URL name. Null on SQLite,
 * which keeps its own freshness check.
 */
export async function createCommandFreshness(config: AppConfig, store: SqlStore): Promise<CommandFreshness | null> {
  if (parseDatabaseUrl(config.databaseUrl).dialect !== 'postgres') return null;
  const registry = new InstanceRegistry(store);
  // Which Redis to connect to. A failed read (the database down, the registry not migrated yet)
  // connects to REDIS_URL's as before; the fence reads the registry again before any change.
  const live = await registry.live(REGISTRATION_LIVE_MS).catch(() => []);
  const plan = planCommandFence(live, config.redisUrl);
  let redis: (CommandRedis & { close(): Promise<void> }) | null = null;
  if (plan.kind === 'redis') {
    const { createRedisCounter } = await import('@cos/limiter-redis');
    const counter = createRedisCounter(redisCounterConfig(config, plan.url));
    await counter.whenReady(COMMAND_REDIS_CONNECT_MS);
    redis = { freshness: counter, location: plan.location, from: plan.from, identity: () => counter.identity({ create: false }), close: () => counter.close() };
  }
  return {
    freshness: new CommandFence(registry, config.redisUrl, redis, !config.credentialCache),
    close: () => redis?.close() ?? Promise.resolve(),
  };
}

/**
 * The registration of an instance whose credential cache is on (Postgres, REDIS_URL, Redis's own
 * freshness, CREDENTIAL_CACHE on): its cache is trusted only while the registration is held
 * (instance-registration.ts). Null for any other instance. Not started: call start().
 */
export function createInstanceRegistrar(config: AppConfig, store: SqlStore, limiter: LimiterHandle, logger: Logger): InstanceRegistrar | null {
  if (!config.credentialCache || limiter.freshness === null || config.redisUrl === null || store.dialect !== 'postgres') return null;
  const identity = limiter.redisIdentity;
  return new InstanceRegistrar(new InstanceRegistry(store), { ...redisLocationOf(config.redisUrl), ...(identity === undefined ? {} : { identity }) }, logger);
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
  readonly store: SqlStore;
  readonly counter: RateCounter;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  readonly config: Partial<CoreConfig>;
  /** See LimiterHandle.freshness. */
  readonly freshness?: CredentialFreshness | null;
  /** CREDENTIAL_CACHE (default true). */
  readonly credentialCache?: boolean;
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
    ...(ports.freshness ? { freshness: ports.freshness, credentialCache: ports.credentialCache !== false } : {}),
    ...(ports.credentialCacheLease ? { credentialCacheLease: ports.credentialCacheLease } : {}),
    stores: ports.store.stores,
    unitOfWork: ports.store.unitOfWork,
    health: ports.store.health,
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
