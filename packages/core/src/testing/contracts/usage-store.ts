/**
 * Contract suite of UsageStore: usage counts per key and hour, added in batches and read back
 * summed by hour or by UTC day, per key or per organisation, and purged past their retention.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { DAY_MS, HOUR_MS } from '../../domain/usage.js';
import type { UsageBucket, UsageRange } from '../../ports/usage-store.js';
import type { StoreHarnessFactory } from '../harness.js';
import { eachWithTwoOrganisations, newApiKey } from './fixtures.js';

/** 2026-03-01T00:00:00Z: midnight UTC, so hour and day buckets are easy to read. */
const DAY0 = Date.UTC(2026, 2, 1);
const hour = (n: number): Date => new Date(DAY0 + n * HOUR_MS);
const range = (since: Date, until: Date, granularity: UsageRange['granularity'] = 'hour'): UsageRange => ({ since, until, granularity });
const plain = (buckets: UsageBucket[]): Array<[string, number, number]> => buckets.map((b) => [b.start.toISOString(), b.requests, b.rateLimited]);

export function describeUsageStore(name: string, factory: StoreHarnessFactory): void {
  describe(`UsageStore contract: ${name}`, () => {
    const current = eachWithTwoOrganisations(factory);
    const usage = () => current().harness.stores.usage;
    const keyIn = async (organisationId: string): Promise<string> => {
      const k = newApiKey(organisationId);
      await current().harness.stores.apiKeys.insert(k);
      return k.id;
    };
    const ALL = range(hour(-48), hour(24 * 40));

    it('add creates a row per (key, hour) and adds to it later; forKey answers the hours with traffic, oldest first', async () => {
      const orgA = current().orgA.id;
      const k = await keyIn(orgA);
      await usage().add([
        { keyId: k, hourStart: hour(3), requests: 5, rateLimited: 1 },
        { keyId: k, hourStart: hour(1), requests: 2, rateLimited: 0 },
      ]);
      await usage().add([{ keyId: k, hourStart: hour(3), requests: 10, rateLimited: 4 }]);
      expect(plain(await usage().forKey(orgA, k, ALL))).to.deep.equal([
        [hour(1).toISOString(), 2, 0],
        [hour(3).toISOString(), 15, 5],
      ]);
    });

    it('counts of the same (key, hour) within one batch are summed; unknown key ids are ignored; an empty batch writes nothing', async () => {
      const orgA = current().orgA.id;
      const k = await keyIn(orgA);
      await usage().add([]);
      await usage().add([
        { keyId: k, hourStart: hour(0), requests: 1, rateLimited: 0 },
        { keyId: randomUUID(), hourStart: hour(0), requests: 7, rateLimited: 7 },
        { keyId: k, hourStart: hour(0), requests: 2, rateLimited: 3 },
      ]);
      expect(plain(await usage().forKey(orgA, k, ALL))).to.deep.equal([[hour(0).toISOString(), 3, 3]]);
      expect(plain(await usage().forOrganisation(orgA, ALL))).to.deep.equal([[hour(0).toISOString(), 3, 3]]);
    });

    it('the range holds hours starting at or after since and before until', async () => {
      const orgA = current().orgA.id;
      const k = await keyIn(orgA);
      await usage().add([0, 1, 2, 3].map((n) => ({ keyId: k, hourStart: hour(n), requests: n + 1, rateLimited: 0 })));
      expect(plain(await usage().forKey(orgA, k, range(hour(1), hour(3))))).to.deep.equal([
        [hour(1).toISOString(), 2, 0],
        [hour(2).toISOString(), 3, 0],
      ]);
      expect(await usage().forKey(orgA, k, range(hour(4), hour(9)))).to.deep.equal([]);
    });

    it('day granularity sums the hours of each UTC day, the bucket starting at midnight UTC', async () => {
      const orgA = current().orgA.id;
      const k = await keyIn(orgA);
      await usage().add([
        { keyId: k, hourStart: hour(-1), requests: 1, rateLimited: 0 },
        { keyId: k, hourStart: hour(0), requests: 2, rateLimited: 1 },
        { keyId: k, hourStart: hour(23), requests: 3, rateLimited: 2 },
        { keyId: k, hourStart: hour(24 * 3 + 5), requests: 4, rateLimited: 0 },
      ]);
      expect(plain(await usage().forKey(orgA, k, range(hour(-24), hour(24 * 5), 'day')))).to.deep.equal([
        [new Date(DAY0 - DAY_MS).toISOString(), 1, 0],
        [new Date(DAY0).toISOString(), 5, 3],
        [new Date(DAY0 + 3 * DAY_MS).toISOString(), 4, 0],
      ]);
    });

    it('forOrganisation sums every key of the organisation and nothing of another; forKey answers nothing for another organisation', async () => {
      const { orgA, orgB } = current();
      const a1 = await keyIn(orgA.id);
      const a2 = await keyIn(orgA.id);
      const b1 = await keyIn(orgB.id);
      await usage().add([
        { keyId: a1, hourStart: hour(2), requests: 4, rateLimited: 1 },
        { keyId: a2, hourStart: hour(2), requests: 6, rateLimited: 0 },
        { keyId: a2, hourStart: hour(5), requests: 1, rateLimited: 0 },
        { keyId: b1, hourStart: hour(2), requests: 100, rateLimited: 100 },
      ]);
      expect(plain(await usage().forOrganisation(orgA.id, ALL))).to.deep.equal([
        [hour(2).toISOString(), 10, 1],
        [hour(5).toISOString(), 1, 0],
      ]);
      expect(plain(await usage().forOrganisation(orgA.id, range(hour(0), hour(24), 'day')))).to.deep.equal([[hour(0).toISOString(), 11, 1]]);
      expect(plain(await usage().forOrganisation(orgB.id, ALL))).to.deep.equal([[hour(2).toISOString(), 100, 100]]);
      expect(await usage().forKey(orgB.id, a1, ALL)).to.deep.equal([]);
    });

    it('an hour with only refused requests is a bucket (rate_limited alone is traffic)', async () => {
      const orgA = current().orgA.id;
      const k = await keyIn(orgA);
      await usage().add([{ keyId: k, hourStart: hour(7), requests: 0, rateLimited: 9 }]);
      expect(plain(await usage().forKey(orgA, k, ALL))).to.deep.equal([[hour(7).toISOString(), 0, 9]]);
    });

    it('large counts and a batch of 1200 keys are written whole (one JSON parameter, no bound-parameter limit)', async () => {
      const orgA = current().orgA.id;
      const keys: string[] = [];
      for (let i = 0; i < 1200; i++) keys.push(await keyIn(orgA));
      await usage().add(keys.map((keyId, i) => ({ keyId, hourStart: hour(i % 3), requests: 1_000_000 + i, rateLimited: i })));
      await usage().add([{ keyId: keys[0]!, hourStart: hour(0), requests: 3_000_000_000, rateLimited: 0 }]);
      const sums = [0, 1, 2].map((h) => keys.reduce((s, _k, i) => (i % 3 === h ? s + 1_000_000 + i : s), h === 0 ? 3_000_000_000 : 0));
      const limited = [0, 1, 2].map((h) => keys.reduce((s, _k, i) => (i % 3 === h ? s + i : s), 0));
      expect(plain(await usage().forOrganisation(orgA, ALL))).to.deep.equal([0, 1, 2].map((h) => [hour(h).toISOString(), sums[h], limited[h]]));
      expect(plain(await usage().forKey(orgA, keys[0]!, ALL))).to.deep.equal([[hour(0).toISOString(), 3_001_000_000, 0]]);
    });

    it('purge deletes the hours that started before the bound and answers how many', async () => {
      const orgA = current().orgA.id;
      const k = await keyIn(orgA);
      const other = await keyIn(orgA);
      await usage().add([
        { keyId: k, hourStart: hour(0), requests: 1, rateLimited: 0 },
        { keyId: other, hourStart: hour(0), requests: 1, rateLimited: 0 },
        { keyId: k, hourStart: hour(1), requests: 2, rateLimited: 0 },
        { keyId: k, hourStart: hour(2), requests: 3, rateLimited: 0 },
      ]);
      expect(await usage().purge(hour(1))).to.equal(2);
      expect(await usage().purge(hour(1))).to.equal(0);
      expect(plain(await usage().forOrganisation(orgA, ALL))).to.deep.equal([
        [hour(1).toISOString(), 2, 0],
        [hour(2).toISOString(), 3, 0],
      ]);
    });
  });
}
