/**
 * Running one operator command: configuration, the command's container (commandContainer: serve's
 * composition with a stderr logger, no metrics and the command's credential fence), the store made
 * ready, the work, and the container closed.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { userInfo } from 'node:os';
import { InProcessRateCounter, namedOperator, noopMetrics, silentLogger, type Core, type Logger, type OperatorPrincipal } from '@cos/core';
import { MIGRATIONS, parseDatabaseUrl, type SqlMigration, type SqlStore } from '@cos/store-sql';
import { createCommandFreshness, type CommandFreshness } from './instance-registration.js';
import { bindComponent, buildContainer, CLI_TOKENS, closeContainer, token, type ServiceContainer } from './container.js';
import { coreConfigOf, loadConfig, type AppConfig, type LogLevel } from './config.js';
import { CliError } from './errors.js';
import { routeConsoleTo } from './console.js';
import { currentIo, runPath } from './io.js';

export interface CommandContext {
  readonly config: AppConfig;
  readonly core: Core;
  readonly store: SqlStore;
  readonly logger: Logger;
  readonly json: boolean;
  /** The operator under its name (`--actor`, default the OS user name): the actor of the audit entries it writes. */
  readonly operator: OperatorPrincipal;
}

/** The OS user name, or USER/LOGNAME/USERNAME when the OS has none for this uid (containers), else "unknown". */
function defaultActorName(): string {
  try {
    const name = userInfo().username;
    if (name !== '') return name;
  } catch {
    // no passwd entry for the uid
  }
  const env = process.env;
  return env['USER'] || env['LOGNAME'] || env['USERNAME'] || 'unknown';
}

/** The actor name of this run: `--actor` (1 to 100 characters, no control characters) or the OS user name. */
function actorName(given: string | undefined = currentIo().state.actor): string {
  if (given === undefined) return defaultActorName();
  const name = given.trim();
  // eslint-disable-next-line no-control-regex
  if (name.length < 1 || name.length > 100 || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new CliError('--actor must be 1 to 100 characters without control characters', { usage: true });
  }
  return name;
}

/** Bound on one fence begin of an operator command (well within the store's 2 s for its unit of work). */
const COMMAND_FENCE_TIMEOUT_MS = 1_000;

export interface RunOptions {
  /** 'ready' (default): SQLite is migrated, Postgres must have no pending migration; 'none': as is. */
  readonly prepare?: 'ready' | 'none';
  /**
   * May the command create a SQLite database that does not exist yet? Only `migrate`, `bootstrap`
   * and `serve` do: any other command on a missing file names the path and creates
   * nothing, so a mistyped DATABASE_URL is not answered from a new, empty database.
   */
  readonly mayCreateDatabase?: boolean;
}

/** Fails with one line naming the file when DATABASE_URL is a SQLite file that does not exist. */
function requireExistingDatabase(config: AppConfig): void {
  const parsed = parseDatabaseUrl(config.databaseUrl);
  if (parsed.dialect !== 'sqlite' || parsed.memory) return;
  const path = resolve(parsed.filename);
  if (!existsSync(path)) {
    throw new CliError(
      `no SQLite database at ${path} (DATABASE_URL); check the path, or create it with \`cos-admin migrate\` or \`cos-admin bootstrap\``,
      { code: 'DATABASE_NOT_FOUND' },
    );
  }
}

/**
 * Operator commands report a failure in one line of their own; log lines (on stderr) appear only
 * when LOG_LEVEL is set.
 */
function commandLogLevel(config: AppConfig): LogLevel {
  return config.logLevelExplicit ? config.logLevel : 'silent';
}

function pendingMigrationsMessage(pending: readonly string[]): string {
  return `the database has ${pending.length} pending migration${pending.length === 1 ? '' : 's'} (${pending.join(', ')}); run \`cos-admin migrate\` first`;
}

/** A pending migration that is not expand-only, and why (its `breaking`). */
export interface BreakingMigration {
  readonly name: string;
  readonly reason: string;
}

/**
 * The pending migrations that are not expand-only, on a database already in use. A database with
 * no migration applied yet has no earlier release reading it, so nothing there is breaking.
 */
export function breakingPending(pending: readonly string[], migrations: readonly SqlMigration[] = MIGRATIONS): BreakingMigration[] {
  if (pending.length === 0 || pending.length >= migrations.length) return [];
  const wanted = new Set(pending);
  return migrations.flatMap((m) => (wanted.has(m.name) && m.breaking !== undefined ? [{ name: m.name, reason: m.breaking }] : []));
}

export function breakingMigrationsMessage(breaking: readonly BreakingMigration[]): string {
  const list = breaking.map((b) => `${b.name} (${b.reason})`).join('; ');
  return `${breaking.length === 1 ? 'a pending migration is' : `${breaking.length} pending migrations are`} not expand-only: ${list}; instances of the previous release cannot run on the migrated schema. Stop them all, then run \`cos-admin migrate --allow-breaking\``;
}

