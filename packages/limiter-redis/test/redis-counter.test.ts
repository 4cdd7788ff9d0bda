/**
 * The Redis counter on its own, against real redis-server processes: key layout and TTL, the one
 * script and its NOSCRIPT fallback, never waiting on a dead or frozen Redis, and its failures as
 * rejections, which the core's RateLimiter turns into its health lines (the counter logs nothing).
 */
import { DEFAULT_CORE_CONFIG, RateLimiter, counterKey, freshnessKeys, keySlot, systemClock, type RateScope } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { RedisCounterError, RedisRateCounter, createRedisCounter } from '@cos/limiter-redis';
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  RedisServer,
  adminClient,
  commandCalls,
  describeWithRedisServer,
  freePort,
  uniquePrefix,
  waitFor,
  type AdminClient,
} from './support/redis-server.js';
import { probeBound } from '@cos/test-support/deadline';
import { rejection } from '@cos/test-support/rejection';

const WINDOW_START = Date.UTC(2026, 5, 10, 12, 0, 0);
const TTL = 120_000;
/**
 * Tests about counting use a generous bound so that a loaded machine cannot turn a slow answer
 * into a failure; the tests about the bound itself set timeoutMs explicitly.
 */
const GENEROUS_TIMEOUT_MS = 1_000;

const ORG: RateScope = { kind: 'organisation', organisationId: '7b0c9a52-2f5e-4c41-9d43-1f6f3e0b8a10' };

/** The core's RateLimiter over `counter`, logging to `logger`: the one owner of the counter's health lines. */
function limiterOver(counter: RedisRateCounter, logger: CapturingLogger): RateLimiter {
  return new RateLimiter({
    counter,
    clock: systemClock,
    logger,
    config: { ...DEFAULT_CORE_CONFIG, rateLimitPerMinute: 1_000_000, rateCounterTimeoutMs: GENEROUS_TIMEOUT_MS },
  });
}

function lines(logger: CapturingLogger, level: 'info' | 'warn'): string[] {
  return logger.entries.filter((e) => e.level === level).map((e) => e.message);
}
const FAIL_OPEN_WARNING = 'Rate counter unavailable; failing open, rate limits are not enforced';
const AVAILABLE_AGAIN = 'Rate counter available again; rate limits enforced';

