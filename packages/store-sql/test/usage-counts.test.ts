/**
 * Usage counts through the real core on SQLite and Postgres, with a FakeClock: requests admitted
 * over the HTTP path (Admission.admit) are counted per key and hour, answered or refused with 429,
 * and written with the last uses: one upsert statement for every key per flush, never one per
 * request; two instances on one database add up.
 */
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { createTestCore, FakeClock } from '@cos/core/testing';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { forEachTarget } from './support/targets.js';

const HOUR = 3_600_000;
const bearer = (raw: string): string => `Bearer ${raw}`;

forEachTarget('usage counts', (target) => {
  let store: SqlStore;
  beforeEach(async () => {
    store = await target.open();
  });
  afterEach(async () => {
    await store.close();
  });

  it('admitted requests are counted per key and hour (429s as rate_limited); one upsert per flush carries every key', async () => {
    const clock = new FakeClock('2026-06-10T12:00:00.000Z');
    const tc = createTestCore({ store, clock, config: { rateLimitPerMinute: 30 } });
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${Math.random().toString(36).slice(2, 10)}` });
    const keys = await Promise.all(Array.from({ length: 5 }, (_, i) => tc.core.apiKeys.issue(OPERATOR, org.id, { label: `k${i}` })));
    const statements: string[] = [];
    const stop = store.onStatement((q) => statements.push(q.sql));
    const refused: Record<string, number> = {};
    try {
      for (let round = 0; round < 8; round++) {
        for (const k of keys) {
          const result = await tc.core.admission.admit(bearer(k.rawKey), '192.0.2.1');
          expect(result.admitted).to.equal(true);
          if (!result.decision.allowed) refused[k.key.id] = (refused[k.key.id] ?? 0) + 1;
        }
        await tc.core.keyUsage.flushIfDue();
        clock.advance(100);
      }
      const usageWrites = (): string[] => statements.filter((s) => /^\s*insert into key_usage/i.test(s));
      expect(usageWrites().length, 'the first uses, in batches; never one per request').to.be.within(1, 3);
      const before = usageWrites().length;
      await tc.core.keyUsage.flush();
      expect(usageWrites(), 'everything pending in ONE statement').to.have.length(before + 1);
      await tc.core.keyUsage.flush();
      expect(usageWrites(), 'nothing pending: no statement').to.have.length(before + 1);
    } finally {
      stop();
    }
    // 40 requests in one minute for an organisation limit of 30: the last 10 were refused.
    expect(Object.values(refused).reduce((a, b) => a + b, 0)).to.equal(10);
    const range = { since: new Date('2026-06-10T00:00:00Z'), until: new Date('2026-06-11T00:00:00Z'), granularity: 'hour' as const };
    for (const k of keys) {
      const limited = refused[k.key.id] ?? 0;
      expect(await store.stores.usage.forKey(org.id, k.key.id, range), k.key.label).to.deep.equal([
        { start: new Date('2026-06-10T12:00:00.000Z'), requests: 8 - limited, rateLimited: limited },
      ]);
    }
    expect(await store.stores.usage.forOrganisation(org.id, { ...range, granularity: 'day' })).to.deep.equal([
      { start: new Date('2026-06-10T00:00:00.000Z'), requests: 30, rateLimited: 10 },
    ]);
  });

  // Two instances need one database two stores can open: a SQLite file or Postgres (not :memory:).
  if (target.name === 'SQLite (:memory:)') return;
  it('two instances on one database: each adds its own counts, the sum is every request', async () => {
    const clock = new FakeClock('2026-06-10T12:59:59.000Z');
    const a = createTestCore({ store, clock });
    const org = await a.core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${Math.random().toString(36).slice(2, 10)}` });
    const k = await a.core.apiKeys.issue(OPERATOR, org.id, { label: 'shared' });
    const second: SqlStore = target.dialect === 'postgres'
      ? createSqlStore({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: (await store.query<{ s: string }>('SELECT current_schema() AS s'))[0]!.s })
      : createSqlStore({ databaseUrl: (await store.query<{ file: string }>("SELECT file FROM pragma_database_list WHERE name = 'main'")).map((r) => `sqlite:${r.file}`)[0]! });
    try {
      const b = createTestCore({ store: second, clock: new FakeClock(clock.now()) });
      for (let i = 0; i < 3; i++) await a.core.admission.admit(bearer(k.rawKey), '192.0.2.1');
      b.clock.advance(2_000); // 13:00:01: the next hour
      for (let i = 0; i < 4; i++) await b.core.admission.admit(bearer(k.rawKey), '192.0.2.2');
      await b.core.keyUsage.flush();
      await a.core.keyUsage.flush();
      for (let i = 0; i < 2; i++) await a.core.admission.admit(bearer(k.rawKey), '192.0.2.1');
      await a.core.keyUsage.stop();
      await b.core.keyUsage.stop();
      const range = { since: new Date('2026-06-10T00:00:00Z'), until: new Date('2026-06-11T00:00:00Z') };
      expect(await store.stores.usage.forKey(org.id, k.key.id, { ...range, granularity: 'hour' })).to.deep.equal([
        { start: new Date('2026-06-10T12:00:00.000Z'), requests: 5, rateLimited: 0 },
        { start: new Date(Date.parse('2026-06-10T12:00:00.000Z') + HOUR), requests: 4, rateLimited: 0 },
      ]);
    } finally {
      await second.close();
    }
  });
});
