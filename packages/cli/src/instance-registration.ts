/**
 * The wiring of the credential fence across processes (core's instance-lease.ts says the protocol,
 * fence-plan.ts the policy, command-fence.ts the command's side): which registry, which Redis and
 * which mode each process gets. A `serve` instance that caches credentials (Postgres, REDIS_URL,
 * CREDENTIAL_CACHE on) holds an InstanceRegistrar on the database's registry; an operator command
 * on Postgres fences each credential change through a CommandFence, connected at its start to the
 * Redis that the live registrations (or its REDIS_URL) name.
 */
import { CommandFence, InstanceRegistrar, planCommandFence, redisLocationOf, REGISTRATION_LIVE_MS, type CommandRedis, type CredentialFreshness, type Logger } from '@cos/core';
import { parseDatabaseUrl, SqlInstanceRegistry, type SqlStore } from '@cos/store-sql';
import { redisCounterConfig, type LimiterHandle } from './compose.js';
import type { AppConfig } from './config.js';

/** How long an operator command waits for its Redis connection before a fenced write would be 503. */
const COMMAND_REDIS_CONNECT_MS = 2_000;

/** An operator command's credential fence, and how to close its Redis connection. */
export interface CommandFreshness {
  readonly freshness: CredentialFreshness;
  close(): Promise<void>;
}

/**
 * The credential freshness of a one-shot operator command (`key revoke`, `key roll`, `org
 * classify`…) on Postgres: a CommandFence that fences every credential change in the Redis of the
 * caching instances registered in the database, or in REDIS_URL's Redis when none is, or refuses
 * the change. It connects now (or gives up after COMMAND_REDIS_CONNECT_MS: its changes are then
 * refused) to the Redis the registrations or REDIS_URL name. Null on SQLite, which keeps its own
 * freshness check.
 */
export async function createCommandFreshness(config: AppConfig, store: SqlStore): Promise<CommandFreshness | null> {
  if (parseDatabaseUrl(config.databaseUrl).dialect !== 'postgres') return null;
  const registry = new SqlInstanceRegistry(store);
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
    freshness: new CommandFence(registry, config.redisUrl, redis, config.credentialCache ? 'strict' : 'best-effort'),
    close: () => redis?.close() ?? Promise.resolve(),
  };
}

/**
 * The registration of an instance whose credential cache is on (Postgres, REDIS_URL, Redis's own
 * freshness, CREDENTIAL_CACHE on): its cache is trusted only while the registration is held. Null
 * for any other instance. Not started: call start().
 */
export function createInstanceRegistrar(config: AppConfig, store: SqlStore, limiter: LimiterHandle, logger: Logger): InstanceRegistrar | null {
  if (!config.credentialCache || limiter.freshness === null || config.redisUrl === null || store.dialect !== 'postgres') return null;
  const identity = limiter.redisIdentity;
  return new InstanceRegistrar(new SqlInstanceRegistry(store), { ...redisLocationOf(config.redisUrl), ...(identity === undefined ? {} : { identity }) }, logger);
}
