/**
 * The core's RateCounter contract suite, unchanged, over the Redis counter: against a redis-server
 * this test starts itself, and against TEST_REDIS_URL when it is set (required under CI=true).
 */
import { describeRateCounter, type CounterHarness } from '@cos/core/testing/contracts';
import { createRedisCounter } from '@cos/limiter-redis';
import { RedisServer, describeWithRedisServer, uniquePrefix, waitFor } from './support/redis-server.js';

/** A connected counter with a key prefix of its own, so runs never see each other's keys. */
async function redisHarness(url: string): Promise<CounterHarness> {
  // the contract is about counting: a generous bound, so a loaded machine cannot fail a hit
  const counter = createRedisCounter({ url, keyPrefix: uniquePrefix(), timeoutMs: 1_000 });
  try {
    await waitFor(() => counter.isReady, 5_000, `a connection to ${url}`);
  } catch (err) {
    await counter.close();
    throw err;
  }
  return { counter, close: () => counter.close() };
}

describeWithRedisServer('limiter-redis contract (spawned redis-server)', function () {
  let server: RedisServer;
  before(async () => {
    server = await RedisServer.start();
  });
  after(async () => {
    await server?.stop();
  });
  describeRateCounter('redis', () => redisHarness(server.url));
});

const sharedUrl = process.env.TEST_REDIS_URL;
if (sharedUrl) {
  describeRateCounter(`redis (TEST_REDIS_URL)`, () => redisHarness(sharedUrl));
} else {
  describe('RateCounter contract: redis (TEST_REDIS_URL)', () => {
    if (process.env.CI === 'true') {
      it('needs TEST_REDIS_URL (CI=true: this must not be skipped)', () => {
        throw new Error('TEST_REDIS_URL is not set; CI must provide a Redis, e.g. redis://127.0.0.1:6379');
      });
    } else {
      it('runs when TEST_REDIS_URL is set (skipped outside CI)');
    }
  });
}
