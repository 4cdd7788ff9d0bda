/**
 * Contract suite of CredentialFreshness (C-36, C-57): the in-memory store and Redis.
 * The harness's change bound is short (a few hundred ms) so that expiry can be waited out.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { CredentialFreshness, FreshnessCount } from '../../ports/credential-freshness.js';
import type { RateCounter } from '../../ports/rate-counter.js';
import { counterKey, freshnessKeys, introspectionCounterKey, keyCounterKey } from '../../access/counter-keys.js';

export interface FreshnessHarness {
  /** Two clients of one shared store (two instances). */
  readonly first: CredentialFreshness & RateCounter;
  readonly second: CredentialFreshness & RateCounter;
  /** The change bound both clients were created with (ms). */
  readonly changeBoundMs: number;
  /** Empties the shared store (FLUSHALL). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

const MINUTE = 60_000;
const TTL = 120_000;

export function describeCredentialFreshness(name: string, factory: () => Promise<FreshnessHarness>): void {
  describe(`CredentialFreshness contract: ${name}`, function () {
    this.timeout(20_000);
    let h: FreshnessHarness;
    let window: number;

    beforeEach(async () => {
      h = await factory();
      window = Math.floor(Date.now() / MINUTE) * MINUTE;
    });
    afterEach(async () => {
      await h.close();
    });

    const check = (c: CredentialFreshness, organisationId: string, tag: string | null, count: FreshnessCount = 'never') =>
      c.check({ keys: freshnessKeys(organisationId), tag, count, counterKey: counterKey(`org:${organisationId}`, window), ttlMs: TTL });
    /** Waits until the organisation is settled (after a flush or a fresh start, at most the bound). */
    async function settledToken(c: CredentialFreshness, organisationId: string): Promise<string> {
      const until = Date.now() + h.changeBoundMs * 3 + 1000;
      for (;;) {
        const r = await check(c, organisationId, null);
        if (r.settled) return r.token;
        if (Date.now() > until) throw new Error('never settled');
        await sleep(Math.max(10, h.changeBoundMs / 5));
      }
    }

    it('answers the same current token to every client, and a tag equal to it is fresh once settled', async () => {
      const org = randomUUID();
      const token = await settledToken(h.first, org);
      const again = await check(h.second, org, token);
      expect(again).to.deep.equal({ count: null, token, settled: true, fresh: true });
      expect((await check(h.second, org, `${token}x`)).fresh).to.equal(false);
      expect((await check(h.second, org, null)).fresh).to.equal(false);
    });

    it("C-50: counts in the organisation's rate-limit counter ('always'; 'if-fresh' only when fresh; 'never' not at all)", async () => {
      const org = randomUUID();
      const token = await settledToken(h.first, org);
      expect((await check(h.first, org, null, 'always')).count).to.equal(1);
      expect((await check(h.second, org, 'stale', 'if-fresh')).count).to.equal(null);
      expect((await check(h.second, org, token, 'if-fresh')).count).to.equal(2);
      expect((await check(h.first, org, token, 'never')).count).to.equal(null);
      // The very counter RateCounter.hit counts for the scope org:<id>.
      expect(await h.second.hit(counterKey(`org:${org}`, window), TTL)).to.equal(3);
      expect((await check(h.first, org, token, 'if-fresh')).count).to.equal(4);
    });

    it("C-51: a check standing for several requests counts them all at once ('always'; 'if-fresh' only when fresh)", async () => {
      const org = randomUUID();
      const token = await settledToken(h.first, org);
      const many = (c: CredentialFreshness, tag: string | null, count: FreshnessCount, hits: number) =>
        c.check({ keys: freshnessKeys(org), tag, count, counterKey: counterKey(`org:${org}`, window), ttlMs: TTL, hits });
      expect(await many(h.first, token, 'if-fresh', 4)).to.deep.equal({ count: 4, token, settled: true, fresh: true });
      expect((await many(h.second, null, 'always', 3)).count).to.equal(7);
      expect((await many(h.second, 'stale', 'if-fresh', 5)).count).to.equal(null);
      expect((await many(h.first, token, 'never', 5)).count).to.equal(null);
      expect(await h.second.hit(counterKey(`org:${org}`, window), TTL, 2)).to.equal(9);
      expect((await check(h.first, org, token, 'if-fresh')).count).to.equal(10);
    });

    it("C-292: with key windows, counts each key first and the organisation only by the hits under their limits; nothing when it does not count", async () => {
      const org = randomUUID();
      const token = await settledToken(h.first, org);
      const guarded = (c: CredentialFreshness, tag: string | null, count: FreshnessCount, hits: number, keys: [string, number, number][]) =>
        c.check({
          keys: freshnessKeys(org),
          tag,
          count,
          counterKey: counterKey(`org:${org}`, window),
          ttlMs: TTL,
          hits,
          keyCounters: keys.map(([keyId, limit, n]) => ({ counterKey: keyCounterKey(org, keyId, window), limit, hits: n })),
        });
      expect(await guarded(h.first, token, 'if-fresh', 4, [['a', 2, 3]])).to.deep.equal({ count: 3, keyCounts: [3], token, settled: true, fresh: true });
      expect(await guarded(h.second, 'stale', 'if-fresh', 2, [['a', 2, 2]])).to.deep.equal({ count: null, token, settled: true, fresh: false });
      expect((await guarded(h.second, null, 'always', 1, [['a', 2, 1]])).count, 'refused by the key: the organisation unchanged').to.equal(3);
      expect(await h.first.hit(keyCounterKey(org, 'a', window), TTL), "the key's counter RateCounter.hit counts").to.equal(5);
      expect((await guarded(h.first, token, 'if-fresh', 3, [['a', 2, 1], ['b', 5, 1]])).keyCounts).to.deep.equal([6, 1]);
      expect((await check(h.first, org, token, 'if-fresh')).count).to.equal(6);
    });

    it("C-271: counts in the organisation's introspection counter when given it (the same slot), never in its rate-limit counter", async () => {
      const org = randomUUID();
      const token = await settledToken(h.first, org);
      const introspection = introspectionCounterKey(org, window);
      const counted = (c: CredentialFreshness, tag: string | null, count: FreshnessCount) =>
        c.check({ keys: freshnessKeys(org), tag, count, counterKey: introspection, ttlMs: TTL });
      expect(await counted(h.first, token, 'if-fresh')).to.deep.equal({ count: 1, token, settled: true, fresh: true });
      expect((await counted(h.second, null, 'always')).count).to.equal(2);
      expect(await h.second.hit(introspection, TTL), 'the counter RateCounter.hit counts for the scope').to.equal(3);
      expect((await check(h.first, org, token, 'if-fresh')).count, "the organisation's own counter").to.equal(1);
    });

    it('a change replaces the token at its begin and again at its end, and the organisation is not settled in between', async () => {
      const org = randomUUID();
      const before = await settledToken(h.first, org);
      await h.first.beginChange(freshnessKeys(org), 'change-1');
      const during = await check(h.second, org, before, 'if-fresh');
      expect(during.token).to.not.equal(before);
      expect(during.settled).to.equal(false);
      expect(during.fresh).to.equal(false);
      expect(during.count).to.equal(null);
      // Not even the token current during the change is fresh.
      expect((await check(h.second, org, during.token)).fresh).to.equal(false);
      await h.first.endChange(freshnessKeys(org), 'change-1');
      const after = await check(h.second, org, during.token);
      expect(after.token).to.not.equal(during.token);
      expect(after.token).to.not.equal(before);
      expect(after.settled).to.equal(true);
      expect((await check(h.first, org, after.token)).fresh).to.equal(true);
    });

    it('two changes of one organisation at once: settled only when both ended', async () => {
      const org = randomUUID();
      await settledToken(h.first, org);
      await h.first.beginChange(freshnessKeys(org), 'a');
      await h.second.beginChange(freshnessKeys(org), 'b');
      await h.first.endChange(freshnessKeys(org), 'a');
      expect((await check(h.first, org, null)).settled).to.equal(false);
      await h.second.endChange(freshnessKeys(org), 'b');
      expect((await check(h.first, org, null)).settled).to.equal(true);
    });

    it('a change that never ends stops holding the organisation after the change bound', async () => {
      const org = randomUUID();
      await settledToken(h.first, org);
      await h.first.beginChange(freshnessKeys(org), 'lost');
      expect((await check(h.second, org, null)).settled).to.equal(false);
      await sleep(h.changeBoundMs + 100);
      const r = await check(h.second, org, null);
      expect(r.settled).to.equal(true);
      expect((await check(h.first, org, r.token)).fresh).to.equal(true);
    });

    it('organisations are independent: a change of one leaves the token of another', async () => {
      const a = randomUUID();
      const b = randomUUID();
      await settledToken(h.first, a);
      const tokenB = await settledToken(h.first, b);
      await h.first.beginChange(freshnessKeys(a), 'c');
      const rb = await check(h.second, b, tokenB);
      expect(rb).to.include({ token: tokenB, settled: true, fresh: true });
      await h.first.endChange(freshnessKeys(a), 'c');
    });

    it('after the store lost its data (FLUSHALL) no earlier token is current again, and nothing is settled for the change bound', async () => {
      const org = randomUUID();
      const seen = new Set<string>([await settledToken(h.first, org)]);
      for (let i = 0; i < 3; i++) {
        await h.flush();
        const r = await check(i % 2 === 0 ? h.first : h.second, org, [...seen][0] ?? null, 'if-fresh');
        expect(r.settled, 'settled right after the flush').to.equal(false);
        expect(r.fresh).to.equal(false);
        expect(r.count).to.equal(null);
        expect(seen.has(r.token), `token ${r.token} reused`).to.equal(false);
        seen.add(r.token);
      }
      const token = await settledToken(h.second, org);
      expect((await check(h.first, org, token)).fresh).to.equal(true);
    });

    it('changes begun or ended after a flush are still fenced', async () => {
      const org = randomUUID();
      await settledToken(h.first, org);
      await h.flush();
      await h.first.beginChange(freshnessKeys(org), 'x');
      await sleep(h.changeBoundMs + 100);
      // the begin re-created the data with a marker: settled again once both the marker and the data-loss bound passed
      const r = await check(h.second, org, null);
      expect(r.settled).to.equal(true);
      await h.first.endChange(freshnessKeys(org), 'x');
      expect((await check(h.second, org, r.token)).fresh).to.equal(false);
    });
  });
}
