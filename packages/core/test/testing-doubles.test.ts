/** The test doubles of @cos/core/testing: FakeClock, seededRandom, CapturingLogger, createTestCore, in-memory specifics. */
import { expect } from 'chai';
import { DEFAULT_CORE_CONFIG, InProcessRateCounter, counterKey } from '@cos/core';
import {
  CapturingLogger,
  createInMemoryStore,
  createTestCore,
  FAKE_CLOCK_START,
  FakeClock,
  InMemoryRateCounter,
  seededRandom,
} from '@cos/core/testing';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const T = (iso: string) => new Date(iso);

describe('FakeClock', () => {
  it('starts at a fixed default instant, or at the given Date or ISO string', () => {
    expect(new FakeClock().now().toISOString()).to.equal(FAKE_CLOCK_START);
    expect(new FakeClock('2026-01-02T03:04:05.678Z').now().toISOString()).to.equal('2026-01-02T03:04:05.678Z');
    expect(new FakeClock(T('2030-12-31T23:59:59.999Z')).now().toISOString()).to.equal('2030-12-31T23:59:59.999Z');
  });

  it('stands still until set or advanced (forwards and backwards, at ms precision)', () => {
    const clock = new FakeClock('2026-06-10T12:00:00.000Z');
    expect(clock.now().getTime()).to.equal(clock.now().getTime());
    clock.advance(1);
    expect(clock.now().toISOString()).to.equal('2026-06-10T12:00:00.001Z');
    clock.advance(59_999);
    expect(clock.now().toISOString()).to.equal('2026-06-10T12:01:00.000Z');
    clock.advance(-120_000);
    expect(clock.now().toISOString()).to.equal('2026-06-10T11:59:00.000Z');
    clock.set('2027-01-01T00:00:00.000Z');
    expect(clock.now().toISOString()).to.equal('2027-01-01T00:00:00.000Z');
    clock.set(T('2025-05-05T05:05:05.505Z'));
    expect(clock.now().toISOString()).to.equal('2025-05-05T05:05:05.505Z');
  });

  it('hands out fresh Dates and keeps no reference to the one it was given', () => {
    const start = T('2026-06-10T12:00:00.000Z');
    const clock = new FakeClock(start);
    start.setTime(0);
    const now = clock.now();
    now.setTime(0);
    expect(clock.now().toISOString()).to.equal('2026-06-10T12:00:00.000Z');
    expect(clock.now()).to.not.equal(clock.now());
  });

  it('rejects invalid times and advances', () => {
    expect(() => new FakeClock('not a date')).to.throw(RangeError);
    expect(() => new FakeClock().set('garbage')).to.throw(RangeError);
    expect(() => new FakeClock().advance(Number.NaN)).to.throw(RangeError);
  });
});

