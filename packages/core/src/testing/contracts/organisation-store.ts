/** Contract suite of OrganisationStore (C-13, C-20, C-24; paging C-6, C-7). */
import { expect } from 'chai';
import type { Organisation } from '../../domain/organisation.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { T0, ascendingIds, at, expectConflict, expectSameInstant, newOrganisation, storePorts } from './fixtures.js';
import { describeKeysetPaging } from './paging.js';

/** Every field, compared by value (Dates at the millisecond). */
export function expectOrganisation(actual: Organisation | null, expected: Organisation): void {
  expect(actual, `organisation ${expected.id}`).to.not.equal(null);
  const o = actual as Organisation;
  expect(o.id).to.equal(expected.id);
  expect(o.name).to.equal(expected.name);
  expect(o.slug).to.equal(expected.slug);
  expect(o.industrySection).to.equal(expected.industrySection);
  expect(o.isSystem).to.equal(expected.isSystem);
  expect(o.rateLimitPerMinute).to.equal(expected.rateLimitPerMinute);
  expectSameInstant(o.createdAt, expected.createdAt, 'createdAt');
  expectSameInstant(o.updatedAt, expected.updatedAt, 'updatedAt');
  expect(Object.keys(o).sort()).to.deep.equal(
    ['createdAt', 'id', 'industrySection', 'isSystem', 'name', 'rateLimitPerMinute', 'slug', 'updatedAt'],
    'no other fields',
  );
}

