/**
 * Contract of ApiKeyStore's expiry reads and writes (C-280, C-282, C-283): the key list's
 * `expiring` filter, the expiry notices due, and the one claim of each notice. Run by
 * describeApiKeyStore on every implementation.
 */
import { expect } from 'chai';
import { DEFAULT_KEY_POLICY } from '../../domain/key-policy.js';
import type { Organisation } from '../../domain/organisation.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { at, newApiKey, newOrganisation, storePorts } from './fixtures.js';

const DAY = 86_400_000;
const ALL = { limit: 100, after: null } as const;
const UNKNOWN_ID = '3f2504e0-4f89-41d3-9a0c-0305e82c3301';
/** The scans' "now" in these tests. */
const NOW = at(10 * DAY);

export function describeApiKeyExpiry(name: string, factory: StoreHarnessFactory): void {
  describe(`ApiKeyStore contract, expiry: ${name}`, () => {
    let harness: StoreHarness;
    let orgA: Organisation;
    let orgB: Organisation;

    beforeEach(async () => {
      harness = await factory();
      orgA = newOrganisation();
      orgB = newOrganisation();
      await harness.stores.organisations.create(orgA);
      await harness.stores.organisations.create(orgB);
    });

    afterEach(async () => {
      await harness.close();
    });

    const keys = () => storePorts(harness).apiKeys;
    const ids = (list: readonly { id: string }[]) => list.map((k) => k.id);

    describe('list with the expiring filter (C-283)', () => {
      it('C-283: only keys active at now whose expiry is at or before until; never-expiring, expired, revoked and later ones are left out', async () => {
        const soon = newApiKey(orgA.id, { createdAt: at(1), expiresAt: at(10 * DAY + 1) });
        const edge = newApiKey(orgA.id, { createdAt: at(2), expiresAt: at(17 * DAY) });
        const later = newApiKey(orgA.id, { createdAt: at(3), expiresAt: at(17 * DAY + 1) });
        const never = newApiKey(orgA.id, { createdAt: at(4) });
        const expired = newApiKey(orgA.id, { createdAt: at(5), expiresAt: NOW });
        const revoked = newApiKey(orgA.id, { createdAt: at(6), expiresAt: at(11 * DAY), revokedAt: at(7) });
        const elsewhere = newApiKey(orgB.id, { createdAt: at(7), expiresAt: at(11 * DAY) });
        for (const k of [soon, edge, later, never, expired, revoked, elsewhere]) await keys().insert(k);
        const filter = { expiring: { now: NOW, until: at(17 * DAY) } };
        const listed = await keys().list(orgA.id, ALL, filter);
        expect(ids(listed)).to.deep.equal([soon.id, edge.id]);
        expect(listed[0]).to.deep.equal(await keys().findById(orgA.id, soon.id));
        expect(ids(await keys().list(orgA.id, ALL))).to.have.length(6);
      });

      it('C-6, C-283: pages by (createdAt, id) within the filter', async () => {
        const inWindow = [1, 2, 3, 4].map((i) => newApiKey(orgA.id, { createdAt: at(i), expiresAt: at(11 * DAY + i) }));
        const outside = newApiKey(orgA.id, { createdAt: at(2, at(500)), expiresAt: at(30 * DAY) });
        for (const k of [...inWindow, outside]) await keys().insert(k);
        const filter = { expiring: { now: NOW, until: at(12 * DAY) } };
        const first = await keys().list(orgA.id, { limit: 2, after: null }, filter);
        expect(ids(first)).to.deep.equal(ids(inWindow.slice(0, 2)));
        const second = await keys().list(orgA.id, { limit: 2, after: { createdAt: first[1]!.createdAt, id: first[1]!.id } }, filter);
        expect(ids(second)).to.deep.equal(ids(inWindow.slice(2)));
      });
    });

    describe('expiry notices (C-280, C-282)', () => {
      it('C-280: due are the active, unnoticed keys within their organisation\'s period (default 7 days without a policy; 0: never), by expiry', async () => {
        await storePorts(harness).organisations.putKeyPolicy(orgB.id, { ...DEFAULT_KEY_POLICY, expiryNoticeSeconds: 30 * 86_400 }, at(0));
        const orgC = newOrganisation();
        await harness.stores.organisations.create(orgC);
        await storePorts(harness).organisations.putKeyPolicy(orgC.id, { ...DEFAULT_KEY_POLICY, expiryNoticeSeconds: 0 }, at(0));
        const inSix = newApiKey(orgA.id, { expiresAt: at(16 * DAY) });
        const inSeven = newApiKey(orgA.id, { expiresAt: at(17 * DAY) });
        const inEight = newApiKey(orgA.id, { expiresAt: at(17 * DAY + 1) });
        const inOne = newApiKey(orgA.id, { expiresAt: at(11 * DAY) });
        const never = newApiKey(orgA.id);
        const expired = newApiKey(orgA.id, { expiresAt: NOW });
        const revoked = newApiKey(orgA.id, { expiresAt: at(11 * DAY), revokedAt: at(1) });
        const thirtyDays = newApiKey(orgB.id, { expiresAt: at(39 * DAY) });
        const beyondThirty = newApiKey(orgB.id, { expiresAt: at(41 * DAY) });
        const off = newApiKey(orgC.id, { expiresAt: at(10 * DAY + 1) });
        for (const k of [inSix, inSeven, inEight, inOne, never, expired, revoked, thirtyDays, beyondThirty, off]) await keys().insert(k);
        const due = await keys().listExpiryNoticesDue(NOW, 100);
        expect(ids(due)).to.deep.equal([inOne.id, inSix.id, inSeven.id, thirtyDays.id]);
        expect(due[3]).to.deep.equal(await keys().findById(orgB.id, thirtyDays.id));
        expect(ids(await keys().listExpiryNoticesDue(NOW, 2))).to.deep.equal([inOne.id, inSix.id]);
      });

      it('C-282: a claim records the notice once: true the first time, false after; a claimed key is no longer due', async () => {
        const k = newApiKey(orgA.id, { expiresAt: at(12 * DAY) });
        const other = newApiKey(orgA.id, { expiresAt: at(13 * DAY) });
        await keys().insert(k);
        await keys().insert(other);
        const before = await keys().findById(orgA.id, k.id);
        expect(await keys().claimExpiryNotice(k.id, NOW)).to.equal(true);
        expect(await keys().claimExpiryNotice(k.id, NOW)).to.equal(false);
        expect(await keys().claimExpiryNotice(k.id, at(DAY, NOW))).to.equal(false);
        expect(ids(await keys().listExpiryNoticesDue(NOW, 100))).to.deep.equal([other.id]);
        // The claim changes nothing the key record says.
        expect(await keys().findById(orgA.id, k.id)).to.deep.equal(before);
      });

      it('C-282: a key that is not due is not claimed: unknown, revoked, expired, outside its period, notices off', async () => {
        const revoked = newApiKey(orgA.id, { expiresAt: at(12 * DAY), revokedAt: at(1) });
        const expired = newApiKey(orgA.id, { expiresAt: at(9 * DAY) });
        const far = newApiKey(orgA.id, { expiresAt: at(30 * DAY) });
        const never = newApiKey(orgA.id);
        const quiet = newApiKey(orgB.id, { expiresAt: at(11 * DAY) });
        await storePorts(harness).organisations.putKeyPolicy(orgB.id, { ...DEFAULT_KEY_POLICY, expiryNoticeSeconds: 0 }, at(0));
        for (const k of [revoked, expired, far, never, quiet]) await keys().insert(k);
        for (const id of [UNKNOWN_ID, revoked.id, expired.id, far.id, never.id, quiet.id]) {
          expect(await keys().claimExpiryNotice(id, NOW), id).to.equal(false);
        }
        // Once within its period, the far key is due and claimed.
        expect(await keys().claimExpiryNotice(far.id, at(23 * DAY))).to.equal(true);
      });

      it('C-282: of concurrent claims of one key in separate units of work, exactly one is true', async () => {
        const k = newApiKey(orgA.id, { expiresAt: at(12 * DAY) });
        await keys().insert(k);
        const claims = await Promise.all([1, 2, 3, 4].map(() => harness.unitOfWork.run((s) => s.apiKeys.claimExpiryNotice(k.id, NOW))));
        expect(claims.filter(Boolean)).to.have.length(1);
      });
    });
  });
}
