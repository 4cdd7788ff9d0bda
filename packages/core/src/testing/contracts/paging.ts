/**
 * The keyset-paging rules every list of every store must obey (C-6, C-7), written once and run
 * for organisations, members, API keys and audit entries.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { KeysetPosition, PageRequest } from '../../ports/pagination.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { ascendingIds, at } from './fixtures.js';

/** One list under test, inside one scope (an organisation, or the whole store). */
interface PagingScope {
  /** Inserts one record at that keyset position. */
  insert(createdAt: Date, id: string): Promise<void>;
  /** One page, reduced to keyset positions. */
  list(page: PageRequest): Promise<KeysetPosition[]>;
}

/** Prepares a scope in a fresh store (e.g. creates the owning organisation). */
export type PagingSubject = (harness: StoreHarness) => Promise<PagingScope>;

const show = (p: KeysetPosition): string => `${p.createdAt.toISOString()}/${p.id}`;
const showAll = (ps: readonly KeysetPosition[]): string[] => ps.map(show);

function sortedPositions(ps: readonly KeysetPosition[]): KeysetPosition[] {
  return [...ps].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

async function insertAll(scope: PagingScope, ps: readonly KeysetPosition[]): Promise<void> {
  for (const p of ps) await scope.insert(p.createdAt, p.id);
}

/** Follows pages of `limit` from the start; `between` runs after every page (to insert concurrently). */
async function walk(
  scope: PagingScope,
  limit: number,
  between: (pageNumber: number) => Promise<void> = async () => undefined,
): Promise<KeysetPosition[]> {
  const seen: KeysetPosition[] = [];
  let after: KeysetPosition | null = null;
  for (let pageNumber = 0; pageNumber < 100; pageNumber++) {
    const page: KeysetPosition[] = await scope.list({ limit, after });
    expect(page.length, 'a page never exceeds its limit').to.be.at.most(limit);
    seen.push(...page);
    if (page.length < limit) return seen;
    after = page[page.length - 1]!;
    await between(pageNumber);
  }
  expect.fail('paging did not terminate within 100 pages');
}

export function describeKeysetPaging(what: string, factory: StoreHarnessFactory, subject: PagingSubject): void {
  describe(`${what}: keyset pagination (C-6, C-7)`, () => {
    let harness: StoreHarness;
    let scope: PagingScope;

    beforeEach(async () => {
      harness = await factory();
      scope = await subject(harness);
    });

    afterEach(async () => {
      await harness.close();
    });

    it('C-7: an empty list is an empty array', async () => {
      expect(await scope.list({ limit: 20, after: null })).to.deep.equal([]);
    });

    it('C-7: records come oldest first (createdAt, then id) whatever the insertion order, at ms precision', async () => {
      const ids = ascendingIds(6);
      const positions: KeysetPosition[] = [
        { createdAt: at(2000), id: ids[0]! },
        { createdAt: at(1), id: ids[5]! },
        { createdAt: at(0), id: ids[3]! },
        { createdAt: at(1), id: ids[1]! },
        { createdAt: at(-60_000), id: ids[4]! },
        { createdAt: at(999), id: ids[2]! },
      ];
      await insertAll(scope, positions);
      const listed = await scope.list({ limit: 100, after: null });
      expect(showAll(listed)).to.deep.equal(showAll(sortedPositions(positions)));
    });

    it('C-6: the limit is respected', async () => {
      const positions = [0, 1, 2, 3, 4].map((i) => ({ createdAt: at(i * 1000), id: randomUUID() }));
      await insertAll(scope, positions);
      const expected = showAll(sortedPositions(positions));
      expect(showAll(await scope.list({ limit: 1, after: null }))).to.deep.equal(expected.slice(0, 1));
      expect(showAll(await scope.list({ limit: 3, after: null }))).to.deep.equal(expected.slice(0, 3));
      expect(showAll(await scope.list({ limit: 5, after: null }))).to.deep.equal(expected);
      expect(showAll(await scope.list({ limit: 100, after: null }))).to.deep.equal(expected);
    });

    it('C-6: `after` an existing record starts strictly after it', async () => {
      const positions = sortedPositions([0, 1, 2, 3, 4].map((i) => ({ createdAt: at(i * 10), id: randomUUID() })));
      await insertAll(scope, positions);
      const listed = await scope.list({ limit: 100, after: positions[2]! });
      expect(showAll(listed)).to.deep.equal(showAll(positions.slice(3)));
      const last = await scope.list({ limit: 100, after: positions[4]! });
      expect(last, 'nothing after the last record').to.deep.equal([]);
    });

    it('C-6: `after` a position that matches no record starts at the next record', async () => {
      const positions = sortedPositions([0, 1, 2, 3].map((i) => ({ createdAt: at(i * 1000), id: randomUUID() })));
      await insertAll(scope, positions);
      const between = { createdAt: at(1500), id: randomUUID() };
      expect(showAll(await scope.list({ limit: 100, after: between }))).to.deep.equal(showAll(positions.slice(2)));
      const before = { createdAt: at(-1), id: randomUUID() };
      expect(showAll(await scope.list({ limit: 100, after: before }))).to.deep.equal(showAll(positions));
    });

    it('C-7: ties on createdAt are broken by id; the keyset is the pair, not either half', async () => {
      const [i0, i1, i2, i3, i4, i5] = ascendingIds(6) as [string, string, string, string, string, string];
      const t0 = at(0);
      const t1 = at(1);
      const t2 = at(2);
      const positions: KeysetPosition[] = [
        { createdAt: t1, id: i2 },
        { createdAt: t1, id: i4 },
        { createdAt: t1, id: i0 },
        { createdAt: t0, id: i5 }, // earlier time, highest id
        { createdAt: t2, id: i1 }, // later time, low id
        { createdAt: t1, id: i3 },
      ];
      await insertAll(scope, positions);
      const all = await scope.list({ limit: 100, after: null });
      expect(showAll(all)).to.deep.equal(
        showAll([
          { createdAt: t0, id: i5 },
          { createdAt: t1, id: i0 },
          { createdAt: t1, id: i2 },
          { createdAt: t1, id: i3 },
          { createdAt: t1, id: i4 },
          { createdAt: t2, id: i1 },
        ]),
      );
      expect(showAll(await scope.list({ limit: 100, after: { createdAt: t1, id: i2 } }))).to.deep.equal(
        showAll([
          { createdAt: t1, id: i3 },
          { createdAt: t1, id: i4 },
          { createdAt: t2, id: i1 },
        ]),
      );
      expect(showAll(await scope.list({ limit: 100, after: { createdAt: t1, id: i4 } }))).to.deep.equal(
        showAll([{ createdAt: t2, id: i1 }]),
      );
      expect(showAll(await scope.list({ limit: 2, after: { createdAt: t0, id: i5 } }))).to.deep.equal(
        showAll([
          { createdAt: t1, id: i0 },
          { createdAt: t1, id: i2 },
        ]),
      );
    });

    it('C-6: following pages visits every record exactly once, in order, whatever the page size', async () => {
      const ids = ascendingIds(7);
      // Three share one instant, so page boundaries fall inside a tie.
      const positions = sortedPositions(ids.map((id, i) => ({ createdAt: at(i < 3 ? 0 : i * 7), id })));
      await insertAll(scope, positions);
      for (const limit of [1, 2, 3, 7, 8]) {
        expect(showAll(await walk(scope, limit)), `pages of ${limit}`).to.deep.equal(showAll(positions));
      }
    });

    it('C-6: records inserted during paging (later createdAt) never make the pager skip or repeat a record', async () => {
      const ids = ascendingIds(9);
      const existing = sortedPositions(ids.map((id, i) => ({ createdAt: at(i % 3 === 0 ? 0 : i * 5), id })));
      await insertAll(scope, existing);
      const added: KeysetPosition[] = [];
      const seen = await walk(scope, 2, async (pageNumber) => {
        if (pageNumber > 5) return;
        // Later createdAt than anything existing, and ids in both directions of the existing ones.
        for (const id of [randomUUID(), `00000000-0000-4000-8000-${String(pageNumber).padStart(12, '0')}`]) {
          const p = { createdAt: at(3_600_000 + pageNumber), id };
          await scope.insert(p.createdAt, p.id);
          added.push(p);
        }
      });
      const seenKeys = showAll(seen);
      expect(new Set(seenKeys).size, 'no record is listed twice').to.equal(seenKeys.length);
      expect(seenKeys.slice(0, existing.length), 'every existing record, once, in order').to.deep.equal(showAll(existing));
      expect(seenKeys.slice(existing.length).every((k) => showAll(added).includes(k)), 'only new records follow').to.equal(
        true,
      );
      expect(showAll(sortedPositions(seen)), 'the whole walk is in keyset order').to.deep.equal(seenKeys);
    });

    it('C-6: the position of a record is exactly what a later page continues from (ms preserved)', async () => {
      const positions = sortedPositions([0, 1, 2].map((i) => ({ createdAt: at(i), id: randomUUID() })));
      await insertAll(scope, positions);
      const first = await scope.list({ limit: 1, after: null });
      expect(first).to.have.length(1);
      expect(first[0]!.createdAt.getTime()).to.equal(positions[0]!.createdAt.getTime());
      const next = await scope.list({ limit: 1, after: first[0]! });
      expect(showAll(next)).to.deep.equal(showAll(positions.slice(1, 2)));
    });
  });
}
