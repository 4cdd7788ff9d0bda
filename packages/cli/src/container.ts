/**
 * The composition root: one inversify 8 container for `serve`, the operator commands and embedders.
 * Each component is bound once, as a singleton factory that names the tokens it is built from, so
 * rebinding a token before the first resolution reaches every component built from it. Closing is
 * the container's too: a component's `close` is its binding's deactivation, and closeContainer runs
 * them in the reverse of the order the components were built (a component is built after everything
 * it depends on, so it closes before any of them).
 *
 * Nothing is built, connected or imported before it is resolved: an operator command that resolves
 * the store and the core opens no Redis connection and loads neither Koa nor prom-client. The
 * modules a default binding needs synchronously (pino, prom-client, limiter-redis) are imported by
 * buildContainer when the configuration chooses them; Koa and the webhook sender load on `getAsync`.
 * Factories are explicit: no decorators and no constructor metadata.
 */
import { Container, type GetOptions, type OptionalGetOptions, type ServiceIdentifier } from '#inversify';
import {
  cryptoRandom,
  noopMetrics,
  type IdempotencySweep,
  type InstanceRegistrar,
  type ExpiryNotices,
  type NotificationRetention,
  type UsageRetention,
  systemClock,
  TOKENS,
  type Clock,
  type Core,
  type CoreConfig,
  type CredentialFreshness,
  type FenceMode,
  type HealthProbe,
  type Logger,
  type Metrics,
  type Random,
  type RateCounter,
  type OuterStores,
  type UnitOfWork,
  type WebhookDelivery,
} from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import {
  buildLimiter,
  composeCore,
  createHttpApp,
  createStore,
  type HttpApp,
  type LimiterHandle,
  type PortOverrides,
  webhookDeliveryOptionsOf,
  webhookSenderOf,
} from './compose.js';
import { coreConfigOf, type AppConfig } from './config.js';
import type { PrometheusMetrics } from './metrics.js';
import { createInstanceRegistrar } from './instance-registration.js';
import { ScannerKeyFile, ScannerKeyUrl, scannerKeySource } from './scanner-keys.js';
import { serviceVersion } from './version.js';

export type { HttpApp, LimiterHandle } from './compose.js';

/**
 * A service identifier that carries the type of what it resolves to: `container.get(token)` needs no
 * type argument. The type lives in an optional property no symbol has (a string key, so copies of
 * these declarations from source and from dist agree).
 */
export type Token<T> = symbol & { readonly 'cos.serviceType'?: T };

/** The token of `key` (a `Symbol.for` key, so two copies of this module agree on it). */
export const token = <T>(key: string): Token<T> => Symbol.for(key) as Token<T>;

/**
 * Every component of the container. The core's ports use the symbols of core's TOKENS, so
 * `container.get<Clock>(TOKENS.Clock)` and `container.get(CLI_TOKENS.Clock)` are the same binding.
 */
