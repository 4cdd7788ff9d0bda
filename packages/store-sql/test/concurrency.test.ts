/**
 * Concurrency on every dialect: unique constraints decide races (C-13), concurrent inserts lose
 * nothing, the count-then-insert cap holds inside units of work (C-25), and pages stay stable while
 * rows are inserted (C-6).
 */
import { ConflictError, type KeysetPosition, type Organisation } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { at, issuedKey, organisation } from './support/fixtures.js';
import { forEachTarget } from './support/targets.js';

forEachTarget('concurrency', (target) => {
  let store: SqlStore;
  beforeEach(async () => {
    store = await target.open();
  });
  afterEach(() => store.close());

  it('C-13: 200 concurrent creations with 20 duplicated slugs: one winner per slug, the rest ConflictError, nothing lost', async () => {
    const DUPLICATED = 20;
    const COPIES = 5; // 20 slugs x 5 attempts = 100 contested creations
    const contested: Organisation[] = [];
    for (let s = 0; s < DUPLICATED; s++) {
      for (let c = 0; c < COPIES; c++) contested.push(organisation({ slug: `contested-${s}`, createdAt: at(s * 10 + c) }));
    }
    const uncontested = Array.from({ length: 200 - contested.length }, (_, i) => organisation({ createdAt: at(1000 + i) }));
    const attempts = [...contested, ...uncontested].sort(() => Math.random() - 0.5);
    const results = await Promise.allSettled(attempts.map((o) => store.stores.organisations.create(o)));

    const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    for (const f of failures) {
      expect(f.reason, String(f.reason)).to.be.instanceOf(ConflictError);
      expect((f.reason as ConflictError).details).to.deep.equal([{ field: 'slug', issue: 'already taken' }]);
    }
    expect(failures).to.have.length(DUPLICATED * (COPIES - 1));

    const listed = await store.stores.organisations.list({ limit: 1000, after: null });
    expect(listed).to.have.length(200 - DUPLICATED * (COPIES - 1));
    const winners = attempts.filter((_, i) => results[i]!.status === 'fulfilled');
    expect(listed.map((o) => o.id).sort()).to.deep.equal(winners.map((o) => o.id).sort());
    for (let s = 0; s < DUPLICATED; s++) {
      expect(listed.filter((o) => o.slug === `contested-${s}`), `slug contested-${s}`).to.have.length(1);
    }
    for (const o of uncontested) expect(listed.some((l) => l.id === o.id), `uncontested ${o.slug}`).to.equal(true);
  });

  it('C-31: 200 concurrent key insertions give 200 distinct keys, all listed and all found by digest', async () => {
    const org = organisation();
    await store.stores.organisations.create(org);
    const keys = Array.from({ length: 200 }, (_, i) => issuedKey(org.id, { createdAt: at(i % 7) }).key);
    await Promise.all(keys.map((k) => store.stores.apiKeys.insert(k)));
    const listed = await store.stores.apiKeys.list(org.id, { limit: 1000, after: null });
    expect(listed).to.have.length(200);
    expect(new Set(listed.map((k) => k.id)).size).to.equal(200);
    expect(new Set(listed.map((k) => k.digest)).size).to.equal(200);
    expect(listed.map((k) => k.id).sort()).to.deep.equal(keys.map((k) => k.id).sort());
    const found = await Promise.all(keys.map((k) => store.stores.apiKeys.findCredential(k.digest)));
    expect(found.every((c, i) => c !== null && c.key.id === keys[i]!.id)).to.equal(true);
    expect(await store.stores.apiKeys.countActive(org.id, at(0))).to.equal(200);
  });

  it('C-25: 100 concurrent issuances through units of work against a cap of 30 insert exactly 30 (organisation row lock on Postgres)', async () => {
    const CAP = 30;
    const org = organisation();
    await store.stores.organisations.create(org);
    const outcomes = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        store.unitOfWork.run(async (tx) => {
          if ((await tx.apiKeys.countActive(org.id, at(0))) >= CAP) return 'refused';
          await tx.apiKeys.insert(issuedKey(org.id, { createdAt: at(i) }).key);
          return 'issued';
        }),
      ),
    );
    expect(outcomes.filter((o) => o === 'issued')).to.have.length(CAP);
    expect(await store.stores.apiKeys.countActive(org.id, at(0))).to.equal(CAP);
  });

  it('C-25: the cap of one organisation does not hold up issuance in another', async () => {
    const a = organisation();
    const b = organisation();
    await store.stores.organisations.create(a);
    await store.stores.organisations.create(b);
    const issue = (orgId: string, i: number) =>
      store.unitOfWork.run(async (tx) => {
        if ((await tx.apiKeys.countActive(orgId, at(0))) >= 5) return false;
        await tx.apiKeys.insert(issuedKey(orgId, { createdAt: at(i) }).key);
        return true;
      });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => issue(i % 2 === 0 ? a.id : b.id, i)));
    expect(results.filter(Boolean)).to.have.length(10);
    expect(await store.stores.apiKeys.countActive(a.id, at(0))).to.equal(5);
    expect(await store.stores.apiKeys.countActive(b.id, at(0))).to.equal(5);
  });

  it('C-6: paging while other callers insert concurrently never skips or repeats a record that existed at the start', async () => {
    const existing = Array.from({ length: 60 }, (_, i) => organisation({ createdAt: at(Math.floor(i / 3)) }));
    for (const o of existing) await store.stores.organisations.create(o);
    let inserting = true;
    let n = 0;
    const writer = (async () => {
      while (inserting && n < 500) {
        // New rows land anywhere after "now" of the walk: some share instants with existing rows.
        await store.stores.organisations.create(organisation({ createdAt: at(20 + (n % 15)) }));
        n += 1;
        // Yield to the event loop (a SQLite query completes within microtasks).
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const seen: string[] = [];
    let after: KeysetPosition | null = null;
    try {
      for (;;) {
        const page: Organisation[] = await store.stores.organisations.list({ limit: 7, after });
        seen.push(...page.map((o) => o.id));
        if (page.length < 7) break;
        const last = page[page.length - 1]!;
        after = { createdAt: last.createdAt, id: last.id };
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      inserting = false;
      await writer;
    }
    expect(n, 'the writer inserted while the pager walked').to.be.greaterThan(0);
    expect(new Set(seen).size, 'no record repeated').to.equal(seen.length);
    for (const o of existing) expect(seen, `existing ${o.id}`).to.include(o.id);
  });
});
