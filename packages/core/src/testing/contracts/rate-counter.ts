/** Contract suite of RateCounter (C-50, C-51, C-55): the in-process and the Redis counter. */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { CounterHarness } from '../harness.js';
import { counterKey, keyCounterKey } from '../../access/counter-keys.js';

const MINUTE = 60_000;
/** Long enough that nothing expires during a test. */
const TTL = 120_000;

export function describeRateCounter(name: string, factory: () => Promise<CounterHarness>): void {
  describe(`RateCounter contract: ${name}`, () => {
    let harness: CounterHarness;
    // Scopes are unique per test, so a shared backing store (one Redis) never leaks counts between runs.
    let scope: (label: string) => string;
    // A window start in the current UTC minute, as core computes it.
    let window: number;

    beforeEach(async () => {
      harness = await factory();
      const run = randomUUID();
      scope = (label) => `${label}:${run}`;
      window = Math.floor(Date.now() / MINUTE) * MINUTE;
    });

    afterEach(async () => {
      await harness.close();
    });

    // hit() answers a number (in-process) or a promise of one (Redis): `await` and Promise.all take both.
    const hit = (s: string, w: number = window, ttl: number = TTL) => harness.counter.hit(counterKey(s, w), ttl);

    it('C-50: the first hit of a window returns 1', async () => {
      expect(await hit(scope('organisation'))).to.equal(1);
    });

    it('C-51: each hit increments the count of its window by one', async () => {
      const s = scope('organisation');
      const counts: number[] = [];
      for (let i = 0; i < 65; i++) counts.push(await hit(s));
      expect(counts).to.deep.equal(Array.from({ length: 65 }, (_, i) => i + 1));
    });

    it('C-50: scopes are counted independently, including look-alike scopes', async () => {
      const scopes = ['org:a', 'org:b', 'org:a:', 'unauthenticated', 'source:::1', 'source:127.0.0.1', 'Org:A', 'org a', 'ß-ünï'].map(
        scope,
      );
      for (let i = 0; i < 3; i++) await hit(scopes[0]!);
      const firsts = [];
      for (const s of scopes.slice(1)) firsts.push(await hit(s));
      expect(firsts).to.deep.equal(scopes.slice(1).map(() => 1));
      expect(await hit(scopes[0]!)).to.equal(4);
      expect(await hit(scopes[1]!)).to.equal(2);
    });

    it('C-50: windows of one scope are counted independently (a new minute starts at 1)', async () => {
      const s = scope('organisation');
      expect(await hit(s, window)).to.equal(1);
      expect(await hit(s, window)).to.equal(2);
      expect(await hit(s, window + MINUTE)).to.equal(1);
      expect(await hit(s, window - MINUTE)).to.equal(1);
      expect(await hit(s, window)).to.equal(3);
      expect(await hit(s, window + MINUTE)).to.equal(2);
    });

    it('C-51, C-55: 100 concurrent hits return the counts 1..100, each exactly once', async () => {
      const s = scope('organisation');
      const counts = await Promise.all(Array.from({ length: 100 }, () => hit(s)));
      expect([...counts].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 100 }, (_, i) => i + 1));
      expect(await hit(s)).to.equal(101);
    });

    it('C-50: concurrent hits on several scopes keep each count exact', async () => {
      const scopes = [scope('a'), scope('b'), scope('c')];
      const counts = await Promise.all(Array.from({ length: 60 }, (_, i) => hit(scopes[i % 3]!)));
      for (let k = 0; k < 3; k++) {
        const mine = counts.filter((_, i) => i % 3 === k).sort((a, b) => a - b);
        expect(mine, `scope ${k}`).to.deep.equal(Array.from({ length: 20 }, (_, i) => i + 1));
      }
    });

    it('C-51: a hit of n counts n at once and answers the count including all of them', async () => {
      const s = scope('batched');
      const hitBy = (n: number) => harness.counter.hit(counterKey(s, window), TTL, n);
      expect(await hitBy(5)).to.equal(5);
      expect(await hit(s)).to.equal(6);
      expect(await hitBy(1)).to.equal(7);
      expect(await hitBy(3)).to.equal(10);
    });

    it('C-51, C-55: concurrent hits of n and of one add up exactly, each answer a distinct total', async () => {
      const s = scope('batched');
      const sizes = Array.from({ length: 30 }, (_, i) => (i % 4) + 1);
      const answers = await Promise.all(sizes.map((n) => harness.counter.hit(counterKey(s, window), TTL, n)));
      const total = sizes.reduce((a, b) => a + b, 0);
      // Each answer a and its n cover the counts a-n+1..a: together every count 1..total exactly once.
      const covered = answers.flatMap((a, i) => Array.from({ length: sizes[i]! }, (_, k) => a - k));
      expect(covered.sort((a, b) => a - b)).to.deep.equal(Array.from({ length: total }, (_, i) => i + 1));
    });

    describe('hitGuarded: key windows counted first, in the same step (C-292)', () => {
      const guarded = (org: string, n: number, keys: { keyId: string; limit: number; hits: number }[]) => {
        if (harness.counter.hitGuarded === undefined) throw new Error(`${name} has no hitGuarded`);
        return harness.counter.hitGuarded(
          counterKey(`org:${org}`, window),
          TTL,
          n,
          keys.map((k) => ({ counterKey: keyCounterKey(org, k.keyId, window), limit: k.limit, hits: k.hits })),
        );
      };

      it('C-292: hits under the key limit count against the organisation; those over it count only in the key window', async () => {
        const org = scope('org');
        expect(await guarded(org, 3, [{ keyId: 'a', limit: 2, hits: 3 }])).to.deep.equal({ count: 2, keyCounts: [3] });
        // Nothing admitted: the organisation's current count, unchanged.
        expect(await guarded(org, 1, [{ keyId: 'a', limit: 2, hits: 1 }])).to.deep.equal({ count: 2, keyCounts: [4] });
        expect(await hit(`org:${org}`)).to.equal(3);
        // Two keys and two requests without a key window: 2 + 1 (b: 1 of 2 under its limit of 1) + 2.
        expect(await guarded(org, 6, [{ keyId: 'a', limit: 10, hits: 2 }, { keyId: 'b', limit: 1, hits: 2 }])).to.deep.equal({ count: 8, keyCounts: [6, 2] });
      });

      it("C-292: a hit refused by its key answers the organisation's count so far, counting nothing there", async () => {
        const org = scope('org');
        expect(await guarded(org, 1, [{ keyId: 'k', limit: 1, hits: 1 }])).to.deep.equal({ count: 1, keyCounts: [1] });
        const other = scope('other');
        await guarded(other, 1, [{ keyId: 'k', limit: 1, hits: 1 }]);
        expect(await guarded(other, 1, [{ keyId: 'k', limit: 1, hits: 1 }])).to.deep.equal({ count: 1, keyCounts: [2] });
      });

      it('C-292, C-55: 40 concurrent guarded hits of one key limited to 25: exactly 25 reach the organisation', async () => {
        const org = scope('org');
        const answers = await Promise.all(Array.from({ length: 40 }, () => guarded(org, 1, [{ keyId: 'k', limit: 25, hits: 1 }])));
        expect(answers.map((a) => a.keyCounts[0]).sort((a, b) => a! - b!)).to.deep.equal(Array.from({ length: 40 }, (_, i) => i + 1));
        expect(await hit(`org:${org}`)).to.equal(26);
      });
    });

    it('C-50: a first hit of n gives the window its ttl', async function () {
      this.timeout(5000);
      const s = scope('ttl');
      expect(await harness.counter.hit(counterKey(s, window), 1000, 4)).to.equal(4);
      await sleep(1300);
      expect(await hit(s, window, 1000), 'forgotten after the ttl').to.equal(1);
    });

    it('C-50: a window is kept for its ttl and forgotten after it', async function () {
      this.timeout(5000);
      const s = scope('ttl');
      expect(await hit(s, window, 1000)).to.equal(1);
      expect(await hit(s, window, 1000), 'still counting within the ttl').to.equal(2);
      await sleep(1300);
      expect(await hit(s, window, 1000), 'forgotten after the ttl').to.equal(1);
      expect(await hit(s, window, 1000)).to.equal(2);
    });

    it('C-50: a short ttl on one window leaves other windows and scopes alone', async function () {
      this.timeout(5000);
      const s = scope('ttl');
      const other = scope('long');
      await hit(s, window, 500);
      await hit(s, window + MINUTE, TTL);
      await hit(other, window, TTL);
      await sleep(800);
      expect(await hit(s, window, 500)).to.equal(1);
      expect(await hit(s, window + MINUTE, TTL)).to.equal(2);
      expect(await hit(other, window, TTL)).to.equal(2);
    });
  });
}