describe('seededRandom', () => {
  it('is deterministic: one seed, one stream of bytes and uuids', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    expect(Array.from(a.bytes(100))).to.deep.equal(Array.from(b.bytes(100)));
    expect(a.uuid()).to.equal(b.uuid());
    expect(Array.from(a.bytes(7))).to.deep.equal(Array.from(b.bytes(7)));
  });

  it('different seeds (even neighbouring ones) give different streams', () => {
    const streams = [0, 1, 2, 3, 0xffffffff].map((seed) => Buffer.from(seededRandom(seed).bytes(32)).toString('hex'));
    expect(new Set(streams).size).to.equal(streams.length);
  });

  it('returns exactly n bytes for any n, including 0 and non-multiples of 4', () => {
    const r = seededRandom(7);
    for (const n of [0, 1, 2, 3, 4, 5, 63, 64, 65]) {
      const bytes = r.bytes(n);
      expect(bytes).to.be.instanceOf(Uint8Array);
      expect(bytes.length).to.equal(n);
    }
    expect(() => r.bytes(-1)).to.throw(RangeError);
  });

  it('bytes cover 0..255 roughly uniformly', () => {
    const counts = new Array<number>(256).fill(0);
    for (const b of seededRandom(2026).bytes(256 * 400)) counts[b]! += 1;
    // Expected 400 per value: a chi-square over 255 degrees of freedom stays well under 400.
    const chi = counts.reduce((sum, c) => sum + (c - 400) ** 2 / 400, 0);
    expect(Math.min(...counts)).to.be.greaterThan(0);
    expect(chi).to.be.below(400);
  });

  it('uuids are v4-shaped and distinct', () => {
    const r = seededRandom(1);
    const ids = Array.from({ length: 1000 }, () => r.uuid());
    for (const id of ids) expect(id).to.match(UUID_V4);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});

describe('CapturingLogger', () => {
  it('keeps every call in order with its level, fields and message', () => {
    const logger = new CapturingLogger();
    logger.debug({ a: 1 }, 'debugging');
    logger.info({}, 'informing');
    logger.warn({ scope: 'org' }, 'warning');
    logger.error({ err: 'x' }, 'failing');
    expect(logger.entries).to.deep.equal([
      { level: 'debug', fields: { a: 1 }, message: 'debugging' },
      { level: 'info', fields: {}, message: 'informing' },
      { level: 'warn', fields: { scope: 'org' }, message: 'warning' },
      { level: 'error', fields: { err: 'x' }, message: 'failing' },
    ]);
  });

  it('copies the fields at call time', () => {
    const logger = new CapturingLogger();
    const fields: Record<string, unknown> = { n: 1 };
    logger.info(fields, 'once');
    fields['n'] = 2;
    expect(logger.entries[0]!.fields).to.deep.equal({ n: 1 });
  });
});

describe('InMemoryRateCounter', () => {
  it('is the production InProcessRateCounter, on the clock it is given', async () => {
    const clock = new FakeClock('2026-06-10T12:00:00.000Z');
    const counter = new InMemoryRateCounter(clock);
    expect(counter).to.be.instanceOf(InProcessRateCounter);
    const window = clock.now().getTime();
    expect(await counter.hit(counterKey('org:a', window), 60_000)).to.equal(1);
    clock.advance(59_999);
    expect(await counter.hit(counterKey('org:a', window), 60_000), 'within the ttl on the fake clock').to.equal(2);
    clock.advance(1);
    expect(await counter.hit(counterKey('org:a', window), 60_000), 'forgotten at the ttl on the fake clock').to.equal(1);
  });
});

describe('createInMemoryStore (beyond the contract)', () => {
  const org = (slug: string, createdAt = T('2026-01-01T00:00:00.000Z')) => ({
    id: `00000000-0000-4000-8000-${slug.padStart(12, '0')}`,
    name: slug,
    slug,
    industrySection: null,
    isSystem: false,
    rateLimitPerMinute: null,
    createdAt,
    updatedAt: createdAt,
  });

  it('keeps writes made outside a unit of work while it runs, and commits the run on top', async () => {
    const h = createInMemoryStore();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const run = h.unitOfWork.run(async (tx) => {
      await tx.organisations.create(org('111'));
      entered();
      await held;
    });
    await inside;
    await h.stores.organisations.create(org('222'));
    expect(await h.stores.organisations.findById(org('111').id), 'uncommitted work is not visible outside').to.equal(null);
    release();
    await run;
    const slugs = (await h.stores.organisations.list({ limit: 10, after: null })).map((o) => o.slug).sort();
    expect(slugs).to.deep.equal(['111', '222']);
  });

  it('a commit that conflicts with a write made meanwhile fails whole', async () => {
    const h = createInMemoryStore();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const run = h.unitOfWork.run(async (tx) => {
      await tx.organisations.create(org('333'));
      await tx.organisations.create(org('444'));
      entered();
      await held;
    });
    await inside;
    await h.stores.organisations.create({ ...org('444'), id: '00000000-0000-4000-8000-999999999999' });
    release();
    const error = await run.then(
      () => null,
      (e: unknown) => e,
    );
    expect((error as { code?: string } | null)?.code).to.equal('CONFLICT');
    expect(await h.stores.organisations.findById(org('333').id)).to.equal(null);
  });

  it('stores handed to a unit of work stop working once it has finished', async () => {
    const h = createInMemoryStore();
    let leaked: Parameters<Parameters<typeof h.unitOfWork.run>[0]>[0] | undefined;
    await h.unitOfWork.run(async (tx) => {
      leaked = tx;
    });
    let error: unknown;
    try {
      await leaked!.organisations.create(org('555'));
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(Error);
    expect(await h.stores.organisations.findById(org('555').id)).to.equal(null);
  });

  it('after close, the health probe and every store call reject', async () => {
    const h = createInMemoryStore();
    await h.health.ping();
    await h.close();
    let pingError: unknown;
    await h.health.ping().catch((e: unknown) => (pingError = e));
    expect(pingError).to.be.instanceOf(Error);
    let listError: unknown;
    await h.stores.organisations.list({ limit: 1, after: null }).catch((e: unknown) => (listError = e));
    expect(listError).to.be.instanceOf(Error);
  });

  it('each call returns a separate, empty store', async () => {
    const a = createInMemoryStore();
    const b = createInMemoryStore();
    await a.stores.organisations.create(org('666'));
    expect(await b.stores.organisations.list({ limit: 10, after: null })).to.deep.equal([]);
  });
});

describe('createTestCore', () => {
  it('wires a core over a fresh in-memory store, a FakeClock, an in-memory counter and a CapturingLogger', async () => {
    const t = createTestCore();
    expect(t.clock).to.be.instanceOf(FakeClock);
    expect(t.counter).to.be.instanceOf(InMemoryRateCounter);
    expect(t.logger).to.be.instanceOf(CapturingLogger);
    expect(t.core.clock).to.equal(t.clock);
    expect(t.core.config).to.deep.equal(DEFAULT_CORE_CONFIG);
    expect(await t.store.stores.organisations.list({ limit: 10, after: null })).to.deep.equal([]);
    await t.store.health.ping();
    for (const part of ['organisations', 'members', 'apiKeys', 'audit', 'authenticator', 'rateLimiter', 'health', 'bootstrap'] as const) {
      expect(t.core[part], part).to.be.an('object');
    }
  });

  it('C-53: applies config overrides over the defaults', () => {
    const t = createTestCore({ config: { rateLimitPerMinute: 5, maxActiveKeysPerOrg: 3 } });
    expect(t.core.config).to.deep.equal({ ...DEFAULT_CORE_CONFIG, rateLimitPerMinute: 5, maxActiveKeysPerOrg: 3 });
  });

  it('uses the clock, store and counter it is given; the default counter runs on the core clock', async () => {
    const clock = new FakeClock('2030-01-01T00:00:00.000Z');
    const store = createInMemoryStore();
    const counter = new InProcessRateCounter(clock);
    const t = createTestCore({ clock, store, counter });
    expect(t.clock).to.equal(clock);
    expect(t.store).to.equal(store);
    expect(t.counter).to.equal(counter);
    expect(t.core.clock.now().toISOString()).to.equal('2030-01-01T00:00:00.000Z');

    const d = createTestCore();
    expect(await d.counter.hit(counterKey('s', 0), 1_000)).to.equal(1);
    d.clock.advance(1_000);
    expect(await d.counter.hit(counterKey('s', 0), 1_000)).to.equal(1);
  });
});