export function describeOrganisationStore(name: string, factory: StoreHarnessFactory): void {
  describe(`OrganisationStore contract: ${name}`, () => {
    let harness: StoreHarness;

    beforeEach(async () => {
      harness = await factory();
    });

    afterEach(async () => {
      await harness.close();
    });

    const organisations = () => storePorts(harness).organisations;

    describe('create and findById', () => {
      it('C-20: round-trips every field: ms timestamps, boolean isSystem false, null industrySection', async () => {
        const o = newOrganisation({ createdAt: at(0), updatedAt: at(1) });
        await organisations().create(o);
        const found = await organisations().findById(o.id);
        expectOrganisation(found, o);
        expect(found!.isSystem).to.be.a('boolean');
        expect(found!.industrySection).to.equal(null);
      });

      it('C-20, C-24: round-trips isSystem true and an industry section letter', async () => {
        const o = newOrganisation({ isSystem: true, industrySection: 'J', createdAt: at(-999), updatedAt: at(7_777) });
        await organisations().create(o);
        const found = await organisations().findById(o.id);
        expectOrganisation(found, o);
        expect(found!.isSystem).to.equal(true);
      });

      it('C-240: round-trips an organisation\'s own rate limit (1 and 1,000,000) and no limit (null)', async () => {
        const low = newOrganisation({ rateLimitPerMinute: 1 });
        const high = newOrganisation({ rateLimitPerMinute: 1_000_000 });
        const none = newOrganisation();
        for (const o of [low, high, none]) await organisations().create(o);
        expectOrganisation(await organisations().findById(low.id), low);
        expectOrganisation(await organisations().findById(high.id), high);
        expect((await organisations().findById(none.id))!.rateLimitPerMinute).to.equal(null);
      });

      it('C-20: round-trips a name with non-ASCII characters and 200 characters', async () => {
        const long = newOrganisation({ name: 'x'.repeat(200) });
        const unicode = newOrganisation({ name: 'Ærø Fiskeri & Søn — Ελληνικά 日本 🚀' });
        await organisations().create(long);
        await organisations().create(unicode);
        expectOrganisation(await organisations().findById(long.id), long);
        expectOrganisation(await organisations().findById(unicode.id), unicode);
      });

      it('an unknown id is null', async () => {
        await organisations().create(newOrganisation());
        expect(await organisations().findById('6f1c2d9e-8a4b-4c3d-9e2f-1a2b3c4d5e6f')).to.equal(null);
      });

      it('returns a copy: mutating a returned record or the created input changes nothing stored', async () => {
        const input = newOrganisation({ createdAt: at(5), updatedAt: at(5) });
        const original = { ...input, createdAt: new Date(input.createdAt), updatedAt: new Date(input.updatedAt) };
        await organisations().create(input);
        (input as { name: string }).name = 'changed after create';
        input.createdAt.setTime(0);
        const found = await organisations().findById(original.id);
        expectOrganisation(found, original);
        (found as { name: string }).name = 'changed after read';
        found!.updatedAt.setTime(0);
        expectOrganisation(await organisations().findById(original.id), original);
      });
    });

    describe('slug uniqueness (C-13)', () => {
      it('C-13: a duplicate slug throws ConflictError [{field:"slug", issue:"already taken"}]', async () => {
        const first = newOrganisation({ slug: 'acme' });
        await organisations().create(first);
        const error = await expectConflict(organisations().create(newOrganisation({ slug: 'acme' })), 'slug', 'already taken');
        expect(error.details).to.deep.equal([{ field: 'slug', issue: 'already taken' }]);
      });

      it('C-13: a rejected duplicate changes nothing', async () => {
        const first = newOrganisation({ slug: 'acme', name: 'First' });
        await organisations().create(first);
        const second = newOrganisation({ slug: 'acme', name: 'Second', isSystem: true, createdAt: at(-1000) });
        await expectConflict(organisations().create(second), 'slug');
        expect(await organisations().findById(second.id)).to.equal(null);
        expectOrganisation(await organisations().findById(first.id), first);
        const all = await organisations().list({ limit: 100, after: null });
        expect(all.map((o) => o.id)).to.deep.equal([first.id]);
        expect(await organisations().findFirstSystem()).to.equal(null);
      });

      it('C-13: distinct slugs coexist, including ones that differ only by a hyphen or digit', async () => {
        const slugs = ['acme', 'acme-1', 'acme1', 'a-cme'];
        for (const slug of slugs) await organisations().create(newOrganisation({ slug }));
        const all = await organisations().list({ limit: 100, after: null });
        expect(all.map((o) => o.slug).sort()).to.deep.equal([...slugs].sort());
      });
    });

    describe('update', () => {
      it('changes the name and updatedAt only, and returns the stored record', async () => {
        const o = newOrganisation({ industrySection: 'C', createdAt: at(0), updatedAt: at(0) });
        await organisations().create(o);
        const updated = await organisations().update(o.id, { name: 'Renamed Ltd', updatedAt: at(60_001) });
        const expected = { ...o, name: 'Renamed Ltd', updatedAt: at(60_001) };
        expectOrganisation(updated, expected);
        expectOrganisation(await organisations().findById(o.id), expected);
      });

      it('C-24: sets an industry section and clears it with null; an absent section is left alone', async () => {
        const o = newOrganisation();
        await organisations().create(o);
        expectOrganisation(await organisations().update(o.id, { industrySection: 'U', updatedAt: at(10) }), {
          ...o,
          industrySection: 'U',
          updatedAt: at(10),
        });
        expectOrganisation(await organisations().update(o.id, { name: 'Still U', updatedAt: at(20) }), {
          ...o,
          name: 'Still U',
          industrySection: 'U',
          updatedAt: at(20),
        });
        expectOrganisation(await organisations().update(o.id, { industrySection: null, updatedAt: at(30) }), {
          ...o,
          name: 'Still U',
          industrySection: null,
          updatedAt: at(30),
        });
        expectOrganisation(await organisations().findById(o.id), { ...o, name: 'Still U', industrySection: null, updatedAt: at(30) });
      });

      it('C-240: sets a rate limit, changes it, clears it with null; an absent limit is left alone', async () => {
        const o = newOrganisation();
        await organisations().create(o);
        expectOrganisation(await organisations().update(o.id, { rateLimitPerMinute: 600, updatedAt: at(10) }), { ...o, rateLimitPerMinute: 600, updatedAt: at(10) });
        expectOrganisation(await organisations().update(o.id, { name: 'Still 600', updatedAt: at(20) }), {
          ...o,
          name: 'Still 600',
          rateLimitPerMinute: 600,
          updatedAt: at(20),
        });
        expectOrganisation(await organisations().update(o.id, { rateLimitPerMinute: 1_000_000, updatedAt: at(25) }), {
          ...o,
          name: 'Still 600',
          rateLimitPerMinute: 1_000_000,
          updatedAt: at(25),
        });
        expectOrganisation(await organisations().update(o.id, { rateLimitPerMinute: null, updatedAt: at(30) }), {
          ...o,
          name: 'Still 600',
          updatedAt: at(30),
        });
        expectOrganisation(await organisations().findById(o.id), { ...o, name: 'Still 600', updatedAt: at(30) });
      });

      it('with only updatedAt changes only updatedAt; slug, isSystem and createdAt never change', async () => {
        const o = newOrganisation({ isSystem: true, industrySection: 'A', rateLimitPerMinute: 5 });
        await organisations().create(o);
        const updated = await organisations().update(o.id, { updatedAt: at(86_400_000) });
        expectOrganisation(updated, { ...o, updatedAt: at(86_400_000) });
      });

      it('an unknown id returns null and creates nothing', async () => {
        const o = newOrganisation();
        await organisations().create(o);
        const result = await organisations().update('0d9f6a4e-3c2b-4a1d-8e7f-6a5b4c3d2e1f', { name: 'Ghost', updatedAt: at(1) });
        expect(result).to.equal(null);
        const all = await organisations().list({ limit: 100, after: null });
        expect(all).to.have.length(1);
        expectOrganisation(all[0]!, o);
      });

      it('affects only the named organisation', async () => {
        const a = newOrganisation();
        const b = newOrganisation();
        await organisations().create(a);
        await organisations().create(b);
        await organisations().update(a.id, { name: 'Only A', industrySection: 'K', updatedAt: at(5) });
        expectOrganisation(await organisations().findById(b.id), b);
      });
    });

    describe('key policy (C-62)', () => {
      const strict = { maxLifetimeSeconds: 7_776_000, allowedEnvironments: ['live'], exposureResponse: 'revoke_key_and_descendants', expiryNoticeSeconds: 0 } as const;

      it('C-62: null for an organisation that never set one, and for an unknown id', async () => {
        const o = newOrganisation();
        await organisations().create(o);
        expect(await organisations().findKeyPolicy(o.id)).to.equal(null);
        expect(await organisations().findKeyPolicy('3f2504e0-4f89-41d3-9a0c-0305e82c3301')).to.equal(null);
      });

      it('C-62: put then find round-trips every field; a second put replaces the policy; other organisations keep theirs', async () => {
        const a = newOrganisation();
        const b = newOrganisation();
        await organisations().create(a);
        await organisations().create(b);
        await organisations().putKeyPolicy(a.id, strict, at(1));
        expect(await organisations().findKeyPolicy(a.id)).to.deep.equal(strict);
        expect(await organisations().findKeyPolicy(b.id)).to.equal(null);
        const relaxed = { maxLifetimeSeconds: null, allowedEnvironments: ['live', 'test'], exposureResponse: 'revoke_key', expiryNoticeSeconds: 604_800 } as const;
        await organisations().putKeyPolicy(a.id, relaxed, at(2));
        expect(await organisations().findKeyPolicy(a.id)).to.deep.equal(relaxed);
        await organisations().putKeyPolicy(b.id, { ...strict, allowedEnvironments: ['test'] }, at(3));
        expect(await organisations().findKeyPolicy(b.id)).to.deep.equal({ ...strict, allowedEnvironments: ['test'] });
        expect(await organisations().findKeyPolicy(a.id)).to.deep.equal(relaxed);
      });

      it('C-280: round-trips the expiry notice period at both bounds (0: none; 90 days)', async () => {
        const o = newOrganisation();
        await organisations().create(o);
        await organisations().putKeyPolicy(o.id, { ...strict, expiryNoticeSeconds: 7_776_000 }, at(1));
        expect((await organisations().findKeyPolicy(o.id))?.expiryNoticeSeconds).to.equal(7_776_000);
        await organisations().putKeyPolicy(o.id, { ...strict, expiryNoticeSeconds: 0 }, at(2));
        expect((await organisations().findKeyPolicy(o.id))?.expiryNoticeSeconds).to.equal(0);
      });

      it('C-62: a policy leaves the organisation record unchanged', async () => {
        const o = newOrganisation({ createdAt: at(1), updatedAt: at(2) });
        await organisations().create(o);
        await organisations().putKeyPolicy(o.id, strict, at(5));
        expectOrganisation(await organisations().findById(o.id), o);
      });
    });

    describe('findFirstSystem', () => {
      it('is null on an empty store and when no organisation is a system one', async () => {
        expect(await organisations().findFirstSystem()).to.equal(null);
        await organisations().create(newOrganisation());
        expect(await organisations().findFirstSystem()).to.equal(null);
      });

      it('returns the oldest system organisation (createdAt, then id), whatever the insertion order', async () => {
        const [i0, i1] = ascendingIds(2) as [string, string];
        const plainOldest = newOrganisation({ createdAt: at(-10_000) });
        const newer = newOrganisation({ isSystem: true, createdAt: at(5_000) });
        const oldTieHigh = newOrganisation({ id: i1, isSystem: true, createdAt: at(1) });
        const oldTieLow = newOrganisation({ id: i0, isSystem: true, createdAt: at(1), industrySection: 'O' });
        for (const o of [newer, plainOldest, oldTieHigh, oldTieLow]) await organisations().create(o);
        expectOrganisation(await organisations().findFirstSystem(), oldTieLow);
      });
    });

    describe('list', () => {
      it('C-20: lists full records', async () => {
        const a = newOrganisation({ createdAt: at(0), updatedAt: at(3), industrySection: 'Q', isSystem: true, rateLimitPerMinute: 1_000 });
        const b = newOrganisation({ createdAt: at(1), updatedAt: at(2) });
        await organisations().create(b);
        await organisations().create(a);
        const all = await organisations().list({ limit: 100, after: null });
        expect(all).to.have.length(2);
        expectOrganisation(all[0]!, a);
        expectOrganisation(all[1]!, b);
      });
    });
  });

  describeKeysetPaging(`OrganisationStore contract: ${name}`, factory, async (harness) => ({
    insert: (createdAt, id) =>
      harness.stores.organisations.create(newOrganisation({ id, slug: `o-${id}`, createdAt, updatedAt: T0 })),
    list: (page) => harness.stores.organisations.list(page),
  }));
}
