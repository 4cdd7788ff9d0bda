/**
 * One shared-store call per organisation per event-loop turn (C-200, C-201, C-202): the credential
 * cache's freshness checks and the rate limiter's hits of one turn, over the in-memory shared
 * counter store. Calls and store reads are counted; timings are never asserted.
 */
import { expect } from 'chai';
import { OPERATOR, TurnBatch, counterKey, createCore, freshnessKeys, type ApiKeyStore, type Core } from '@cos/core';
import { FakeClock, InMemoryFreshCounter, InMemoryRateCounter, IN_MEMORY_CHANGE_BOUND_MS, createInMemoryStore, type StoreHarness } from '@cos/core/testing';
import { GatedApiKeyStore, TEST_SOURCE, withStore } from './use-cases-fixtures.js';
import { storePorts } from '@cos/core/testing/contracts';

const LIMIT = 1_000;
const MINUTE = 60_000;
const TTL = 120_000;

describe('TurnBatch: one shared-store call per organisation per event-loop turn (C-200, C-201, C-202, C-204)', () => {
  let clock: FakeClock;
  let store: StoreHarness;
  let shared: InMemoryFreshCounter;

  beforeEach(() => {
    clock = new FakeClock();
    store = createInMemoryStore();
    shared = new InMemoryFreshCounter(clock);
  });

  function instance(options: { cache?: boolean } = {}): { core: Core; keys: GatedApiKeyStore } {
    const keys = new GatedApiKeyStore(storePorts(store).apiKeys);
    const core = createCore({
      stores: withStore(storePorts(store), 'apiKeys', keys as ApiKeyStore),
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: shared,
      freshness: shared,
      ...(options.cache !== undefined ? { credentialCache: options.cache } : {}),
      clock,
      config: { rateLimitPerMinute: LIMIT },
    });
    return { core, keys };
  }

  async function organisationWithKey(core: Core, slug: string): Promise<string> {
    const org = await core.organisations.create(OPERATOR, { name: slug, slug });
    return (await core.apiKeys.issue(OPERATOR, org.id, { label: 'k' })).rawKey;
  }

  /** The remaining counts of concurrent admissions (all admitted). */
  async function burst(core: Core, keys: readonly string[]): Promise<number[]> {
    const answers = await Promise.all(keys.map((raw) => core.admission.admit(`Bearer ${raw}`, TEST_SOURCE)));
    return answers.map((a) => {
      if (!a.admitted) throw new Error('refused');
      return a.decision.remaining;
    });
  }

  it('C-200, C-201: the cached requests of one turn cost one call per organisation, and each gets its own count, in call order', async () => {
    const { core, keys } = instance();
    const a = await organisationWithKey(core, 'a');
    const b = await organisationWithKey(core, 'b');
    await burst(core, [a, b]); // unsettled: store reads, nothing cached yet
    clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
    await burst(core, [a, b]); // settled: observed, filled
    await burst(core, [a, b]); // served from the cache
    const calls = shared.calls;
    const reads = keys.reads;
    const remaining = await burst(core, [...Array.from({ length: 20 }, () => a), ...Array.from({ length: 10 }, () => b)]);
    expect(shared.calls - calls, 'shared-store calls for 30 requests of 2 organisations').to.equal(2);
    expect(keys.reads - reads, 'store reads').to.equal(0);
    const usedA = LIMIT - remaining[0]!;
    expect(remaining.slice(0, 20), 'organisation a: consecutive counts in call order').to.deep.equal(Array.from({ length: 20 }, (_, i) => LIMIT - usedA - i));
    const usedB = LIMIT - remaining[20]!;
    expect(remaining.slice(20), 'organisation b').to.deep.equal(Array.from({ length: 10 }, (_, i) => LIMIT - usedB - i));
    // The counter holds exactly what was handed out.
    const window = Math.floor(clock.now().getTime() / MINUTE) * MINUTE;
    for (const [raw, last] of [
      [a, remaining[19]!],
      [b, remaining[29]!],
    ] as const) {
      const org = (await core.admission.admit(`Bearer ${raw}`, TEST_SOURCE)) as { organisation: { id: string } };
      expect(await shared.hit(counterKey(`org:${org.organisation.id}`, window), TTL, 1)).to.equal(LIMIT - last + 2);
    }
  });

  it('C-200: without the cache the hits of one turn cost one call per organisation too, each with its own count', async () => {
    const { core } = instance({ cache: false });
    const a = await organisationWithKey(core, 'a');
    await burst(core, [a]);
    const calls = shared.calls;
    const remaining = await burst(core, Array.from({ length: 15 }, () => a));
    expect(shared.calls - calls).to.equal(1);
    expect(remaining).to.deep.equal(Array.from({ length: 15 }, (_, i) => LIMIT - 2 - i));
  });

  it('C-200: a shared counter without the freshness port (SQLite with Redis) is batched once it has answered with a promise; a synchronous one never is', async () => {
    const keys = new GatedApiKeyStore(storePorts(store).apiKeys);
    const over = (counter: InMemoryFreshCounter | InMemoryRateCounter) =>
      createCore({ stores: withStore(storePorts(store), 'apiKeys', keys as ApiKeyStore), unitOfWork: store.unitOfWork, health: store.health, counter, clock, config: { rateLimitPerMinute: LIMIT } });
    const sharedOnly = over(shared);
    const a = await organisationWithKey(sharedOnly, 'a');
    await burst(sharedOnly, [a]);
    const calls = shared.calls;
    expect(await burst(sharedOnly, Array.from({ length: 10 }, () => a))).to.deep.equal(Array.from({ length: 10 }, (_, i) => LIMIT - 2 - i));
    expect(shared.calls - calls, 'calls for 10 requests').to.equal(1);
    const local = over(new InMemoryRateCounter(clock));
    const decision = local.rateLimiter.checkAt({ kind: 'organisation', organisationId: 'o' }, clock.now().getTime());
    expect(decision, 'a synchronous decision, no batch').not.to.be.instanceOf(Promise);
    expect(local.rateLimiter.checkAt({ kind: 'organisation', organisationId: 'o' }, clock.now().getTime())).not.to.be.instanceOf(Promise);
  });

  it('C-202: a revocation that returned before a request was sent is refused on that request, whatever was queued in its turn before it', async () => {
    const one = instance();
    const two = instance();
    const org = await one.core.organisations.create(OPERATOR, { name: 'r', slug: 'r' });
    const issued = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
    const other = await organisationWithKey(one.core, 'other');
    const raw = issued.rawKey;
    await burst(two.core, [raw, other]);
    clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
    await burst(two.core, [raw, other]);
    await burst(two.core, [raw, other]);
    // A request of the key queued first; the revocation completes on the other instance; then the next requests.
    const early = two.core.admission.admit(`Bearer ${raw}`, TEST_SOURCE);
    await one.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    const next = await Promise.all([two.core.admission.admit(`Bearer ${raw}`, TEST_SOURCE), two.core.admission.admit(`Bearer ${other}`, TEST_SOURCE)]);
    await early;
    expect(next[0].admitted, 'the next request of the revoked key').to.equal(false);
    expect(next[1].admitted, 'another organisation').to.equal(true);
  });

  it('C-151, C-204: the requests of a late group share one store read per key, and fail open each', async () => {
    const { core, keys } = instance();
    const a = await organisationWithKey(core, 'a');
    const b = await organisationWithKey(core, 'b');
    await burst(core, [a, b]);
    clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
    await burst(core, [a, b]);
    await burst(core, [a, b]);
    const check = shared.check.bind(shared);
    shared.check = () => new Promise(() => undefined); // a frozen Redis
    try {
      const reads = keys.reads;
      const remaining = await burst(core, [...Array.from({ length: 12 }, () => a), ...Array.from({ length: 8 }, () => b)]);
      expect(keys.reads - reads, 'store reads for 20 late requests of 2 keys').to.equal(2);
      expect(remaining, 'every one failed open').to.deep.equal(Array(20).fill(LIMIT));
    } finally {
      shared.check = check;
    }
    const reads = keys.reads;
    await burst(core, [a, b]);
    expect(keys.reads - reads, 'the entries stayed').to.equal(0);
  });

  it('C-36, C-204: a read that started before a request began is never shared with it: a revocation that returned in between is refused', async () => {
    const one = instance();
    const two = instance();
    const org = await one.core.organisations.create(OPERATOR, { name: 'r', slug: 'r' });
    const issued = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
    two.keys.hold();
    // A miss on two: its read of the key is under way (held) when the revocation commits on one.
    const early = two.core.admission.admit(`Bearer ${issued.rawKey}`, TEST_SOURCE);
    await new Promise((resolve) => setImmediate(resolve));
    expect(two.keys.reads, 'the early read under way').to.equal(1);
    await one.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    const next = two.core.admission.admit(`Bearer ${issued.rawKey}`, TEST_SOURCE);
    await new Promise((resolve) => setImmediate(resolve));
    expect(two.keys.reads, 'the next request reads for itself').to.equal(2);
    two.keys.release();
    await early;
    expect((await next).admitted, 'the request sent after the revocation returned').to.equal(false);
  });

  it('C-201: checks of one organisation with different tags or count modes in one turn are answered each as alone', async () => {
    const batch = new TurnBatch({ freshness: shared, counter: shared, timeoutMs: 1_000 });
    const org = 'o1';
    const keys = freshnessKeys(org);
    const window = Math.floor(clock.now().getTime() / MINUTE) * MINUTE;
    const request = (tag: string | null, count: 'always' | 'if-fresh' | 'never') => ({ keys, tag, count, counterKey: counterKey(`org:${org}`, window), ttlMs: TTL });
    await batch.check(request(null, 'never'));
    clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
    const first = await batch.check(request(null, 'never'));
    if (first.kind !== 'value') throw new Error('no answer');
    const token = first.value.token;
    const calls = shared.calls;
    const answers = await Promise.all([
      batch.check(request(token, 'if-fresh')),
      batch.check(request(null, 'always')),
      batch.check(request(token, 'if-fresh')),
      batch.check(request('stale', 'if-fresh')),
      batch.check(request(token, 'never')),
      batch.hit(counterKey(`org:${org}`, window), TTL),
    ]);
    expect(shared.calls - calls, 'one call per (tag, mode) group and one for the hits').to.equal(5);
    const values = answers.map((a) => (a.kind === 'value' ? a.value : null));
    const counts = values.map((v) => (typeof v === 'number' ? v : v?.count));
    // Groups go out in the order they were first queued: the two fresh checks (1, 2), always (3), the hit (4).
    expect(counts).to.deep.equal([1, 3, 2, null, null, 4]);
    expect(values.slice(0, 5).map((v) => (typeof v === 'number' ? null : v?.fresh))).to.deep.equal([true, false, true, false, true]);
  });

  it('C-200: a failing store answers every request of the group with the failure, once', async () => {
    const batch = new TurnBatch({ freshness: shared, counter: shared, timeoutMs: 1_000 });
    shared.failing = true;
    const calls = shared.calls;
    const answers = await Promise.all(Array.from({ length: 5 }, () => batch.hit('{org:x}:0', TTL)));
    expect(shared.calls - calls).to.equal(1);
    expect(answers.map((a) => a.kind)).to.deep.equal(Array(5).fill('error'));
  });

  describe('key windows in the batch (C-292)', () => {
    /** An organisation at a plan of 8 with keys limited to 3 and 5 and one without a limit of its own. */
    async function limitedOrganisation(core: Core, slug: string): Promise<Record<'a' | 'b' | 'c', string>> {
      const org = await core.organisations.create(OPERATOR, { name: slug, slug });
      await core.rateLimits.replace(OPERATOR, org.id, { requests_per_minute: 8 });
      const key = async (limit: number | null): Promise<string> => (await core.apiKeys.issue(OPERATOR, org.id, { label: 'k', rate_limit_per_minute: limit })).rawKey;
      return { a: await key(3), b: await key(5), c: await key(null) };
    }
    // a's 4th and 5th are refused by a (3), b's 4th by the organisation (8); no key goes over its limit
    // after that, where one request at a time is refused from memory, counting nothing (C-292).
    const SEQUENCE = ['a', 'a', 'b', 'c', 'a', 'a', 'b', 'b', 'c', 'a', 'b', 'c', 'c'] as const;
    type Outcome = [boolean, number, number, string | null];
    const outcome = (a: Awaited<ReturnType<Core['admission']['admit']>>): Outcome => [a.decision.allowed, a.decision.limit, a.decision.remaining, a.decision.limitScope ?? null];

    for (const cache of [true, false]) {
      it(`C-292: one turn of requests of one organisation through keys with and without limits decides exactly as the same requests one at a time (${cache ? 'cached: one call' : 'no cache: the limiter\'s hits'})`, async () => {
        const { core } = instance({ cache });
        const one = await limitedOrganisation(core, 'one-at-a-time');
        const all = await limitedOrganisation(core, 'one-turn');
        // Warm the caches (and the limiter's shared-store mode) in this minute; count in the next one.
        for (const keys of [one, all]) for (const raw of Object.values(keys)) await core.admission.admit(`Bearer ${raw}`, TEST_SOURCE);
        await core.admission.admit(`Bearer ${one.c}`, TEST_SOURCE);
        clock.advance(MINUTE);
        const sequential: Outcome[] = [];
        for (const k of SEQUENCE) sequential.push(outcome(await core.admission.admit(`Bearer ${one[k]}`, TEST_SOURCE)));
        const before = shared.calls;
        const batched = (await Promise.all(SEQUENCE.map((k) => core.admission.admit(`Bearer ${all[k]}`, TEST_SOURCE)))).map(outcome);
        expect(batched).to.deep.equal(sequential);
        if (cache) expect(shared.calls - before, 'one call for the whole turn').to.equal(1);
        expect(sequential.filter(([allowed]) => allowed)).to.have.length(8);
        expect(sequential.filter(([, , , scope]) => scope === 'key').length).to.be.greaterThan(0);
        expect(sequential.filter(([, , , scope]) => scope === 'organisation').length).to.be.greaterThan(0);
      });
    }
  });
});
