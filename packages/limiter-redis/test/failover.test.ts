/**
 * C-64 on a primary with a replica: a revocation is answered 204 only once its freshness bump
 * reached the replica (WAIT), so a failover to that replica never resurrects the revoked key in
 * a cache; with the replica stopped it is answered 503 and nothing is revoked. The instances reach
 * Redis through a TcpProxy, which the failover points at the promoted replica (the address switch
 * a managed Redis or Sentinel makes). The replica is stopped with SIGSTOP and its replication link
 * blackholed, so what the primary sends it meanwhile is really lost.
 */
import { expect } from 'chai';
import { freshnessKeys } from '@cos/core';
import { createRedisCounter, type RedisRateCounter } from '@cos/limiter-redis';
import { ReplicatedRedis } from '@cos/test-support/redis-cluster';
import { TcpProxy } from '@cos/test-support/tcp-proxy';
import { FAILOVER_CHANGE_BOUND_MS, describeWithTopology, revokeAcrossFailover, type FailoverTopology } from './support/failover.js';
import { uniquePrefix, waitFor } from './support/redis-server.js';

describeWithTopology('limiter-redis: failover to a replica (C-64)', function () {
  this.timeout(60_000);
  let redis: ReplicatedRedis;
  let proxy: TcpProxy;

  beforeEach(async () => {
    redis = await ReplicatedRedis.start();
    proxy = await new TcpProxy('127.0.0.1', redis.primary.port).listen();
  });
  afterEach(async () => {
    redis?.replica.thaw();
    await proxy?.close();
    await redis?.stop();
  });

  function topology(options: { minReplicasAcked?: number } = {}): FailoverTopology {
    const keyPrefix = uniquePrefix();
    return {
      counter: () => createRedisCounter({ url: proxy.urlFor(redis.primary.url), keyPrefix, timeoutMs: 1_000, changeBoundMs: FAILOVER_CHANGE_BOUND_MS, ...options }),
      stopReplica: () => redis.stopReplica(),
      failover: async (_org, counters) => {
        await redis.primary.kill();
        await waitFor(() => counters.every((c) => !c.isReady), 5_000, 'the instances to notice the primary is gone');
        redis.replica.thaw();
        await redis.promoteReplica();
        redis.link.cut(); // the dead primary's address stays dead for the promoted replica too
        proxy.retarget('127.0.0.1', redis.replica.port);
      },
    };
  }

  it('C-64: replica stopped, revoke, primary killed, replica promoted: the revocation is 503 with nothing revoked, its retry is 204, and the key is never 200 again on either instance', async () => {
    const outcome = await revokeAcrossFailover(topology());
    expect(outcome.answered, 'the replica could not acknowledge the bump: refused').to.equal(503);
    expect(outcome.revokedInStore, 'nothing half-done').to.equal(false);
    expect(outcome.stale).to.deep.equal([]);
    expect(outcome.checked).to.be.greaterThan(10);
  });

  it('C-64: with the replica running the revocation is 204 and its bump survives the failover: the key is never 200 again', async () => {
    const t = topology();
    const outcome = await revokeAcrossFailover({ ...t, stopReplica: () => Promise.resolve() });
    expect(outcome.answered).to.equal(204);
    expect(outcome.revokedInStore).to.equal(true);
    expect(outcome.stale).to.deep.equal([]);
  });

  it('the hazard is real: with REDIS_MIN_REPLICAS_ACKED=0 the same failover answers 204 and then resurrects the revoked key', async () => {
    const outcome = await revokeAcrossFailover(topology({ minReplicasAcked: 0 }));
    expect(outcome.answered).to.equal(204);
    expect(outcome.stale.length, 'stale 200s after the failover').to.be.greaterThan(0);
  });

  it('REDIS_MIN_REPLICAS_ACKED above the replicas there are refuses every change (503 path), and the default waits for the one replica there is', async () => {
    const keyPrefix = uniquePrefix();
    const counters: RedisRateCounter[] = [
      createRedisCounter({ url: redis.primary.url, keyPrefix, minReplicasAcked: 2, replicaAckTimeoutMs: 150 }),
      // The default number of replicas (the one there is), with room for a loaded machine's replication.
      createRedisCounter({ url: redis.primary.url, keyPrefix, replicaAckTimeoutMs: 2_000 }),
    ];
    try {
      await waitFor(async () => (await Promise.all(counters.map((c) => c.whenReady(100)))).every(Boolean), 5_000, 'connections');
      const refused = await counters[0]!.beginChange(freshnessKeys('org-a'), 'c1').then(
        () => 'confirmed',
        (e: Error) => e.message,
      );
      expect(refused).to.match(/^redis credential freshness: [01] of 2 replica\(s\) of 127\.0\.0\.1:\d+ acknowledged the change within 150 ms \(a failover could lose it\)$/);
      await counters[1]!.beginChange(freshnessKeys('org-a'), 'c2');
      await counters[1]!.endChange(freshnessKeys('org-a'), 'c2');
      // and the bump is on the replica once the begin was confirmed
      const token = await redis.replica.cli('GET', `${keyPrefix}:{org:org-b}:cc:token`);
      expect(token).to.equal('');
      await counters[1]!.beginChange(freshnessKeys('org-b'), 'c3');
      expect(await redis.replica.cli('GET', `${keyPrefix}:{org:org-b}:cc:token`)).to.not.equal('');
    } finally {
      await Promise.all(counters.map((c) => c.close()));
    }
  });

  it('C-64: a primary without ROLE (renamed, as some providers do) is asked INFO replication: the replica is still waited for, and a stopped one still refuses the change', async () => {
    await proxy.close();
    await redis.stop();
    redis = await ReplicatedRedis.start({ primaryArgs: ['--rename-command', 'ROLE', 'ROLE-renamed-by-the-provider'] });
    proxy = await new TcpProxy('127.0.0.1', redis.primary.port).listen();
    const keyPrefix = uniquePrefix();
    const counter = createRedisCounter({ url: redis.primary.url, keyPrefix, replicaAckTimeoutMs: 2_000 });
    try {
      await waitFor(() => counter.whenReady(100), 5_000, 'a connection');
      await counter.beginChange(freshnessKeys('org-c'), 'c1');
      expect(await redis.replica.cli('GET', `${keyPrefix}:{org:org-c}:cc:token`), 'on the replica once confirmed').to.not.equal('');
      await counter.endChange(freshnessKeys('org-c'), 'c1');
      await redis.stopReplica();
      const refused = await counter.beginChange(freshnessKeys('org-c'), 'c2').then(
        () => 'confirmed',
        (e: Error) => e.message,
      );
      expect(refused).to.match(/0 of 1 replica\(s\) of 127\.0\.0\.1:\d+ acknowledged the change within 2000 ms/);
    } finally {
      await counter.close();
    }
  });
});
