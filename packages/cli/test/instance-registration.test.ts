/**
 * The instance registry from both sides (C-36, C-57): a caching instance's registration and the
 * lease its cache consults (InstanceRegistrar), and what an operator command makes of the live
 * registrations (planCommandFence, CommandFence), on a real SQLite registry with a controlled
 * monotonic clock. The end-to-end race with two `serve` processes is in system-tests
 * (credential-cache/cli-without-redis-url.test.ts).
 */
import { expect } from 'chai';
import { CapturingLogger, InMemoryFreshCounter } from '@cos/core/testing';
import {
  CommandFence,
  CommandFenceRefusal,
  counterKey,
  freshnessKeys,
  identityRefusal,
  InstanceRegistrar,
  planCommandFence,
  redisLocationOf,
  REGISTRATION_HEARTBEAT_MS,
  REGISTRATION_LIVE_MS,
  REGISTRATION_TRUST_MS,
  type InstanceRecord,
} from '@cos/core';
import { createSqlStore, DEFAULT_STATEMENT_TIMEOUT_MS, SqlInstanceRegistry, type SqlStore } from '@cos/store-sql';
import { createConnection } from 'node:net';
import { createRedisCounter, IDENTITY_KEY_NAME, type RedisRateCounter } from '@cos/limiter-redis';

function record(redisLocation: string, redisAuth = false, instanceId = 'i-1', redisIdentity: string | null = null): InstanceRecord {
  return { instanceId, redisLocation, redisAuth, redisIdentity, startedAt: 0, heartbeatAt: 0, ageMs: 0 };
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}

