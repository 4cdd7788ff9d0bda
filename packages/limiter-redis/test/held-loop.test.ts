/**
 * The credential cache's deadline with the event loop held, on one real redis-server
 * (support/held-loop.ts; the same suite runs on a Redis Cluster in cluster.test.ts).
 */
import { createRedisCounter, type RedisRateCounter } from '@cos/limiter-redis';
import { HELD_CHANGE_BOUND_MS, HELD_TIMEOUT_MS, heldLoopSuite } from './support/held-loop.js';
import { RedisServer, describeWithRedisServer, uniquePrefix, waitFor } from './support/redis-server.js';

describeWithRedisServer('limiter-redis: the credential cache with the event loop held (C-150, C-151)', function () {
  this.timeout(30_000);
  let server: RedisServer;
  let counter: RedisRateCounter | undefined;

  after(async () => {
    await counter?.close();
    await server?.stop();
  });

  heldLoopSuite(async () => {
    server = await RedisServer.start();
    counter = createRedisCounter({ url: server.url, timeoutMs: HELD_TIMEOUT_MS, changeBoundMs: HELD_CHANGE_BOUND_MS, keyPrefix: uniquePrefix() });
    const connected = counter;
    await waitFor(() => connected.whenReady(100), 10_000, 'the counter to connect');
    return { counter: connected, ports: [server.port], sameTurnWrite: { freeze: () => server.freeze(), thaw: () => server.thaw() } };
  });
});
