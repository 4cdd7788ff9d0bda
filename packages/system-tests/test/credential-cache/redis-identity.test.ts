/**
 * Operator commands prove they reached the caching instances' Redis, not just its address (C-110,
 * C-111). A real `cos-admin serve` on Postgres caches credentials and records its Redis in the
 * instance registry as it reaches it, `redis://127.0.0.1:<port>/0`, with that Redis's identity. From
 * another host the same address names another Redis: simulated here twice, with real servers only.
 *
 * - On this host: the instance reaches its Redis through a TcpProxy; after it registered, the proxy
 *   sends new connections to a second redis-server, so a command without REDIS_URL (or with
 *   REDIS_URL naming that address) reaches another Redis at exactly the recorded address.
 * - In a network namespace (`unshare -n`): the command runs where 127.0.0.1:<port> is a different
 *   redis-server, reaching Postgres over its unix socket, as on another host. Where the machine
 *   cannot create a namespace (or has no Postgres socket) that test is skipped with the reason printed.
 * - On a Redis Cluster (REDIS_CLUSTER_NODES): the instance's seed is a proxy to a node of one
 *   cluster; the command's seed, the same address, leads to another cluster.
 *
 * Each time the command must refuse (exit 1, one line, nothing written in the database or in the
 * Redis it reached); led back to the instances' Redis, the same command revokes and the instance
 * answers 401.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { expect } from 'chai';
import { createRedisCounter } from '@cos/limiter-redis';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { RedisCluster, redisTopologyAvailable } from '@cos/test-support/redis-cluster';
import { RedisServer, redisServerAvailable } from '@cos/test-support/redis-server';
import { TcpProxy } from '@cos/test-support/tcp-proxy';
import { childEnv, cliJson, ensureBuilt, nodeArgs, runCli, startServe, tempDir, type CliResult, type Env, type ServeProcess } from '../../../cli/test/support/cli.js';
import { postgresDatabase } from '../../../cli/test/support/databases.js';
import { postgresUrl } from '../support/env.js';
import { Client } from '../support/http.js';
import { freePort, sleep } from '../support/free-port.js';

/** A fresh Redis answers "not settled" for its change bound (10 s) from its first call on. */
const SETTLE_MS = 10_500;
const POSTGRES_SOCKET_DIR = process.env['TEST_POSTGRES_SOCKET_DIR'] ?? '/var/run/postgresql';

async function until(ok: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The identity kept in the Redis of `target` (null: none), read with the service's own client; nothing is created. */
async function identityOf(target: { url: string } | { clusterNodes: string[] }): Promise<string | null> {
  const counter = createRedisCounter({ ...target, timeoutMs: 5_000 });
  try {
    if (!(await counter.whenReady(10_000))) throw new Error('the test could not reach Redis');
    return await counter.identity({ create: false });
  } finally {
    await counter.close();
  }
}

/** An integer reply of one command on a connection of its own (DBSIZE). */
function integerReply(port: number, command: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write(`${command}\r\n`));
    let answer = '';
    socket.setTimeout(5_000, () => socket.destroy(new Error(`${command}: no answer`)));
    socket.on('data', (d: Buffer) => {
      answer += d.toString('utf8');
      const match = /^:(\d+)\r\n/.exec(answer);
      if (match !== null) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
  });
}

/** How this machine creates a network namespace (`unshare -n`, or with a user namespace `-rn`), or why it cannot. */
function namespaceSupport(): { args: string[] } | { reason: string } {
  const errors: string[] = [];
  for (const args of [['-n'], ['-rn']]) {
    const probe = spawnSync('unshare', [...args, 'ip', 'link', 'set', 'lo', 'up'], { encoding: 'utf8' });
    if (probe.status === 0) return { args };
    errors.push(`unshare ${args.join(' ')}: ${(probe.stderr || probe.error?.message || `exit ${probe.status}`).trim()}`);
  }
  return { reason: errors.join('; ') };
}

