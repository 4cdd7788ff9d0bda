/**
 * Operator commands without REDIS_URL (C-36, C-57): two real `cos-admin serve` processes on one
 * Postgres and one Redis cache credentials (the default) and record themselves, with where their
 * Redis is, in the database's instance registry. `cos-admin key revoke`, `key roll` and `org
 * classify`, run WITHOUT REDIS_URL while both instances are under load of the key, must either
 * take effect on both instances for every request sent after the command exited 0, or refuse with
 * nothing written: they fence in the recorded Redis when it needs no credentials, refuse when it
 * needs them (a Redis started with --requirepass) or when REDIS_URL names another Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import { cliJson, runCli, startServe, type Env, type ServeProcess } from '../../../cli/test/support/cli.js';
import { RedisServer } from '@cos/test-support/redis-server';
import { Client } from '../support/http.js';
import { freePort, sleep } from '../support/free-port.js';
import { closedLoad, type LoadShot } from '../support/load.js';
import { startServeInstances, until, type ServeInstances } from '../support/serve-instances.js';
import { storeReadsDuring } from '../support/store-reads.js';

/** Loops per instance that keep sending the key under test. */
const LOOPS = 3;

type Shot = LoadShot<'A' | 'B', { section: string | null }>;

/** A redis-server with a password, spawned for the refusal test. */
async function startPasswordRedis(password: string): Promise<{ port: number; child: ChildProcess; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--requirepass', password], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    port,
    child,
    async stop() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

describe('system: operator commands without REDIS_URL against caching instances (C-36, C-57)', function () {
  this.timeout(240_000);
  let fx: ServeInstances;
  let redis: RedisServer;
  /** The instances' environment and working directory. */
  let env: Env;
  let work: { readonly dir: string };
  /** The operator's environment: the same database, no REDIS_URL. */
  let operatorEnv: Env;
  /** The instances the tests stop themselves, or start. */
  const servers: ServeProcess[] = [];
  let clients: Record<'A' | 'B', Client>;
  let orgId: string;
  let ownerKey: string;
  let db: SqlStore;
  let pgProxy: TcpProxy;

  before(async function () {
    fx = await startServeInstances(this, {
      redis: 'server',
      env: { RATE_LIMIT_PER_MINUTE: '100000000' },
      async seed(ground) {
        operatorEnv = { DATABASE_URL: ground.databaseUrl };
        orgId = (await ground.cli<{ id: string }>(['org', 'create', '--name', 'Registry Ltd', '--slug', 'registry-ltd'], operatorEnv)).id;
        ownerKey = (await ground.cli<{ key: string }>(['key', 'issue', orgId, '--label', 'owner'], operatorEnv)).key;
      },
      // B reaches Postgres through a proxy that sees its statements: the test can see B serve from its cache.
      instances: [{}, { postgresProxy: true }],
    });
    ({ env, redis } = fx);
    work = { dir: fx.dir };
    db = createSqlStore({ databaseUrl: fx.databaseUrl, poolMax: 1 });
    servers.push(...fx.instances.map((i) => i.serve));
    clients = { A: fx.instances[0]!.client, B: fx.instances[1]!.client };
    pgProxy = fx.instances[1]!.pgProxy;
    await until(async () => (await registrations()).length === 2, 10_000, 'both instances to register');
    await fx.settle(async () => {
      for (const i of ['A', 'B'] as const) expect((await getOrg(i, ownerKey)).status).to.equal(200);
    });
  });

  after(async () => {
    for (const s of servers) s.kill();
    await db?.close();
    await fx?.close();
  });

  const registrations = () => db.query<{ instance_id: string; redis_location: string; redis_auth: boolean }>('SELECT instance_id, redis_location, redis_auth FROM instance_registry');
  const getOrg = (i: 'A' | 'B', key: string) => clients[i].call('GET', `/v1/organisations/${orgId}`, { key, timeoutMs: 5_000 });

  /** Keeps sending GET of the organisation with `key` on both instances until stopped. */
  const load = (key: string) =>
    closedLoad(['A', 'B'] as const, LOOPS, (i) => getOrg(i, key), (r) => (r.status === 200 ? { section: r.json<{ industry_section: string | null }>().industry_section } : {}));

  /** Both instances answer `key` from their caches: several 200s each, then B and A read no row for it. */
  async function warm(shots: Shot[]): Promise<void> {
    await until(async () => (['A', 'B'] as const).every((i) => shots.filter((s) => s.instance === i && s.status === 200).length >= 5), 5_000, '200s on both instances');
  }

  async function issueKey(label: string): Promise<{ id: string; key: string }> {
    return cliJson<{ id: string; key: string }>(['key', 'issue', orgId, '--label', label], operatorEnv, work.dir);
  }

  const revokedAt = async (keyId: string) => (await db.query<{ revoked_at: string | null }>('SELECT revoked_at FROM api_keys WHERE id = ?', [keyId]))[0]!.revoked_at;
  const snapshot = async () =>
    (await db.query('SELECT (SELECT count(*) FROM api_keys) AS keys, (SELECT count(*) FROM audit_entries) AS audit, (SELECT count(*) FROM webhook_outbox) AS outbox, (SELECT industry_section FROM organisations WHERE id = ?) AS section', [orgId]))[0];

  it('the cache is in use once registered: a warm key is answered by B without a credential or organisation read sent to Postgres', async () => {
    for (let n = 0; n < 5; n++) expect((await getOrg('B', ownerKey)).status).to.equal(200);
    const reads = await storeReadsDuring(pgProxy, async () => {
      for (let n = 0; n < 30; n++) expect((await getOrg('B', ownerKey)).status).to.equal(200);
    });
    expect(reads, 'reads B sent to Postgres for 30 cached requests').to.deep.equal([]);
  });

  it('the instances registered with their Redis location and no credentials', async () => {
    const rows = await registrations();
    expect(rows.map((r) => [r.redis_location, r.redis_auth])).to.deep.equal([
      [`redis://127.0.0.1:${redis.port}/0`, false],
      [`redis://127.0.0.1:${redis.port}/0`, false],
    ]);
  });

  for (let repetition = 0; repetition < 3; repetition++) {
    it(`C-36: \`cos-admin key revoke\` without REDIS_URL under load on both instances: exit 0, and no request sent after it is answered 200 on either (repetition ${repetition + 1})`, async () => {
      const { id, key } = await issueKey(`revoke-${repetition}`);
      const traffic = load(key);
      try {
        await warm(traffic.shots);
        const r = await runCli(['key', 'revoke', orgId, id], operatorEnv, work.dir);
        const exited = performance.now();
        expect(r.code, r.stderr).to.equal(0);
        await sleep(50);
        await traffic.stop();
        const after = traffic.shots.filter((s) => s.sentAt > exited);
        expect(after.length, 'requests sent after the command exited').to.be.greaterThan(0);
        expect(after.filter((s) => s.status !== 401).map((s) => `${s.instance} ${s.status}`)).to.deep.equal([]);
        // And later still (the 75 s of the report are not waited for: the token changed, nothing can be fresh again).
        for (const i of ['A', 'B'] as const) expect((await getOrg(i, key)).status).to.equal(401);
      } finally {
        await traffic.stop();
      }
    });
  }

  it('C-36: `cos-admin key roll` (grace 0) without REDIS_URL under load of the old key: the old key is 401 on both for every request sent after it, the new key 200', async () => {
    const { id, key } = await issueKey('roll');
    const traffic = load(key);
    let rolled: { key: string };
    try {
      await warm(traffic.shots);
      const r = await runCli(['key', 'roll', orgId, id, '--json'], operatorEnv, work.dir);
      const exited = performance.now();
      expect(r.code, r.stderr).to.equal(0);
      rolled = JSON.parse(r.stdout) as { key: string };
      await sleep(50);
      await traffic.stop();
      const after = traffic.shots.filter((s) => s.sentAt > exited);
      expect(after.length).to.be.greaterThan(0);
      expect(after.filter((s) => s.status !== 401).map((s) => `${s.instance} ${s.status}`)).to.deep.equal([]);
    } finally {
      await traffic.stop();
    }
    for (const i of ['A', 'B'] as const) expect((await getOrg(i, rolled.key)).status).to.equal(200);
  });

  it('C-57: `cos-admin org classify` without REDIS_URL under load: every request sent after it sees the new section on both instances', async () => {
    const { key } = await issueKey('classify');
    const problems: string[] = [];
    for (const section of ['K', 'C', 'none'] as const) {
      const traffic = load(key);
      try {
        await warm(traffic.shots);
        const r = await runCli(['org', 'classify', orgId, '--section', section], operatorEnv, work.dir);
        const exited = performance.now();
        expect(r.code, r.stderr).to.equal(0);
        await sleep(50);
        await traffic.stop();
        const want = section === 'none' ? null : section;
        const after = traffic.shots.filter((s) => s.sentAt > exited);
        if (after.length === 0) problems.push(`${section}: no request after the command`);
        const stale = after.filter((s) => s.status !== 200 || s.section !== want);
        if (stale.length > 0) problems.push(`${section}: ${stale.map((s) => `${s.instance} ${s.status} ${s.section}`).join(', ')}`);
      } finally {
        await traffic.stop();
      }
    }
    expect(problems).to.deep.equal([]);
  });

  it('REDIS_URL naming another Redis than the instances\' is refused: exit 1, one line naming REDIS_URL and the instances\' host:port, nothing written', async () => {
    const { id, key } = await issueKey('other-redis');
    const other = await RedisServer.start();
    try {
      const before = await snapshot();
      const r = await runCli(['key', 'revoke', orgId, id], { ...operatorEnv, REDIS_URL: other.url }, work.dir);
      expect(r.code).to.equal(1);
      expect(r.stdout).to.equal('');
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.include('REDIS_URL').and.to.include(`127.0.0.1:${redis.port}`).and.to.include('nothing was changed');
      expect(await snapshot(), 'the database is unchanged').to.deep.equal(before);
      expect(await revokedAt(id)).to.equal(null);
      for (const i of ['A', 'B'] as const) expect((await getOrg(i, key)).status).to.equal(200);
    } finally {
      await other.kill();
    }
  });

  it("the instances' Redis unreachable (frozen): the command without REDIS_URL refuses naming its host:port, nothing written; thawed, the same command revokes", async () => {
    const { id, key } = await issueKey('frozen-redis');
    const before = await snapshot();
    redis.freeze();
    let r;
    try {
      r = await runCli(['key', 'revoke', orgId, id], operatorEnv, work.dir);
    } finally {
      redis.thaw();
    }
    expect(r.code).to.equal(1);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.include(`127.0.0.1:${redis.port}`).and.to.include('unreachable').and.to.include('nothing was changed');
    expect(await snapshot(), 'the database is unchanged').to.deep.equal(before);
    const ok = await runCli(['key', 'revoke', orgId, id], operatorEnv, work.dir);
    expect(ok.code, ok.stderr).to.equal(0);
    for (const i of ['A', 'B'] as const) expect((await getOrg(i, key)).status).to.equal(401);
  });

  it('a clean shutdown removes the registration; with none left the command writes as before (nothing to fence)', async () => {
    const stopped = servers.splice(0);
    for (const s of stopped) s.child.kill('SIGTERM');
    for (const s of stopped) expect((await s.exited()).code).to.equal(0);
    expect(await registrations()).to.deep.equal([]);
    const { id } = await issueKey('no-instances');
    const r = await runCli(['key', 'revoke', orgId, id], operatorEnv, work.dir);
    expect(r.code, r.stderr).to.equal(0);
    expect(await revokedAt(id)).to.not.equal(null);
  });

  it('a password-protected Redis (--requirepass): the command without REDIS_URL refuses (exit 1, one line naming REDIS_URL and host:port), nothing written; with REDIS_URL it revokes and the instance answers 401', async () => {
    const password = 's3cret-pw';
    const locked = await startPasswordRedis(password);
    const port = await freePort();
    const lockedUrl = `redis://:${password}@127.0.0.1:${locked.port}`;
    const server = startServe([], { ...env, PORT: String(port), REDIS_URL: lockedUrl }, work.dir);
    servers.push(server);
    const c = new Client(`http://127.0.0.1:${port}`);
    try {
      await until(async () => (await c.call('GET', '/v1/health').catch(() => null))?.status === 200, 15_000, 'serve to answer');
      await until(async () => (await registrations()).length === 1, 10_000, 'the instance to register');
      const [row] = await registrations();
      expect(row).to.include({ redis_location: `redis://127.0.0.1:${locked.port}/0`, redis_auth: true });
      expect(JSON.stringify(await db.query('SELECT * FROM instance_registry')), 'no password in the registry').to.not.include(password);
      const { id, key } = await issueKey('locked');
      expect((await c.call('GET', `/v1/organisations/${orgId}`, { key })).status).to.equal(200);
      for (const [what, args] of [
        ['key revoke', ['key', 'revoke', orgId, id]],
        ['key roll', ['key', 'roll', orgId, id]],
        ['org classify', ['org', 'classify', orgId, '--section', 'Q']],
      ] as const) {
        const before = await snapshot();
        const r = await runCli(args, operatorEnv, work.dir);
        expect(r.code, `${what}: ${r.stderr}`).to.equal(1);
        expect(r.stderr.trim().split('\n'), what).to.have.length(1);
        expect(r.stderr, what).to.include('REDIS_URL').and.to.include(`127.0.0.1:${locked.port}`).and.to.include('nothing was changed');
        expect(r.stderr, `${what}: never the password`).to.not.include(password);
        expect(await snapshot(), `${what}: the database is unchanged`).to.deep.equal(before);
        expect(await revokedAt(id), what).to.equal(null);
      }
      const ok = await runCli(['key', 'revoke', orgId, id], { ...operatorEnv, REDIS_URL: lockedUrl }, work.dir);
      expect(ok.code, ok.stderr).to.equal(0);
      expect((await c.call('GET', `/v1/organisations/${orgId}`, { key })).status).to.equal(401);
    } finally {
      server.kill();
      await locked.stop();
    }
  });
});
