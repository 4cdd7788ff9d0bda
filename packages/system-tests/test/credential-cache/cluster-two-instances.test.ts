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
import { RedisCluster, redisTopologyAvailable } from '@cos/test-support/redis-cluster';
import { TcpProxy } from '@cos/test-support/tcp-proxy';
import { cliJson, ensureBuilt, startServe, tempDir, type Env, type ServeProcess } from '../../../cli/test/support/cli.js';
import { postgresDatabase } from '../../../cli/test/support/databases.js';
import { postgresUrl } from '../support/env.js';
import { Client } from '../support/http.js';
import { storeReadsDuring } from '../support/store-reads.js';
import { freePort, sleep } from '../support/free-port.js';

const REPETITIONS = Number(process.env['CREDENTIAL_CACHE_REPETITIONS'] ?? 200);
const LOOPS = 2;

interface Shot {
  readonly instance: 'A' | 'B';
  readonly sentAt: number;
  readonly status: number;
}

async function until(ok: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('system: the credential cache across two serve instances on a Redis Cluster (REDIS_CLUSTER_NODES; C-36, C-57)', function () {
  this.timeout(120_000);
  let cluster: RedisCluster;
  let pgProxy: TcpProxy;
  let dropDatabase: (() => Promise<void>) | undefined;
  let work: { dir: string; remove(): void };
  let env: Env;
  const servers: ServeProcess[] = [];
  let a: Client;
  let b: Client;
  let orgId: string;
  let ownerKey: string;

  before(async function () {
    if (postgresUrl() === undefined || (!redisTopologyAvailable() && process.env['CI'] !== 'true')) {
      this.skip();
      return;
    }
    await ensureBuilt();
    cluster = await RedisCluster.start();
    const db = await postgresDatabase();
    dropDatabase = () => db.drop();
    work = tempDir('cos-cc-cluster-');
    env = { DATABASE_URL: db.databaseUrl, REDIS_CLUSTER_NODES: cluster.urls.join(','), PORT: '0', RATE_LIMIT_PER_MINUTE: '100000000', LOG_LEVEL: 'warn' };
    await cliJson(['migrate'], env, work.dir);
    const org = await cliJson<{ id: string }>(['org', 'create', '--name', 'Cluster Ltd', '--slug', 'cluster-ltd'], env, work.dir);
    orgId = org.id;
    ownerKey = (await cliJson<{ key: string }>(['key', 'issue', orgId, '--label', 'owner'], env, work.dir)).key;
    pgProxy = await TcpProxy.for(db.databaseUrl, 5432);
    const [portA, portB] = [await freePort(), await freePort()];
    servers.push(startServe([], { ...env, PORT: String(portA) }, work.dir));
    servers.push(startServe([], { ...env, PORT: String(portB), DATABASE_URL: pgProxy.urlFor(db.databaseUrl), REDIS_CLUSTER_NODES: cluster.urls.slice(2, 4).join(',') }, work.dir));
    a = new Client(`http://127.0.0.1:${portA}`);
    b = new Client(`http://127.0.0.1:${portB}`);
    for (const c of [a, b]) await until(async () => (await c.call('GET', '/v1/health').catch(() => null))?.status === 200, 20_000, 'serve to answer');
    // The organisation's slot is new to the cluster: not settled for the change bound (10 s).
    for (const i of ['A', 'B'] as const) expect((await getOrg(i, ownerKey)).status).to.equal(200);
    await sleep(10_500);
  });

  after(async () => {
    for (const s of servers) s.kill();
    await pgProxy?.close();
    await cluster?.stop();
    await dropDatabase?.();
    work?.remove();
  });

  const client = (i: 'A' | 'B') => (i === 'A' ? a : b);
  const getOrg = (i: 'A' | 'B', key: string) => client(i).call('GET', `/v1/organisations/${orgId}`, { key, timeoutMs: 5_000 });

  function load(key: string): { shots: Shot[]; stop(): Promise<void> } {
    const shots: Shot[] = [];
    let running = true;
    const loop = async (instance: 'A' | 'B') => {
      while (running) {
        const sentAt = performance.now();
        const status = await getOrg(instance, key).then(
          (r) => r.status,
          () => 0,
        );
        shots.push({ instance, sentAt, status });
      }
    };
    const loops = [...Array.from({ length: LOOPS }, () => loop('A')), ...Array.from({ length: LOOPS }, () => loop('B'))];
    return {
      shots,
      async stop() {
        running = false;
        await Promise.all(loops);
      },
    };
  }

  async function issueKey(label: string): Promise<{ id: string; key: string }> {
    const r = await a.call('POST', `/v1/organisations/${orgId}/api-keys`, { key: ownerKey, body: { label } });
    expect(r.status, r.text).to.equal(201);
    return r.json<{ id: string; key: string }>();
  }

  async function until200s(shots: Shot[], n = 3): Promise<void> {
    const deadline = performance.now() + 5_000;
    while (['A', 'B'].some((i) => shots.filter((s) => s.instance === i && s.status === 200).length < n)) {
      if (performance.now() > deadline) throw new Error(`no 200s on both instances: ${JSON.stringify(shots.slice(-6))}`);
      await sleep(5);
    }
  }

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
