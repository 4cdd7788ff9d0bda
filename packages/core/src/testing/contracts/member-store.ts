/** Contract suite of MemberStore (C-21; paging C-6, C-7). */
import { expect } from 'chai';
import type { Member } from '../../domain/member.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { at, expectConflict, expectSameInstant, newMember, newOrganisation } from './fixtures.js';
import { describeKeysetPaging } from './paging.js';

export function expectMember(actual: Member | undefined | null, expected: Member): void {
  expect(actual, `member ${expected.id}`).to.not.equal(undefined);
  expect(actual, `member ${expected.id}`).to.not.equal(null);
  const m = actual as Member;
  expect(m.id).to.equal(expected.id);
  expect(m.organisationId).to.equal(expected.organisationId);
  expect(m.email).to.equal(expected.email);
  expectSameInstant(m.createdAt, expected.createdAt, 'createdAt');
  expect(Object.keys(m).sort()).to.deep.equal(['createdAt', 'email', 'id', 'organisationId'], 'no other fields');
}

const ALL = { limit: 100, after: null } as const;

export function describeMemberStore(name: string, factory: StoreHarnessFactory): void {
  describe(`MemberStore contract: ${name}`, () => {
    let harness: StoreHarness;
    let orgA: string;
    let orgB: string;

    beforeEach(async () => {
      harness = await factory();
      const a = newOrganisation();
      const b = newOrganisation();
      await harness.stores.organisations.create(a);
      await harness.stores.organisations.create(b);
      orgA = a.id;
      orgB = b.id;
    });

    afterEach(async () => {
      await harness.close();
    });

    const members = () => harness.stores.members;

    it('C-21: add then list round-trips every field (ms timestamp, e-mail exactly as given)', async () => {
      const m = newMember(orgA, { email: 'Ada.Lovelace+ops@Example.COM', createdAt: at(123) });
      await members().add(m);
      const listed = await members().list(orgA, ALL);
      expect(listed).to.have.length(1);
      expectMember(listed[0], m);
    });

    it('C-21: an organisation without members lists nothing; an unknown organisation lists nothing', async () => {
      await members().add(newMember(orgA));
      expect(await members().list(orgB, ALL)).to.deep.equal([]);
      expect(await members().list('2b7e1516-28ae-4d2a-abf7-158809cf4f3c', ALL)).to.deep.equal([]);
    });

    it('C-21: lists are per organisation: members of one never appear in another', async () => {
      const a1 = newMember(orgA, { createdAt: at(0) });
      const b1 = newMember(orgB, { createdAt: at(1) });
      const a2 = newMember(orgA, { createdAt: at(2) });
      for (const m of [a1, b1, a2]) await members().add(m);
      const listA = await members().list(orgA, ALL);
      const listB = await members().list(orgB, ALL);
      expect(listA.map((m) => m.id)).to.deep.equal([a1.id, a2.id]);
      expect(listB.map((m) => m.id)).to.deep.equal([b1.id]);
      expectMember(listB[0], b1);
    });

    describe('e-mail uniqueness', () => {
      it('C-21: the same e-mail twice in one organisation throws ConflictError with field "email"', async () => {
        await members().add(newMember(orgA, { email: 'grace@example.com' }));
        await expectConflict(members().add(newMember(orgA, { email: 'grace@example.com' })), 'email');
      });

      it('C-21: e-mails are compared case-insensitively', async () => {
        await members().add(newMember(orgA, { email: 'Grace.Hopper@Example.com' }));
        await expectConflict(members().add(newMember(orgA, { email: 'grace.hopper@EXAMPLE.COM' })), 'email');
        await expectConflict(members().add(newMember(orgA, { email: 'GRACE.HOPPER@EXAMPLE.COM' })), 'email');
      });

      it('C-21: a rejected duplicate changes nothing', async () => {
        const first = newMember(orgA, { email: 'Linus@example.org', createdAt: at(0) });
        await members().add(first);
        const dup = newMember(orgA, { email: 'linus@EXAMPLE.org', createdAt: at(-5) });
        await expectConflict(members().add(dup), 'email');
        const listed = await members().list(orgA, ALL);
        expect(listed).to.have.length(1);
        expectMember(listed[0], first);
        expect(await members().remove(orgA, dup.id)).to.equal(false);
      });

      it('C-21: the same e-mail may belong to members of different organisations', async () => {
        const a = newMember(orgA, { email: 'shared@example.com' });
        const b = newMember(orgB, { email: 'SHARED@example.com' });
        await members().add(a);
        await members().add(b);
        expectMember((await members().list(orgA, ALL))[0], a);
        expectMember((await members().list(orgB, ALL))[0], b);
      });

      it('C-21: once removed, the e-mail can be added again', async () => {
        const first = newMember(orgA, { email: 'again@example.com' });
        await members().add(first);
        expect(await members().remove(orgA, first.id)).to.equal(true);
        const second = newMember(orgA, { email: 'Again@example.com' });
        await members().add(second);
        const listed = await members().list(orgA, ALL);
        expect(listed.map((m) => m.id)).to.deep.equal([second.id]);
      });
    });

    describe('find', () => {
      it('finds a member of that organisation only; null for another organisation, an unknown id or once removed', async () => {
        const m = newMember(orgA, { createdAt: at(3) });
        await members().add(m);
        expectMember(await members().find(orgA, m.id), m);
        expect(await members().find(orgB, m.id)).to.equal(null);
        expect(await members().find(orgA, '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d')).to.equal(null);
        await members().remove(orgA, m.id);
        expect(await members().find(orgA, m.id)).to.equal(null);
      });
    });

    describe('remove', () => {
      it('returns true and the member is gone; a second remove returns false', async () => {
        const keep = newMember(orgA, { createdAt: at(0) });
        const gone = newMember(orgA, { createdAt: at(1) });
        await members().add(keep);
        await members().add(gone);
        expect(await members().remove(orgA, gone.id)).to.equal(true);
        expect((await members().list(orgA, ALL)).map((m) => m.id)).to.deep.equal([keep.id]);
        expect(await members().remove(orgA, gone.id)).to.equal(false);
      });

      it('with the wrong organisation returns false and removes nothing', async () => {
        const m = newMember(orgA);
        await members().add(m);
        expect(await members().remove(orgB, m.id)).to.equal(false);
        expectMember((await members().list(orgA, ALL))[0], m);
      });

      it('an unknown member id returns false', async () => {
        await members().add(newMember(orgA));
        expect(await members().remove(orgA, '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d')).to.equal(false);
        expect(await members().list(orgA, ALL)).to.have.length(1);
      });
    });

    it('returns copies: mutating a listed record or the added input changes nothing stored', async () => {
      const input = newMember(orgA, { email: 'copy@example.com', createdAt: at(9) });
      const original = { ...input, createdAt: new Date(input.createdAt) };
      await members().add(input);
      (input as { email: string }).email = 'mutated@example.com';
      input.createdAt.setTime(0);
      const [listed] = await members().list(orgA, ALL);
      expectMember(listed, original);
      (listed as { email: string }).email = 'mutated-again@example.com';
      listed!.createdAt.setTime(1);
      expectMember((await members().list(orgA, ALL))[0], original);
    });
  });

  describeKeysetPaging(`MemberStore contract: ${name}`, factory, async (harness) => {
    const org = newOrganisation();
    const other = newOrganisation();
    await harness.stores.organisations.create(org);
    await harness.stores.organisations.create(other);
    // A member of another organisation at the same instant must never show up in the pages.
    await harness.stores.members.add(newMember(other.id, { createdAt: at(1) }));
    return {
      insert: (createdAt, id) => harness.stores.members.add(newMember(org.id, { id, email: `m-${id}@example.com`, createdAt })),
      list: (page) => harness.stores.members.list(org.id, page),
    };
  });
}
