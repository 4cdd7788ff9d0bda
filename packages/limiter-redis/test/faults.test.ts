/**
 * Fault tests through the core's RateLimiter (which owns windows, the timeout race and the
 * fail-open decision) over the Redis counter, against real redis-server processes that are
 * absent, killed, restarted, flushed, frozen and paused while requests keep coming.
 */
import {
  DEFAULT_CORE_CONFIG,
  RateLimiter,
  systemClock,
  type Clock,
  type CoreConfig,
  type RateCounter,
  type RateDecision,
  type RateScope,
} from '@cos/core';
import { CapturingLogger, FakeClock } from '@cos/core/testing';
import { createRedisCounter, RedisCounterError, type RedisRateCounter } from '@cos/limiter-redis';
import { overBound, probeBound } from '@cos/test-support/deadline';
import { expect } from 'chai';
import {
  RedisServer,
  adminClient,
  commandCalls,
  describeWithRedisServer,
  freePort,
  scriptCalls,
  uniquePrefix,
  waitFor,
  type AdminClient,
} from './support/redis-server.js';

/** REDIS_TIMEOUT_MS as deployed (C-54): the bound the frozen/paused tests exercise. */
const TIMEOUT_MS = 50;
/**
 * The bound for tests whose point is not the timeout (a dead Redis fails at once; a restarted one
 * counts again): generous, so a loaded machine cannot turn one slow answer into a failure.
 */
const GENEROUS_TIMEOUT_MS = 1_000;
const ORG_ID = '7b0c9a52-2f5e-4c41-9d43-1f6f3e0b8a10';
const ORG: RateScope = { kind: 'organisation', organisationId: ORG_ID };

interface Timed {
  readonly decision: RateDecision;
  /** The check ended before a timer of the traffic's bound, armed right after the check started, fired. */
  readonly withinBound: boolean;
  readonly elapsedMs: number;
}

/**
 * `total` checks of one scope from `workers` concurrent callers, each probed against `boundMs`
 * (test-support/deadline: measured against the event loop, so a loaded machine does not fail a
 * bound that holds); `onDone(n)` after each completes.
 */
async function traffic(limiter: RateLimiter, boundMs: number, total: number, workers: number, onDone?: (done: number) => void): Promise<Timed[]> {
  const results: Timed[] = [];
  let started = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (started < total) {
        started++;
        const { outcome, withinBound, elapsedMs } = await probeBound(() => limiter.check(ORG), boundMs);
        if (outcome.status === 'rejected') throw outcome.reason; // check() never rejects: a failure of the test
        results.push({ decision: outcome.value, withinBound, elapsedMs });
        onDone?.(results.length);
      }
    }),
  );
  return results;
}

/**
 * A counter that passes every hit to `inner` and records how each one ended: 'counted', or the
 * reason the Redis counter gave for failing ('not-connected', 'command-failed', 'timeout'…).
 */
function recording(inner: RedisRateCounter): { readonly counter: RateCounter; readonly endings: string[] } {
  const endings: string[] = [];
  const counter: RateCounter = {
    hit(key, ttlMs) {
      return inner.hit(key, ttlMs).then(
        (count) => {
          endings.push('counted');
          return count;
        },
        (error: unknown) => {
          endings.push(error instanceof RedisCounterError ? error.reason : String(error));
          throw error;
        },
      );
    },
  };
  return { counter, endings };
}

/** Log lines at `level`: all of them the core RateLimiter's, the one owner of the counter's health lines (C-54). */
function coreLines(logger: CapturingLogger, level: 'info' | 'warn') {
  return logger.entries.filter((e) => e.level === level);
}
const FAIL_OPEN_WARNING = 'Rate counter unavailable; failing open, rate limits are not enforced';
const AVAILABLE_AGAIN = 'Rate counter available again; rate limits enforced';

/**
 * A clock fixed in the middle of a UTC minute, for tests that compare a count before and after a
 * freeze: on the system clock a run that straddled a minute boundary (the 80 frozen checks take
 * about 0.4 s) read the second count in a new window and failed by chance.
 */
function midMinute(): Clock {
  return new FakeClock('2026-06-10T12:00:30.000Z');
}