/**
 * Runs one cos-admin command in a new network namespace whose 127.0.0.1:`port` is a redis-server of
 * its own (no persistence): what the command does on another host where that address is another
 * Redis. Answers the command's result and the keys that Redis holds afterwards.
 */
function runInNamespace(unshareArgs: readonly string[], port: number, args: readonly string[], env: Env, cwd: string): Promise<CliResult & { keysWritten: number }> {
  const script = [
    'set -e',
    'ip link set lo up',
    `redis-server --port ${port} --bind 127.0.0.1 --save '' --appendonly no --loglevel warning &`,
    'R=$!',
    "trap 'kill $R 2>/dev/null' EXIT",
    'n=0',
    `until redis-cli -p ${port} ping 2>/dev/null | grep -q PONG; do n=$((n+1)); [ $n -le 400 ] || { echo "the namespace's redis-server did not answer" >&2; exit 97; }; sleep 0.05; done`,
    'set +e',
    '"$@" >"$OUT/stdout" 2>"$OUT/stderr"',
    'echo $? >"$OUT/code"',
    `redis-cli -p ${port} dbsize >"$OUT/dbsize"`,
  ].join('\n');
  const out = tempDir('cos-netns-');
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', [...unshareArgs, 'sh', '-c', script, 'netns', process.execPath, ...nodeArgs(args)], {
      cwd,
      env: { ...childEnv(env), OUT: out.dir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        if (code !== 0 || !existsSync(join(out.dir, 'code'))) throw new Error(`the namespace's script failed (${code}): ${stderr}`);
        const read = (name: string) => readFileSync(join(out.dir, name), 'utf8');
        resolve({ code: Number(read('code').trim()), stdout: read('stdout'), stderr: read('stderr'), keysWritten: Number(read('dbsize').trim()) });
      } catch (e) {
        reject(e as Error);
      } finally {
        out.remove();
      }
    });
  });
}

interface Stack {
  readonly databaseUrl: string;
  readonly db: SqlStore;
  readonly work: { dir: string; remove(): void };
  readonly orgId: string;
  readonly client: Client;
  readonly server: ServeProcess;
  drop(): Promise<void>;
}

/** A Postgres database, an organisation, and one caching `serve` with `redis` as its Redis settings; resolves once it registered with an identity. */
async function startStack(redis: Env): Promise<Stack> {
  const created = await postgresDatabase();
  const databaseUrl = created.databaseUrl;
  const db = createSqlStore({ databaseUrl, poolMax: 1 });
  const work = tempDir('cos-redis-identity-');
  const operatorEnv = { DATABASE_URL: databaseUrl };
  await cliJson(['migrate'], operatorEnv, work.dir);
  const orgId = (await cliJson<{ id: string }>(['org', 'create', '--name', 'Identity Ltd', '--slug', 'identity-ltd'], operatorEnv, work.dir)).id;
  const port = await freePort();
  const server = startServe([], { DATABASE_URL: databaseUrl, ...redis, PORT: String(port), RATE_LIMIT_PER_MINUTE: '100000000', LOG_LEVEL: 'warn' }, work.dir);
  const client = new Client(`http://127.0.0.1:${port}`);
  await until(async () => (await client.call('GET', '/v1/health').catch(() => null))?.status === 200, 60_000, 'serve to answer');
  await until(async () => (await db.query("SELECT 1 FROM instance_registry WHERE role = 'cache' AND redis_identity IS NOT NULL")).length === 1, 15_000, 'the instance to register with an identity');
  return {
    databaseUrl,
    db,
    work,
    orgId,
    client,
    server,
    async drop() {
      server.kill();
      await db.close();
      await created.drop();
      work.remove();
    },
  };
}

