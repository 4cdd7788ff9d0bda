/**
 * The counter and the credential freshness on a real Redis Cluster (three primaries, three
 * replicas, `redis-cli --cluster create` on loopback ports; started here, torn down after): the
 * core's RateCounter and CredentialFreshness contract suites unchanged, every key of one
 * organisation under one hash tag and nothing global, a resharding of the organisation's slot
 * under load, and C-64's failover (CLUSTER FAILOVER TAKEOVER) last, since it kills a primary.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { describeCredentialFreshness, describeRateCounter, type FreshnessHarness } from '@cos/core/testing/contracts';
import { OPERATOR, UnavailableError, counterKey, createCore, freshnessKeys, keySlot, type Core } from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';
import { createRedisCounter, type RedisRateCounter } from '@cos/limiter-redis';
import { RedisCluster } from '@cos/test-support/redis-cluster';
import { FAILOVER_CHANGE_BOUND_MS, describeWithTopology, revokeAcrossFailover } from './support/failover.js';
import { HELD_CHANGE_BOUND_MS, HELD_TIMEOUT_MS, heldLoopSuite } from './support/held-loop.js';
import { RedisServer, uniquePrefix, waitFor } from './support/redis-server.js';

const BOUND_MS = 300;
const MINUTE = 60_000;
const TTL = 120_000;

describeWithTopology('limiter-redis on a Redis Cluster (REDIS_CLUSTER_NODES)', function () {
  this.timeout(60_000);
  let cluster: RedisCluster;
  const open: RedisRateCounter[] = [];

  before(async () => {
    cluster = await RedisCluster.start();
  });
  after(async () => {
    await Promise.all(open.map((c) => c.close()));
    await cluster?.stop();
  });

  async function connected(options: { keyPrefix: string; changeBoundMs?: number }): Promise<RedisRateCounter> {
    // These tests' subject is where keys live and what the fence guarantees, not the latency bound:
    // 5 s per command gives WAIT 3 s (60 %), since a replica of a cluster started moments ago on a
    // loaded machine took longer than the 600 ms a 1 s bound allows to acknowledge a change (the
    // failover tests below keep the production-like 1 s bound).
    const counter = createRedisCounter({ clusterNodes: cluster.urls, timeoutMs: 5_000, ...options });
    open.push(counter);
    await waitFor(() => counter.whenReady(100), 10_000, 'the cluster client to discover the slots');
    return counter;
  }

  describeRateCounter('redis cluster', async () => {
    const counter = await connected({ keyPrefix: uniquePrefix() });
    return { counter, close: () => counter.close() };
  });

  describeCredentialFreshness('redis cluster (FLUSHALL + SCRIPT FLUSH on every primary)', async (): Promise<FreshnessHarness> => {
    const keyPrefix = uniquePrefix();
    const [first, second] = [await connected({ keyPrefix, changeBoundMs: BOUND_MS }), await connected({ keyPrefix, changeBoundMs: BOUND_MS })];
    return {
      first,
      second,
      changeBoundMs: BOUND_MS,
      async flush() {
        await cluster.onPrimaries('FLUSHALL');
        await cluster.onPrimaries('SCRIPT', 'FLUSH');
      },
      close: () => Promise.all([first.close(), second.close()]).then(() => undefined),
    };
  });

  describe('the credential cache with the event loop held (C-150, C-151)', () => {
    heldLoopSuite(async () => {
      const counter = createRedisCounter({ clusterNodes: cluster.urls, timeoutMs: HELD_TIMEOUT_MS, changeBoundMs: HELD_CHANGE_BOUND_MS, keyPrefix: uniquePrefix() });
      open.push(counter);
      await waitFor(() => counter.whenReady(100), 10_000, 'the cluster client to discover the slots');
      return { counter, ports: cluster.urls.map((url) => Number(new URL(url).port)) };
    });
  });

  it('C-200, C-201: the cached requests of one turn cost one call per organisation and slot, and each gets its own count', async () => {
    const counter = await connected({ keyPrefix: uniquePrefix(), changeBoundMs: BOUND_MS });
    const store = createInMemoryStore();
    const limit = 1_000_000;
    const core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter, freshness: counter, config: { rateCounterTimeoutMs: 5_000, rateLimitPerMinute: limit } });
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const org = await core.organisations.create(OPERATOR, { name: `Batch ${i}`, slug: `batch-${i}-${Date.now()}` });
      keys.push((await core.apiKeys.issue(OPERATOR, org.id, { label: 'k' })).rawKey);
    }
    const admitAll = (list: readonly string[]) => Promise.all(list.map((raw) => core.admission.admit(`Bearer ${raw}`, '127.0.0.1')));
    // A slot seen first is settled after the change bound; then the keys are observed, filled and served.
    await waitFor(
      async () => {
        await admitAll(keys);
        return (await admitAll(keys)).every((a) => a.admitted && a.decision.remaining < limit);
      },
      10_000,
      'the keys to be counted',
    );
    for (let i = 0; i < 3; i++) await admitAll(keys);
    const evalshaCalls = async (): Promise<number> => {
      let calls = 0;
      for (const p of await cluster.primaries()) {
        const stats = await cluster.node(p.port).cli('INFO', 'commandstats');
        calls += Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
      }
      return calls;
    };
    await cluster.onPrimaries('CONFIG', 'RESETSTAT');
    const burst = keys.flatMap((raw) => Array.from({ length: 10 }, () => raw));
    const answers = await admitAll(burst);
    expect(await evalshaCalls(), 'EVALSHA calls for 30 requests of 3 organisations').to.equal(3);
    for (let o = 0; o < 3; o++) {
      const remaining = answers.slice(o * 10, o * 10 + 10).map((a) => (a.admitted ? a.decision.remaining : -1));
      expect(remaining, `organisation ${o}: consecutive counts in call order`).to.deep.equal(Array.from({ length: 10 }, (_, i) => remaining[0]! - i));
    }
  });

  it('every key of one organisation shares its hash tag; the data-loss keys are per slot; no key is global', async () => {
    const keyPrefix = uniquePrefix();
    const counter = await connected({ keyPrefix, changeBoundMs: BOUND_MS });
    const orgs = Array.from({ length: 12 }, (_, i) => `tag-test-${i}`);
    const window = Math.floor(Date.now() / MINUTE) * MINUTE;
    for (const org of orgs) {
      await counter.check({ keys: freshnessKeys(org), tag: null, count: 'always', counterKey: counterKey(`org:${org}`, window), ttlMs: TTL });
      await counter.beginChange(freshnessKeys(org), 'c');
      await counter.endChange(freshnessKeys(org), 'c');
    }
    const keys: string[] = [];
    for (const p of await cluster.primaries()) {
      const text = await cluster.node(p.port).cli('--scan', '--pattern', `${keyPrefix}:*`);
      keys.push(...text.split('\n').filter((k) => k !== ''));
    }
    const untagged = keys.filter((k) => !/^[^{]*\{[^}]+\}/.test(k));
    expect(untagged, 'keys without a hash tag').to.deep.equal([]);
    for (const org of orgs) {
      const own = keys.filter((k) => k.includes(`{org:${org}}`));
      expect(own.map((k) => k.slice(k.indexOf('}') + 1)).sort()).to.deep.equal([`:${window}`, ':cc:token'].sort());
      const slot = keySlot(own[0]!);
      const perSlot = keys.filter((k) => !k.includes('{org:') && keySlot(k) === slot);
      expect(perSlot.map((k) => k.slice(k.indexOf('}') + 1)), `the slot keys of ${org}'s slot`).to.include(':cc:alive');
    }
  });

  it('a resharding (redis-cli --cluster reshard) of the slot an organisation lives in, under load: every count answered is exact, and no token from before a change is fresh after it', async function () {
    const keyPrefix = uniquePrefix();
    const [from, to] = await cluster.primaries();
    // An organisation whose slot is the first of `from`'s: redis-cli moves the source's lowest slots.
    let org = '';
    for (let n = 0; org === ''; n++) if (keySlot(`x:{org:reshard-${n}}:cc:token`) === from!.firstSlot) org = `reshard-${n}`;
    const slot = from!.firstSlot;
    const [one, two] = [await connected({ keyPrefix, changeBoundMs: BOUND_MS }), await connected({ keyPrefix, changeBoundMs: BOUND_MS })];
    const window = Math.floor(Date.now() / MINUTE) * MINUTE;
    const check = (c: RedisRateCounter, tag: string | null) => c.check({ keys: freshnessKeys(org), tag, count: 'never', counterKey: counterKey(`org:${org}`, window), ttlMs: TTL });
    await waitFor(async () => (await check(one, null)).settled, 5_000, 'the organisation to be settled');

    let running = true;
    const counts: number[] = [];
    let rejected = 0;
    const hitting = async (c: RedisRateCounter) => {
      while (running) {
        await c.hit(counterKey(`org:${org}`, window), TTL).then(
          (n) => counts.push(n),
          () => rejected++,
        );
      }
    };
    const stale: string[] = [];
    let changes = 0;
    const changing = async () => {
      for (let i = 0; running; i++) {
        try {
          const before = await check(two, null);
          if (!before.settled) {
            await sleep(5);
            continue;
          }
          await one.beginChange(freshnessKeys(org), `c${i}`);
          // From the begin's answer on, a tag from before it is never fresh, on either client.
          for (const c of [one, two]) {
            const r = await check(c, before.token);
            if (r.fresh) stale.push(`change ${i}: ${before.token} fresh after the begin`);
          }
          await one.endChange(freshnessKeys(org), `c${i}`);
          const r = await check(two, before.token);
          if (r.fresh) stale.push(`change ${i}: ${before.token} fresh after the end`);
          changes++;
        } catch {
          // a call refused during the migration (TRYAGAIN, ASK): the caller fails open or answers 503
          await sleep(5);
        }
      }
    };
    const load = [hitting(one), hitting(two), hitting(one), hitting(two), changing()];
    await sleep(300);
    const countsBefore = counts.length;
    await cluster.reshard(from!.id, to!.id, 30);
    await sleep(300);
    running = false;
    await Promise.all(load);

    const owner = await cluster.shardOf(slot);
    expect(owner.primaryId, 'the slot moved').to.equal(to!.id);
    expect(counts.length - countsBefore, 'hits answered while the slot moved and after').to.be.greaterThan(50);
    expect(new Set(counts).size, 'no count answered twice').to.equal(counts.length);
    const total = await one.hit(counterKey(`org:${org}`, window), TTL);
    // Answered hits were counted once each; refused ones (failed open) at most once.
    expect(total - 1).to.be.within(counts.length, counts.length + rejected);
    expect(stale).to.deep.equal([]);
    expect(changes, 'changes completed during the load').to.be.greaterThan(5);
  });

  it('C-36 during a resharding (redis-cli --cluster reshard) of the organisation\'s slot: two instances under load, every revocation answered 204 is 401 on both from then on', async () => {
    const keyPrefix = uniquePrefix();
    const store = createInMemoryStore();
    const counters = [await connected({ keyPrefix, changeBoundMs: FAILOVER_CHANGE_BOUND_MS }), await connected({ keyPrefix, changeBoundMs: FAILOVER_CHANGE_BOUND_MS })];
    const cores = counters.map((counter) =>
      createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter, freshness: counter, config: { rateCounterTimeoutMs: 1_000, rateLimitPerMinute: 1_000_000 } }),
    );
    const [from, to] = await cluster.primaries();
    const moving = from!.lowest(400);
    // The organisation's id is the core's: create organisations until one lives in a slot that moves.
    let orgId = '';
    for (let n = 0; orgId === ''; n++) {
      const org = await cores[0]!.organisations.create(OPERATOR, { name: `Reshard ${n}`, slug: `reshard-${n}` });
      if (moving.has(keySlot(`${keyPrefix}:${freshnessKeys(org.id).token}`))) orgId = org.id;
    }
    const admit = async (core: Core, raw: string): Promise<number> => {
      try {
        return (await core.admission.admit(`Bearer ${raw}`, '127.0.0.1')).admitted ? 200 : 401;
      } catch {
        return 0;
      }
    };
    const owner = await cores[0]!.apiKeys.issue(OPERATOR, orgId, { label: 'owner' });
    for (const core of cores) await admit(core, owner.rawKey);
    await sleep(FAILOVER_CHANGE_BOUND_MS + 200); // the slot is new: settled after the change bound

    // Load: both instances keep admitting the organisation's owner key meanwhile.
    let loaded = true;
    const background = cores.map(async (core) => {
      while (loaded) await admit(core, owner.rawKey);
    });
    let resharding = true;
    const reshard = cluster.reshard(from!.id, to!.id, moving.size).finally(() => {
      resharding = false;
    });
    const stale: string[] = [];
    let revocations = 0;
    let duringReshard = 0;
    let refused = 0;
    for (let i = 0; resharding || revocations < 20; i++) {
      const issued = await cores[i % 2]!.apiKeys.issue(OPERATOR, orgId, { label: `k${i}` });
      for (let w = 0; w < 3; w++) for (const core of cores) await admit(core, issued.rawKey);
      let revoked = false;
      for (let attempt = 0; attempt < 100 && !revoked; attempt++) {
        try {
          await cores[(i + 1) % 2]!.apiKeys.revoke(OPERATOR, orgId, issued.key.id);
          revoked = true;
        } catch (e) {
          if (!(e instanceof UnavailableError)) throw e;
          refused++;
          await sleep(10);
        }
      }
      if (!revoked) throw new Error(`revocation ${i} never answered 204`);
      revocations++;
      if (resharding) duringReshard++;
      for (let w = 0; w < 3; w++) {
        for (const [n, core] of cores.entries()) {
          const status = await admit(core, issued.rawKey);
          if (status === 200) stale.push(`revocation ${i}: instance ${n + 1} answered 200`);
        }
      }
    }
    await reshard;
    loaded = false;
    await Promise.all(background);
    expect((await cluster.shardOf(keySlot(`${keyPrefix}:${freshnessKeys(orgId).token}`))).primaryId, 'the slot moved').to.equal(to!.id);
    expect(stale).to.deep.equal([]);
    expect(duringReshard, 'revocations while the slots were moving').to.be.greaterThan(2);
    console.log(`      ${revocations} revocations, ${duringReshard} while the slots moved, ${refused} refusals (503) retried`);
  });

  // Mocha runs a suite's own tests before its nested suites: the failover, which kills a primary,
  // goes in a nested suite declared last so that it runs after everything else on this cluster.
  describe('failover (last: it kills a primary)', () => {
    it('C-64 in the cluster: the replica of the organisation\'s primary stopped, revoke, primary killed, replica taken over (CLUSTER FAILOVER TAKEOVER): 503 and nothing revoked, or 204 and the key never 200 again', async () => {
      const keyPrefix = uniquePrefix();
      const shardOf = (org: string) => cluster.shardOf(keySlot(`${keyPrefix}:{org:${org}}:cc:token`));
      let frozen: Awaited<ReturnType<typeof shardOf>> | undefined;
      try {
        const outcome = await revokeAcrossFailover({
          counter: () => {
            const c = createRedisCounter({ clusterNodes: cluster.urls, keyPrefix, timeoutMs: 1_000, changeBoundMs: FAILOVER_CHANGE_BOUND_MS });
            open.push(c);
            return c;
          },
          stopReplica: async (org) => {
            frozen = await shardOf(org);
            await frozen.replica.freeze();
          },
          failover: async () => {
            const { primary, replica } = frozen!;
            await primary.kill();
            replica.thaw();
            await waitFor(
              async () => {
                const reply = await replica.cli('CLUSTER', 'FAILOVER', 'TAKEOVER').catch((e: Error) => e.message);
                return reply === 'OK' || /master/i.test(await replica.cli('ROLE'));
              },
              10_000,
              'the replica to take over',
            );
            await waitFor(async () => (await replica.cli('ROLE')).startsWith('master'), 10_000, 'the replica to be a primary');
            await cluster.waitHealthy();
            // The instances' cluster clients find the new primary by themselves (topology refresh).
            await sleep(1_500);
          },
        });
        expect(outcome.answered, 'the stopped replica could not acknowledge the bump: refused').to.equal(503);
        expect(outcome.revokedInStore).to.equal(false);
        expect(outcome.stale).to.deep.equal([]);
      } finally {
        frozen?.replica.thaw();
      }
    });
  });
});

describe('limiter-redis keys on a plain Redis: nothing global', function () {
  this.timeout(20_000);
  it('every key the counter and the freshness write carries a hash tag (a global key would keep the organisation off a cluster)', async function () {
    const server = await RedisServer.start();
    const keyPrefix = uniquePrefix();
    // The keys are the subject, not the deadline: a machine under load may answer later than the default 50 ms.
    const counter = createRedisCounter({ url: server.url, keyPrefix, timeoutMs: 5_000 });
    try {
      await waitFor(() => counter.whenReady(100), 5_000, 'a connection');
      const window = Math.floor(Date.now() / MINUTE) * MINUTE;
      await counter.check({ keys: freshnessKeys('o1'), tag: null, count: 'always', counterKey: counterKey('org:o1', window), ttlMs: TTL });
      await counter.beginChange(freshnessKeys('o1'), 'c');
      await counter.endChange(freshnessKeys('o1'), 'c');
      await counter.hit(counterKey('src:127.0.0.1', window), TTL);
      const admin = await import('./support/redis-server.js').then((m) => m.adminClient(server.url));
      const keys = await admin.keys(`${keyPrefix}:*`);
      await admin.close();
      expect(keys.length).to.be.greaterThan(3);
      expect(keys.filter((k) => !/^[^{]*\{[^}]+\}/.test(k))).to.deep.equal([]);
    } finally {
      await counter.close();
      await server.stop();
    }
  });
});
