/**
 * Redis Cluster under faults (three primaries, three replicas, `cluster-node-timeout` 1000 ms,
 * started here, one cluster per test since each test breaks one): a replica whose replication link
 * is cut but which the cluster still promotes (C-170), and a primary frozen with SIGSTOP whose
 * connection stays open (C-171). The fault injections are the test-support cluster helper's
 * (cutReplicaLink, freezePrimary, waitPromoted).
 */
import { expect } from 'chai';
import { counterKey, freshnessKeys, keySlot } from '@cos/core';
import { createRedisCounter, type RedisRateCounter } from '@cos/limiter-redis';
import { clusterReplicasOf } from '../src/freshness.js';
import { RedisCluster } from '@cos/test-support/redis-cluster';
import { FAILOVER_CHANGE_BOUND_MS, describeWithTopology, revokeAcrossFailover } from './support/failover.js';
import { uniquePrefix, waitFor } from './support/redis-server.js';

const MINUTE = 60_000;
const TTL = 120_000;
/** C-171's bound: counting and changes work again this soon after the promotion. */
const FOLLOW_BOUND_MS = 5_000;

/** The promise's value, or 'timeout' after `ms` (the promise may never settle: a frozen node). */
function within<T>(ms: number, work: Promise<T>): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([work, new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)))]).finally(() => clearTimeout(timer));
}

describe('limiter-redis: replicas a cluster lists (C-170)', () => {
  const line = (id: string, flags: string, primary: string) => `${id} 127.0.0.1:7000@17000 ${flags} ${primary} 0 0 1 connected`;
  it('C-170: counts every replica CLUSTER NODES lists for the primary answering, link up or not, failed or not', () => {
    const nodes = [
      line('p1', 'myself,master', '-'),
      line('r1', 'slave', 'p1'),
      line('r2', 'slave,fail?', 'p1'),
      line('r3', 'slave,fail', 'p1'),
      line('p2', 'master', '-'),
      line('r4', 'slave', 'p2'),
    ].join('\n');
    expect(clusterReplicasOf(nodes)).to.equal(3);
    expect(clusterReplicasOf(nodes.replace('myself,master', 'myself,slave'))).to.equal(0);
    expect(clusterReplicasOf('')).to.equal(0);
  });
});

describeWithTopology('limiter-redis: a Redis Cluster under faults', function () {
  this.timeout(90_000);
  let cluster: RedisCluster;
  const open: RedisRateCounter[] = [];

  beforeEach(async () => {
    cluster = await RedisCluster.start();
  });
  afterEach(async () => {
    for (const node of cluster?.nodes ?? []) node.thaw();
    await Promise.all(open.splice(0).map((c) => c.close()));
    await cluster?.stop();
  });

  it('C-170: with REDIS_MIN_REPLICAS_ACKED unset, the replica\'s link cut (masterauth + CLIENT KILL TYPE replica), revoke, primary killed, the stale replica promoted by the cluster: 503 and nothing revoked, and the key is never 200 after its revocation', async () => {
    const keyPrefix = uniquePrefix();
    const shardOf = (org: string) => cluster.shardOf(keySlot(`${keyPrefix}:{org:${org}}:cc:token`));
    let shard: Awaited<ReturnType<typeof shardOf>> | undefined;
    let organisationId = '';
    const outcome = await revokeAcrossFailover({
      counter: () => {
        const c = createRedisCounter({ clusterNodes: cluster.urls, keyPrefix, timeoutMs: 1_000, changeBoundMs: FAILOVER_CHANGE_BOUND_MS });
        open.push(c);
        return c;
      },
      stopReplica: async (org) => {
        organisationId = org;
        shard = await shardOf(org);
        await cluster.cutReplicaLink(shard);
      },
      failover: async (_org, counters) => {
        await shard!.primary.kill();
        await cluster.waitPromoted(shard!.replica);
        await cluster.waitHealthy();
        // Both instances route the organisation's slot to the promoted replica (a hit on a key of its
        // slot that is not the credential cache's: no cache is touched meanwhile).
        const probe = counterKey(`org:${organisationId}`, 0);
        await waitFor(
          async () => (await Promise.all(counters.map((c) => c.hit(probe, TTL).then(() => true, () => false)))).every(Boolean),
          15_000,
          'both instances to reach the promoted replica',
        );
      },
    });
    expect(outcome.answered, 'the replica with its link cut could not acknowledge the change: refused').to.equal(503);
    expect(outcome.revokedInStore, 'nothing half-done').to.equal(false);
    expect(outcome.stale).to.deep.equal([]);
    expect(outcome.checked).to.be.greaterThan(10);
  });

  it(`C-171: a primary frozen (SIGSTOP, its connection left open) is followed to its promoted replica: counting and credential changes work again within ${FOLLOW_BOUND_MS} ms of the promotion`, async () => {
    const keyPrefix = uniquePrefix();
    const counter = createRedisCounter({ clusterNodes: cluster.urls, keyPrefix, timeoutMs: 1_000 });
    open.push(counter);
    await waitFor(() => counter.whenReady(100), 10_000, 'the cluster client to discover the slots');
    const org = 'frozen-primary';
    const shard = await cluster.shardOf(keySlot(`${keyPrefix}:{org:${org}}:cc:token`));
    const window = Math.floor(Date.now() / MINUTE) * MINUTE;
    const key = counterKey(`org:${org}`, window);
    const works = async (): Promise<boolean> => {
      const hit = await within(1_000, counter.hit(key, TTL).then(() => true, () => false));
      if (hit !== true) return false;
      const change = await within(
        1_000,
        counter.beginChange(freshnessKeys(org), 'c').then(
          () => counter.endChange(freshnessKeys(org), 'c').then(() => true),
          () => false,
        ),
      );
      return change === true;
    };
    expect(await works(), 'before the freeze').to.equal(true);

    const frozenAt = performance.now();
    await cluster.freezePrimary(shard);
    const promotedAt = await cluster.waitPromoted(shard.replica);
    let followedAt: number | undefined;
    while (performance.now() - promotedAt < FOLLOW_BOUND_MS + 3_000) {
      if (await works()) {
        followedAt = performance.now();
        break;
      }
    }
    expect(followedAt, 'counting and changes never came back while the old primary stayed frozen').to.not.equal(undefined);
    const after = followedAt! - promotedAt;
    console.log(`      promoted ${Math.round(promotedAt - frozenAt)} ms after the freeze; counting and changes back ${Math.round(after)} ms after the promotion was seen`);
    expect(after).to.be.below(FOLLOW_BOUND_MS);
    // and the count went on on the new primary (none of the frozen node's)
    expect(await counter.hit(key, TTL)).to.be.a('number');
  });
});
