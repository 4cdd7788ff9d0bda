/** Contract suite of ApiKeyStore (C-22, C-25, C-31, C-35, C-36; paging C-6, C-7). */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { ApiKey } from '../../domain/api-key.js';
import type { KeyAttributes } from '../../ports/api-key-store.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { KEY_ALREADY_ROLLED_MESSAGE } from '../../domain/api-key.js';
import { ALL_BUILTIN_SCOPES } from '../../domain/scopes.js';
import { at, expectConflictError, expectSameInstant, newApiKey, newDigest, newOrganisation, storePorts } from './fixtures.js';
import { expectOrganisation } from './organisation-store.js';
import { describeKeysetPaging } from './paging.js';
import { describeApiKeyExpiry } from './api-key-expiry.js';
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
  const lastUsedAt = expected.lastUsedAt ?? null;
  if (lastUsedAt === null) expect(k.lastUsedAt, 'lastUsedAt').to.equal(null);
  else expectSameInstant(k.lastUsedAt ?? null, lastUsedAt, 'lastUsedAt');
  expect(k.rolledFromKeyId, 'rolledFromKeyId').to.equal(expected.rolledFromKeyId ?? null);
  // C-60: a record inserted without scopes holds every built-in scope; stored scopes come back sorted.
  expect(k.scopes, 'scopes').to.deep.equal([...new Set(expected.scopes ?? ALL_BUILTIN_SCOPES)].sort());
  expect(k.createdByKeyId, 'createdByKeyId').to.equal(expected.createdByKeyId ?? null);
  // C-260, C-262: a record inserted without them has no metadata and any address.
  expect(k.metadata, 'metadata').to.deep.equal(expected.metadata ?? {});
  expect(k.allowedCidrs, 'allowedCidrs').to.deep.equal(expected.allowedCidrs ?? null);
  // C-290: a record inserted without it has no limit of its own.
  expect(k.rateLimitPerMinute, 'rateLimitPerMinute').to.equal(expected.rateLimitPerMinute ?? null);
  expect(Object.keys(k).sort()).to.deep.equal(
    [
      'allowedCidrs',
      'createdAt',
      'createdByKeyId',
      'digest',
      'expiresAt',
      'id',
      'keyPrefix',
      'label',
      'lastUsedAt',
      'metadata',
      'organisationId',
      'rateLimitPerMinute',
      'revokedAt',
      'rolledFromKeyId',
      'scopes',
    ],
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

    const keys = () => storePorts(harness).apiKeys;

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

      it('C-31, C-242: sees an organisation update made after the key was inserted, its rate limit included', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        await storePorts(harness).organisations.update(orgA.id, { name: 'Renamed', industrySection: null, rateLimitPerMinute: 7, updatedAt: at(99) });
        expectOrganisation((await keys().findCredential(k.digest))!.organisation, {
          ...orgA,
          name: 'Renamed',
          industrySection: null,
          rateLimitPerMinute: 7,
          updatedAt: at(99),
        });
        await storePorts(harness).organisations.update(orgA.id, { rateLimitPerMinute: null, updatedAt: at(100) });
        expect((await keys().findCredential(k.digest))!.organisation.rateLimitPerMinute).to.equal(null);
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

    describe('shortenExpiry (a roll never extends a key; C-36)', () => {
      it('shortens an active key without expiry, or with a later one, and returns true', async () => {
        const open = newApiKey(orgA.id);
        const later = newApiKey(orgA.id, { expiresAt: at(1_000_000) });
        for (const k of [open, later]) await keys().insert(k);
        expect(await keys().shortenExpiry(orgA.id, open.id, at(5_000), at(100))).to.equal(true);
        expect(await keys().shortenExpiry(orgA.id, later.id, at(5_000), at(100))).to.equal(true);
        expectApiKey(await keys().findById(orgA.id, open.id), { ...open, expiresAt: at(5_000) });
        expectApiKey(await keys().findById(orgA.id, later.id), { ...later, expiresAt: at(5_000) });
        expect(await keys().countActive(orgA.id, at(4_999))).to.equal(2);
        expect(await keys().countActive(orgA.id, at(5_000)), 'C-36: expired at the new expiresAt exactly').to.equal(0);
      });

      it('never extends: a key ending at or before the target is unchanged and the call returns false', async () => {
        const sooner = newApiKey(orgA.id, { expiresAt: at(3_000) });
        const same = newApiKey(orgA.id, { expiresAt: at(5_000) });
        for (const k of [sooner, same]) await keys().insert(k);
        expect(await keys().shortenExpiry(orgA.id, sooner.id, at(5_000), at(100))).to.equal(false);
        expect(await keys().shortenExpiry(orgA.id, same.id, at(5_000), at(100))).to.equal(false);
        expectApiKey(await keys().findById(orgA.id, sooner.id), sooner);
        expectApiKey(await keys().findById(orgA.id, same.id), same);
      });

      it('changes nothing on a revoked, an expired, an unknown or another organisation\'s key', async () => {
        const revoked = newApiKey(orgA.id, { revokedAt: at(1) });
        const expired = newApiKey(orgA.id, { expiresAt: at(50) });
        const mine = newApiKey(orgA.id);
        for (const k of [revoked, expired, mine]) await keys().insert(k);
        expect(await keys().shortenExpiry(orgA.id, revoked.id, at(5_000), at(100))).to.equal(false);
        expect(await keys().shortenExpiry(orgA.id, expired.id, at(40), at(100))).to.equal(false);
        expect(await keys().shortenExpiry(orgB.id, mine.id, at(5_000), at(100))).to.equal(false);
        expect(await keys().shortenExpiry(orgA.id, UNKNOWN_ID, at(5_000), at(100))).to.equal(false);
        expectApiKey(await keys().findById(orgA.id, revoked.id), revoked);
        expectApiKey(await keys().findById(orgA.id, expired.id), expired);
        expectApiKey(await keys().findById(orgA.id, mine.id), mine);
      });

      it('C-36: the credential read next sees the shorter life', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        expect((await keys().findCredential(k.digest))!.key.expiresAt).to.equal(null);
        await keys().shortenExpiry(orgA.id, k.id, at(5_000), at(100));
        expectSameInstant((await keys().findCredential(k.digest))!.key.expiresAt, at(5_000), 'expiresAt');
      });

      it('concurrent shortenings to the same end: exactly one returns true', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        const results = await Promise.all(Array.from({ length: 8 }, () => keys().shortenExpiry(orgA.id, k.id, at(5_000), at(100))));
        expect(results.filter((r) => r)).to.have.length(1);
      });
    });

    describe('rolledFromKeyId (a key is rolled at most once)', () => {
      it('round-trips; a second key rolled from the same key is a ConflictError and is not stored', async () => {
        const old = newApiKey(orgA.id);
        await keys().insert(old);
        const first = newApiKey(orgA.id, { rolledFromKeyId: old.id });
        await keys().insert(first);
        expectApiKey(await keys().findById(orgA.id, first.id), first);
        const second = newApiKey(orgA.id, { rolledFromKeyId: old.id });
        const error = await expectConflictError(keys().insert(second));
        expect(error.message).to.equal(KEY_ALREADY_ROLLED_MESSAGE);
        expect(await keys().findById(orgA.id, second.id)).to.equal(null);
        await keys().insert(newApiKey(orgA.id, { rolledFromKeyId: first.id }));
        await keys().insert(newApiKey(orgA.id));
        await keys().insert(newApiKey(orgA.id));
      });

      it('concurrent inserts of keys rolled from one key: exactly one is stored', async () => {
        const old = newApiKey(orgA.id);
        await keys().insert(old);
        const results = await Promise.allSettled(
          Array.from({ length: 6 }, () => keys().insert(newApiKey(orgA.id, { rolledFromKeyId: old.id }))),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
        expect((await keys().list(orgA.id, ALL)).filter((k) => k.rolledFromKeyId === old.id)).to.have.length(1);
      });
    });

    describe('recordUses (last_used_at, written in batches)', () => {
      it('a new key has never been used: lastUsedAt is null, whatever the inserted record said', async () => {
        const k = newApiKey(orgA.id, { lastUsedAt: at(5) });
        await keys().insert(k);
        expect((await keys().findById(orgA.id, k.id))!.lastUsedAt).to.equal(null);
      });

      it('sets lastUsedAt of every key of the batch at ms precision, seen by findById, list and findCredential', async () => {
        const k1 = newApiKey(orgA.id);
        const k2 = newApiKey(orgB.id);
        const untouched = newApiKey(orgA.id);
        for (const k of [k1, k2, untouched]) await keys().insert(k);
        await keys().recordUses([
          { keyId: k1.id, at: at(1_001) },
          { keyId: k2.id, at: at(2_002) },
          { keyId: UNKNOWN_ID, at: at(3_003) },
        ]);
        expectApiKey(await keys().findById(orgA.id, k1.id), { ...k1, lastUsedAt: at(1_001) });
        expectApiKey(await keys().findById(orgB.id, k2.id), { ...k2, lastUsedAt: at(2_002) });
        expectApiKey(await keys().findById(orgA.id, untouched.id), untouched);
        expectApiKey((await keys().list(orgA.id, ALL)).find((k) => k.id === k1.id), { ...k1, lastUsedAt: at(1_001) });
        expectApiKey((await keys().findCredential(k2.digest))!.key, { ...k2, lastUsedAt: at(2_002) });
      });

      it('never moves back: an older use (a late flush of another instance) leaves the later one; the latest of a batch wins', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        await keys().recordUses([{ keyId: k.id, at: at(5_000) }]);
        await keys().recordUses([{ keyId: k.id, at: at(4_000) }]);
        expectSameInstant((await keys().findById(orgA.id, k.id))!.lastUsedAt ?? null, at(5_000), 'lastUsedAt');
        await keys().recordUses([
          { keyId: k.id, at: at(7_000) },
          { keyId: k.id, at: at(9_000) },
          { keyId: k.id, at: at(8_000) },
        ]);
        expectSameInstant((await keys().findById(orgA.id, k.id))!.lastUsedAt ?? null, at(9_000), 'lastUsedAt');
      });

      it('an empty batch changes nothing; revoked and expired keys are recorded like any other', async () => {
        const revoked = newApiKey(orgA.id, { revokedAt: at(1) });
        await keys().insert(revoked);
        await keys().recordUses([]);
        expectApiKey(await keys().findById(orgA.id, revoked.id), revoked);
        await keys().recordUses([{ keyId: revoked.id, at: at(0) }]);
        expectApiKey(await keys().findById(orgA.id, revoked.id), { ...revoked, lastUsedAt: at(0) });
      });

      it('a batch of 1200 keys is written whole (no bound-parameter limit)', async () => {
        const many = Array.from({ length: 1200 }, () => newApiKey(orgA.id));
        for (const k of many) await keys().insert(k);
        await keys().recordUses(many.map((k, i) => ({ keyId: k.id, at: at(i) })));
        for (let i = 0; i < many.length; i += 97) {
          expectSameInstant((await keys().findById(orgA.id, many[i]!.id))!.lastUsedAt ?? null, at(i), `lastUsedAt of key ${i}`);
        }
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

    describe('metadata, allowedCidrs and rateLimitPerMinute (C-260, C-261, C-262, C-290)', () => {
      const META = { owner: 'team-a', 'ci.job': 'deploy – prod ✓', __proto__name: 'x', 'z.last': '' };
      const attributes = (k: ApiKey): KeyAttributes => ({ label: k.label, metadata: k.metadata ?? {}, allowedCidrs: k.allowedCidrs ?? null, rateLimitPerMinute: k.rateLimitPerMinute ?? null });

      it('C-260, C-262, C-290: round-trip through findById, findCredential and list; a record inserted without them has {}, null and null', async () => {
        const rich = newApiKey(orgA.id, { metadata: META, allowedCidrs: ['10.0.0.0/8', '2001:db8::/32', '203.0.113.7/32'], rateLimitPerMinute: 1_000_000 });
        const plain = newApiKey(orgA.id);
        for (const k of [rich, plain]) await keys().insert(k);
        expectApiKey(await keys().findById(orgA.id, rich.id), rich);
        expectApiKey(await keys().findById(orgA.id, plain.id), plain);
        expectApiKey((await keys().findCredential(rich.digest))!.key, rich);
        const listed = await keys().list(orgA.id, ALL);
        expectApiKey(listed.find((k) => k.id === rich.id), rich);
        expect((await keys().findById(orgA.id, plain.id))!.metadata).to.deep.equal({});
        expect((await keys().findById(orgA.id, plain.id))!.allowedCidrs).to.equal(null);
        expect((await keys().findById(orgA.id, plain.id))!.rateLimitPerMinute).to.equal(null);
        expect((await keys().findCredential(rich.digest))!.key.rateLimitPerMinute).to.equal(1_000_000);
      });

      it('C-260: a metadata name such as __proto__ is an entry like any other', async () => {
        const metadata = JSON.parse('{"__proto__": "kept", "constructor": "too"}') as Record<string, string>;
        const k = newApiKey(orgA.id, { metadata });
        await keys().insert(k);
        const found = (await keys().findById(orgA.id, k.id))!;
        expect(Object.entries(found.metadata!).sort()).to.deep.equal([['__proto__', 'kept'], ['constructor', 'too']]);
      });

      it('C-261, C-290: update sets label, metadata, allowedCidrs and rateLimitPerMinute of an active key holding `from`; the credential read next sees them', async () => {
        const k = newApiKey(orgA.id, { metadata: { owner: 'a' } });
        await keys().insert(k);
        const to: KeyAttributes = { label: 'renamed', metadata: { owner: 'b', team: 'x' }, allowedCidrs: ['192.0.2.0/24'], rateLimitPerMinute: 60 };
        expect(await keys().update(orgA.id, k.id, { from: attributes(k), to }, at(100))).to.equal(true);
        const changed = { ...k, ...to };
        expectApiKey(await keys().findById(orgA.id, k.id), changed);
        expectApiKey((await keys().findCredential(k.digest))!.key, changed);
        // Back to any address, no metadata and no limit of its own.
        const back: KeyAttributes = { label: 'renamed', metadata: {}, allowedCidrs: null, rateLimitPerMinute: null };
        expect(await keys().update(orgA.id, k.id, { from: to, to: back }, at(100))).to.equal(true);
        expectApiKey(await keys().findById(orgA.id, k.id), { ...k, ...back });
      });

      it('C-261: metadata in `from` is compared as a whole, whatever the order of its names', async () => {
        const k = newApiKey(orgA.id, { metadata: { a: '1', b: '2', c: '3' } });
        await keys().insert(k);
        const from: KeyAttributes = { label: k.label, metadata: { c: '3', a: '1', b: '2' }, allowedCidrs: null, rateLimitPerMinute: null };
        expect(await keys().update(orgA.id, k.id, { from, to: { ...from, label: 'x' } }, at(100))).to.equal(true);
        expect((await keys().findById(orgA.id, k.id))!.label).to.equal('x');
      });

      it('C-261: changes nothing on a revoked, an expired, an unknown or another organisation\'s key, nor when the key no longer holds `from`', async () => {
        const revoked = newApiKey(orgA.id, { revokedAt: at(1) });
        const expired = newApiKey(orgA.id, { expiresAt: at(50) });
        const mine = newApiKey(orgA.id, { metadata: { owner: 'a' }, allowedCidrs: ['10.0.0.0/8'], rateLimitPerMinute: 100 });
        for (const k of [revoked, expired, mine]) await keys().insert(k);
        const to: KeyAttributes = { label: 'changed', metadata: { x: 'y' }, allowedCidrs: null, rateLimitPerMinute: null };
        expect(await keys().update(orgA.id, revoked.id, { from: attributes(revoked), to }, at(100))).to.equal(false);
        expect(await keys().update(orgA.id, expired.id, { from: attributes(expired), to }, at(50)), 'expired at expiresAt exactly').to.equal(false);
        expect(await keys().update(orgB.id, mine.id, { from: attributes(mine), to }, at(100))).to.equal(false);
        expect(await keys().update(orgA.id, UNKNOWN_ID, { from: attributes(mine), to }, at(100))).to.equal(false);
        const stale: KeyAttributes[] = [
          { ...attributes(mine), label: 'other' },
          { ...attributes(mine), metadata: { owner: 'b' } },
          { ...attributes(mine), metadata: { owner: 'a', more: '' } },
          { ...attributes(mine), allowedCidrs: null },
          { ...attributes(mine), allowedCidrs: ['10.0.0.0/16'] },
          { ...attributes(mine), rateLimitPerMinute: null },
          { ...attributes(mine), rateLimitPerMinute: 99 },
        ];
        for (const from of stale) expect(await keys().update(orgA.id, mine.id, { from, to }, at(100)), JSON.stringify(from)).to.equal(false);
        for (const k of [revoked, expired, mine]) expectApiKey(await keys().findById(orgA.id, k.id), k);
      });

      it('C-261: concurrent updates made from the same reading: exactly one applies', async () => {
        const k = newApiKey(orgA.id);
        await keys().insert(k);
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => keys().update(orgA.id, k.id, { from: attributes(k), to: { ...attributes(k), metadata: { n: String(i) } } }, at(100))),
        );
        expect(results.filter((r) => r)).to.have.length(1);
        expect((await keys().findById(orgA.id, k.id))!.metadata).to.deep.equal({ n: String(results.indexOf(true)) });
      });
    });

    describe('scopes and lineage (C-60, C-61)', () => {
      it('C-60: round-trips a subset of scopes, sorted, through findById, findCredential and list', async () => {
        const k = newApiKey(orgA.id, { scopes: ['organisations:read', 'api_keys:read'] });
        await keys().insert(k);
        const expected = { ...k, scopes: ['api_keys:read', 'organisations:read'] };
        expectApiKey(await keys().findById(orgA.id, k.id), expected);
        expectApiKey((await keys().findCredential(k.digest))?.key, expected);
        expectApiKey((await keys().list(orgA.id, ALL))[0], expected);
      });

      it('C-60: a single scope and scope names an embedding service declared round-trip', async () => {
        const one = newApiKey(orgA.id, { scopes: ['members:read'] });
        const custom = newApiKey(orgA.id, { scopes: ['reports:read', 'api_keys:read', 'reports:write'] });
        await keys().insert(one);
        await keys().insert(custom);
        expect((await keys().findById(orgA.id, one.id))?.scopes).to.deep.equal(['members:read']);
        expect((await keys().findById(orgA.id, custom.id))?.scopes).to.deep.equal(['api_keys:read', 'reports:read', 'reports:write']);
      });

      it('C-61, C-100: round-trips createdByKeyId; listCreatedBy lists the keys a key made, oldest first, in every organisation', async () => {
        const parent = newApiKey(orgA.id, { createdAt: at(1) });
        const second = newApiKey(orgA.id, { createdAt: at(3), createdByKeyId: parent.id, revokedAt: at(4) });
        const [lowId, highId] = [randomUUID(), randomUUID()].sort();
        const first = newApiKey(orgA.id, { id: highId, createdAt: at(2), createdByKeyId: parent.id });
        const grandchild = newApiKey(orgA.id, { createdAt: at(5), createdByKeyId: first.id });
        const elsewhere = newApiKey(orgB.id, { createdAt: at(6), createdByKeyId: parent.id });
        const between = newApiKey(orgB.id, { id: lowId, createdAt: at(2), createdByKeyId: parent.id });
        const later = newApiKey(orgB.id, { createdAt: at(7), createdByKeyId: elsewhere.id });
        for (const k of [parent, second, first, grandchild, elsewhere, between, later]) await keys().insert(k);
        expectApiKey(await keys().findById(orgA.id, first.id), first);
        const children = await keys().listCreatedBy(parent.id);
        // Ordered by (createdAt, id) across organisations: `between` shares `first`'s instant and sorts first by id.
        expect(children.map((k) => k.id)).to.deep.equal([between.id, first.id, second.id, elsewhere.id]);
        expectApiKey(children[2], second);
        expectApiKey(children[3], elsewhere);
        expect((await keys().listCreatedBy(first.id)).map((k) => k.id)).to.deep.equal([grandchild.id]);
        expect((await keys().listCreatedBy(elsewhere.id)).map((k) => k.id)).to.deep.equal([later.id]);
        expect(await keys().listCreatedBy(grandchild.id)).to.deep.equal([]);
        expect(await keys().listCreatedBy(UNKNOWN_ID)).to.deep.equal([]);
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

  describeApiKeyExpiry(name, factory);
}
