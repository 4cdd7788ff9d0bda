/**
 * The composition root: every port bound in one inversify container, with explicit factories
 * (`toConstantValue` / `toResolvedValue` + their dependency tokens), never implicit metadata.
 * Heavy adapters are imported only when chosen: Redis when REDIS_URL is set, Koa when the HTTP app
 * is resolved (`container.getAsync(CLI_TOKENS.HttpApp)`), so operator commands start fast.
 */
import { Container } from 'inversify';
import {
  createCore,
  cryptoRandom,
  InProcessRateCounter,
  systemClock,
  TOKENS,
  type Clock,
  type Core,
  type CoreConfig,
  type HealthProbe,
  type Logger,
  type Random,
  type RateCounter,
  type Stores,
  type UnitOfWork,
} from '@cos/core';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { coreConfigOf, type AppConfig } from './config.js';
import { createLogger } from './logger.js';
import { serviceVersion } from './version.js';

/** Tokens of the composition root itself (core's TOKENS cover the ports and the Core). */
export const CLI_TOKENS = Object.freeze({
  AppConfig: Symbol.for('cos.cli.AppConfig'),
  SqlStore: Symbol.for('cos.cli.SqlStore'),
  Limiter: Symbol.for('cos.cli.Limiter'),
  ServiceVersion: Symbol.for('cos.cli.ServiceVersion'),
  /** The Koa application (resolve with `getAsync`: Koa is imported on first use). */
  HttpApp: Symbol.for('cos.cli.HttpApp'),
});

export type StoreKind = 'sqlite' | 'postgres';
export type LimiterKind = 'in-process' | 'redis';

/** The rate counter together with what it is and how to release it. */
export interface LimiterHandle {
  readonly kind: LimiterKind;
  readonly counter: RateCounter;
  close(): Promise<void>;
}

/** What a Koa application offers that the server needs (kept structural: no Koa import here). */
export interface HttpApp {
  callback(): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;
}

export interface ContainerOverrides {
  readonly clock?: Clock;
  readonly random?: Random;
  /** Default: pino, JSON lines on stdout at LOG_LEVEL. */
  readonly logger?: Logger;
  /** Default: the Redis counter when REDIS_URL is set, else the in-process counter. */
  readonly counter?: RateCounter;
  /** Passed to the SQL store: pool size (Postgres). */
  readonly poolMax?: number;
}

async function createLimiter(config: AppConfig, logger: Logger, clock: Clock): Promise<LimiterHandle> {
  if (config.redisUrl === null) {
    return { kind: 'in-process', counter: new InProcessRateCounter(clock), close: () => Promise.resolve() };
  }
  const { createRedisCounter } = await import('@cos/limiter-redis');
  const counter = await createRedisCounter({ url: config.redisUrl, timeoutMs: config.redisTimeoutMs, logger });
  return { kind: 'redis', counter, close: () => counter.close() };
}

/**
 * Builds the container for `config`. The caller owns it: `closeContainer(container)` closes the
 * database pool and the Redis connection.
 */
export async function buildContainer(config: AppConfig, overrides: ContainerOverrides = {}): Promise<Container> {
  const logger: Logger = overrides.logger ?? createLogger({ level: config.logLevel, fd: 1 });
  const clock = overrides.clock ?? systemClock;
  const random = overrides.random ?? cryptoRandom;

  const store = createSqlStore({
    databaseUrl: config.databaseUrl,
    logger,
    ...(overrides.poolMax !== undefined ? { poolMax: overrides.poolMax } : {}),
  });
  let limiter: LimiterHandle;
  try {
    limiter =
      overrides.counter !== undefined
        ? { kind: config.redisUrl === null ? 'in-process' : 'redis', counter: overrides.counter, close: () => Promise.resolve() }
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

  container.bind<Logger>(TOKENS.Logger).toConstantValue(logger);
  container.bind<Clock>(TOKENS.Clock).toConstantValue(clock);
  container.bind<Random>(TOKENS.Random).toConstantValue(random);
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
        counter: RateCounter,
        health: HealthProbe,
        clk: Clock,
        rnd: Random,
        log: Logger,
        cfg: Partial<CoreConfig>,
      ) => createCore({ stores, unitOfWork, counter, health, clock: clk, random: rnd, logger: log, config: cfg }),
      [
        TOKENS.Stores,
        TOKENS.UnitOfWork,
        TOKENS.RateCounter,
        TOKENS.HealthProbe,
        TOKENS.Clock,
        TOKENS.Random,
        TOKENS.Logger,
        TOKENS.Config,
      ],
    );

  container.bind<HttpApp>(CLI_TOKENS.HttpApp).toResolvedValue(
    async (core: Core, log: Logger, cfg: AppConfig, version: string): Promise<HttpApp> => {
      const { createKoaApp } = await import('@cos/adapter-koa');
      return createKoaApp({ core, logger: log }, { serviceVersion: version, errorsUrl: cfg.errorsUrl });
    },
    [TOKENS.Core, TOKENS.Logger, CLI_TOKENS.AppConfig, CLI_TOKENS.ServiceVersion],
  );

  return container;
}

/** Closes the database pool and the Redis connection of a container built by buildContainer. */
export async function closeContainer(container: Container): Promise<void> {
  const store = container.get<SqlStore>(CLI_TOKENS.SqlStore);
  const limiter = container.get<LimiterHandle>(CLI_TOKENS.Limiter);
  const results = await Promise.allSettled([limiter.close(), store.close()]);
  await container.unbindAll();
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

/** The store behind a container and what kind it is. */
export function storeOf(container: Container): SqlStore {
  return container.get<SqlStore>(CLI_TOKENS.SqlStore);
}

export function limiterOf(container: Container): LimiterHandle {
  return container.get<LimiterHandle>(CLI_TOKENS.Limiter);
}

export function coreOf(container: Container): Core {
  return container.get<Core>(TOKENS.Core);
}
