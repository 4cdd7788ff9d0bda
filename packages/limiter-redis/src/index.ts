/**
 * @cos/limiter-redis: the core's RateCounter port on Redis (C-54, C-55).
 */
export {
  RedisRateCounter,
  RedisCounterError,
  createRedisCounter,
  reconnectDelayMs,
  DEFAULT_KEY_PREFIX,
  DEFAULT_REDIS_TIMEOUT_MS,
  DEFAULT_CHANGE_BOUND_MS,
  defaultReplicaAckTimeoutMs,
  DEFAULT_MAX_REPLICAS_WAITED,
  FRESHNESS_SCRIPT_SHA1,
  REDIS_MAX_RECONNECT_DELAY_MS,
  type RedisCounterConfig,
  type RedisCounterFailure,
} from './redis-counter.js';
