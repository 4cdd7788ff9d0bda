/**
 * The composition root as an inversify 8 container, for `serve` and embedders. It binds what
 * compose.ts builds (createServicePorts: the store, counter and metrics the configuration chooses;
 * composeCore: the Core over them) as constant values and explicit factories, never implicit
 * metadata, so there is one way of wiring the service whether a container is used or not.
 * Adapters are imported only when chosen: Redis when REDIS_URL is set; Koa when the HTTP app is
 * resolved (`await container.getAsync(CLI_TOKENS.HttpApp)`).
 */
import { Container } from 'inversify';
import {
  TOKENS,
  type Clock,
  type Core,
  type CoreConfig,
  type HealthProbe,
  type Logger,
  type Metrics,
  type Random,
  type RateCounter,
  type Stores,
  type UnitOfWork,
} from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import {
  composeCore,
  coreConfigOf,
  createHttpApp,
  createInstanceRegistrar,
  createServicePorts,
  type HttpApp,
  type LimiterHandle,
  type PortOverrides,
  webhookDeliveryOptionsOf,
  webhookSenderOf,
} from './compose.js';
import type { AppConfig } from './config.js';
import type { PrometheusMetrics } from './metrics.js';
import type { InstanceRegistrar } from './instance-registration.js';
import { ScannerKeyFile, ScannerKeyUrl, scannerKeySource } from './scanner-keys.js';
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
  /** The published scanner key list (ScannerKeyUrl), or null when SECRET_SCANNING_KEYS_URL is unset; `serve` starts it. */
  ScannerKeyUrl: Symbol.for('cos.cli.ScannerKeyUrl'),
  /** PrometheusMetrics when OPS_PORT is set (the operations listener's /metrics), else null. */
  PrometheusMetrics: Symbol.for('cos.cli.PrometheusMetrics'),
  /** The instance's registration (InstanceRegistrar) when its credential cache is on, else null: closeContainer ends it. */
  InstanceRegistrar: Symbol.for('cos.cli.InstanceRegistrar'),
});

/**
 * What buildContainer's caller may replace: `clock`, `random`, `logger`, `counter` (with
 * `freshness`), `metrics`, `poolMax`. Each is handed to everything built from it.
 */
export type ContainerOverrides = PortOverrides;

/**
 * Builds the container for `config`. The caller owns it: `closeContainer(container)` closes the
 * database pool and the Redis connection. Every binding is a value compose.ts built, or a factory
 * calling compose.ts (the Core with its webhook delivery, the Koa app): rebinding a port afterwards would
 * reach only part of the stack, so replace it through `overrides` instead.
 */
export async function buildContainer(config: AppConfig, overrides: ContainerOverrides = {}): Promise<Container> {
  // Before anything connects: a key file that does not parse stops the start with one line.
  const scannerKeys = config.secretScanningPublicKeys === null ? null : ScannerKeyFile.load(config.secretScanningPublicKeys);
  const ports = await createServicePorts(config, overrides);
  const { store, limiter, logger, clock, random, metrics } = ports;
  const coreConfig = coreConfigOf(config);
  const version = serviceVersion();

  const container = new Container({ defaultScope: 'Singleton' });
  container.bind<AppConfig>(CLI_TOKENS.AppConfig).toConstantValue(config);
  container.bind<string>(CLI_TOKENS.ServiceVersion).toConstantValue(version);
  container.bind<SqlStore>(CLI_TOKENS.SqlStore).toConstantValue(store);
  container.bind<LimiterHandle>(CLI_TOKENS.Limiter).toConstantValue(limiter);
  container.bind<ScannerKeyFile | null>(CLI_TOKENS.ScannerKeys).toConstantValue(scannerKeys);
  const scannerKeyUrl =
    config.secretScanningKeysUrl === null ? null : new ScannerKeyUrl({ url: config.secretScanningKeysUrl, refreshMs: config.secretScanningKeysRefreshMs, logger });
  container.bind<ScannerKeyUrl | null>(CLI_TOKENS.ScannerKeyUrl).toConstantValue(scannerKeyUrl);
  container.bind<PrometheusMetrics | null>(CLI_TOKENS.PrometheusMetrics).toConstantValue(ports.prometheus);

  // The core's ports, for hosts that read them: the same objects the Core below is built over.
  container.bind<Metrics>(TOKENS.Metrics).toConstantValue(metrics);
  container.bind<Logger>(TOKENS.Logger).toConstantValue(logger);
  container.bind<Clock>(TOKENS.Clock).toConstantValue(clock);
  container.bind<Random>(TOKENS.Random).toConstantValue(random);
  container.bind<Partial<CoreConfig>>(TOKENS.Config).toConstantValue(coreConfig);
  container.bind<Stores>(TOKENS.Stores).toConstantValue(store.stores);
  container.bind<UnitOfWork>(TOKENS.UnitOfWork).toConstantValue(store.unitOfWork);
  container.bind<HealthProbe>(TOKENS.HealthProbe).toConstantValue(store.health);
  container.bind<RateCounter>(TOKENS.RateCounter).toConstantValue(limiter.counter);

  // A caching instance records itself in the database for as long as the container lives, so
  // operator commands fence their credential changes for it (instance-registration.ts).
  const registrar = createInstanceRegistrar(config, store, limiter, logger);
  container.bind<InstanceRegistrar | null>(CLI_TOKENS.InstanceRegistrar).toConstantValue(registrar);
  if (registrar !== null) void registrar.start();

  container.bind<Core>(TOKENS.Core).toResolvedValue(() =>
    composeCore({
      store,
      counter: limiter.counter,
      clock,
      random,
      logger,
      metrics,
      config: coreConfig,
      freshness: limiter.freshness,
      credentialCache: config.credentialCache,
      credentialCacheLease: registrar,
      webhookSecrets: config.webhookSecrets,
      webhookSender: webhookSenderOf(config),
      webhookDelivery: webhookDeliveryOptionsOf(config),
      notificationRetentionMs: config.notificationRetentionMs,
    }),
  );

  container
    .bind<HttpApp>(CLI_TOKENS.HttpApp)
    .toResolvedValue((core: Core) => createHttpApp(core, logger, config, version, scannerKeySource(scannerKeys, scannerKeyUrl)), [TOKENS.Core]);

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
  // The cache is bypassed from here on, then the registration is removed (before the pool closes).
  await container.get<InstanceRegistrar | null>(CLI_TOKENS.InstanceRegistrar)?.stop();
  container.get<ScannerKeyUrl | null>(CLI_TOKENS.ScannerKeyUrl)?.stop();
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