export const CLI_TOKENS = Object.freeze({
  AppConfig: token<AppConfig>('cos.cli.AppConfig'),
  ServiceVersion: token<string>('cos.cli.ServiceVersion'),
  Logger: token<Logger>(TOKENS.Logger.description!),
  Clock: token<Clock>(TOKENS.Clock.description!),
  Random: token<Random>(TOKENS.Random.description!),
  /** Postgres pool size, or null for the store's default. */
  PoolMax: token<number | null>('cos.cli.PoolMax'),
  /** PrometheusMetrics when OPS_PORT is set (the operations listener's /metrics), else null. */
  PrometheusMetrics: token<PrometheusMetrics | null>('cos.cli.PrometheusMetrics'),
  /** What the core and the adapters report to: the Prometheus metrics, else noopMetrics. */
  Metrics: token<Metrics>(TOKENS.Metrics.description!),
  /** The SQL store chosen by DATABASE_URL (connects lazily; does not migrate). Closed with the container. */
  SqlStore: token<SqlStore>('cos.cli.SqlStore'),
  Stores: token<OuterStores>(TOKENS.Stores.description!),
  UnitOfWork: token<UnitOfWork>(TOKENS.UnitOfWork.description!),
  HealthProbe: token<HealthProbe>(TOKENS.HealthProbe.description!),
  /** The rate counter with its kind: Redis when REDIS_URL is set (it connects when resolved), else in-process. */
  Limiter: token<LimiterHandle>('cos.cli.Limiter'),
  /** The counter the core counts requests in (the Limiter's, unless rebound). */
  RateCounter: token<RateCounter>(TOKENS.RateCounter.description!),
  /** Where credential writes are fenced (the Limiter's freshness), or null. */
  CredentialFreshness: token<CredentialFreshness | null>('cos.cli.CredentialFreshness'),
  /** How the core fences credential changes in its freshness, and whether it caches credentials: CREDENTIAL_CACHE on 'cache', off 'best-effort'. */
  FenceMode: token<FenceMode>('cos.cli.FenceMode'),
  /** The instance's registration (InstanceRegistrar) when its credential cache is on, else null: started when built. */
  InstanceRegistrar: token<InstanceRegistrar | null>('cos.cli.InstanceRegistrar'),
  CoreConfig: token<Partial<CoreConfig>>(TOKENS.Config.description!),
  /** The core; closing it writes the keys' pending last uses. */
  Core: token<Core>(TOKENS.Core.description!),
  /** The secret-scanning public keys (ScannerKeyFile), or null when SECRET_SCANNING_PUBLIC_KEYS is unset. */
  ScannerKeys: token<ScannerKeyFile | null>('cos.cli.ScannerKeys'),
  /** The published scanner key list (ScannerKeyUrl), or null when SECRET_SCANNING_KEYS_URL is unset; `serve` starts it. */
  ScannerKeyUrl: token<ScannerKeyUrl | null>('cos.cli.ScannerKeyUrl'),
  /** The Koa application: resolve with `getAsync` (Koa is imported on first use). */
  HttpApp: token<HttpApp>('cos.cli.HttpApp'),
  /** Deletes the notifications past NOTIFICATION_RETENTION; `serve` starts it, closing stops it. */
  NotificationRetention: token<NotificationRetention>('cos.cli.NotificationRetention'),
  /** Deletes the usage counts past USAGE_RETENTION; `serve` starts it, closing stops it. */
  UsageRetention: token<UsageRetention>('cos.cli.UsageRetention'),
  /** Sends the keys' expiry notices (`api_key.expiring`); `serve` starts it, closing stops it. */
  ExpiryNotices: token<ExpiryNotices>('cos.cli.ExpiryNotices'),
  /** The core's webhook outbox sender (null without a sender); `serve` starts it, closing stops it. */
  WebhookDelivery: token<WebhookDelivery | null>('cos.cli.WebhookDelivery'),
  /** Deletes expired Idempotency-Key answers; `serve` starts it, closing stops it. */
  IdempotencySweep: token<IdempotencySweep>('cos.cli.IdempotencySweep'),
  /** What a `serve` worker runs (ServeComponents): resolve with `getAsync`, once its store is ready. */
  Serve: token<ServeComponents>('cos.cli.Serve'),
});

/**
 * Everything a `serve` worker runs, resolved as one component: the core, the HTTP application, the
 * background workers (started once it listens, stopped before the container closes), the
 * secret-scanning key sources and what its start-up line reports.
 */
export interface ServeComponents {
  readonly core: Core;
  readonly app: HttpApp;
  /**
   * The background workers besides the core's KeyUsage: started once the worker listens, stopped
   * while the requests in flight finish. (KeyUsage is started with them and stopped when the
   * container closes, after the drain, so the uses of the last requests are written.)
   */
  readonly workers: readonly { start(): void; stop(): Promise<unknown> }[];
  readonly scannerKeys: ScannerKeyFile | null;
  readonly scannerKeyUrl: ScannerKeyUrl | null;
  /** The Prometheus metrics the primary's /metrics gathers (null when OPS_PORT is unset). */
  readonly prometheus: PrometheusMetrics | null;
  readonly limiterKind: LimiterHandle['kind'];
  readonly version: string;
}

