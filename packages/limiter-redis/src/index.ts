/**
 * @cos/limiter-redis: the core's RateCounter port on Redis (C-54, C-55).
 *
 * config.ts (options, defaults), errors.ts, scripts.ts (the Lua scripts), connection.ts (plain or
 * cluster connections, readiness, Redis's clock offset), counter.ts (RateCounter) and freshness.ts
 * (CredentialFreshness), target.ts (what a configured target is, asked at start).
 */
export { RedisRateCounter, createRedisCounter, IDENTITY_KEY_NAME } from './counter.js';
export { RedisCounterError, type RedisCounterFailure } from './errors.js';
export { reconnectDelayMs, REDIS_MAX_RECONNECT_DELAY_MS } from './connection.js';
export { FRESHNESS_SCRIPT_SHA1 } from './scripts.js';
export { probeRedisTarget, type RedisTargetProbe } from './target.js';
export {
  DEFAULT_KEY_PREFIX,
  DEFAULT_REDIS_TIMEOUT_MS,
  DEFAULT_CHANGE_BOUND_MS,
  defaultReplicaAckTimeoutMs,
  DEFAULT_MAX_REPLICAS_WAITED,
  type RedisCounterConfig,
} from './config.js';