/** What a refused command must have left alone. */
async function snapshot(s: Stack): Promise<unknown> {
  return (
    await s.db.query(
      'SELECT (SELECT count(*) FROM api_keys) AS keys, (SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL) AS revoked, (SELECT count(*) FROM audit_entries) AS audit, (SELECT count(*) FROM webhook_outbox) AS outbox, (SELECT count(*) FROM instance_registry WHERE role = \'writer\') AS writers, (SELECT max(industry_section) FROM organisations) AS section',
    )
  )[0];
}

function expectRefusal(r: CliResult, address: string, variable: 'REDIS_URL' | 'REDIS_CLUSTER_NODES'): void {
  expect(r.code, `${r.stdout}${r.stderr}`).to.equal(1);
  expect(r.stdout).to.equal('');
  expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
  expect(r.stderr).to.include(address).and.to.include('is not the one the running instances cache credentials with').and.to.include(variable).and.to.include('nothing was changed');
}

describe("system: an operator command reaching another Redis at the instances' recorded address refuses (C-110, C-111)", function () {
  this.timeout(240_000);
  let instancesRedis: RedisServer;
  let otherRedis: RedisServer;
  let proxy: TcpProxy;
  let stack: Stack;
  let ownerKey: string;

  before(async function () {
    if (postgresUrl() === undefined || (!redisServerAvailable() && process.env['CI'] !== 'true')) {
      this.skip();
      return;
    }
    await ensureBuilt();
    [instancesRedis, otherRedis] = [await RedisServer.start(), await RedisServer.start()];
    proxy = await TcpProxy.for(instancesRedis.url, 6379);
    stack = await startStack({ REDIS_URL: `redis://127.0.0.1:${proxy.port}` });
    ownerKey = (await cliJson<{ key: string }>(['key', 'issue', stack.orgId, '--label', 'owner'], { DATABASE_URL: stack.databaseUrl }, stack.work.dir)).key;
    // The first call to a fresh Redis starts its 10 s "not settled": make it, then wait that out, so the instance caches.
    expect((await getOrg(ownerKey)).status).to.equal(200);
    await sleep(SETTLE_MS);
  });

  after(async () => {
    await stack?.drop();
    await proxy?.close();
    await instancesRedis?.kill();
    await otherRedis?.kill();
  });

  afterEach(() => proxy?.redirect('127.0.0.1', instancesRedis.port));

  const getOrg = (key: string) => stack.client.call('GET', `/v1/organisations/${stack.orgId}`, { key, timeoutMs: 5_000 });
  const operatorEnv = (): Env => ({ DATABASE_URL: stack.databaseUrl });

  async function cachedKey(label: string): Promise<{ id: string; key: string }> {
    const issued = await cliJson<{ id: string; key: string }>(['key', 'issue', stack.orgId, '--label', label], operatorEnv(), stack.work.dir);
    for (let n = 0; n < 5; n++) expect((await getOrg(issued.key)).status).to.equal(200);
    return issued;
  }

  it("C-111: the instance recorded its Redis's address and identity, the id kept in that Redis; the other Redis holds none", async () => {
    const rows = await stack.db.query<{ redis_location: string; redis_identity: string }>("SELECT redis_location, redis_identity FROM instance_registry WHERE role = 'cache'");
    const identity = await identityOf({ url: instancesRedis.url });
    expect(identity).to.be.a('string');
    expect(rows).to.deep.equal([{ redis_location: `redis://127.0.0.1:${proxy.port}/0`, redis_identity: identity }]);
    expect(await identityOf({ url: otherRedis.url })).to.equal(null);
    // Its first heartbeat runs while its Redis connection is still being made: it waits for it.
    expect(stack.server.stdout(), 'no warning about an unreadable identity at start').to.not.include('identity could not be read');
  });

  it("C-110: the recorded address now leads a new connection to another Redis: `key revoke` without REDIS_URL and with REDIS_URL naming that address, `key roll` and `org classify` exit 1 with one line and writes nothing, in the database or in that Redis; led back to the instances' Redis it revokes and the instance answers 401", async () => {
    const { id, key } = await cachedKey('proxied');
    const before = await snapshot(stack);
    proxy.redirect('127.0.0.1', otherRedis.port);
    const without = await runCli(['key', 'revoke', stack.orgId, id], operatorEnv(), stack.work.dir);
    expectRefusal(without, `127.0.0.1:${proxy.port}`, 'REDIS_URL');
    const named = await runCli(['key', 'revoke', stack.orgId, id], { ...operatorEnv(), REDIS_URL: `redis://127.0.0.1:${proxy.port}` }, stack.work.dir);
    expectRefusal(named, `127.0.0.1:${proxy.port}`, 'REDIS_URL');
    // Every command that fences takes the same path.
    expectRefusal(await runCli(['key', 'roll', stack.orgId, id], operatorEnv(), stack.work.dir), `127.0.0.1:${proxy.port}`, 'REDIS_URL');
    expectRefusal(await runCli(['org', 'classify', stack.orgId, '--section', 'K'], operatorEnv(), stack.work.dir), `127.0.0.1:${proxy.port}`, 'REDIS_URL');
    expect(await snapshot(stack), 'the database is unchanged').to.deep.equal(before);
    expect(await integerReply(otherRedis.port, 'DBSIZE'), 'nothing written in the Redis the command reached').to.equal(0);
    expect((await getOrg(key)).status, 'the key was not revoked').to.equal(200);

    proxy.redirect('127.0.0.1', instancesRedis.port);
    const ok = await runCli(['key', 'revoke', stack.orgId, id], operatorEnv(), stack.work.dir);
    expect(ok.code, ok.stderr).to.equal(0);
    for (let n = 0; n < 20; n++) expect((await getOrg(key)).status, `request ${n + 1} after the revocation`).to.equal(401);
  });

  it("C-111: the instances' Redis lost its identity key (a restart without persistence): within a heartbeat the instance records the new identity it created, and a command without REDIS_URL revokes", async () => {
    const old = await identityOf({ url: instancesRedis.url });
    expect(await integerReply(instancesRedis.port, 'DEL rl:redis-identity')).to.equal(1);
    const recorded = async () => (await stack.db.query<{ redis_identity: string }>("SELECT redis_identity FROM instance_registry WHERE role = 'cache'"))[0]?.redis_identity;
    await until(async () => {
      const now = await recorded();
      return now !== old && now === (await identityOf({ url: instancesRedis.url }));
    }, 20_000, 'the instance to record the new identity');
    const { id, key } = await cachedKey('after-identity-loss');
    const r = await runCli(['key', 'revoke', stack.orgId, id], operatorEnv(), stack.work.dir);
    expect(r.code, r.stderr).to.equal(0);
    for (let n = 0; n < 20; n++) expect((await getOrg(key)).status).to.equal(401);
  });

  it('C-110: from a network namespace where 127.0.0.1:<port> is another redis-server (Postgres over its unix socket), `key revoke` without REDIS_URL exits 1 and writes nothing; the instance still answers the key (it was not revoked)', async function () {
    const support = namespaceSupport();
    const socket = join(POSTGRES_SOCKET_DIR, `.s.PGSQL.${new URL(stack.databaseUrl).port || '5432'}`);
    const reason = 'reason' in support ? `cannot create a network namespace here (${support.reason})` : existsSync(socket) ? null : `no Postgres unix socket at ${socket} (TEST_POSTGRES_SOCKET_DIR)`;
    if (reason !== null) {
      console.log(`      skipped: ${reason}`);
      this.skip();
      return;
    }
    const { id, key } = await cachedKey('namespaced');
    const before = await snapshot(stack);
    const pg = new URL(stack.databaseUrl);
    const overSocket = `postgres://${pg.username}@/${pg.pathname.slice(1)}?host=${encodeURIComponent(POSTGRES_SOCKET_DIR)}&port=${pg.port || '5432'}`;
    const r = await runInNamespace((support as { args: string[] }).args, proxy.port, ['key', 'revoke', stack.orgId, id], { DATABASE_URL: overSocket }, stack.work.dir);
    expectRefusal(r, `127.0.0.1:${proxy.port}`, 'REDIS_URL');
    expect(r.keysWritten, "nothing written in the namespace's Redis").to.equal(0);
    expect(await snapshot(stack), 'the database is unchanged').to.deep.equal(before);
    for (let n = 0; n < 20; n++) expect((await getOrg(key)).status).to.equal(200);
  });
});

