import { TOKENS, type Logger, type RateCounter } from '@cos/core';
import { ContainerModule } from 'inversify';
import { createRedisCounter, type RedisCounterConfig } from './redis-counter.js';

/**
 * Binds the core's TOKENS.RateCounter to one RedisRateCounter (a singleton, created on first use).
 * Without `config.logger` it logs through TOKENS.Logger when the container has one. Unbinding
 * (container.unbindAll / unload) closes the connection.
 */
export function redisCounterModule(config: RedisCounterConfig): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<RateCounter>(TOKENS.RateCounter)
      .toResolvedValue(
        (logger: Logger | undefined) => createRedisCounter({ ...config, logger: config.logger ?? logger }),
        [{ serviceIdentifier: TOKENS.Logger, optional: true }],
      )
      .inSingletonScope()
      .onDeactivation(async (counter) => {
        if ('close' in counter && typeof counter.close === 'function') await counter.close();
      });
  });
}
