/**
 * The composition root as an inversify 8 container: every port bound with an explicit factory
 * (`toConstantValue` / `toResolvedValue` and its dependency tokens), never implicit metadata.
 * Adapters are imported only when chosen: Redis when REDIS_URL is set; Koa when the HTTP app is
 * resolved (`await container.getAsync(CLI_TOKENS.HttpApp)`).
 */
import { Container } from 'inversify';
import {
  createCore,
  cryptoRandom,
  noopMetrics,
  systemClock,
  TOKENS,
  type Clock,
  type Core,
  type CoreConfig,
  type CredentialFreshness,
  type HealthProbe,
  type Logger,
  type Metrics,
  type Random,
  type RateCounter,
  type Stores,
  type UnitOfWork,
  type WebhookDelivery,
} from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import {
  coreConfigOf,
  createHttpApp,
  createLimiter,
  createMetrics,
  createStore,
  createWebhookDelivery,
  type HttpApp,
  type LimiterHandle,
} from './compose.js';
import type { AppConfig } from './config.js';
import type { PrometheusMetrics } from './metrics.js';
import { createLogger } from './logger.js';
import { ScannerKeyFile } from './scanner-keys.js';
import { serviceVersion } from './version.js';

export type { HttpApp, LimiterHandle, LimiterKind, StoreKind } from './compose.js';

/** Tokens of the composition root itself (core's TOKENS cover the ports and the Core). */
export const CLI_TOKENS = Object.freeze({
  AppConfig: Symbol.for('cos.cli.AppConfig'),
  SqlStore: Symbol.for('cos.cli.SqlStore'),
  Limiter: Symbol.for('cos.cli.Limiter'),
  ServiceVersion: Symbol.for('cos.cli.ServiceVersion'),
  /** The Koa application: resolve with `getAsync` (Koa is imported on first use). */
  HttpApp: Symbol.for('cos.cli.HttpApp'),
  /** The secret-scanning public keys (ScannerKeyFile), or null when SECRET_SCANNING_PUBLIC_KEYS is unset. */
  ScannerKeys: Symbol.for('cos.cli.ScannerKeys'),
  /** The webhook outbox's sender (WebhookDelivery): resolve with `getAsync`; `serve` starts it. */
  WebhookDelivery: Symbol.for('cos.cli.WebhookDelivery'),
  /** PrometheusMetrics when OPS_PORT is set (the operations listener's /metrics), else null. */
  PrometheusMetrics: Symbol.for('cos.cli.PrometheusMetrics'),
});

export interface ContainerOverrides {
  readonly clock?: Clock;
  readonly random?: Random;
  /** Default: pino, JSON lines on stdout at LOG_LEVEL. */
  readonly logger?: Logger;
  /** Default: the Redis counter when REDIS_URL is set, else the in-process counter. */
  readonly counter?: RateCounter;
  /** Postgres pool size (default: the store's). */
  readonly poolMax?: number;
  /** With `counter`: the credential freshness to use with it (default none). */
  readonly freshness?: CredentialFreshness;
  /** Default: Prometheus metrics when OPS_PORT is set, else none (noopMetrics). */
  readonly metrics?: Metrics;
}

/**
 * Builds the container for `config`. The caller owns it: `closeContainer(container)` closes the
 * database pool and the Redis connection.
 */