describe("system: on a Redis Cluster, an operator command whose seed address leads to another cluster refuses (C-110, C-111)", function () {
  this.timeout(240_000);
  let instancesCluster: RedisCluster;
  let otherCluster: RedisCluster;
  let proxy: TcpProxy;
  let stack: Stack;

  before(async function () {
    if (postgresUrl() === undefined || (!redisTopologyAvailable() && process.env['CI'] !== 'true')) {
      this.skip();
      return;
    }
    await ensureBuilt();
    instancesCluster = await RedisCluster.start();
    otherCluster = await RedisCluster.start();
    proxy = await TcpProxy.for(instancesCluster.urls[0]!, 6379);
    stack = await startStack({ REDIS_CLUSTER_NODES: `redis://127.0.0.1:${proxy.port}` });
  });

  after(async () => {
    await stack?.drop();
    await proxy?.close();
    await instancesCluster?.stop();
    await otherCluster?.stop();
  });

  it("C-111: the instance recorded the cluster's identity (one key, read through the cluster client); C-110: the seed address now leading to another cluster, `key revoke` without REDIS_CLUSTER_NODES exits 1 naming it, writes nothing; led back it revokes and the instance answers 401", async () => {
    const operatorEnv = { DATABASE_URL: stack.databaseUrl };
    const [row] = await stack.db.query<{ redis_location: string; redis_identity: string }>("SELECT redis_location, redis_identity FROM instance_registry WHERE role = 'cache'");
    expect(row!.redis_location).to.equal(`cluster:redis://127.0.0.1:${proxy.port}/0`);
    expect(row!.redis_identity).to.equal(await identityOf({ clusterNodes: instancesCluster.urls }));
    expect(await identityOf({ clusterNodes: otherCluster.urls })).to.equal(null);

    const { id, key } = await cliJson<{ id: string; key: string }>(['key', 'issue', stack.orgId, '--label', 'clustered'], operatorEnv, stack.work.dir);
    const getOrg = () => stack.client.call('GET', `/v1/organisations/${stack.orgId}`, { key, timeoutMs: 5_000 });
    expect((await getOrg()).status).to.equal(200);
    const before = await snapshot(stack);
    proxy.redirect('127.0.0.1', otherCluster.nodes[0]!.port);
    const r = await runCli(['key', 'revoke', stack.orgId, id], operatorEnv, stack.work.dir);
    expectRefusal(r, `cluster 127.0.0.1:${proxy.port}`, 'REDIS_CLUSTER_NODES');
    expect(await snapshot(stack), 'the database is unchanged').to.deep.equal(before);
    const written = await Promise.all(otherCluster.nodes.map(async (n) => Number(await n.cli('DBSIZE'))));
    expect(written, 'nothing written in the other cluster').to.deep.equal([0, 0, 0, 0, 0, 0]);
    expect((await getOrg()).status, 'the key was not revoked').to.equal(200);

    proxy.redirect('127.0.0.1', instancesCluster.nodes[0]!.port);
    const ok = await runCli(['key', 'revoke', stack.orgId, id], operatorEnv, stack.work.dir);
    expect(ok.code, ok.stderr).to.equal(0);
    for (let n = 0; n < 20; n++) expect((await getOrg()).status, `request ${n + 1} after the revocation`).to.equal(401);
  });
});