describe('instance registration: caching instances and operator commands (C-57)', () => {
  describe('redisLocationOf / planCommandFence', () => {
    it('a location never holds credentials: scheme, lower-case host, port (default 6379) and db (default 0)', () => {
      expect(redisLocationOf('redis://user:pw@Cache.Internal')).to.deep.equal({ location: 'redis://cache.internal:6379/0', target: 'cache.internal:6379', auth: true });
      expect(redisLocationOf('rediss://:pw@10.0.0.5:6380/3')).to.deep.equal({ location: 'rediss://10.0.0.5:6380/3', target: '10.0.0.5:6380', auth: true });
      expect(redisLocationOf('redis://127.0.0.1:6379/')).to.deep.equal({ location: 'redis://127.0.0.1:6379/0', target: '127.0.0.1:6379', auth: false });
    });

    it('no live registration: REDIS_URL when set (as before), else nothing to fence', () => {
      expect(planCommandFence([], null)).to.deep.equal({ kind: 'none' });
      expect(planCommandFence([], 'redis://:pw@h:1/2')).to.deep.include({ kind: 'redis', url: 'redis://:pw@h:1/2', from: 'REDIS_URL' });
    });

    it('live registrations without REDIS_URL: their Redis from its recorded location when it needs no credentials', () => {
      expect(planCommandFence([record('redis://127.0.0.1:6390/0'), record('redis://127.0.0.1:6390/0', false, 'i-2')], null)).to.deep.include({
        kind: 'redis',
        url: 'redis://127.0.0.1:6390/0',
        from: 'registry',
      });
    });

    it('REDIS_CLUSTER_NODES: a cluster is recorded as its seed nodes (no credentials), a command with REDIS_CLUSTER_NODES naming a node of it fences there, one without connects to the recorded seeds, another Redis is refused naming the variable', () => {
      const seeds = 'cluster:redis://:pw@Node-B:7101,redis://:pw@node-a:7100';
      expect(redisLocationOf(seeds)).to.deep.equal({ location: 'cluster:redis://node-a:7100/0,redis://node-b:7101/0', target: 'cluster node-a:7100,node-b:7101', auth: true });
      const recorded = [record('cluster:redis://node-a:7100/0,redis://node-b:7101/0')];
      // another seed list of the same cluster (one node in common)
      expect(planCommandFence(recorded, 'cluster:redis://node-b:7101,redis://node-c:7102')).to.deep.include({ kind: 'redis', url: 'cluster:redis://node-b:7101,redis://node-c:7102', from: 'REDIS_URL' });
      expect(planCommandFence(recorded, null)).to.deep.include({ kind: 'redis', url: 'cluster:redis://node-a:7100/0,redis://node-b:7101/0', from: 'registry' });
      // instances given different seed lists of the one cluster
      expect(planCommandFence([...recorded, record('cluster:redis://node-b:7101/0,redis://node-c:7102/0', false, 'i-2')], null)).to.deep.include({ kind: 'redis', from: 'registry' });
      const two = planCommandFence([...recorded, record('cluster:redis://node-x:7100/0', false, 'i-2')], null);
      expect((two as { message: string }).message).to.match(/different addresses .*: set REDIS_CLUSTER_NODES to their Redis/);
      const plain = planCommandFence(recorded, 'redis://node-a:7100');
      expect(plain.kind).to.equal('refuse');
      expect((plain as { message: string }).message).to.match(/^REDIS_URL names the Redis at node-a:7100 .* set REDIS_CLUSTER_NODES to that Redis; nothing was changed$/);
      const otherCluster = planCommandFence([record('redis://cache:6379/0')], 'cluster:redis://:secret@node-x:7100');
      expect((otherCluster as { message: string }).message).to.match(/^REDIS_CLUSTER_NODES names the Redis at cluster node-x:7100/);
      expect((otherCluster as { message: string }).message).to.not.include('secret');
    });

    it('refusals name REDIS_URL and the host:port to set, never a password: credentials needed, another Redis named, instances disagreeing', () => {
      const needsPassword = planCommandFence([record('redis://cache:6379/0', true)], null);
      expect(needsPassword.kind).to.equal('refuse');
      const other = planCommandFence([record('redis://cache:6379/0')], 'redis://:hunter2@elsewhere:6379/0');
      expect(other.kind).to.equal('refuse');
      const otherDb = planCommandFence([record('redis://cache:6379/0')], 'redis://cache:6379/1');
      expect(otherDb.kind, 'another database of the same server is another Redis').to.equal('refuse');
      const split = planCommandFence([record('redis://a:6379/0'), record('redis://b:6379/0', false, 'i-2')], null);
      expect(split.kind, 'instances that recorded different addresses, no REDIS_URL').to.equal('refuse');
      expect(planCommandFence([record('redis://a:6379/0'), record('redis://b:6379/0', false, 'i-2')], 'redis://b:6379'), 'REDIS_URL names one of them').to.deep.include({
        kind: 'redis',
        from: 'REDIS_URL',
      });
      for (const plan of [needsPassword, other, otherDb]) {
        const message = (plan as { message: string }).message;
        expect(message).to.include('REDIS_URL').and.to.include('cache:6379').and.to.include('nothing was changed').and.not.include('hunter2');
        expect(message).to.not.include('\n');
      }
      expect((split as { message: string }).message).to.include('a:6379').and.to.include('b:6379').and.to.include('REDIS_URL');
      // The same Redis named with its password: fenced there.
      expect(planCommandFence([record('redis://cache:6379/0', true)], 'redis://:pw@CACHE:6379')).to.deep.include({ kind: 'redis', from: 'REDIS_URL' });
    });
  });

  describe("identityRefusal: the Redis reached must be the instances' by its identity (C-110, C-112)", () => {
    const recorded = { location: redisLocationOf('redis://127.0.0.1:6410/0'), from: 'registry' } as const;
    const named = { location: redisLocationOf('redis://127.0.0.1:6410/0'), from: 'REDIS_URL' } as const;

    it('C-110: the identity the instances recorded, reached: fenced there, by REDIS_URL or by the recorded address', () => {
      const live = [record('redis://127.0.0.1:6410/0', false, 'i-1', 'id-a'), record('redis://127.0.0.1:6410/0', false, 'i-2', 'id-a')];
      expect(identityRefusal(live, 'id-a', recorded)).to.equal(null);
      expect(identityRefusal(live, 'id-a', named)).to.equal(null);
    });

    it('C-110: another identity, or none, at the same address: refused in one line naming the host:port and REDIS_URL, nothing changed', () => {
      const live = [record('redis://127.0.0.1:6410/0', false, 'i-1', 'id-a')];
      for (const [reached, via, why] of [
        ['id-b', recorded, 'its identity differs'],
        [null, recorded, 'it holds no identity'],
        ['id-b', named, 'its identity differs'],
      ] as const) {
        const message = identityRefusal(live, reached, via);
        expect(message, `${reached} via ${via.from}`).to.be.a('string');
        expect(message).to.include('127.0.0.1:6410').and.to.include(why).and.to.include('set REDIS_URL').and.to.include('nothing was changed').and.not.include('\n');
        expect(message, 'identities are not printed').to.not.include('id-a');
      }
      const cluster = identityRefusal([record('cluster:redis://127.0.0.1:7300/0', false, 'i-1', 'id-a')], null, { location: redisLocationOf('cluster:redis://127.0.0.1:7300/0'), from: 'registry' });
      expect(cluster).to.include('REDIS_CLUSTER_NODES').and.to.include('cluster 127.0.0.1:7300');
    });

    it('C-110: live instances that recorded different identities share no Redis: refused whatever was reached', () => {
      const live = [record('redis://127.0.0.1:6410/0', false, 'i-1', 'id-a'), record('redis://127.0.0.1:6410/0', false, 'i-2', 'id-b')];
      for (const reached of ['id-a', 'id-b', null]) expect(identityRefusal(live, reached, named)).to.include('2 different Redis servers');
    });

    it('C-112: no live row recorded an identity (instances of an earlier version): refused without REDIS_URL; REDIS_URL naming their Redis is trusted as before; rows with and without one: those with one decide', () => {
      const old = [record('redis://127.0.0.1:6410/0', false, 'i-1', null)];
      expect(identityRefusal(old, 'id-a', recorded)).to.include('recorded no identity').and.to.include('set REDIS_URL').and.to.include('nothing was changed');
      expect(identityRefusal(old, 'id-a', named)).to.equal(null);
      expect(identityRefusal(old, null, named)).to.equal(null);
      const mixed = [...old, record('redis://127.0.0.1:6410/0', false, 'i-2', 'id-a')];
      expect(identityRefusal(mixed, 'id-a', recorded)).to.equal(null);
      expect(identityRefusal(mixed, 'id-b', recorded)).to.include('its identity differs');
    });
  });

  describe('the identity on a real Redis (C-110, C-111): the registrar records it, the fence compares it', function () {
    const redisUrl = process.env['TEST_REDIS_URL'];
    let store: SqlStore;
    let registry: SqlInstanceRegistry;
    const open: RedisRateCounter[] = [];
    const keyPrefix = `idt${process.pid}x${Date.now()}`;

    before(function () {
      if (redisUrl === undefined || redisUrl === '') {
        if (process.env['CI'] === 'true') throw new Error('CI=true but TEST_REDIS_URL is not set: the Redis suites must run in CI');
        this.skip();
      }
    });
    beforeEach(async () => {
      store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
      await store.migrate();
      registry = new SqlInstanceRegistry(store);
    });
    afterEach(async () => {
      await Promise.all(open.splice(0).map((c) => c.close()));
      await store.close();
    });

    /** Deletes the identity key of database 0 of the test Redis (what a restart without persistence does), on a connection of its own. */
    function deleteIdentity(): Promise<void> {
      const url = new URL(redisUrl!);
      return new Promise((resolve, reject) => {
        const socket = createConnection({ host: url.hostname, port: Number(url.port || 6379) }, () => socket.write(`DEL ${keyPrefix}:${IDENTITY_KEY_NAME}\r\n`));
        socket.setTimeout(5_000, () => socket.destroy(new Error('DEL: no answer')));
        socket.once('data', (d: Buffer) => {
          socket.destroy();
          if (d.toString('utf8') === ':1\r\n') resolve();
          else reject(new Error(`DEL answered ${d.toString('utf8').trim()}`));
        });
        socket.on('error', reject);
      });
    }

    /** A counter on database `db` of the test Redis: another database is another key space, so another identity. */
    async function counterOn(db: number): Promise<RedisRateCounter> {
      const url = new URL(redisUrl!);
      url.pathname = `/${db}`;
      const c = createRedisCounter({ url: url.toString(), keyPrefix, timeoutMs: 1_000 });
      open.push(c);
      expect(await c.whenReady(5_000)).to.equal(true);
      return c;
    }

    it("C-111: the registrar records the identity it read (created when absent) with its row; C-110: a command reaching that Redis fences, one reaching another at the recorded address refuses, writes nothing in either and leaves no writer row", async () => {
      const [instances, elsewhere] = [await counterOn(0), await counterOn(1)];
      const location = redisLocationOf('redis://127.0.0.1:6410/0');
      const registrar = new InstanceRegistrar(registry, { ...location, identity: () => instances.identity({ create: true }) }, new CapturingLogger());
      expect(await registrar.heartbeat()).to.equal(true);
      const [row] = await registry.live(REGISTRATION_LIVE_MS);
      const identity = await instances.identity({ create: false });
      expect(identity).to.be.a('string');
      expect(row!.redisIdentity).to.equal(identity);

      const keys = freshnessKeys('identity-org');
      const probe = { keys, tag: null, count: 'never', counterKey: counterKey('org:identity-org', 0), ttlMs: 1 } as const;
      const wrong = new CommandFence(registry, null, { freshness: elsewhere, location, from: 'registry', identity: () => elsewhere.identity({ create: false }) }, 'strict');
      const refused = await rejection(wrong.beginChange(keys, 'c1'));
      expect(refused).to.be.instanceOf(CommandFenceRefusal);
      expect(refused.message).to.include('127.0.0.1:6410').and.to.include('it holds no identity').and.to.include('nothing was changed');
      expect(await registry.writesInFlight(REGISTRATION_LIVE_MS), 'no writer row left').to.equal(0);
      expect(await elsewhere.identity({ create: false }), 'the command created no identity there').to.equal(null);

      const tokenBefore = (await instances.check(probe)).token;
      const right = new CommandFence(registry, null, { freshness: instances, location, from: 'registry', identity: () => instances.identity({ create: false }) }, 'strict');
      await right.beginChange(keys, 'c2');
      const during = await instances.check(probe);
      expect(during.token, 'fenced in the instances\' Redis').to.not.equal(tokenBefore);
      expect(during.settled).to.equal(false);
      await right.endChange(keys, 'c2');
      await registrar.stop();
    });

    it("C-112: rows of instances that recorded no identity (an earlier version's): the command without REDIS_URL refuses naming REDIS_URL, with REDIS_URL it fences as before", async () => {
      const redis = await counterOn(0);
      await redis.identity({ create: true });
      const location = redisLocationOf('redis://127.0.0.1:6410/0');
      // What an instance of the earlier version writes: no identity.
      await registry.heartbeat({ instanceId: 'old', redisLocation: location.location, redisAuth: false });
      const keys = freshnessKeys('upgrade-org');
      const unproven = new CommandFence(registry, null, { freshness: redis, location, from: 'registry', identity: () => redis.identity({ create: false }) }, 'strict');
      const refused = await rejection(unproven.beginChange(keys, 'c1'));
      expect(refused).to.be.instanceOf(CommandFenceRefusal);
      expect(refused.message).to.include('recorded no identity').and.to.include('set REDIS_URL').and.to.include('nothing was changed');
      expect(await registry.writesInFlight(REGISTRATION_LIVE_MS)).to.equal(0);
      const named = new CommandFence(registry, 'redis://127.0.0.1:6410/0', { freshness: redis, location, from: 'REDIS_URL', identity: () => redis.identity({ create: false }) }, 'strict');
      await named.beginChange(keys, 'c2');
      await named.endChange(keys, 'c2');
    });

    it('C-111: the registrar reads the identity at every heartbeat: a Redis that lost its key gets a new one which the row follows; an unreadable identity keeps the recorded one and, while none was ever read, is logged', async () => {
      const redis = await counterOn(0);
      let unreadable = false;
      const logger = new CapturingLogger();
      const read = () => (unreadable ? Promise.reject(new Error('redis identity: not connected to 127.0.0.1:6410')) : redis.identity({ create: true }));
      const registrar = new InstanceRegistrar(registry, { ...redisLocationOf('redis://127.0.0.1:6410/0'), identity: read }, logger);
      unreadable = true;
      expect(await registrar.heartbeat(), 'registered without an identity').to.equal(true);
      expect((await registry.live(REGISTRATION_LIVE_MS))[0]!.redisIdentity).to.equal(null);
      expect(logger.entries.filter((e) => e.level === 'warn' && /identity could not be read: operator commands without REDIS_URL refuse/.test(e.message))).to.have.length(1);
      unreadable = false;
      await registrar.heartbeat();
      const first = await redis.identity({ create: false });
      expect((await registry.live(REGISTRATION_LIVE_MS))[0]!.redisIdentity).to.equal(first);
      // The key lost (a restart without persistence): the next heartbeat creates and records a new identity.
      await deleteIdentity();
      await registrar.heartbeat();
      const second = await redis.identity({ create: false });
      expect(second).to.be.a('string').and.not.equal(first);
      expect((await registry.live(REGISTRATION_LIVE_MS))[0]!.redisIdentity).to.equal(second);
      unreadable = true;
      await registrar.heartbeat();
      expect((await registry.live(REGISTRATION_LIVE_MS))[0]!.redisIdentity, 'unreadable: the recorded one is kept').to.equal(second);
      expect(logger.entries.filter((e) => e.level === 'warn'), 'not logged again once one was read').to.have.length(1);
      await registrar.stop();
    });
  });

  describe('InstanceRegistrar (the lease) on a SQLite registry', () => {
    let store: SqlStore;
    let registry: SqlInstanceRegistry;
    let now: number;
    let failing: boolean;
    let logger: CapturingLogger;
    const location = redisLocationOf('redis://:pw@127.0.0.1:6390');

    beforeEach(async () => {
      store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
      await store.migrate();
      registry = new SqlInstanceRegistry(store);
      now = 1_000_000;
      failing = false;
      logger = new CapturingLogger();
    });
    afterEach(() => store.close());

    function registrar(): InstanceRegistrar {
      const flaky = {
        heartbeat: (r: Parameters<SqlInstanceRegistry['heartbeat']>[0]) => (failing ? Promise.reject(new Error('database unreachable')) : registry.heartbeat(r)),
        writesInFlight: (liveMs: number) => registry.writesInFlight(liveMs),
        remove: (id: string) => registry.remove(id),
        prune: () => registry.prune(),
      };
      return new InstanceRegistrar(flaky, location, logger, undefined, () => now);
    }

    it('the timing rules hold: the lease ends well before a command may call the row dead', () => {
      expect(REGISTRATION_TRUST_MS + 2 * REGISTRATION_HEARTBEAT_MS).to.be.at.most(REGISTRATION_LIVE_MS);
      expect(REGISTRATION_TRUST_MS).to.be.at.least(3 * REGISTRATION_HEARTBEAT_MS);
      expect(REGISTRATION_LIVE_MS).to.be.at.least(10 * DEFAULT_STATEMENT_TIMEOUT_MS);
    });

    it('registers (without the password) and holds the lease at once when no command is changing credentials; keeps it while heartbeats succeed', async () => {
      const r = registrar();
      expect(r.epoch(), 'before registering').to.equal(null);
      expect(await r.heartbeat()).to.equal(true);
      const [row] = await registry.live(REGISTRATION_LIVE_MS);
      expect(row).to.include({ instanceId: r.instanceId, redisLocation: 'redis://127.0.0.1:6390/0', redisAuth: true });
      const epoch = r.epoch();
      expect(epoch).to.be.a('number');
      for (let n = 0; n < 10; n++) {
        now += REGISTRATION_HEARTBEAT_MS;
        await r.heartbeat();
        expect(r.epoch(), 'the same lease').to.equal(epoch);
      }
      await r.stop();
    });

    it("a command's change in flight when the instance registers: registered (the command will see it) but no lease until the change is over", async () => {
      await registry.beginWrite('w-1');
      const r = registrar();
      expect(await r.heartbeat()).to.equal(false);
      expect(await registry.live(REGISTRATION_LIVE_MS), 'registered all the same').to.have.length(1);
      expect(r.epoch()).to.equal(null);
      expect(logger.entries.some((e) => /waits for it to finish/.test(e.message))).to.equal(true);
      await registry.endWrite('w-1');
      expect(await r.heartbeat()).to.equal(true);
      expect(r.epoch()).to.be.a('number');
      // Once held, a command's change in flight does not matter: the command sees the registration.
      await registry.beginWrite('w-2');
      now += REGISTRATION_HEARTBEAT_MS;
      expect(await r.heartbeat()).to.equal(true);
      expect(r.epoch()).to.be.a('number');
      await r.stop();
    });

    it('heartbeats failing: the lease ends REGISTRATION_TRUST_MS after the last successful one was sent; once they succeed again a new lease (a new epoch: the cache starts empty)', async () => {
      const r = registrar();
      await r.heartbeat();
      const first = r.epoch();
      expect(first).to.be.a('number');
      now += REGISTRATION_HEARTBEAT_MS;
      const lastSent = now;
      await r.heartbeat();
      failing = true;
      now += REGISTRATION_HEARTBEAT_MS;
      expect(await r.heartbeat()).to.equal(false);
      expect(r.epoch(), 'one failure: still held').to.equal(first);
      now = lastSent + REGISTRATION_TRUST_MS - 1;
      expect(r.epoch()).to.equal(first);
      now = lastSent + REGISTRATION_TRUST_MS;
      expect(r.epoch(), 'lapsed').to.equal(null);
      expect(logger.entries.some((e) => e.level === 'warn' && /instance registration not refreshed/.test(e.message))).to.equal(true);
      failing = false;
      await registry.beginWrite('w-1'); // a command that saw no live registration is changing a key
      expect(await r.heartbeat()).to.equal(false);
      expect(r.epoch(), 'waits for the command').to.equal(null);
      await registry.endWrite('w-1');
      await r.heartbeat();
      const second = r.epoch();
      expect(second).to.be.a('number').and.not.equal(first);
      await r.stop();
    });

    it('stop(): the lease ends at once, then the row is removed; idempotent', async () => {
      const r = registrar();
      await r.start();
      expect(r.epoch()).to.be.a('number');
      expect(await registry.live(REGISTRATION_LIVE_MS)).to.have.length(1);
      await r.stop();
      expect(r.epoch()).to.equal(null);
      expect(await registry.live(REGISTRATION_LIVE_MS)).to.deep.equal([]);
      await r.stop();
    });
  });

  describe('CommandFence: the registry read again right before each change', () => {
    let store: SqlStore;
    let registry: SqlInstanceRegistry;
    beforeEach(async () => {
      store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
      await store.migrate();
      registry = new SqlInstanceRegistry(store);
    });
    afterEach(() => store.close());

    it('nothing registered and no REDIS_URL: nothing to fence, but the change is in flight (a writer row) from before the registry is read until its end; an instance registered since the command started: refused', async () => {
      const fence = new CommandFence(registry, null, null, 'strict');
      await fence.beginChange(freshnessKeys('org'), 'c1');
      expect(await registry.writesInFlight(REGISTRATION_LIVE_MS)).to.equal(1);
      await fence.endChange(freshnessKeys('org'), 'c1');
      expect(await registry.writesInFlight(REGISTRATION_LIVE_MS)).to.equal(0);
      await registry.heartbeat({ instanceId: 'late', redisLocation: 'redis://127.0.0.1:6390/0', redisAuth: false });
      const refused = await rejection(fence.beginChange(freshnessKeys('org'), 'c2'));
      expect(refused).to.be.instanceOf(CommandFenceRefusal);
      expect(refused.message).to.include('127.0.0.1:6390').and.to.include('nothing was changed');
      expect(await registry.writesInFlight(REGISTRATION_LIVE_MS), 'a refused change leaves no row').to.equal(0);
    });

    it("fenced in the instances' Redis: begin and end reach it; a Redis failure is refused even with CREDENTIAL_CACHE=off, which excuses it only when no instance is registered", async () => {
      await registry.heartbeat({ instanceId: 'i', redisLocation: 'redis://127.0.0.1:6390/0', redisAuth: false, redisIdentity: 'the-instances-redis' });
      const shared = new InMemoryFreshCounter();
      const fence = new CommandFence(
        registry,
        null,
        { freshness: shared, location: redisLocationOf('redis://127.0.0.1:6390/0'), from: 'registry', identity: () => Promise.resolve('the-instances-redis') },
        'best-effort',
      );
      const before = await shared.check({ keys: freshnessKeys('org'), tag: null, count: 'never', counterKey: counterKey('org:org', 0), ttlMs: 1 });
      await fence.beginChange(freshnessKeys('org'), 'c1');
      const during = await shared.check({ keys: freshnessKeys('org'), tag: null, count: 'never', counterKey: counterKey('org:org', 0), ttlMs: 1 });
      expect(during.settled, 'the change is in progress in Redis').to.equal(false);
      expect(during.token).to.not.equal(before.token);
      await fence.endChange(freshnessKeys('org'), 'c1');
      shared.failing = true;
      const refused = await rejection(fence.beginChange(freshnessKeys('org'), 'c2'));
      expect(refused).to.be.instanceOf(CommandFenceRefusal);
      expect(refused.message).to.include('127.0.0.1:6390').and.to.include('unreachable');
      await registry.remove('i');
      await fence.beginChange(freshnessKeys('org'), 'c3'); // none registered: best effort
    });
  });
});