export async function buildContainer(config: AppConfig, overrides: ContainerOverrides = {}): Promise<Container> {
  const logger: Logger = overrides.logger ?? createLogger({ level: config.logLevel, fd: 1 });
  const clock = overrides.clock ?? systemClock;
  // Before anything connects: a key file that does not parse stops the start with one line.
  const scannerKeys = config.secretScanningPublicKeys === null ? null : ScannerKeyFile.load(config.secretScanningPublicKeys);
  const prometheus = overrides.metrics === undefined ? await createMetrics(config) : null;
  const metrics: Metrics = overrides.metrics ?? prometheus ?? noopMetrics;
  const store = createStore(config, logger, overrides.poolMax, metrics === noopMetrics ? undefined : metrics);
  prometheus?.observeOutbox(() => store.stores.outbox.countPending());
  let limiter: LimiterHandle;
  try {
    limiter =
      overrides.counter !== undefined
        ? {
            kind: config.redisUrl === null ? 'in-process' : 'redis',
            counter: overrides.counter,
            freshness: overrides.freshness ?? null,
            close: () => Promise.resolve(),
          }
        : await createLimiter(config, logger, clock);
  } catch (e) {
    await store.close();
    throw e;
  }

  const container = new Container({ defaultScope: 'Singleton' });
  container.bind<AppConfig>(CLI_TOKENS.AppConfig).toConstantValue(config);
  container.bind<string>(CLI_TOKENS.ServiceVersion).toConstantValue(serviceVersion());
  container.bind<SqlStore>(CLI_TOKENS.SqlStore).toConstantValue(store);
  container.bind<LimiterHandle>(CLI_TOKENS.Limiter).toConstantValue(limiter);
  container.bind<ScannerKeyFile | null>(CLI_TOKENS.ScannerKeys).toConstantValue(scannerKeys);
  container.bind<PrometheusMetrics | null>(CLI_TOKENS.PrometheusMetrics).toConstantValue(prometheus);
  container.bind<Metrics>(TOKENS.Metrics).toConstantValue(metrics);

  container.bind<Logger>(TOKENS.Logger).toConstantValue(logger);
  container.bind<Clock>(TOKENS.Clock).toConstantValue(clock);
  container.bind<Random>(TOKENS.Random).toConstantValue(overrides.random ?? cryptoRandom);
  container.bind<Partial<CoreConfig>>(TOKENS.Config).toConstantValue(coreConfigOf(config));
  container.bind<Stores>(TOKENS.Stores).toResolvedValue((s: SqlStore) => s.stores, [CLI_TOKENS.SqlStore]);
  container.bind<UnitOfWork>(TOKENS.UnitOfWork).toResolvedValue((s: SqlStore) => s.unitOfWork, [CLI_TOKENS.SqlStore]);
  container.bind<HealthProbe>(TOKENS.HealthProbe).toResolvedValue((s: SqlStore) => s.health, [CLI_TOKENS.SqlStore]);
  container.bind<RateCounter>(TOKENS.RateCounter).toResolvedValue((l: LimiterHandle) => l.counter, [CLI_TOKENS.Limiter]);

  container
    .bind<Core>(TOKENS.Core)
    .toResolvedValue(
      (
        stores: Stores,
        unitOfWork: UnitOfWork,
        health: HealthProbe,
        counter: RateCounter,
        clk: Clock,
        random: Random,
        log: Logger,
        cfg: Partial<CoreConfig>,
        meter: Metrics,
        limiter: LimiterHandle,
        app: AppConfig,
      ) =>
        createCore({
          stores,
          unitOfWork,
          health,
          counter,
          clock: clk,
          random,
          logger: log,
          config: cfg,
          metrics: meter,
          ...(limiter.freshness !== null ? { freshness: limiter.freshness, credentialCache: app.credentialCache } : {}),
        }),
      [
        TOKENS.Stores,
        TOKENS.UnitOfWork,
        TOKENS.HealthProbe,
        TOKENS.RateCounter,
        TOKENS.Clock,
        TOKENS.Random,
        TOKENS.Logger,
        TOKENS.Config,
        TOKENS.Metrics,
        CLI_TOKENS.Limiter,
        CLI_TOKENS.AppConfig,
      ],
    );

  container
    .bind<HttpApp>(CLI_TOKENS.HttpApp)
    .toResolvedValue(
      (core: Core, log: Logger, cfg: AppConfig, version: string, keys: ScannerKeyFile | null) => createHttpApp(core, log, cfg, version, keys),
      [TOKENS.Core, TOKENS.Logger, CLI_TOKENS.AppConfig, CLI_TOKENS.ServiceVersion, CLI_TOKENS.ScannerKeys],
    );

  container
    .bind<WebhookDelivery>(CLI_TOKENS.WebhookDelivery)
    .toResolvedValue(
      (s: SqlStore, cfg: AppConfig, clk: Clock, random: Random, log: Logger, meter: Metrics) =>
        createWebhookDelivery(s, cfg, { clock: clk, random, logger: log, metrics: meter }),
      [CLI_TOKENS.SqlStore, CLI_TOKENS.AppConfig, TOKENS.Clock, TOKENS.Random, TOKENS.Logger, TOKENS.Metrics],
    );

  return container;
}

/**
 * Closes the database pool and the Redis connection of a container built by buildContainer, after
 * writing the keys' pending last uses (the core's KeyUsage; a failed write is logged, never thrown).
 * Idempotent.
 */
export async function closeContainer(container: Container): Promise<void> {
  if (!container.isBound(CLI_TOKENS.SqlStore)) return;
  await coreOf(container).keyUsage.stop();
  const store = container.get<SqlStore>(CLI_TOKENS.SqlStore);
  const limiter = container.get<LimiterHandle>(CLI_TOKENS.Limiter);
  const results = await Promise.allSettled([limiter.close(), store.close()]);
  await container.unbindAllAsync();
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

export function coreOf(container: Container): Core {
  return container.get<Core>(TOKENS.Core);
}

export function storeOf(container: Container): SqlStore {
  return container.get<SqlStore>(CLI_TOKENS.SqlStore);
}

export function limiterOf(container: Container): LimiterHandle {
  return container.get<LimiterHandle>(CLI_TOKENS.Limiter);
}