/** The container buildContainer returns: inversify's, with `get`/`getAsync` typed by the token. */
export class ServiceContainer extends Container {
  /** The tokens of the components built so far, in the order they were built (closeContainer closes them in reverse). */
  readonly built: ServiceIdentifier[] = [];

  override get<T>(token: Token<T>): T;
  override get<T>(serviceIdentifier: ServiceIdentifier<T>, options: OptionalGetOptions): T | undefined;
  override get<T>(serviceIdentifier: ServiceIdentifier<T>, options?: GetOptions): T;
  override get<T>(serviceIdentifier: ServiceIdentifier<T>, options?: GetOptions | OptionalGetOptions): T | undefined {
    return super.get<T>(serviceIdentifier, options as GetOptions);
  }

  override getAsync<T>(token: Token<T>): Promise<T>;
  override getAsync<T>(serviceIdentifier: ServiceIdentifier<T>, options: OptionalGetOptions): Promise<T | undefined>;
  override getAsync<T>(serviceIdentifier: ServiceIdentifier<T>, options?: GetOptions): Promise<T>;
  override getAsync<T>(serviceIdentifier: ServiceIdentifier<T>, options?: GetOptions | OptionalGetOptions): Promise<T | undefined> {
    return super.getAsync<T>(serviceIdentifier, options as GetOptions);
  }
}

/** The tokens of the components a factory is built from, in the order of its parameters. */
export type Tokens<D extends readonly unknown[]> = { readonly [K in keyof D]: Token<D[K]> };

/**
 * Binds `id` to a singleton built by `factory` from the components `deps` name, and `close` (if
 * any) as its deactivation. Returns the binding so that `rebind` can replace it with the same shape.
 */
export function bindComponent<T, D extends readonly unknown[]>(
  container: ServiceContainer,
  id: Token<T>,
  deps: Tokens<D>,
  factory: (...deps: NoInfer<D>) => T | Promise<T>,
  close?: (value: T) => void | Promise<void>,
  how: 'bind' | 'rebind' = 'bind',
): void {
  const syntax = how === 'bind' ? container.bind<T>(id) : container.rebind<T>(id);
  const record = (value: T): T => {
    container.built.push(id);
    return value;
  };
  const build = (...args: D): T | Promise<T> => {
    const value = factory(...args);
    return value instanceof Promise ? value.then(record) : record(value);
  };
  const bound = syntax.toResolvedValue(build as unknown as (...args: unknown[]) => T | Promise<T>, deps as unknown as ServiceIdentifier[]).inSingletonScope();
  if (close !== undefined) bound.onDeactivation(close);
}

/**
 * What buildContainer's caller may replace before anything is built: `clock`, `random`, `logger`,
 * `counter` (with `freshness`), `metrics`, `poolMax`. Each is bound in place of the default (whose
 * module is then not even imported), so it reaches everything built from it; any token may also be
 * rebound afterwards (`container.rebind(token)`), before its first resolution, with the same effect.
 */
export type ContainerOverrides = PortOverrides;

/**
 * Builds the container for `config`; nothing is built yet. The caller owns it: `closeContainer`
 * closes what was built (the core's pending key uses, the instance's registration, the scanner's
 * refresh, the webhook sender, the Redis connection, the database pool), dependants first.
 */