describeWithRedisServer('limiter-redis: RedisRateCounter', function () {
  let server: RedisServer;
  let admin: AdminClient;
  const open: RedisRateCounter[] = [];

  function counter(options: { url?: string; timeoutMs?: number; keyPrefix?: string } = {}) {
    const c = createRedisCounter({ timeoutMs: GENEROUS_TIMEOUT_MS, ...options, url: options.url ?? server.url });
    open.push(c);
    return c;
  }
  async function ready(c: RedisRateCounter): Promise<RedisRateCounter> {
    await waitFor(() => c.isReady, 5_000, 'the counter to connect');
    return c;
  }

  before(async () => {
    server = await RedisServer.start();
    admin = await adminClient(server.url);
  });
  afterEach(async () => {
    if (server.running) server.thaw();
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  after(async () => {
    admin?.destroy();
    await server?.stop();
  });

  describe('counting', () => {
    it('C-55: one key per scope and window, rl:{<scope>}:<windowStartMs>, counting every hit', async () => {
      await admin.flushAll();
      const c = await ready(counter());
      expect(await c.hit(counterKey('org:a', WINDOW_START), TTL)).to.equal(1);
      expect(await c.hit(counterKey('org:a', WINDOW_START), TTL)).to.equal(2);
      expect(await c.hit(counterKey('org:b', WINDOW_START), TTL)).to.equal(1);
      expect(await c.hit(counterKey('org:a', WINDOW_START + 60_000), TTL)).to.equal(1);
      expect((await admin.keys('*')).sort()).to.deep.equal([
        `rl:{org:a}:${WINDOW_START}`,
        `rl:{org:a}:${WINDOW_START + 60_000}`,
        `rl:{org:b}:${WINDOW_START}`,
      ]);
      expect(await admin.get(`rl:{org:a}:${WINDOW_START}`)).to.equal('2');
    });

    it('C-55: keyPrefix replaces "rl" so deployments can share one Redis', async () => {
      const prefix = uniquePrefix();
      const c = await ready(counter({ keyPrefix: prefix }));
      await c.hit(counterKey('unauth', WINDOW_START), TTL);
      expect(await admin.keys(`${prefix}:*`)).to.deep.equal([`${prefix}:{unauth}:${WINDOW_START}`]);
    });

    it('C-55: key names come from the core: a hit and a freshness check use the names given, behind the prefix, and build none', async () => {
      const prefix = uniquePrefix();
      const c = await ready(counter({ keyPrefix: prefix }));
      await c.hit('a name the core chose', TTL);
      const keys = { token: 'the token key', changes: 'the changes key', alive: 'the alive key', unsettled: 'the unsettled key' };
      await c.check({ keys, tag: null, count: 'always', counterKey: 'the counter key', ttlMs: TTL });
      await c.beginChange(keys, 'change');
      expect((await admin.keys(`${prefix}:*`)).sort()).to.deep.equal(
        ['a name the core chose', 'the counter key', 'the token key', 'the changes key', 'the alive key', 'the unsettled key'].map((k) => `${prefix}:${k}`).sort(),
      );
      // and the names the core gives an organisation's token and changes are the ones every earlier
      // version used; its data-loss markers are those of its hash slot (no global key)
      const o = freshnessKeys('o');
      expect(o).to.include({ token: '{org:o}:cc:token', changes: '{org:o}:cc:changes' });
      expect(o.alive).to.match(/^\{cc[0-9a-z]+\}:cc:alive$/);
      expect(o.unsettled).to.equal(o.alive.replace(':cc:alive', ':cc:unsettled'));
      expect(keySlot(`${prefix}:${o.alive}`)).to.equal(keySlot(`${prefix}:${o.token}`));
    });

    it('C-50: the first hit sets a TTL of ttlMs past which Redis forgets the window; later hits keep it', async () => {
      const prefix = uniquePrefix();
      const c = await ready(counter({ keyPrefix: prefix }));
      const key = `${prefix}:{org:ttl}:${WINDOW_START}`;
      await c.hit(counterKey('org:ttl', WINDOW_START), TTL);
      const first = await admin.pTTL(key);
      expect(first).to.be.within(TTL - 1_000, TTL);
      await sleep(30);
      await c.hit(counterKey('org:ttl', WINDOW_START), TTL);
      const second = await admin.pTTL(key);
      expect(second).to.be.within(TTL - 2_000, first - 1);

      await c.hit(counterKey('org:short', WINDOW_START), 150);
      await waitFor(async () => (await admin.exists(`${prefix}:{org:short}:${WINDOW_START}`)) === 0, 2_000, 'expiry');
      expect(await c.hit(counterKey('org:short', WINDOW_START), 150)).to.equal(1);
    });

    it('C-55: concurrent hits from two counters are counted exactly once each', async () => {
      const prefix = uniquePrefix();
      const [a, b] = [await ready(counter({ keyPrefix: prefix })), await ready(counter({ keyPrefix: prefix }))];
      const counts = await Promise.all(
        Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).hit(counterKey('org:shared', WINDOW_START), TTL)),
      );
      expect([...counts].sort((x, y) => x - y)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
    });

    it('runs the one script as EVALSHA, and after SCRIPT FLUSH falls back to EVAL and keeps counting', async () => {
      const prefix = uniquePrefix();
      const c = await ready(counter({ keyPrefix: prefix }));
      await c.hit(counterKey('org:sha', WINDOW_START), TTL); // the script is in Redis' cache from here on
      await admin.configResetStat();
      for (let i = 2; i <= 11; i++) expect(await c.hit(counterKey('org:sha', WINDOW_START), TTL)).to.equal(i);
      let calls = await commandCalls(admin);
      expect(calls.evalsha).to.equal(10);
      expect(calls.eval ?? 0).to.equal(0);
      // commandstats also counts the calls made inside the script: INCRBY each time, PEXPIRE only on a first hit
      expect(calls.incrby).to.equal(10);
      expect(calls.pexpire ?? 0).to.equal(0);

      await admin.scriptFlush();
      await admin.configResetStat();
      expect(await c.hit(counterKey('org:sha', WINDOW_START), TTL)).to.equal(12);
      expect(await c.hit(counterKey('org:sha', WINDOW_START), TTL)).to.equal(13);
      calls = await commandCalls(admin);
      expect(calls.eval).to.equal(1); // the NOSCRIPT fallback, which also re-caches the script
      expect(calls.evalsha).to.equal(2); // the one that met NOSCRIPT, then a normal one
    });
  });

  describe("the hot path's own connection (C-203)", () => {
    it('uses the database, user and password of REDIS_URL, and a refused password leaves it not connected, naming why without the password', async () => {
      const user = `hot-${Date.now()}`;
      await admin.sendCommand(['ACL', 'SETUSER', user, 'on', '>hot-s3cret', '~*', '&*', '+@all']);
      try {
        const prefix = uniquePrefix();
        const c = await ready(counter({ url: `redis://${user}:hot-s3cret@127.0.0.1:${server.port}/3`, keyPrefix: prefix }));
        expect(await c.hit(counterKey('org:db', WINDOW_START), TTL, 4)).to.equal(4);
        expect(await c.hit(counterKey('org:db', WINDOW_START), TTL)).to.equal(5);
        const db3 = await adminClient(`${server.url}/3`);
        try {
          expect(await db3.get(`${prefix}:{org:db}:${WINDOW_START}`)).to.equal('5');
        } finally {
          db3.destroy();
        }
        expect(await admin.exists(`${prefix}:{org:db}:${WINDOW_START}`), 'nothing in database 0').to.equal(0);
        const refused = counter({ url: `redis://${user}:wrong-s3cret@127.0.0.1:${server.port}` });
        await sleep(300);
        expect(refused.isReady).to.equal(false);
        const err = (await rejection(refused.hit(counterKey('org:x', WINDOW_START), TTL))) as RedisCounterError;
        expect(err.reason).to.equal('not-connected');
        expect(err.message).to.match(/WRONGPASS|invalid username-password/);
        expect(err.message).not.to.include('s3cret');
      } finally {
        await admin.sendCommand(['ACL', 'DELUSER', user]);
      }
    });

    it('C-51: 5,000 hits sent at once, replies split across reads as they come, are each answered with their own count', async () => {
      const c = await ready(counter({ keyPrefix: uniquePrefix() }));
      const counts = await Promise.all(Array.from({ length: 5_000 }, () => c.hit(counterKey('org:many', WINDOW_START), TTL)));
      expect([...counts].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 5_000 }, (_, i) => i + 1));
    });
  });

  describe('never waiting on a dead Redis', () => {
    it('C-54: createRedisCounter does not throw on a dead Redis; hit() rejects at once while not connected', async () => {
      const url = `redis://127.0.0.1:${await freePort()}`;
      // a long timeout, so that "at once" cannot be the timeout firing
      const c = counter({ url, timeoutMs: 1_000 });
      expect(c.isReady).to.equal(false);
      for (let i = 0; i < 20; i++) {
        // bound 0 (test-support/deadline): settled before any timer could fire
        const { outcome, withinBound } = await probeBound(() => c.hit(counterKey('org:x', WINDOW_START), TTL), 0);
        expect(withinBound, 'rejected at once').to.equal(true);
        const err = outcome.status === 'rejected' ? outcome.reason : null;
        expect(err).to.be.instanceOf(RedisCounterError);
        expect((err as RedisCounterError).reason).to.equal('not-connected');
        await sleep(5);
      }
    });

    it('C-54: a frozen Redis (SIGSTOP) makes hit() reject after timeoutMs, never later, and the late hits count nothing', async () => {
      const prefix = uniquePrefix();
      const c = await ready(counter({ keyPrefix: prefix, timeoutMs: 50 }));
      const patient = await ready(counter({ keyPrefix: prefix }));
      await patient.hit(counterKey('org:frozen', WINDOW_START), TTL);
      server.freeze();
      try {
        const { outcome, withinBound, elapsedMs } = await probeBound(
          () => Promise.all(Array.from({ length: 20 }, () => rejection(c.hit(counterKey('org:frozen', WINDOW_START), TTL)))),
          50,
        );
        // after the timeout (a wall-clock lower bound holds on any machine), and never later than it
        expect(elapsedMs).to.be.at.least(45);
        expect(withinBound, 'all rejected by their 50 ms timers').to.equal(true);
        const errors = outcome.status === 'fulfilled' ? outcome.value : [];
        expect(errors).to.have.length(20);
        for (const err of errors) expect((err as RedisCounterError).reason).to.equal('timeout');
        expect(c.isReady).to.equal(true); // the socket is open; only the answers are missing
      } finally {
        server.thaw();
      }
      // the hits sent while frozen reach Redis after their deadline and count nothing (fail-open
      // requests are allowed without being counted); counting carries on from the one before
      expect(await patient.hit(counterKey('org:frozen', WINDOW_START), TTL)).to.equal(2);
      const key = `${prefix}:{org:frozen}:${WINDOW_START}`;
      expect(await admin.get(key)).to.equal('2');
    });

    it('C-54: timeoutMs is configurable (REDIS_TIMEOUT_MS)', async () => {
      const c = await ready(counter({ keyPrefix: uniquePrefix(), timeoutMs: 200 }));
      await admin.sendCommand(['CLIENT', 'PAUSE', '600', 'ALL']);
      const { outcome, withinBound, elapsedMs } = await probeBound(() => rejection(c.hit(counterKey('org:paused', WINDOW_START), TTL)), 200);
      expect(elapsedMs).to.be.at.least(195);
      expect(withinBound, 'rejected by its 200 ms timer').to.equal(true);
      const err = outcome.status === 'fulfilled' ? outcome.value : null;
      expect((err as RedisCounterError).reason).to.equal('timeout');
      await admin.sendCommand(['CLIENT', 'UNPAUSE']);
      expect(() => createRedisCounter({ url: server.url, timeoutMs: 0 })).to.throw(RangeError);
    });

    it('C-54: a killed Redis is noticed at once, and a restarted one is found again without any call waiting', async () => {
      const local = await RedisServer.start();
      try {
        const c = await ready(counter({ url: local.url, timeoutMs: 1_000 }));
        expect(await c.hit(counterKey('org:k', WINDOW_START), TTL)).to.equal(1);
        await local.kill();
        await waitFor(() => !c.isReady, 1_000, 'the counter to notice');
        const { outcome, withinBound } = await probeBound(() => rejection(c.hit(counterKey('org:k', WINDOW_START), TTL)), 0);
        expect(withinBound, 'rejected at once').to.equal(true);
        expect(((outcome.status === 'fulfilled' ? outcome.value : null) as RedisCounterError).reason).to.equal('not-connected');
        await local.start(); // same port, empty data, empty script cache
        await ready(c);
        expect(await c.hit(counterKey('org:k', WINDOW_START), TTL)).to.equal(1);
        expect(await c.hit(counterKey('org:k', WINDOW_START), TTL)).to.equal(2);
      } finally {
        await local.stop();
      }
    });

    it('close() returns promptly on a dead Redis and on a frozen one; later hits reject', async () => {
      const dead = counter({ url: `redis://127.0.0.1:${await freePort()}` });
      await sleep(50);
      expect((await probeBound(() => dead.close(), 0)).withinBound, 'a dead connection closes at once').to.equal(true);
      expect(((await rejection(dead.hit(counterKey('org:x', WINDOW_START), TTL))) as RedisCounterError).reason).to.equal('closed');

      const c = await ready(counter({ keyPrefix: uniquePrefix(), timeoutMs: 50 }));
      server.freeze();
      try {
        await rejection(c.hit(counterKey('org:x', WINDOW_START), TTL)); // leaves a command waiting for its answer
        // the unanswered command holds close() for its grace period (1 s), not longer
        expect((await probeBound(() => c.close(), 1_000)).withinBound, 'closed within the grace period').to.equal(true);
      } finally {
        server.thaw();
      }
      expect(c.isReady).to.equal(false);
      expect(((await rejection(c.hit(counterKey('org:x', WINDOW_START), TTL))) as RedisCounterError).reason).to.equal('closed');
    });
  });

  describe('logging: the core RateLimiter owns the counter\'s health lines (C-54)', () => {
    it('C-54: connection failures give one warning per 10 s, and one recovery line per warning, not one per reconnect when the connection flaps', async () => {
      const port = await freePort();
      const logger = new CapturingLogger();
      const c = counter({ url: `redis://127.0.0.1:${port}` });
      const rl = limiterOver(c, logger);
      // 1.5 s of requests while several reconnect attempts fail: one warning, naming host:port
      for (let elapsed = 0; elapsed < 1_500; elapsed += 50) {
        expect(await rl.check(ORG)).to.include({ allowed: true, degraded: true });
        await sleep(50);
      }
      expect(lines(logger, 'warn')).to.deep.equal([FAIL_OPEN_WARNING]);
      expect(String(logger.entries[0]!.fields['reason'])).to.include(`not connected to 127.0.0.1:${port}`);

      const local = await RedisServer.start(port);
      try {
        await ready(c);
        expect(await rl.check(ORG)).to.include({ degraded: false });
        expect(lines(logger, 'info')).to.deep.equal([AVAILABLE_AGAIN]);
        // the connection flaps three times, all within 10 s of the warning; requests keep coming
        for (let flap = 0; flap < 3; flap++) {
          await local.kill();
          await waitFor(() => !c.isReady, 1_000, 'the counter to notice');
          expect(await rl.check(ORG)).to.include({ allowed: true, degraded: true });
          await local.start();
          await ready(c);
          expect(await rl.check(ORG)).to.include({ degraded: false });
        }
      } finally {
        await local.stop();
      }
      // no second warning inside the 10 s, and so no recovery line per reconnect either
      expect(lines(logger, 'warn')).to.deep.equal([FAIL_OPEN_WARNING]);
      expect(lines(logger, 'info')).to.deep.equal([AVAILABLE_AGAIN]);
    });

    it('the counter itself logs nothing: it takes no logger, and a rejection while not connected names host:port and why', async () => {
      const port = await freePort();
      const c = counter({ url: `redis://127.0.0.1:${port}` });
      await sleep(300); // a failed connect attempt or two
      const err = (await rejection(c.hit(counterKey('org:x', WINDOW_START), TTL))) as RedisCounterError;
      expect(err.reason).to.equal('not-connected');
      expect(err.message).to.match(new RegExp(`^redis rate counter: not connected to 127\\.0\\.0\\.1:${port} \\(.+\\)$`));
    });

    it('never logs the password of REDIS_URL', async () => {
      const logger = new CapturingLogger();
      const dead = counter({ url: `redis://:s3cret-password@127.0.0.1:${await freePort()}` });
      // the default user of a server without requirepass is "nopass": any password is accepted
      const live = counter({ url: `redis://:s3cret-password@127.0.0.1:${server.port}`, keyPrefix: uniquePrefix() });
      await ready(live);
      await sleep(100);
      expect(dead.isReady).to.equal(false);
      const [deadLimiter, liveLimiter] = [limiterOver(dead, logger), limiterOver(live, logger)];
      expect(await deadLimiter.check(ORG)).to.include({ degraded: true });
      expect(await deadLimiter.check(ORG)).to.include({ degraded: true });
      expect(await liveLimiter.check(ORG)).to.include({ degraded: false });
      expect(lines(logger, 'warn')).to.deep.equal([FAIL_OPEN_WARNING]);
      expect(JSON.stringify(logger.entries)).not.to.include('s3cret-password');
      expect(((await rejection(dead.hit(counterKey('org:x', WINDOW_START), TTL))) as Error).message).not.to.include('s3cret-password');
    });
  });
});
