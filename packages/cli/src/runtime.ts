/**
 * Running one operator command: configuration, a container on a stderr logger, the store made
 * ready (SQLite migrates itself; Postgres must have been migrated), the work, and a clean close.
 */
import type { Container } from 'inversify';
import { InProcessRateCounter, type Core, type Logger } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { loadConfig, type AppConfig, type LogLevel } from './config.js';
import { CliError } from './errors.js';
import { createLogger, type CosLogger } from './logger.js';

export interface CommandContext {
  readonly config: AppConfig;
  readonly container: Container;
  readonly core: Core;
  readonly store: SqlStore;
  readonly logger: Logger;
  readonly json: boolean;
}

export interface RunOptions {
  /** 'ready' (default): SQLite is migrated, Postgres must have no pending migration; 'none': as is. */
  readonly prepare?: 'ready' | 'none';
}

/** Operators see warnings and errors unless LOG_LEVEL asks for more. */
function commandLogLevel(config: AppConfig): LogLevel {
  return config.logLevelExplicit ? config.logLevel : 'warn';
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
  const logger: CosLogger = createLogger({ level: commandLogLevel(config), fd: 2, sync: true });
  const { buildContainer, closeContainer, coreOf, storeOf } = await import('./container.js');
  // Operator commands never count requests: no Redis connection for them.
  const container = await buildContainer(config, { logger, counter: new InProcessRateCounter(), poolMax: 2 });
  try {
    const store = storeOf(container);
    if ((options.prepare ?? 'ready') === 'ready') await makeStoreReady(store);
    await work({ config, container, core: coreOf(container), store, logger, json });
  } finally {
    await closeContainer(container);
    logger.flush();
  }
}
