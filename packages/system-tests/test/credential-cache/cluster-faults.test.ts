/**
 * Two real `cos-admin serve` processes on one Postgres and a real local Redis Cluster (three
 * primaries, three replicas, `cluster-node-timeout` 1000; one cluster per test, since each breaks
 * one), every setting at its default (REDIS_MIN_REPLICAS_ACKED unset, REDIS_TIMEOUT_MS 50):
 * - C-170: the replica of the organisation's primary has its replication link cut (a wrong
 *   `masterauth`, `CLIENT KILL TYPE replica`) while instance B holds a key in its cache; the
 *   revocation through A answers 503 (nothing revoked); the primary is killed and the cluster
 *   promotes the stale replica; the revocation retried answers 204 and the key is 401 on both.
 * - C-171: the organisation's primary is frozen (SIGSTOP); within 5 s of the cluster promoting its
 *   replica, requests are counted again (X-RateLimit-Remaining below the limit) and a revocation
 *   answers 204.
 */
import { expect } from 'chai';
import { keySlot } from '@cos/core';
import type { RedisCluster } from '@cos/test-support/redis-cluster';
import { Client } from '../support/http.js';
import { sleep } from '../support/free-port.js';
import { startServeInstances, type ServeInstances } from '../support/serve-instances.js';

const LIMIT = 1_000_000;
/** C-171's bound, from the promotion. */
const FOLLOW_BOUND_MS = 5_000;

async function until<T>(what: () => Promise<T | undefined>, ms: number, label: string): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await what();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms: ${label}`);
    await sleep(50);
  }
}

describe('system: two serve instances on a Redis Cluster under faults, defaults (C-170, C-171)', function () {
  this.timeout(180_000);
  let fx: ServeInstances | undefined;
  let cluster: RedisCluster | undefined;
  let a: Client;
  let b: Client;
  let orgId: string;
  let ownerKey: string;

  beforeEach(async function () {
    fx = await startServeInstances(this, {
      redis: 'cluster',
      env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) },
      async seed(ground) {
        ({ id: orgId, key: ownerKey } = await ground.organisation('Faults Ltd', 'faults-ltd'));
      },
      instances: [{}, {}],
    });
    ({ cluster } = fx);
    a = fx.instances[0]!.client;
    b = fx.instances[1]!.client;
    // The organisation's slot is new to the cluster: not settled (no cache) for the change bound.
    await fx.settle(async () => {
      for (const c of [a, b]) expect((await getOrg(c, ownerKey)).status).to.equal(200);
    });
  });

  afterEach(async () => {
    cluster = undefined;
    await fx?.close();
    fx = undefined;
  });

  const getOrg = (c: Client, key: string) => c.call('GET', `/v1/organisations/${orgId}`, { key, timeoutMs: 5_000 });
  const revoke = (c: Client, keyId: string) => c.call('DELETE', `/v1/organisations/${orgId}/api-keys/${keyId}`, { key: ownerKey, timeoutMs: 5_000 });
  const shard = () => cluster!.shardOf(keySlot(`rl:{org:${orgId}}:cc:token`));

  async function issueKey(label: string): Promise<{ id: string; key: string }> {
    const r = await a.call('POST', `/v1/organisations/${orgId}/api-keys`, { key: ownerKey, body: { label } });
    expect(r.status, r.text).to.equal(201);
    return r.json<{ id: string; key: string }>();
  }

  it('C-170: replica link cut, revoke (503, nothing revoked), primary killed, stale replica promoted: the retried revocation is 204 and the key is 401 on both instances from then on', async () => {
    const k = await issueKey('cached');
    for (let i = 0; i < 3; i++) for (const c of [a, b]) expect((await getOrg(c, k.key)).status).to.equal(200);
    const s = await shard();
    await cluster!.cutReplicaLink(s);
    const refused = await revoke(a, k.id);
    expect(refused.status, `the replica with its link cut could not acknowledge the revocation: ${refused.text}`).to.equal(503);
    expect((await getOrg(a, k.key)).status, 'nothing revoked').to.equal(200);

    await s.primary.kill();
    await cluster!.waitPromoted(s.replica);
    await cluster!.waitHealthy();
    await until(async () => ((await revoke(a, k.id)).status === 204 ? true : undefined), 20_000, 'the retried revocation to answer 204');
    const answers: string[] = [];
    for (let i = 0; i < 20; i++) for (const [name, c] of [['A', a], ['B', b]] as const) answers.push(`${name} ${(await getOrg(c, k.key)).status}`);
    expect(answers.filter((x) => !x.endsWith('401'))).to.deep.equal([]);
  });

  it(`C-171: the organisation's primary frozen (SIGSTOP): within ${FOLLOW_BOUND_MS} ms of the promotion both instances count again and a revocation answers 204`, async () => {
    const k = await issueKey('to revoke');
    const s = await shard();
    await cluster!.freezePrimary(s);
    const promotedAt = await cluster!.waitPromoted(s.replica);
    const counted = async (c: Client): Promise<boolean> => {
      const r = await getOrg(c, ownerKey);
      return r.status === 200 && Number(r.headers.get('x-ratelimit-remaining')) < LIMIT;
    };
    let revoked = false;
    const backAt = await until(
      async () => {
        if (!revoked) revoked = (await revoke(a, k.id)).status === 204;
        return revoked && (await counted(a)) && (await counted(b)) ? performance.now() : undefined;
      },
      FOLLOW_BOUND_MS + 5_000,
      'counting on both instances and a revocation answering 204 while the old primary stays frozen',
    );
    console.log(`      counting and revocation back ${Math.round(backAt - promotedAt)} ms after the promotion was seen`);
    expect(backAt - promotedAt).to.be.below(FOLLOW_BOUND_MS);
    for (const c of [a, b]) expect((await getOrg(c, k.key)).status, 'the revoked key').to.equal(401);
  });
});
