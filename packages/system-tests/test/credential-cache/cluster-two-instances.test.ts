/**
 * The credential cache on a Redis Cluster end to end (REDIS_CLUSTER_NODES; C-36, C-57): two real
 * `cos-admin serve` processes on one Postgres and a real local cluster (three primaries, three
 * replicas, started by this test and torn down after). Instance A is given every node as seed, B
 * only two of them. The cache is in use (B answers a warm key without a byte to Postgres), and a key
 * revoked on one instance is 401 on both for every request sent after the 204, under load of that
 * key on both instances, 200 times; an operator command fences in the cluster the instances
 * recorded, with REDIS_CLUSTER_NODES or without it.
 */
import { expect } from 'chai';
import type { RedisCluster } from '@cos/test-support/redis-cluster';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import { cliJson, type Env } from '../../../cli/test/support/cli.js';
import { Client } from '../support/http.js';
import { storeReadsDuring } from '../support/store-reads.js';
import { closedLoad, untilEachAnswered200, type LoadShot } from '../support/load.js';
import { sleep } from '../support/free-port.js';
import { startServeInstances, type ServeInstances } from '../support/serve-instances.js';

const REPETITIONS = Number(process.env['CREDENTIAL_CACHE_REPETITIONS'] ?? 200);
const LOOPS = 2;

describe('system: the credential cache across two serve instances on a Redis Cluster (REDIS_CLUSTER_NODES; C-36, C-57)', function () {
  this.timeout(120_000);
  let fx: ServeInstances;
  let cluster: RedisCluster;
  let pgProxy: TcpProxy;
  /** The operator's environment and working directory (the instances'). */
  let env: Env;
  let work: { readonly dir: string };
  let a: Client;
  let b: Client;
  let orgId: string;
  let ownerKey: string;

  before(async function () {
    fx = await startServeInstances(this, {
      redis: 'cluster',
      env: { RATE_LIMIT_PER_MINUTE: '100000000' },
      async seed(ground) {
        ({ id: orgId, key: ownerKey } = await ground.organisation('Cluster Ltd', 'cluster-ltd'));
      },
      // A is given every node as seed, B only two of them; B reaches Postgres through a proxy that sees its statements.
      instances: [{}, { postgresProxy: true, env: (ground) => ({ REDIS_CLUSTER_NODES: ground.cluster.urls.slice(2, 4).join(',') }) }],
    });
    ({ env, cluster } = fx);
    work = { dir: fx.dir };
    a = fx.instances[0]!.client;
    b = fx.instances[1]!.client;
    pgProxy = fx.instances[1]!.pgProxy;
    // The organisation's slot is new to the cluster: not settled for the change bound.
    await fx.settle(async () => {
      for (const i of ['A', 'B'] as const) expect((await getOrg(i, ownerKey)).status).to.equal(200);
    });
  });

  after(() => fx?.close());

  const client = (i: 'A' | 'B') => (i === 'A' ? a : b);
  const getOrg = (i: 'A' | 'B', key: string) => client(i).call('GET', `/v1/organisations/${orgId}`, { key, timeoutMs: 5_000 });

  const load = (key: string) => closedLoad(['A', 'B'] as const, LOOPS, (i) => getOrg(i, key));

  async function issueKey(label: string): Promise<{ id: string; key: string }> {
    const r = await a.call('POST', `/v1/organisations/${orgId}/api-keys`, { key: ownerKey, body: { label } });
    expect(r.status, r.text).to.equal(201);
    return r.json<{ id: string; key: string }>();
  }

  const until200s = (shots: readonly LoadShot<'A' | 'B'>[]) => untilEachAnswered200(shots, ['A', 'B'], 3);

  it('the cache is in use on the cluster: a warm key is answered by B without a credential or organisation read sent to Postgres', async () => {
    for (let n = 0; n < 5; n++) expect((await getOrg('B', ownerKey)).status).to.equal(200);
    const reads = await storeReadsDuring(pgProxy, async () => {
      for (let i = 0; i < 30; i++) expect((await getOrg('B', ownerKey)).status).to.equal(200);
    });
    expect(reads, 'reads B sent to Postgres for 30 cached requests').to.deep.equal([]);
  });

  it(`C-36: a key revoked on one instance is 401 on both for every request sent after the 204, under load on both (${REPETITIONS} times)`, async () => {
    const problems: string[] = [];
    let checked = 0;
    for (let i = 0; i < REPETITIONS; i++) {
      const { id, key } = await issueKey(`rev-${i}`);
      const traffic = load(key);
      try {
        await until200s(traffic.shots);
        const r = await (i % 2 === 0 ? a : b).call('DELETE', `/v1/organisations/${orgId}/api-keys/${id}`, { key: ownerKey });
        const answered = performance.now();
        expect(r.status, r.text).to.equal(204);
        await sleep(15);
        await traffic.stop();
        const after = traffic.shots.filter((s) => s.sentAt > answered);
        checked += after.length;
        const stale = after.filter((s) => s.status !== 401);
        if (stale.length > 0) problems.push(`repetition ${i}: ${stale.map((s) => `${s.instance} ${s.status}`).join(', ')}`);
      } finally {
        await traffic.stop();
      }
    }
    console.log(`      ${REPETITIONS} revocations on the cluster, ${checked} requests sent after a 204 checked`);
    expect(problems).to.deep.equal([]);
    expect(checked).to.be.greaterThan(REPETITIONS);
  });

  it('an operator command fences in the cluster: `cos-admin key revoke` with REDIS_CLUSTER_NODES naming one node of it, and without it (the instances recorded the cluster), is seen at once by both instances', async () => {
    for (const commandEnv of [{ ...env, REDIS_CLUSTER_NODES: cluster.urls[4]! }, Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'REDIS_CLUSTER_NODES'))]) {
      const { id, key } = await issueKey('cli');
      const traffic = load(key);
      try {
        await until200s(traffic.shots);
        await cliJson(['key', 'revoke', orgId, id], commandEnv, work.dir);
        const answered = performance.now();
        await sleep(20);
        await traffic.stop();
        expect(traffic.shots.filter((s) => s.sentAt > answered && s.status !== 401).map((s) => `${s.instance} ${s.status}`)).to.deep.equal([]);
        for (const i of ['A', 'B'] as const) expect((await getOrg(i, key)).status).to.equal(401);
      } finally {
        await traffic.stop();
      }
    }
  });
});
