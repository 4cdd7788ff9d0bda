/**
 * The core's CredentialFreshness contract suite (C-57), unchanged, over Redis: two counters
 * (two instances) on one server, against a redis-server this test starts (its flush is FLUSHALL,
 * then SCRIPT FLUSH as well) and against TEST_REDIS_URL (its flush deletes the run's keys only).
 */
import { createClient } from 'redis';
import { describeCredentialFreshness, type FreshnessHarness } from '@cos/core/testing/contracts';
import { createRedisCounter } from '@cos/limiter-redis';
import { RedisServer, describeWithRedisServer, uniquePrefix, waitFor } from './support/redis-server.js';

const BOUND_MS = 300;

async function harness(url: string, whole: boolean): Promise<FreshnessHarness> {
  const keyPrefix = uniquePrefix();
  const make = () => createRedisCounter({ url, keyPrefix, timeoutMs: 1_000, changeBoundMs: BOUND_MS });
  const first = make();
  const second = make();
  const admin = createClient({ url });
  await admin.connect();
  await waitFor(() => first.isReady && second.isReady, 5_000, `connections to ${url}`);
  return {
    first,
    second,
    changeBoundMs: BOUND_MS,
    async flush() {
      if (whole) {
        await admin.sendCommand(['FLUSHALL']);
        await admin.sendCommand(['SCRIPT', 'FLUSH']);
        return;
      }
      for await (const keys of admin.scanIterator({ MATCH: `${keyPrefix}:*`, COUNT: 1000 })) {
        if (keys.length > 0) await admin.del(keys);
      }
    },
    async close() {
      await Promise.all([first.close(), second.close(), admin.close()]);
    },
  };
}

describeWithRedisServer('limiter-redis credential freshness (spawned redis-server)', function () {
  let server: RedisServer;
  before(async () => {
    server = await RedisServer.start();
  });
  after(async () => {
    await server?.stop();
  });
  describeCredentialFreshness('redis (FLUSHALL + SCRIPT FLUSH)', () => harness(server.url, true));
});

const sharedUrl = process.env.TEST_REDIS_URL;
if (sharedUrl) describeCredentialFreshness('redis (TEST_REDIS_URL)', () => harness(sharedUrl, false));
else if (process.env.CI === 'true') {
  describe('CredentialFreshness contract: redis (TEST_REDIS_URL)', () => {
    it('needs TEST_REDIS_URL (CI=true: this must not be skipped)', () => {
      throw new Error('TEST_REDIS_URL is not set');
    });
  });
}
