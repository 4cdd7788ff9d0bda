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
  FRESHNESS_SCRIPT_SHA1,
  REDIS_MAX_RECONNECT_DELAY_MS,
  REDIS_WARN_INTERVAL_MS,
  type RedisCounterConfig,
  type RedisCounterFailure,
} from './redis-counter.js';
// The inversify ContainerModule lives at the '@cos/limiter-redis/module' subpath, so that importing the
// counter does not load inversify.
