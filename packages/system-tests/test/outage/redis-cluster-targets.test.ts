/**
 * `cos-admin serve`'s Redis target checked at start (C-172, C-173), real processes against a real
 * local Redis Cluster (three primaries, three replicas) and a plain Redis, on SQLite and Postgres:
 * REDIS_URL naming one node of the cluster, or REDIS_CLUSTER_NODES naming a Redis without cluster
 * support, refuse to start (exit 1, one line naming the variable and the fix); seeds that do not
 * answer yet (reached through a TcpProxy that resets every connection) let serve start, with one
 * warning, and /readyz answers 503 until a seed answers, then 200.
 */
import { expect } from 'chai';
import { RedisCluster, redisTopologyAvailable } from '@cos/test-support/redis-cluster';
import { RedisServer } from '@cos/test-support/redis-server';
import { TcpProxy } from '@cos/test-support/tcp-proxy';
import { cliJson, ensureBuilt, startServe, type Env, type ServeProcess } from '../../../cli/test/support/cli.js';
import { databaseTargets, type TestDatabase } from '../../../cli/test/support/databases.js';
import { sleep } from '../support/free-port.js';

const NO_SEED_WARNING = 'REDIS_CLUSTER_NODES: no Redis node answered yet; connecting in the background, and not ready (/readyz 503) until one answers';

async function until<T>(what: () => Promise<T | undefined>, ms: number, label: string): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await what();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms: ${label}`);
    await sleep(50);
  }
}

/** Starts serve and waits for whichever comes first: its exit, or its listening line. */
async function exitOrListen(env: Env, cwd: string, started: (s: ServeProcess) => void): Promise<{ code: number | null; stdout: string; stderr: string } | 'listening'> {
  const s = startServe([], env, cwd);
  started(s);
  const outcome = await Promise.race([s.exited().then(() => 'exited' as const), s.listening(60_000).then(() => 'listening' as const)]);
  if (outcome === 'listening') return 'listening';
  return { code: (await s.exited()).code, stdout: s.stdout(), stderr: s.stderr() };
}

async function readyz(ops: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${ops}/readyz`);
  return { status: res.status, text: (await res.text()).trim() };
}

describe('system: serve checks its Redis target at start (C-172, C-173)', function () {
  this.timeout(120_000);
  let cluster: RedisCluster;
  let plain: RedisServer;

  before(async function () {
    if (!redisTopologyAvailable() && process.env['CI'] !== 'true') {
      this.skip();
      return;
    }
    await ensureBuilt();
    [cluster, plain] = await Promise.all([RedisCluster.start(), RedisServer.start()]);
  });
  after(async () => {
    await cluster?.stop();
    await plain?.kill();
  });

  for (const target of databaseTargets()) {
    describe(`on ${target.name}`, () => {
      let db: TestDatabase;
      let serve: ServeProcess | undefined;
      let proxy: TcpProxy | undefined;
      before(async () => {
        db = await target.create();
        await cliJson(['migrate'], { DATABASE_URL: db.databaseUrl }, db.cwd);
      });
      afterEach(async () => {
        serve?.kill();
        serve = undefined;
        await proxy?.close();
        proxy = undefined;
      });
      after(async () => {
        await db?.drop();
      });

      it('C-172: REDIS_URL naming one node of a Redis Cluster: exit 1, one line naming REDIS_URL and REDIS_CLUSTER_NODES, nothing listens', async () => {
        const node = cluster.nodes[0]!;
        const r = await exitOrListen({ DATABASE_URL: db.databaseUrl, REDIS_URL: node.url, PORT: '0' }, db.cwd, (s) => (serve = s));
        if (r === 'listening') throw new Error('serve started');
        expect(r.code).to.equal(1);
        expect(r.stderr).to.equal(`cos-admin: REDIS_URL points at a Redis Cluster node (127.0.0.1:${node.port}): set REDIS_CLUSTER_NODES to the cluster's nodes instead\n`);
        expect(r.stdout).to.not.match(/"address"/);
      });

      it('C-172: REDIS_CLUSTER_NODES naming a Redis without cluster support (with cluster nodes beside it): exit 1, one line naming REDIS_CLUSTER_NODES and REDIS_URL, nothing listens', async () => {
        const port = new URL(plain.url).port;
        const r = await exitOrListen({ DATABASE_URL: db.databaseUrl, REDIS_CLUSTER_NODES: [cluster.nodes[1]!.url, plain.url].join(','), PORT: '0' }, db.cwd, (s) => (serve = s));
        if (r === 'listening') throw new Error('serve started');
        expect(r.code).to.equal(1);
        expect(r.stderr).to.equal(`cos-admin: REDIS_CLUSTER_NODES names 127.0.0.1:${port}, which is not a Redis Cluster node (cluster support disabled): set REDIS_URL to it instead\n`);
        expect(r.stdout).to.not.match(/"address"/);
      });

      it('C-173: seeds that do not answer yet: serve starts, warns once, /readyz is 503 until a seed answers and 200 after', async () => {
        proxy = await new TcpProxy('127.0.0.1', cluster.nodes[2]!.port).listen();
        proxy.cut(); // every connection reset on arrival
        serve = startServe([], { DATABASE_URL: db.databaseUrl, REDIS_CLUSTER_NODES: proxy.urlFor(cluster.nodes[2]!.url), PORT: '0', OPS_PORT: '0' }, db.cwd);
        const started = await serve.listening(60_000);
        const ops = String(started.line['ops'] ?? '');
        expect(ops, 'the start-up line names the operations listener').to.match(/^http:\/\//);
        // Not ready for as long as no seed answers (the re-probe runs every second: several rounds).
        for (let i = 0; i < 5; i++) {
          expect(await readyz(ops)).to.deep.equal({ status: 503, text: 'redis not reached yet' });
          await sleep(300);
        }
        proxy.restore();
        await until(async () => ((await readyz(ops)).status === 200 ? true : undefined), 15_000, '/readyz 200 once the seed answers');
        const warnings = serve.logLines().filter((l) => l['msg'] === NO_SEED_WARNING);
        expect(warnings.length, 'the warning, once').to.equal(1);
        expect(warnings[0]).to.include({ variable: 'REDIS_CLUSTER_NODES' });
        expect(JSON.stringify(serve.logLines()), 'no credentials or digests, and no other line about it').to.not.match(/not a Redis Cluster node/);
      });
    });
  }
});
