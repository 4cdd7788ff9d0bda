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
  REDIS_MAX_RECONNECT_DELAY_MS,
  REDIS_WARN_INTERVAL_MS,
  type RedisCounterConfig,
  type RedisCounterFailure,
} from './redis-counter.js';
export { redisCounterModule } from './module.js';
