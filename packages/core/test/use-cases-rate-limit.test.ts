import { expect } from 'chai';
import {
  COUNTER_TTL_MS,
  DEFAULT_CORE_CONFIG,
  RateLimitedError,
  RateLimiter,
  counterKey,
  scopeKey,
  type CoreConfig,
  type RateCounter,
  type RateScope,
} from '@cos/core';
import { CapturingLogger, createInMemoryStore, FakeClock, InMemoryRateCounter } from '@cos/core/testing';
import { newOrganisation } from '@cos/core/testing/contracts';
import { rejectsWith } from './use-cases-fixtures.js';

const ORG: RateScope = { kind: 'organisation', organisationId: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b' };
const OTHER_ORG: RateScope = { kind: 'organisation', organisationId: '00000000-0000-4000-8000-000000000000' };
const UNAUTH: RateScope = { kind: 'unauthenticated' };
const SOURCE: RateScope = { kind: 'source', address: '203.0.113.7' };

/** Wraps a real counter, recording every hit; can be switched to fail or to hang. */
class SwitchableCounter implements RateCounter {
  readonly hits: Array<{ key: string; ttlMs: number }> = [];
  mode: 'up' | 'failing' | 'hanging' | 'garbage' = 'up';
  constructor(private readonly inner: RateCounter) {}
  hit(key: string, ttlMs: number): Promise<number> {
    this.hits.push({ key, ttlMs });
    switch (this.mode) {
      case 'up':
        return Promise.resolve(this.inner.hit(key, ttlMs));
      case 'failing':
        return Promise.reject(new Error('ECONNREFUSED 127.0.0.1:6379'));
      case 'hanging':
        return new Promise<number>(() => undefined);
      case 'garbage':
        return Promise.resolve(Number.NaN);
    }
  }
}

/** A CapturingLogger that also notes when (FakeClock ms since the limiter's start) each line was logged. */
class StampingLogger extends CapturingLogger {
  readonly lines: Array<{ at: number; level: 'info' | 'warn'; fields: Record<string, unknown> }> = [];
  readonly #origin: number;
  constructor(private readonly clock: FakeClock) {
    super();
    this.#origin = clock.now().getTime();
  }
  override info(fields: Record<string, unknown>, message: string): void {
    this.lines.push({ at: this.clock.now().getTime() - this.#origin, level: 'info', fields: { ...fields } });
    super.info(fields, message);
  }
  override warn(fields: Record<string, unknown>, message: string): void {
    this.lines.push({ at: this.clock.now().getTime() - this.#origin, level: 'warn', fields: { ...fields } });
    super.warn(fields, message);
  }
}

function limiter(config: Partial<CoreConfig> = {}, start = '2026-06-10T12:00:30.000Z') {
  const clock = new FakeClock(start);
  const counter = new SwitchableCounter(new InMemoryRateCounter(clock));
  const logger = new StampingLogger(clock);
  const rl = new RateLimiter({ counter, clock, logger, config: { ...DEFAULT_CORE_CONFIG, ...config } });
  return { clock, counter, logger, rl };
}

describe('use case: rate limiter', () => {
  it('C-50: scope keys are org:<id>, unauth and src:<address>', () => {
    expect(scopeKey(ORG)).to.equal(`org:${'6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b'}`);
    expect(scopeKey(UNAUTH)).to.equal('unauth');
    expect(scopeKey(SOURCE)).to.equal('src:203.0.113.7');
  });

  it('C-53: limits come from the configuration per scope kind', () => {
    const { rl } = limiter({ rateLimitPerMinute: 120, unauthRateLimitPerMinute: 30 });
    expect(rl.limitFor(ORG)).to.equal(120);
    expect(rl.limitFor(SOURCE)).to.equal(120);
    expect(rl.limitFor(UNAUTH)).to.equal(30);
  });

  it('spec §8.1, C-55: the counter is hit under the name the core gives it (scope and UTC-minute window start) with a two-minute ttl', async () => {
    const { rl, counter } = limiter();
    await rl.check(ORG);
    expect(counter.hits).to.deep.equal([{ key: `{${scopeKey(ORG)}}:${Date.parse('2026-06-10T12:00:00.000Z')}`, ttlMs: COUNTER_TTL_MS }]);
    expect(counter.hits[0]!.key).to.equal(counterKey(scopeKey(ORG), Date.parse('2026-06-10T12:00:00.000Z')));
    expect(COUNTER_TTL_MS).to.equal(120_000);
  });

  it('C-51/C-52: requests 1..60 are allowed with decreasing Remaining; request 61 and later are refused', async () => {
    const { rl } = limiter();
    for (let i = 1; i <= 60; i++) {
      const d = await rl.check(ORG);
      expect(d).to.deep.equal({
        allowed: true,
        limit: 60,
        remaining: 60 - i,
        resetEpochSeconds: Date.parse('2026-06-10T12:01:00Z') / 1000,
        retryAfterSeconds: 30,
        degraded: false,
      });
    }
    for (let i = 0; i < 3; i++) {
      const d = await rl.check(ORG);
      expect(d).to.deep.include({ allowed: false, remaining: 0, retryAfterSeconds: 30, degraded: false });
    }
  });

  it('C-51: enforce throws RateLimitedError carrying the decision on request 61', async () => {
    const { rl } = limiter();
    for (let i = 0; i < 60; i++) expect((await rl.enforce(ORG)).allowed).to.equal(true);
    const e = await rejectsWith(rl.enforce(ORG), RateLimitedError);
    expect(e.decision).to.deep.include({ allowed: false, limit: 60, remaining: 0, retryAfterSeconds: 30 });
  });

  it('C-50: organisations are counted separately; the unauthenticated counter is global and has its own limit', async () => {
    const { rl } = limiter({ rateLimitPerMinute: 2, unauthRateLimitPerMinute: 3 });
    await rl.check(ORG);
    await rl.check(ORG);
    expect((await rl.check(ORG)).allowed).to.equal(false);
    expect((await rl.check(OTHER_ORG)).allowed).to.equal(true);
    for (let i = 0; i < 3; i++) expect((await rl.check(UNAUTH)).allowed).to.equal(true);
    expect((await rl.check(UNAUTH)).allowed).to.equal(false);
    expect((await rl.check(SOURCE)).remaining).to.equal(1);
  });

  it('spec §8.1-§8.3: the counter resets at the start of the next UTC minute', async () => {
    const { rl, clock } = limiter({ rateLimitPerMinute: 2 }, '2026-06-10T12:00:59.900Z');
    await rl.check(ORG);
    await rl.check(ORG);
    const refused = await rl.check(ORG);
    expect(refused).to.deep.include({ allowed: false, retryAfterSeconds: 1 });
    clock.set('2026-06-10T12:01:00.000Z');
    const next = await rl.check(ORG);
    expect(next).to.deep.include({ allowed: true, remaining: 1, retryAfterSeconds: 60 });
    expect(next.resetEpochSeconds).to.equal(Date.parse('2026-06-10T12:02:00Z') / 1000);
  });

  it('a scope over its limit is remembered until its window ends: no further counter calls', async () => {
    const { rl, counter, clock } = limiter({ rateLimitPerMinute: 3 });
    for (let i = 0; i < 4; i++) await rl.check(ORG);
    expect(counter.hits).to.have.length(4);
    for (let i = 0; i < 20; i++) {
      const d = await rl.check(ORG);
      expect(d).to.deep.include({ allowed: false, limit: 3, remaining: 0 });
    }
    expect(counter.hits).to.have.length(4);
    await rl.check(OTHER_ORG);
    expect(counter.hits).to.have.length(5);
    clock.advance(30_000); // 12:01:00, a new window
    expect((await rl.check(ORG)).allowed).to.equal(true);
    expect(counter.hits).to.have.length(6);
  });

  it('C-240: an organisation scope carrying its own limit is counted against it, exactly: N allowed, then refused; null is the default', async () => {
    const { rl, counter } = limiter({ rateLimitPerMinute: 60 });
    const planned: RateScope = { ...ORG, limitPerMinute: 7 };
    expect(rl.limitFor(planned)).to.equal(7);
    expect(rl.limitFor({ ...ORG, limitPerMinute: null })).to.equal(60);
    for (let i = 1; i <= 7; i++) expect(await rl.check(planned), `request ${i}`).to.deep.include({ allowed: true, limit: 7, remaining: 7 - i });
    expect(await rl.check(planned)).to.deep.include({ allowed: false, limit: 7, remaining: 0 });
    expect(counter.hits).to.have.length(8);
    expect(await rl.check({ ...OTHER_ORG, limitPerMinute: null })).to.deep.include({ allowed: true, limit: 60, remaining: 59 });
  });

  it('C-242: a scope remembered over its limit is counted again once its limit is raised; a lower limit stays refused without a count', async () => {
    const { rl, counter } = limiter();
    for (let i = 0; i < 4; i++) await rl.check({ ...ORG, limitPerMinute: 3 });
    const window = Math.floor(Date.parse('2026-06-10T12:00:30.000Z') / 60_000) * 60_000;
    expect(rl.isBlocked({ ...ORG, limitPerMinute: 3 }, window)).to.equal(true);
    expect(rl.isBlocked({ ...ORG, limitPerMinute: 2 }, window)).to.equal(true);
    expect(rl.isBlocked({ ...ORG, limitPerMinute: 4 }, window)).to.equal(false);
    expect(await rl.check({ ...ORG, limitPerMinute: 2 })).to.deep.include({ allowed: false, limit: 2 });
    expect(counter.hits, 'answered from memory').to.have.length(4);
    expect(await rl.check({ ...ORG, limitPerMinute: 6 })).to.deep.include({ allowed: true, limit: 6, remaining: 1 });
    expect(counter.hits).to.have.length(5);
  });

  it('C-243: check and enforce of an organisation scope without its limit read the organisation\'s own limit from the store; without stores, the default', async () => {
    const clock = new FakeClock('2026-06-10T12:00:30.000Z');
    const store = createInMemoryStore();
    await store.stores.organisations.create(newOrganisation({ id: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b', rateLimitPerMinute: 2 }));
    const rl = new RateLimiter({ counter: new InMemoryRateCounter(clock), clock, logger: new CapturingLogger(), config: DEFAULT_CORE_CONFIG, stores: store.stores });
    expect(await rl.check(ORG)).to.deep.include({ allowed: true, limit: 2, remaining: 1 });
    await rl.enforce(ORG);
    await rejectsWith(rl.enforce(ORG), RateLimitedError);
    expect(await rl.check(OTHER_ORG), 'an organisation the store does not have: the default').to.deep.include({ allowed: true, limit: 60 });
    const bare = limiter().rl;
    expect(await bare.check(ORG)).to.deep.include({ limit: 60 });
  });

  it('peek shows the current window with Remaining = limit and counts nothing', () => {
    const { rl, counter } = limiter({ unauthRateLimitPerMinute: 90 });
    expect(rl.peek(SOURCE)).to.deep.equal({
      allowed: true,
      limit: 60,
      remaining: 60,
      resetEpochSeconds: Date.parse('2026-06-10T12:01:00Z') / 1000,
      retryAfterSeconds: 30,
      degraded: false,
    });
    expect(rl.peek(UNAUTH).limit).to.equal(90);
    expect(counter.hits).to.deep.equal([]);
  });

  describe('fail-open (C-54)', () => {
    it('C-54: when the counter fails, the request is allowed with Remaining = limit and degraded', async () => {
      const { rl, counter } = limiter();
      counter.mode = 'failing';
      const d = await rl.enforce(ORG);
      expect(d).to.deep.equal({
        allowed: true,
        limit: 60,
        remaining: 60,
        resetEpochSeconds: Date.parse('2026-06-10T12:01:00Z') / 1000,
        retryAfterSeconds: 30,
        degraded: true,
      });
    });

    it('C-54: a counter that never answers is abandoned after rateCounterTimeoutMs; nothing queues behind it', async () => {
      const { rl, counter } = limiter({ rateCounterTimeoutMs: 25 });
      counter.mode = 'hanging';
      const started = process.hrtime.bigint();
      // 200 requests: one after another they would need 200 x 25 ms = 5 s.
      const decisions = await Promise.all(Array.from({ length: 200 }, () => rl.check(ORG)));
      const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
      expect(decisions.every((d) => d.allowed && d.degraded)).to.equal(true);
      expect(elapsedMs).to.be.below(2000);
    });

    it('C-54: a counter answering something that is not a count fails open too', async () => {
      const { rl, counter } = limiter();
      counter.mode = 'garbage';
      expect(await rl.check(ORG)).to.deep.include({ allowed: true, degraded: true, remaining: 60 });
    });

    it('C-54: a warning at most once per 10 s while the counter stays down, one info line on recovery', async () => {
      const { rl, counter, clock, logger } = limiter();
      counter.mode = 'failing';
      for (let i = 0; i < 5; i++) await rl.check(ORG);
      const warns = () => logger.entries.filter((e) => e.level === 'warn');
      const infos = () => logger.entries.filter((e) => e.level === 'info');
      expect(warns()).to.have.length(1);
      expect(warns()[0]?.fields['reason']).to.equal('ECONNREFUSED 127.0.0.1:6379');
      clock.advance(9_999);
      await rl.check(ORG);
      expect(warns()).to.have.length(1);
      clock.advance(1);
      await rl.check(UNAUTH);
      expect(warns()).to.have.length(2);
      expect(infos()).to.have.length(0);
      counter.mode = 'up';
      expect(await rl.check(ORG)).to.deep.include({ allowed: true, degraded: false });
      await rl.check(ORG);
      expect(infos()).to.have.length(1);
      expect(warns()).to.have.length(2);
    });

    it('C-54: a new outage more than 10 s after the last warning warns at once; within 10 s of it, it does not', async () => {
      const { rl, counter, clock, logger } = limiter();
      const levels = () => logger.entries.map((e) => e.level);
      counter.mode = 'failing';
      await rl.check(ORG);
      counter.mode = 'up';
      await rl.check(ORG);
      expect(levels()).to.deep.equal(['warn', 'info']);
      // a new outage 9.999 s after the warning: no second warning, and so no second recovery line
      clock.advance(9_999);
      counter.mode = 'failing';
      await rl.check(ORG);
      counter.mode = 'up';
      await rl.check(ORG);
      expect(levels()).to.deep.equal(['warn', 'info']);
      // a new outage 10 s after the warning warns at once, and its recovery is logged
      clock.advance(1);
      counter.mode = 'failing';
      await rl.check(ORG);
      expect(levels()).to.deep.equal(['warn', 'info', 'warn']);
      counter.mode = 'up';
      await rl.check(ORG);
      expect(levels()).to.deep.equal(['warn', 'info', 'warn', 'info']);
    });

    it('C-54: a flapping counter (down 80 ms of every 250 ms for 60 s) logs at most one warning and one recovery line per 10 s, alternating', async () => {
      const { rl, counter, clock, logger } = limiter({ rateLimitPerMinute: 1_000_000 });
      let failedOpen = 0;
      for (let cycle = 0; cycle < 240; cycle++) {
        // one 250 ms cycle: a check that fails at 0, then answered checks at 80, 130, 180 and 230 ms
        counter.mode = 'failing';
        if ((await rl.check(ORG)).degraded) failedOpen++;
        clock.advance(80);
        counter.mode = 'up';
        for (const step of [50, 50, 50, 20]) {
          expect((await rl.check(ORG)).degraded).to.equal(false);
          clock.advance(step);
        }
      }
      expect(failedOpen).to.equal(240);
      const at = (level: string) => logger.lines.filter((l) => l.level === level).map((l) => l.at);
      // one warning per 10 s, not one per stall
      expect(at('warn')).to.deep.equal([0, 10_000, 20_000, 30_000, 40_000, 50_000]);
      // each followed by one recovery line, at the first answer after it
      expect(at('info')).to.deep.equal([80, 10_080, 20_080, 30_080, 40_080, 50_080]);
      expect(logger.lines.map((l) => l.level)).to.deep.equal(Array.from({ length: 6 }, () => ['warn', 'info']).flat());
      // the recovery line counts the fail-open decisions since the previous one: 40 stalls per 10 s
      expect(logger.lines.filter((l) => l.level === 'info').map((l) => l.fields['failedOpen'])).to.deep.equal([1, 40, 40, 40, 40, 40]);
    });

    it('C-54: a recovery less than 10 s after the previous recovery line is logged by a later answer, once 10 s have passed', async () => {
      const { rl, counter, clock, logger } = limiter();
      const lines = () => logger.lines.map((l) => `${l.at} ${l.level}`);
      counter.mode = 'failing';
      await rl.check(ORG); // 0: warn
      clock.advance(9_900);
      counter.mode = 'up';
      await rl.check(ORG); // 9.9 s: info
      clock.advance(100);
      counter.mode = 'failing';
      await rl.check(ORG); // 10 s: a new warning (10 s after the first)
      clock.advance(100);
      counter.mode = 'up';
      await rl.check(ORG); // 10.1 s: only 0.2 s after the last info line: not yet
      expect(lines()).to.deep.equal(['0 warn', '9900 info', '10000 warn']);
      clock.advance(9_799);
      await rl.check(ORG); // 19.899 s: still within 10 s of the last info line
      expect(lines()).to.have.length(3);
      clock.advance(1);
      await rl.check(ORG); // 19.9 s: the counter has stayed up; the log says so, once
      await rl.check(ORG);
      expect(lines()).to.deep.equal(['0 warn', '9900 info', '10000 warn', '19900 info']);
    });

    it('C-54: a timeout is logged with its bound', async () => {
      const { rl, counter, logger } = limiter({ rateCounterTimeoutMs: 5 });
      counter.mode = 'hanging';
      await rl.check(ORG);
      expect(logger.entries[0]?.fields['reason']).to.equal('no answer within 5 ms');
    });
  });
});
