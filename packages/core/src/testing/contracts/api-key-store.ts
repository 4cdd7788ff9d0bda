/** Contract suite of ApiKeyStore (C-22, C-25, C-31, C-35, C-36; paging C-6, C-7). */
import { expect } from 'chai';
import type { ApiKey } from '../../domain/api-key.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { at, expectConflictError, expectSameInstant, newApiKey, newDigest, newOrganisation } from './fixtures.js';
import { expectOrganisation } from './organisation-store.js';
import { describeKeysetPaging } from './paging.js';
import type { Organisation } from '../../domain/organisation.js';

export function expectApiKey(actual: ApiKey | undefined | null, expected: ApiKey): void {
  expect(actual, `key ${expected.id}`).to.not.equal(undefined);
  expect(actual, `key ${expected.id}`).to.not.equal(null);
  const k = actual as ApiKey;
  expect(k.id).to.equal(expected.id);
  expect(k.organisationId).to.equal(expected.organisationId);
  expect(k.label).to.equal(expected.label);
  expect(k.keyPrefix).to.equal(expected.keyPrefix);
  expect(k.digest).to.equal(expected.digest);
  expectSameInstant(k.createdAt, expected.createdAt, 'createdAt');
  if (expected.expiresAt === null) expect(k.expiresAt, 'expiresAt').to.equal(null);
  else expectSameInstant(k.expiresAt, expected.expiresAt, 'expiresAt');
  if (expected.revokedAt === null) expect(k.revokedAt, 'revokedAt').to.equal(null);
  else expectSameInstant(k.revokedAt, expected.revokedAt, 'revokedAt');
  expect(Object.keys(k).sort()).to.deep.equal(
    ['createdAt', 'digest', 'expiresAt', 'id', 'keyPrefix', 'label', 'organisationId', 'revokedAt'],
    'no other fields',
  );
}

const ALL = { limit: 100, after: null } as const;
const UNKNOWN_ID = '3f2504e0-4f89-41d3-9a0c-0305e82c3301';

