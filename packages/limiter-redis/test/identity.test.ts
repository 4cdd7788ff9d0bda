/**
 * A Redis's identity (C-111), on real redis-server processes and a real Redis Cluster: the random
 * id kept in Redis itself that caching instances record and operator commands compare, so that a
 * command proves it reached the instances' Redis and not another one at the same address.
 */
import { expect } from 'chai';
import { createRedisCounter, IDENTITY_KEY_NAME, type RedisRateCounter } from '@cos/limiter-redis';
import { RedisCluster } from '@cos/test-support/redis-cluster';
import { rejection } from '@cos/test-support/rejection';
import { describeWithTopology } from './support/failover.js';
import { RedisServer, adminClient, describeWithRedisServer, uniquePrefix, waitFor } from './support/redis-server.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describeWithRedisServer('limiter-redis: the identity of a Redis (C-111)', function () {
  this.timeout(30_000);
  let first: RedisServer;
  let second: RedisServer;
  const open: RedisRateCounter[] = [];

  async function counter(url: string, keyPrefix: string): Promise<RedisRateCounter> {
    const c = createRedisCounter({ url, keyPrefix, timeoutMs: 1_000 });
    open.push(c);
    expect(await c.whenReady(5_000), 'connected').to.equal(true);
    return c;
  }

  before(async () => {
    [first, second] = [await RedisServer.start(), await RedisServer.start()];
  });
  afterEach(async () => {
    if (first.running) first.thaw();
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  after(async () => {
    await first?.stop();
    await second?.stop();
  });

  it('C-111: absent, identity({ create: false }) is null and writes nothing; the first identity({ create: true }) stores a random id with no expiry, and every reader of that Redis gets the same one', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}:${IDENTITY_KEY_NAME}`;
    const admin = await adminClient(first.url);
    try {
      const reader = await counter(first.url, prefix);
      expect(await reader.identity({ create: false })).to.equal(null);
      expect(await admin.exists(key), 'a reader that may not create writes nothing').to.equal(0);
      const [a, b] = [await counter(first.url, prefix), await counter(first.url, prefix)];
      const created = await Promise.all([a.identity({ create: true }), b.identity({ create: true })]);
      expect(created[0]).to.match(UUID);
      expect(created[1], 'two creators at once: the first one stays for both').to.equal(created[0]);
      expect(await reader.identity({ create: false })).to.equal(created[0]);
      expect(await admin.get(key)).to.equal(created[0]);
      expect(await admin.pTTL(key), 'never expires').to.equal(-1);
    } finally {
      admin.destroy();
    }
  });

  it('C-111: two Redis servers have different identities; one whose key is gone (a restart without persistence) gets a new one from its next creator', async () => {
    const prefix = uniquePrefix();
    const [one, other] = [await counter(first.url, prefix), await counter(second.url, prefix)];
    const idOne = await one.identity({ create: true });
    const idOther = await other.identity({ create: true });
    expect(idOne).to.match(UUID);
    expect(idOther).to.match(UUID).and.not.equal(idOne);
    const admin = await adminClient(first.url);
    try {
      await admin.del(`${prefix}:${IDENTITY_KEY_NAME}`);
    } finally {
      admin.destroy();
    }
    expect(await one.identity({ create: false })).to.equal(null);
    expect(await one.identity({ create: true })).to.match(UUID).and.not.equal(idOne);
  });

  it('a Redis that does not answer: identity() rejects within its bound (at least 1 s), naming host:port', async () => {
    const c = await counter(first.url, uniquePrefix());
    first.freeze();
    const started = performance.now();
    const error = await rejection(c.identity({ create: true }));
    const elapsed = performance.now() - started;
    first.thaw();
    expect(error.message).to.include(`127.0.0.1:${first.port}`).and.to.include('identity');
    expect(elapsed).to.be.within(900, 10_000);
  });
});

describeWithTopology('limiter-redis: the identity of a Redis Cluster (C-111)', function () {
  this.timeout(60_000);
  let cluster: RedisCluster;
  const open: RedisRateCounter[] = [];

  before(async () => {
    cluster = await RedisCluster.start();
  });
  after(async () => {
    await Promise.all(open.map((c) => c.close()));
    await cluster?.stop();
  });

  async function connected(nodes: readonly string[], keyPrefix: string): Promise<RedisRateCounter> {
    const counter = createRedisCounter({ clusterNodes: nodes, keyPrefix, timeoutMs: 5_000 });
    open.push(counter);
    await waitFor(() => counter.whenReady(100), 10_000, 'the cluster client to discover the slots');
    return counter;
  }

  it('C-111: one identity per cluster, one key on one slot, the same through clients seeded by different nodes; absent and not created: null', async () => {
    const prefix = uniquePrefix();
    const [viaFirst, viaLast] = [await connected([cluster.urls[0]!], prefix), await connected([cluster.urls[5]!], prefix)];
    expect(await viaLast.identity({ create: false })).to.equal(null);
    const id = await viaFirst.identity({ create: true });
    expect(id).to.match(UUID);
    expect(await viaLast.identity({ create: false })).to.equal(id);
    expect(await viaLast.identity({ create: true }), 'an existing identity is kept').to.equal(id);
    // Exactly one primary holds the key.
    const key = `${prefix}:${IDENTITY_KEY_NAME}`;
    const primaries = (await cluster.topology()).filter((n) => n.primary);
    const local = await Promise.all(primaries.map(async (p) => (await cluster.node(p.port).cli('KEYS', key)).split('\n').filter((l) => l !== '').length));
    expect(local.reduce((a, b) => a + b, 0), 'the key on one primary').to.equal(1);
  });
});
