/**
 * Running one operator command: configuration, the store and the core on a stderr logger (the
 * same factories `buildContainer` binds, without the container: these commands are one-shot and
 * benchmarked for start-up), the store made ready, the work, and a clean close.
 */
import { cryptoRandom, InProcessRateCounter, silentLogger, systemClock, type Core, type Logger } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { composeCore, coreConfigOf, createCommandFreshness, createStore } from './compose.js';
import { loadConfig, type AppConfig, type LogLevel } from './config.js';
import { CliError } from './errors.js';
import { routeConsoleTo } from './console.js';

export interface CommandContext {
  readonly config: AppConfig;
  readonly core: Core;
  readonly store: SqlStore;
  readonly logger: Logger;
  readonly json: boolean;
}

export interface RunOptions {
  /** 'ready' (default): SQLite is migrated, Postgres must have no pending migration; 'none': as is. */
  readonly prepare?: 'ready' | 'none';
}

/**
 * Operator commands report a failure in one line of their own; log lines (on stderr) appear only
 * when LOG_LEVEL is set.
 */
function commandLogLevel(config: AppConfig): LogLevel {
  return config.logLevelExplicit ? config.logLevel : 'silent';
}

export function pendingMigrationsMessage(pending: readonly string[]): string {
  return `the database has ${pending.length} pending migration${pending.length === 1 ? '' : 's'} (${pending.join(', ')}); run \`cos-admin migrate\` first`;
}

/**
 * SQLite: applies pending migrations (the embedded default needs no separate step). Postgres:
 * refuses to go on while migrations are pending. Returns the migrations applied.
 */
export async function makeStoreReady(store: SqlStore): Promise<string[]> {
  const pending = await store.pendingMigrations();
  if (pending.length === 0) return [];
  if (store.dialect === 'sqlite') return store.migrate();
  throw new CliError(pendingMigrationsMessage(pending));
}

export async function runCommand(
  json: boolean,
  work: (ctx: CommandContext) => Promise<void>,
  options: RunOptions = {},
): Promise<void> {
  const config = loadConfig();
  const level = commandLogLevel(config);
  // pino is loaded only when something is to be logged: most commands log nothing.
  const logger =
    level === 'silent'
      ? { ...silentLogger, flush: () => undefined }
      : (await import('./logger.js')).createLogger({ level, fd: 2, sync: true });
  routeConsoleTo(logger);
  const store = createStore(config, logger, 2);
  let fence: Awaited<ReturnType<typeof createCommandFreshness>> = null;
  try {
    if ((options.prepare ?? 'ready') === 'ready') await makeStoreReady(store);
    // Operator commands never count requests: an in-process counter. On Postgres with REDIS_URL
    // they connect to Redis all the same, to fence their credential writes as serve does (issue 14).
    fence = await createCommandFreshness(config, logger);
    const core = composeCore({
      store,
      counter: new InProcessRateCounter(),
      clock: systemClock,
      random: cryptoRandom,
      logger,
      config: coreConfigOf(config),
      freshness: fence?.freshness ?? null,
      credentialCache: config.credentialCache,
    });
    await work({ config, core, store, logger, json });
  } finally {
    await fence?.close();
    await store.close();
    logger.flush();
  }
}