export function describeApiKeyStore(name: string, factory: StoreHarnessFactory): void {
  describe(`ApiKeyStore contract: ${name}`, () => {
    let harness: StoreHarness;
    let orgA: Organisation;
    let orgB: Organisation;

    beforeEach(async () => {
      harness = await factory();
      orgA = newOrganisation({ industrySection: 'K', createdAt: at(-5), updatedAt: at(-4) });
      orgB = newOrganisation({ isSystem: true });
      await harness.stores.organisations.create(orgA);
      await harness.stores.organisations.create(orgB);
    });

    afterEach(async () => {
      await harness.close();
    });

    const keys = () => harness.stores.apiKeys;

    describe('insert and findById', () => {
      it('C-22: round-trips every field: ms timestamps, null expiresAt and revokedAt', async () => {
        const k = newApiKey(orgA.id, { createdAt: at(42) });
        await keys().insert(k);
        expectApiKey(await keys().findById(orgA.id, k.id), k);
      });

      it('C-22, C-23: round-trips an expiresAt, a test prefix and a 100-character label', async () => {
        const k = newApiKey(orgA.id, {
          keyPrefix: 'svc_test_Zz9',
          label: 'ł'.repeat(50) + 'x'.repeat(50),
          expiresAt: at(90 * 86_400_000 + 1),
          createdAt: at(1),
        });
        await keys().insert(k);
        expectApiKey(await keys().findById(orgA.id, k.id), k);
      });

      it('C-22: round-trips a revokedAt', async () => {
        const k = newApiKey(orgA.id, { revokedAt: at(500) });
        await keys().insert(k);
        expectApiKey(await keys().findById(orgA.id, k.id), k);
      });

      it('C-34: a key looked up in another organisation is null; an unknown id is null', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        expect(await keys().findById(orgB.id, k.id)).to.equal(null);
        expect(await keys().findById(orgA.id, UNKNOWN_ID)).to.equal(null);
        expect(await keys().findById(UNKNOWN_ID, k.id)).to.equal(null);
      });

      it('C-31: a duplicate digest throws ConflictError and changes nothing', async () => {
        const first = newApiKey(orgA.id, { createdAt: at(0) });
        await keys().insert(first);
        const dup = newApiKey(orgB.id, { digest: first.digest, createdAt: at(-1) });
        await expectConflictError(keys().insert(dup));
        expect(await keys().findById(orgB.id, dup.id)).to.equal(null);
        expect(await keys().list(orgB.id, ALL)).to.deep.equal([]);
        expectApiKey((await keys().findCredential(first.digest))?.key, first);
        expect(await keys().countActive(orgB.id, at(0))).to.equal(0);
      });

      it('returns copies: mutating a returned record or the inserted input changes nothing stored', async () => {
        const input = newApiKey(orgA.id, { expiresAt: at(1_000_000), createdAt: at(3) });
        const original = { ...input, expiresAt: new Date(input.expiresAt!), createdAt: new Date(input.createdAt) };
        await keys().insert(input);
        (input as { label: string }).label = 'mutated';
        input.expiresAt!.setTime(0);
        const found = await keys().findById(orgA.id, original.id);
        expectApiKey(found, original);
        (found as { revokedAt: Date | null }).revokedAt = at(1);
        found!.createdAt.setTime(0);
        expectApiKey(await keys().findById(orgA.id, original.id), original);
      });
    });

    describe('findCredential (C-31)', () => {
      it('C-31: finds a key by its digest together with its full organisation', async () => {
        const k = newApiKey(orgA.id, { expiresAt: at(60_000) });
        await keys().insert(k);
        await keys().insert(newApiKey(orgB.id));
        const credential = await keys().findCredential(k.digest);
        expect(credential).to.not.equal(null);
        expectApiKey(credential!.key, k);
        expectOrganisation(credential!.organisation, orgA);
      });

      it('C-31: joins the system organisation of a platform key (isSystem true)', async () => {
        const k = newApiKey(orgB.id);
        await keys().insert(k);
        const credential = await keys().findCredential(k.digest);
        expectOrganisation(credential!.organisation, orgB);
        expect(credential!.organisation.isSystem).to.equal(true);
      });

      it('C-31: an unknown digest is null', async () => {
        await keys().insert(newApiKey(orgA.id));
        expect(await keys().findCredential(newDigest())).to.equal(null);
      });

      it('C-36: returns revoked and expired keys as they are (the caller decides), never a stale copy', async () => {
        const k = newApiKey(orgA.id, { expiresAt: at(10) });
        await keys().insert(k);
        expect((await keys().findCredential(k.digest))!.key.revokedAt).to.equal(null);
        expect(await keys().revoke(orgA.id, k.id, at(5))).to.equal(true);
        expectApiKey((await keys().findCredential(k.digest))!.key, { ...k, revokedAt: at(5) });
      });

      it('C-31: sees an organisation update made after the key was inserted', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        await harness.stores.organisations.update(orgA.id, { name: 'Renamed', industrySection: null, updatedAt: at(99) });
        expectOrganisation((await keys().findCredential(k.digest))!.organisation, {
          ...orgA,
          name: 'Renamed',
          industrySection: null,
          updatedAt: at(99),
        });
      });
    });

    describe('list', () => {
      it('C-22: lists full records of one organisation only', async () => {
        const a1 = newApiKey(orgA.id, { createdAt: at(0), expiresAt: at(5) });
        const b1 = newApiKey(orgB.id, { createdAt: at(1) });
        const a2 = newApiKey(orgA.id, { createdAt: at(2), revokedAt: at(3) });
        for (const k of [a2, b1, a1]) await keys().insert(k);
        const listA = await keys().list(orgA.id, ALL);
        expect(listA).to.have.length(2);
        expectApiKey(listA[0], a1);
        expectApiKey(listA[1], a2);
        const listB = await keys().list(orgB.id, ALL);
        expect(listB.map((k) => k.id)).to.deep.equal([b1.id]);
        expect(await keys().list(UNKNOWN_ID, ALL)).to.deep.equal([]);
      });
    });

    describe('countActive (C-25, C-36)', () => {
      it('C-25: counts keys neither revoked nor expired, per organisation', async () => {
        const now = at(10_000);
        const active = [
          newApiKey(orgA.id),
          newApiKey(orgA.id, { expiresAt: at(10_001) }), // 1 ms left
          newApiKey(orgA.id, { expiresAt: at(86_400_000) }),
        ];
        const inactive = [
          newApiKey(orgA.id, { revokedAt: at(1) }),
          newApiKey(orgA.id, { expiresAt: at(9_999) }),
          newApiKey(orgA.id, { expiresAt: now }), // C-36: expires at expiresAt exactly
          newApiKey(orgA.id, { expiresAt: at(86_400_000), revokedAt: at(2) }),
        ];
        for (const k of [...active, ...inactive]) await keys().insert(k);
        await keys().insert(newApiKey(orgB.id));
        expect(await keys().countActive(orgA.id, now)).to.equal(3);
        expect(await keys().countActive(orgB.id, now)).to.equal(1);
        expect(await keys().countActive(UNKNOWN_ID, now)).to.equal(0);
      });

      it('C-36: the count follows `now`: a key stops counting at its expiresAt exactly', async () => {
        await keys().insert(newApiKey(orgA.id, { expiresAt: at(1_000) }));
        await keys().insert(newApiKey(orgA.id));
        expect(await keys().countActive(orgA.id, at(999))).to.equal(2);
        expect(await keys().countActive(orgA.id, at(1_000))).to.equal(1);
        expect(await keys().countActive(orgA.id, at(1_001))).to.equal(1);
      });

      it('C-25: revoking a key lowers the count at once', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        await keys().insert(newApiKey(orgA.id));
        expect(await keys().countActive(orgA.id, at(0))).to.equal(2);
        await keys().revoke(orgA.id, k.id, at(0));
        expect(await keys().countActive(orgA.id, at(0))).to.equal(1);
      });
    });

    describe('revoke (C-35)', () => {
      it('C-35: returns true on the transition and sets revokedAt at ms precision', async () => {
        const k = newApiKey(orgA.id, { expiresAt: at(1_000_000) });
        await keys().insert(k);
        expect(await keys().revoke(orgA.id, k.id, at(777))).to.equal(true);
        expectApiKey(await keys().findById(orgA.id, k.id), { ...k, revokedAt: at(777) });
      });

      it('C-35: a second revoke returns false and keeps the first revokedAt', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        expect(await keys().revoke(orgA.id, k.id, at(100))).to.equal(true);
        expect(await keys().revoke(orgA.id, k.id, at(200))).to.equal(false);
        expectApiKey(await keys().findById(orgA.id, k.id), { ...k, revokedAt: at(100) });
      });

      it('C-34: with the wrong organisation returns false and changes nothing', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        expect(await keys().revoke(orgB.id, k.id, at(100))).to.equal(false);
        expectApiKey(await keys().findById(orgA.id, k.id), k);
        expect(await keys().countActive(orgA.id, at(100))).to.equal(1);
      });

      it('an unknown key returns false', async () => {
        expect(await keys().revoke(orgA.id, UNKNOWN_ID, at(100))).to.equal(false);
      });

      it('affects only the named key', async () => {
        const k = newApiKey(orgA.id);
        const other = newApiKey(orgA.id);
        await keys().insert(k);
        await keys().insert(other);
        await keys().revoke(orgA.id, k.id, at(1));
        expectApiKey(await keys().findById(orgA.id, other.id), other);
      });

      it('C-35: concurrent revokes of one key: exactly one returns true', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => keys().revoke(orgA.id, k.id, at(1_000 + i))));
        expect(results.filter((r) => r)).to.have.length(1);
        const winner = results.indexOf(true);
        expectApiKey(await keys().findById(orgA.id, k.id), { ...k, revokedAt: at(1_000 + winner) });
      });
    });

    describe('recordExposure (C-58: a redelivered secret-scanning alert records nothing twice)', () => {
      const URL_1 = 'https://gist.example.com/someone/0123abcd?file=.env';
      const URL_2 = 'https://gist.example.com/someone/0123abcd?file=.env.local';

      it('C-58: true the first time for a (key, url) pair, false for every repeat', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        expect(await keys().recordExposure(k.id, URL_1, at(1))).to.equal(true);
        expect(await keys().recordExposure(k.id, URL_1, at(2))).to.equal(false);
        expect(await keys().recordExposure(k.id, URL_1, at(3))).to.equal(false);
        expect(await keys().recordExposure(k.id, URL_2, at(4)), 'another url of the same key').to.equal(true);
      });

      it('C-58: no url (null) is a pair of its own, distinct from any url, and repeats too', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        expect(await keys().recordExposure(k.id, null, at(1))).to.equal(true);
        expect(await keys().recordExposure(k.id, URL_1, at(2))).to.equal(true);
        expect(await keys().recordExposure(k.id, null, at(3))).to.equal(false);
      });

      it('C-58: different keys are independent, in one organisation or another', async () => {
        const k1 = newApiKey(orgA.id);
        const k2 = newApiKey(orgA.id);
        const k3 = newApiKey(orgB.id);
        for (const k of [k1, k2, k3]) await keys().insert(k);
        expect(await keys().recordExposure(k1.id, URL_1, at(1))).to.equal(true);
        expect(await keys().recordExposure(k2.id, URL_1, at(1))).to.equal(true);
        expect(await keys().recordExposure(k3.id, URL_1, at(1))).to.equal(true);
        expect(await keys().recordExposure(k2.id, null, at(2))).to.equal(true);
        expect(await keys().recordExposure(k1.id, null, at(2))).to.equal(true);
        expect(await keys().recordExposure(k1.id, URL_1, at(3))).to.equal(false);
      });

      it('C-58: concurrent recordings of one pair: exactly one is first', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        const results = await Promise.all(Array.from({ length: 8 }, (_, i) => keys().recordExposure(k.id, URL_1, at(i))));
        expect(results.filter((r) => r)).to.have.length(1);
      });

      it('C-58: recording an exposure leaves the key itself unchanged', async () => {
        const k = newApiKey(orgA.id, { expiresAt: at(86_400_000) });
        await keys().insert(k);
        await keys().recordExposure(k.id, URL_1, at(5));
        expectApiKey(await keys().findById(orgA.id, k.id), k);
      });
    });
  });

  describeKeysetPaging(`ApiKeyStore contract: ${name}`, factory, async (harness) => {
    const org = newOrganisation();
    const other = newOrganisation();
    await harness.stores.organisations.create(org);
    await harness.stores.organisations.create(other);
    await harness.stores.apiKeys.insert(newApiKey(other.id, { createdAt: at(1) }));
    return {
      insert: (createdAt, id) => harness.stores.apiKeys.insert(newApiKey(org.id, { id, createdAt })),
      list: (page) => harness.stores.apiKeys.list(org.id, page),
    };
  });
}