export async function buildContainer(config: AppConfig, overrides: ContainerOverrides = {}): Promise<ServiceContainer> {
  const c = new ServiceContainer({ defaultScope: 'Singleton' });
  const T = CLI_TOKENS;
  // The modules the chosen default bindings build from synchronously.
  const logging = overrides.logger === undefined ? await import('./logger.js') : null;
  const prometheus = overrides.metrics === undefined && config.opsPort !== null ? await import('./metrics.js') : null;
  const redis = overrides.counter === undefined && config.redisUrl !== null ? await import('@cos/limiter-redis') : null;

  c.bind(T.AppConfig).toConstantValue(config);
  bindComponent(c, T.ServiceVersion, [], serviceVersion);
  bindComponent(c, T.Logger, [], () => overrides.logger ?? logging!.createLogger({ level: config.logLevel, fd: 1 }));
  c.bind(T.Clock).toConstantValue(overrides.clock ?? systemClock);
  c.bind(T.Random).toConstantValue(overrides.random ?? cryptoRandom);
  c.bind(T.PoolMax).toConstantValue(overrides.poolMax ?? null);
  // Prometheus metrics only when the operations listener is on: nobody else could read them.
  bindComponent(c, T.PrometheusMetrics, [], () => (prometheus === null ? null : prometheus.createPrometheusMetrics()));
  bindComponent(c, T.Metrics, [T.PrometheusMetrics], (p) => overrides.metrics ?? p ?? noopMetrics);
  bindComponent(
    c,
    T.SqlStore,
    [T.Logger, T.PoolMax, T.Metrics, T.PrometheusMetrics],
    (logger, poolMax, metrics, p) => {
      const store = createStore(config, logger, {
        ...(poolMax !== null ? { poolMax } : {}),
        ...(metrics !== noopMetrics ? { metrics } : {}),
        ...(overrides.statementTimeoutMs !== undefined ? { statementTimeoutMs: overrides.statementTimeoutMs } : {}),
      });
      p?.observeOutbox(() => store.stores.outbox.countPending());
      return store;
    },
    (store) => store.close(),
  );
  bindComponent(c, T.Stores, [T.SqlStore], (s) => s.stores);
  bindComponent(c, T.UnitOfWork, [T.SqlStore], (s) => s.unitOfWork);
  bindComponent(c, T.HealthProbe, [T.SqlStore], (s) => s.health);
  bindComponent(c, T.Limiter, [T.Clock], (clock) => buildLimiter(config, clock, redis, overrides), (limiter) => limiter.close());
  bindComponent(c, T.RateCounter, [T.Limiter], (l) => l.counter);
  bindComponent(c, T.CredentialFreshness, [T.Limiter], (l) => l.freshness);
  c.bind(T.FenceMode).toConstantValue(config.credentialCache ? 'cache' : 'best-effort');
  // A caching instance records itself in the database for as long as the container lives, so
  // operator commands fence their credential changes for it (core's instance-lease.ts).
  bindComponent(
    c,
    T.InstanceRegistrar,
    [T.SqlStore, T.Limiter, T.Logger],
    (store, limiter, logger) => {
      const registrar = createInstanceRegistrar(config, store, limiter, logger);
      if (registrar !== null) void registrar.start();
      return registrar;
    },
    (registrar) => registrar?.stop(),
  );
  bindComponent(c, T.CoreConfig, [], () => coreConfigOf(config));
  bindComponent(
    c,
    T.Core,
    [T.Stores, T.UnitOfWork, T.HealthProbe, T.RateCounter, T.Clock, T.Random, T.Logger, T.Metrics, T.CoreConfig, T.CredentialFreshness, T.FenceMode, T.InstanceRegistrar],
    (stores, unitOfWork, health, counter, clock, random, logger, metrics, coreConfig, freshness, fenceMode, lease) =>
      composeCore({
        stores,
        unitOfWork,
        health,
        counter,
        clock,
        random,
        logger,
        metrics,
        config: coreConfig,
        freshness,
        fenceMode,
        credentialCacheLease: lease,
        webhookSecrets: config.webhookSecrets,
        webhookSender: webhookSenderOf(config),
        webhookDelivery: webhookDeliveryOptionsOf(config),
        notificationRetentionMs: config.notificationRetentionMs,
        usageRetentionMs: config.usageRetentionMs,
      }),
    // Closing the core writes the keys' pending last uses.
    (core) => core.keyUsage.stop(),
  );
  bindComponent(c, T.ScannerKeys, [], () => (config.secretScanningPublicKeys === null ? null : ScannerKeyFile.load(config.secretScanningPublicKeys)));
  bindComponent(
    c,
    T.ScannerKeyUrl,
    [T.Logger],
    (logger) =>
      config.secretScanningKeysUrl === null ? null : new ScannerKeyUrl({ url: config.secretScanningKeysUrl, refreshMs: config.secretScanningKeysRefreshMs, logger }),
    (keys) => keys?.stop(),
  );
  bindComponent(c, T.HttpApp, [T.Core, T.Logger, T.ServiceVersion, T.ScannerKeys, T.ScannerKeyUrl], (core, logger, version, file, url) =>
    createHttpApp(core, logger, config, version, scannerKeySource(file, url)),
  );
  bindComponent(
    c,
    T.NotificationRetention,
    [T.Core],
    (core) => core.notificationRetention,
    (retention) => retention.stop(),
  );
  bindComponent(
    c,
    T.UsageRetention,
    [T.Core],
    (core) => core.usageRetention,
    (retention) => retention.stop(),
  );
  bindComponent(
    c,
    T.ExpiryNotices,
    [T.Core],
    (core) => core.expiryNotices,
    (notices) => notices.stop(),
  );
  bindComponent(
    c,
    T.WebhookDelivery,
    [T.Core],
    (core) => core.webhookDelivery,
    (delivery) => delivery?.stop(),
  );
  bindComponent(
    c,
    T.IdempotencySweep,
    [T.Core],
    (core) => core.idempotencySweep,
    (sweep) => sweep.stop(),
  );
  bindComponent(
    c,
    T.Serve,
    [T.Core, T.HttpApp, T.WebhookDelivery, T.NotificationRetention, T.UsageRetention, T.ExpiryNotices, T.IdempotencySweep, T.ScannerKeys, T.ScannerKeyUrl, T.PrometheusMetrics, T.Limiter, T.ServiceVersion],
    (core, app, delivery, retention, usageRetention, expiryNotices, sweep, scannerKeys, scannerKeyUrl, prometheus, limiter, version): ServeComponents => ({
      core,
      app,
      workers: [...(delivery === null ? [] : [delivery]), sweep, retention, usageRetention, expiryNotices],
      scannerKeys,
      scannerKeyUrl,
      prometheus,
      limiterKind: limiter.kind,
      version,
    }),
  );
  return c;
}

/**
 * Closes what the container built, each component after everything built from it (the core's
 * pending key uses are written before the pool closes; the instance's registration is removed
 * before it too), then unbinds the rest. A failing close does not stop the others; the first
 * failure is thrown at the end. Idempotent. Stop the HTTP server first.
 */
export async function closeContainer(container: Container): Promise<void> {
  if (!container.isBound(CLI_TOKENS.AppConfig)) return;
  const built = container instanceof ServiceContainer ? container.built.splice(0).reverse() : [];
  let failure: { reason: unknown } | null = null;
  for (const id of built) {
    if (!container.isBound(id)) continue;
    try {
      await container.unbindAsync(id);
    } catch (e) {
      failure ??= { reason: e };
    }
  }
  await container.unbindAllAsync().catch((e: unknown) => (failure ??= { reason: e }));
  if (failure !== null) throw failure.reason;
}

export function coreOf(container: Container): Core {
  return container.get<Core>(CLI_TOKENS.Core);
}

export function storeOf(container: Container): SqlStore {
  return container.get<SqlStore>(CLI_TOKENS.SqlStore);
}

export function limiterOf(container: Container): LimiterHandle {
  return container.get<LimiterHandle>(CLI_TOKENS.Limiter);
}