describeWithRedisServer('limiter-redis faults, through the core RateLimiter', function () {
  const servers: RedisServer[] = [];
  const counters: RedisRateCounter[] = [];
  let logger: CapturingLogger;

  async function server(port?: number): Promise<RedisServer> {
    const s = await RedisServer.start(port);
    servers.push(s);
    return s;
  }
  function counter(url: string, timeoutMs: number, keyPrefix = uniquePrefix()): RedisRateCounter {
    const c = createRedisCounter({ url, timeoutMs, keyPrefix });
    counters.push(c);
    return c;
  }
  async function ready(c: RedisRateCounter): Promise<void> {
    await waitFor(() => c.isReady, 5_000, 'the counter to connect');
  }
  function limiter(c: RateCounter, timeoutMs: number, config: Partial<CoreConfig> = {}, clock: Clock = systemClock): RateLimiter {
    const full: CoreConfig = { ...DEFAULT_CORE_CONFIG, ...config, rateCounterTimeoutMs: timeoutMs };
    return new RateLimiter({ counter: c, clock, logger, config: full });
  }
  /** Checks until one is counted (not failed open); how many checks that took, and the decision. */
  async function counted(rl: RateLimiter): Promise<{ decision: RateDecision; attempts: number }> {
    let decision: RateDecision | undefined;
    let attempts = 0;
    await waitFor(
      async () => {
        attempts++;
        decision = await rl.check(ORG);
        return !decision.degraded;
      },
      3_000,
      'a counted decision',
    );
    return { decision: decision!, attempts };
  }

  /** `total` checks from `workers` callers while the server is frozen (SIGSTOP), thawed afterwards whatever happens. */
  async function trafficWhileFrozen(s: RedisServer, rl: RateLimiter, total: number, workers: number): Promise<Timed[]> {
    s.freeze();
    try {
      return await traffic(rl, TIMEOUT_MS, total, workers);
    } finally {
      s.thaw();
    }
  }

  beforeEach(() => {
    logger = new CapturingLogger();
  });
  afterEach(async () => {
    await Promise.all(counters.splice(0).map((c) => c.close()));
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  });

  it('C-54: Redis absent at start-up -> requests allowed with Remaining = limit, one warning; enforced once Redis appears', async () => {
    const port = await freePort();
    const c = counter(`redis://127.0.0.1:${port}`, GENEROUS_TIMEOUT_MS);
    const rl = limiter(c, GENEROUS_TIMEOUT_MS); // default limit: 60
    // bound 0: a connection that is not up fails at once, before any timer could fire
    const results = await traffic(rl, 0, 100, 4);

    expect(results).to.have.length(100);
    for (const { decision } of results) {
      expect(decision).to.include({ allowed: true, degraded: true, limit: 60, remaining: 60 });
    }
    expect(overBound(results), 'checks that waited for a timer (wall ms)').to.deep.equal([]);
    expect(coreLines(logger, 'warn').map((e) => e.message)).to.deep.equal([FAIL_OPEN_WARNING]);

    await server(port);
    await ready(c);
    const decision = await rl.check(ORG);
    expect(decision).to.include({ allowed: true, degraded: false, remaining: 59 });
    expect(coreLines(logger, 'info').map((e) => e.message)).to.deep.equal([AVAILABLE_AGAIN]);
    expect(logger.entries, 'nothing else logged').to.have.length(2);
  });

  it('C-54: Redis killed mid-traffic -> no check waits longer than the timeout, all allowed, one warning', async () => {
    const s = await server();
    const c = counter(s.url, GENEROUS_TIMEOUT_MS);
    await ready(c);
    const { counter: recorded, endings } = recording(c);
    const rl = limiter(recorded, GENEROUS_TIMEOUT_MS, { rateLimitPerMinute: 1_000_000 });
    let killed: Promise<void> | undefined;
    const results = await traffic(rl, GENEROUS_TIMEOUT_MS, 200, 4, (done) => {
      if (done === 50) killed = s.kill(); // crash while the other callers are in flight
    });
    await killed;

    expect(results).to.have.length(200);
    expect(results.every((r) => r.decision.allowed)).to.equal(true);
    expect(results.slice(0, 40).every((r) => !r.decision.degraded)).to.equal(true);
    expect(results.slice(-50).every((r) => r.decision.degraded)).to.equal(true);
    expect(overBound(results), 'checks that outlived the timeout (wall ms)').to.deep.equal([]);
    // even the checks in flight at the crash: the closed socket failed them, not the timeout
    expect(endings).to.have.length(200);
    expect(endings.filter((e) => e !== 'counted' && e !== 'command-failed' && e !== 'not-connected')).to.deep.equal([]);
    expect(coreLines(logger, 'warn')).to.have.length(1);
  });

  it('C-54: Redis restarted (empty data, empty script cache) -> counting resumes; one warning, one recovery line', async () => {
    const s = await server();
    const c = counter(s.url, GENEROUS_TIMEOUT_MS);
    await ready(c);
    const rl = limiter(c, GENEROUS_TIMEOUT_MS);
    for (let i = 1; i <= 3; i++) expect(await rl.check(ORG)).to.include({ degraded: false, remaining: 60 - i });

    await s.kill();
    await waitFor(() => !c.isReady, 1_000, 'the counter to notice');
    expect(await rl.check(ORG)).to.include({ allowed: true, degraded: true, remaining: 60 });
    await s.start(); // same port; no persistence, so the counts and the script cache are gone
    await ready(c);

    const admin = await adminClient(s.url);
    try {
      expect(await rl.check(ORG)).to.include({ degraded: false, remaining: 59 });
      expect(await rl.check(ORG)).to.include({ degraded: false, remaining: 58 });
      const calls = await commandCalls(admin);
      expect(calls.eval).to.equal(1); // NOSCRIPT -> EVAL once, EVALSHA again after that
      expect(calls.evalsha).to.equal(2);
    } finally {
      admin.destroy();
    }
    expect(coreLines(logger, 'warn').map((e) => e.message)).to.deep.equal([FAIL_OPEN_WARNING]);
    expect(coreLines(logger, 'info').map((e) => e.message)).to.deep.equal([AVAILABLE_AGAIN]);
    expect(logger.entries, 'nothing else logged').to.have.length(2);
  });

  it('C-54: SCRIPT FLUSH -> the NOSCRIPT fallback is invisible: no degraded decision, counting continues', async () => {
    const s = await server();
    const c = counter(s.url, GENEROUS_TIMEOUT_MS);
    await ready(c);
    const rl = limiter(c, GENEROUS_TIMEOUT_MS);
    const admin = await adminClient(s.url);
    try {
      for (let i = 1; i <= 5; i++) {
        if (i === 3) await admin.scriptFlush();
        expect(await rl.check(ORG)).to.include({ allowed: true, degraded: false, remaining: 60 - i });
      }
    } finally {
      admin.destroy();
    }
    expect(coreLines(logger, 'warn')).to.deep.equal([]);
  });

  it('C-54: Redis frozen (SIGSTOP) -> latency bounded by the timeout, all allowed; counting resumes after SIGCONT', async () => {
    const s = await server();
    const c = counter(s.url, TIMEOUT_MS);
    await ready(c);
    const rl = limiter(c, TIMEOUT_MS, { rateLimitPerMinute: 1_000_000 }, midMinute());
    const before = await counted(rl);

    const warnsBefore = coreLines(logger, 'warn').length;
    const results = await trafficWhileFrozen(s, rl, 200, 20);
    expect(results).to.have.length(200);
    for (const { decision } of results) expect(decision).to.include({ allowed: true, degraded: true });
    expect(overBound(results), 'checks that outlived the timeout (wall ms)').to.deep.equal([]);
    expect(coreLines(logger, 'warn').length - warnsBefore, 'warnings while frozen').to.equal(1);

    const infosBefore = coreLines(logger, 'info').length;
    const after = await counted(rl);
    // The 200 hits that timed out reached Redis after their deadline and counted nothing (fail-open
    // requests are allowed without being counted, C-54); only the checks around the freeze count.
    const used = 1_000_000 - after.decision.remaining;
    expect(used, 'hits counted').to.be.within(2, before.attempts + after.attempts);
    expect(coreLines(logger, 'info').length - infosBefore, 'info lines on recovery').to.equal(1);
  });

  it('C-54, C-51: requests allowed while Redis was frozen are not counted when it wakes: 80 fail-open checks against limit 60, then the organisation is still served', async () => {
    const s = await server();
    const c = counter(s.url, TIMEOUT_MS);
    await ready(c);
    const rl = limiter(c, TIMEOUT_MS, { rateLimitPerMinute: 60 }, midMinute());
    const before = await counted(rl);
    const results = await trafficWhileFrozen(s, rl, 80, 10);
    for (const { decision } of results) expect(decision).to.include({ allowed: true, degraded: true, remaining: 60 });
    const after = await counted(rl);
    // Counted late, the 80 would have filled the window: 429 for the rest of the minute.
    expect(after.decision.allowed, 'allowed after Redis woke up').to.equal(true);
    expect(60 - after.decision.remaining, 'hits counted').to.be.within(2, before.attempts + after.attempts);
    // Redis holds the same count: the queued calls were applied as no-ops.
    const admin = await adminClient(s.url);
    try {
      const keys = await admin.keys('*');
      const counts = await Promise.all(keys.map((k) => admin.get(k)));
      expect(counts.map(Number).reduce((a, b) => a + b, 0)).to.equal(60 - after.decision.remaining);
    } finally {
      admin.destroy();
    }
  });

  it('C-54: Redis paused (CLIENT PAUSE) -> latency bounded by the timeout, all allowed; counting resumes', async () => {
    const s = await server();
    const c = counter(s.url, TIMEOUT_MS);
    await ready(c);
    const rl = limiter(c, TIMEOUT_MS, { rateLimitPerMinute: 1_000_000 });
    await counted(rl);
    const admin = await adminClient(s.url);
    const warnsBefore = coreLines(logger, 'warn').length;
    try {
      await admin.sendCommand(['CLIENT', 'PAUSE', '700', 'ALL']);
      const results = await traffic(rl, TIMEOUT_MS, 100, 10);
      for (const { decision } of results) expect(decision).to.include({ allowed: true, degraded: true });
      expect(overBound(results), 'checks that outlived the timeout (wall ms)').to.deep.equal([]);
      expect(coreLines(logger, 'warn').length - warnsBefore, 'warnings while paused').to.equal(1);
      const infosBefore = coreLines(logger, 'info').length;
      await counted(rl);
      expect(coreLines(logger, 'info').length - infosBefore, 'info lines on recovery').to.equal(1);
    } finally {
      admin.destroy();
    }
  });

  it('C-51: a flooding organisation costs no Redis round trip once over its limit, until its window ends', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const c = counter(s.url, GENEROUS_TIMEOUT_MS, prefix);
    await ready(c);
    const clock = new FakeClock('2026-06-10T12:00:30.000Z');
    const rl = limiter(c, GENEROUS_TIMEOUT_MS, {}, clock);
    const admin = await adminClient(s.url);
    try {
      await rl.check({ kind: 'unauthenticated' }); // warm the script cache, then count from zero
      await admin.configResetStat();
      for (let i = 1; i <= 60; i++) expect(await rl.check(ORG)).to.include({ allowed: true, remaining: 60 - i });
      expect(await rl.check(ORG)).to.include({ allowed: false, remaining: 0, retryAfterSeconds: 30 });
      for (let i = 0; i < 500; i++) expect((await rl.check(ORG)).allowed).to.equal(false);
      expect(await scriptCalls(admin)).to.equal(61);

      const windowStart = Date.parse('2026-06-10T12:00:00.000Z');
      const keys = (await admin.keys(`${prefix}:*`)).filter((k) => k.includes(ORG_ID));
      expect(keys).to.have.length(1); // C-50: one counter per organisation and window
      expect(keys[0]).to.match(new RegExp(`^${prefix}:\\{[^}]*${ORG_ID}\\}:${windowStart}$`));
      expect(await admin.get(keys[0]!)).to.equal('61');

      clock.advance(30_000); // 12:01:00, a new window
      expect(await rl.check(ORG)).to.include({ allowed: true, remaining: 59 });
      expect(await scriptCalls(admin)).to.equal(62);
    } finally {
      admin.destroy();
    }
  });

  it('C-55 + C-51: two instances (two counters, two limiters) over one Redis: requests 1-60 pass, the 61st is refused', async () => {
    const s = await server();
    const prefix = uniquePrefix();
    const [ca, cb] = [counter(s.url, GENEROUS_TIMEOUT_MS, prefix), counter(s.url, GENEROUS_TIMEOUT_MS, prefix)];
    await Promise.all([ready(ca), ready(cb)]);
    const clockA = new FakeClock('2026-06-10T12:00:10.000Z');
    const clockB = new FakeClock('2026-06-10T12:00:10.000Z');
    const [a, b] = [limiter(ca, GENEROUS_TIMEOUT_MS, {}, clockA), limiter(cb, GENEROUS_TIMEOUT_MS, {}, clockB)];

    for (let n = 1; n <= 60; n++) {
      const decision = await (n % 2 ? a : b).check(ORG);
      expect(decision, `request ${n}`).to.include({ allowed: true, degraded: false, remaining: 60 - n });
    }
    expect(await a.check(ORG)).to.include({ allowed: false, remaining: 0 });
    expect(await b.check(ORG)).to.include({ allowed: false, remaining: 0 });
    expect(await a.check(ORG)).to.include({ allowed: false, remaining: 0 });
  });
});
