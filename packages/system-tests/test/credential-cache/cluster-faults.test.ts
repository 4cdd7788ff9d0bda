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
import { RedisCluster, redisTopologyAvailable } from '@cos/test-support/redis-cluster';
import { cliJson, ensureBuilt, startServe, tempDir, type Env, type ServeProcess } from '../../../cli/test/support/cli.js';
import { postgresDatabase } from '../../../cli/test/support/databases.js';
import { postgresUrl } from '../support/env.js';
import { Client } from '../support/http.js';
import { freePort, sleep } from '../support/free-port.js';

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
  let cluster: RedisCluster | undefined;
  let dropDatabase: (() => Promise<void>) | undefined;
  let work: { dir: string; remove(): void } | undefined;
  let servers: ServeProcess[] = [];
  let a: Client;
  let b: Client;
  let orgId: string;
  let ownerKey: string;

  beforeEach(async function () {
    if (postgresUrl() === undefined || (!redisTopologyAvailable() && process.env['CI'] !== 'true')) {
      this.skip();
      return;
    }
    await ensureBuilt();
    cluster = await RedisCluster.start();
    const db = await postgresDatabase();
    dropDatabase = () => db.drop();
    work = tempDir('cos-cluster-faults-');
    const env: Env = { DATABASE_URL: db.databaseUrl, REDIS_CLUSTER_NODES: cluster.urls.join(','), PORT: '0', RATE_LIMIT_PER_MINUTE: String(LIMIT), LOG_LEVEL: 'warn' };
    await cliJson(['migrate'], env, work.dir);
    orgId = (await cliJson<{ id: string }>(['org', 'create', '--name', 'Faults Ltd', '--slug', 'faults-ltd'], env, work.dir)).id;
    ownerKey = (await cliJson<{ key: string }>(['key', 'issue', orgId, '--label', 'owner'], env, work.dir)).key;
    const [portA, portB] = [await freePort(), await freePort()];
    servers = [startServe([], { ...env, PORT: String(portA) }, work.dir), startServe([], { ...env, PORT: String(portB) }, work.dir)];
    a = new Client(`http://127.0.0.1:${portA}`);
    b = new Client(`http://127.0.0.1:${portB}`);
    for (const c of [a, b]) await until(async () => ((await c.call('GET', '/v1/health').catch(() => null))?.status === 200 ? true : undefined), 30_000, 'serve to answer');
    // The organisation's slot is new to the cluster: not settled (no cache) for the change bound, 10 s.
    for (const c of [a, b]) expect((await getOrg(c, ownerKey)).status).to.equal(200);
    await sleep(10_500);
  });

  afterEach(async () => {
    for (const node of cluster?.nodes ?? []) node.thaw();
    for (const s of servers) s.kill();
    servers = [];
    await cluster?.stop();
    cluster = undefined;
    await dropDatabase?.();
    dropDatabase = undefined;
    work?.remove();
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