/** Refuses (exit 1) when a pending migration is not expand-only and `allowBreaking` is not set. */
export function refuseBreaking(pending: readonly string[], allowBreaking: boolean): void {
  const breaking = breakingPending(pending);
  if (breaking.length > 0 && !allowBreaking) throw new CliError(breakingMigrationsMessage(breaking), { code: 'BREAKING_MIGRATION' });
}

/**
 * SQLite: applies pending migrations (the embedded default needs no separate step), except one that
 * is not expand-only (that takes `cos-admin migrate --allow-breaking`). Postgres: refuses to go on
 * while migrations are pending. Returns the migrations applied.
 */
export async function makeStoreReady(store: SqlStore): Promise<string[]> {
  const pending = await store.pendingMigrations();
  if (pending.length === 0) return [];
  if (store.dialect === 'sqlite') {
    refuseBreaking(pending, false);
    return store.migrate();
  }
  throw new CliError(pendingMigrationsMessage(pending), { code: 'PENDING_MIGRATIONS' });
}

/**
 * The run's configuration: its environment and the `.env` of its working directory; a relative
 * SQLite path names a file under that directory.
 */
export function runConfig(): AppConfig {
  const io = currentIo();
  if (io.ownsProcess) return loadConfig();
  const config = loadConfig(io.env, { envFile: join(io.cwd, '.env') });
  const parsed = parseDatabaseUrl(config.databaseUrl);
  if (parsed.dialect !== 'sqlite' || parsed.memory) return config;
  return Object.freeze({ ...config, databaseUrl: `sqlite:${runPath(parsed.filename)}` });
}

export async function runCommand(
  json: boolean,
  work: (ctx: CommandContext) => Promise<void>,
  options: RunOptions = {},
): Promise<void> {
  const operator = namedOperator(actorName());
  const config = runConfig();
  if (options.mayCreateDatabase !== true) requireExistingDatabase(config);
  const level = commandLogLevel(config);
  // pino is loaded only when something is to be logged: most commands log nothing.
  const logger =
    level === 'silent'
      ? { ...silentLogger, flush: () => undefined }
      : (await import('./logger.js')).createLogger({ level, fd: 2, sync: true, ...(currentIo().ownsProcess ? {} : { stream: currentIo().stderr }) });
  // Only a run that owns the process takes over console.*: inside another program it is that program's.
  if (currentIo().ownsProcess) routeConsoleTo(logger);
  const container = await commandContainer(config, logger);
  try {
    const store = container.get(CLI_TOKENS.SqlStore);
    if ((options.prepare ?? 'ready') === 'ready') await makeStoreReady(store);
    const core = await container.getAsync(CLI_TOKENS.Core);
    await work({ config, core, store, logger, json, operator });
  } finally {
    await closeContainer(container);
    logger.flush();
  }
}

/** An operator command's credential fence and its Redis connection, or null on SQLite. */
const COMMAND_FENCE = token<CommandFreshness | null>('cos.cli.CommandFence');

/**
 * The container of one operator command: serve's, with the command's own parts bound in place of
 * serve's before anything is built. It logs to stderr, keeps a pool of 2 and reports no metrics;
 * it never counts requests (an in-process counter); on Postgres it fences its credential writes as
 * serve does, in the Redis of the caching instances registered in the database (or REDIS_URL's),
 * or refuses them (core's CommandFence). Only what the command resolves is built: the fence
 * (and its Redis connection) only when the core is.
 */
export async function commandContainer(config: AppConfig, logger: Logger): Promise<ServiceContainer> {
  const T = CLI_TOKENS;
  const container = await buildContainer(config, { logger, poolMax: 2, metrics: noopMetrics, counter: new InProcessRateCounter() });
  container.rebind(T.InstanceRegistrar).toConstantValue(null);
  // Strict, no cache: the command's fence itself decides which failures may be ignored
  // (CREDENTIAL_CACHE=off with no caching instance registered); a refusal must stop the change.
  container.rebind(T.FenceMode).toConstantValue('strict');
  // The fence's bound on one begin (a registry read and a Redis call) inside the unit of work.
  container.rebind(T.CoreConfig).toConstantValue({ ...coreConfigOf(config), rateCounterTimeoutMs: Math.max(config.redisTimeoutMs, COMMAND_FENCE_TIMEOUT_MS) });
  bindComponent(
    container,
    COMMAND_FENCE,
    [T.SqlStore],
    (store) => createCommandFreshness(config, store),
    (fence) => fence?.close(),
    'bind',
  );
  bindComponent(container, T.CredentialFreshness, [COMMAND_FENCE], (fence) => fence?.freshness ?? null, undefined, 'rebind');
  return container;
}
