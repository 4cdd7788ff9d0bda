/**
 * Contract suite of IdempotencyStore: kept answers of requests made with an Idempotency-Key, per
 * (organisation, key), claimed atomically, expiring after their TTL.
 */
import { expect } from 'chai';
import type { IdempotencyClaimRequest, IdempotentResponse } from '../../ports/idempotency-store.js';
import type { StoreHarnessFactory } from '../harness.js';
import { at, eachWithTwoOrganisations, expectSameInstant } from './fixtures.js';

const HOUR = 3_600_000;
const RESPONSE: IdempotentResponse = {
  status: 201,
  headers: { 'content-type': 'application/json; charset=utf-8', location: '/v1/organisations/x/api-keys/y' },
  body: '{"id":"y","label":"ł \\"quoted\\""}',
};

export function describeIdempotencyStore(name: string, factory: StoreHarnessFactory): void {
  describe(`IdempotencyStore contract: ${name}`, () => {
    const current = eachWithTwoOrganisations(factory);
    const store = () => current().harness.stores.idempotency;
    const orgA = (): string => current().orgA.id;
    const orgB = (): string => current().orgB.id;
    const claimOf = (organisationId: string, overrides: Partial<IdempotencyClaimRequest> = {}): IdempotencyClaimRequest => ({
      organisationId,
      key: 'retry-abc-123',
      fingerprint: 'f'.repeat(64),
      token: 'a0000000-0000-4000-8000-000000000001',
      now: at(0),
      expiresAt: at(24 * HOUR),
      lockedUntil: at(120_000),
      ...overrides,
    });

    it('a free key is claimed; a second claim sees the running record (no response yet)', async () => {
      expect(await store().claim(claimOf(orgA()))).to.deep.equal({ kind: 'claimed' });
      const second = await store().claim(claimOf(orgA(), { token: 'a0000000-0000-4000-8000-000000000002', fingerprint: 'e'.repeat(64), now: at(1_000) }));
      expect(second.kind).to.equal('existing');
      if (second.kind !== 'existing') return;
      expect(second.record).to.include({ organisationId: orgA(), key: 'retry-abc-123', fingerprint: 'f'.repeat(64), response: null });
      expectSameInstant(second.record.createdAt, at(0), 'createdAt');
      expectSameInstant(second.record.expiresAt, at(24 * HOUR), 'expiresAt');
      expectSameInstant(second.record.lockedUntil, at(120_000), 'lockedUntil');
    });

    it('keys are per organisation: the same key in another organisation is free', async () => {
      expect((await store().claim(claimOf(orgA()))).kind).to.equal('claimed');
      expect((await store().claim(claimOf(orgB()))).kind).to.equal('claimed');
    });

    it('complete keeps the response (status, headers, body byte for byte) for the holder of the token only', async () => {
      await store().claim(claimOf(orgA()));
      expect(await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-00000000dead', RESPONSE)).to.equal(false);
      expect(await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000001', RESPONSE)).to.equal(true);
      const again = await store().claim(claimOf(orgA(), { token: 'a0000000-0000-4000-8000-000000000003', now: at(5 * HOUR) }));
      expect(again.kind).to.equal('existing');
      if (again.kind === 'existing') expect(again.record.response).to.deep.equal(RESPONSE);
      expect(await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000001', RESPONSE), 'completed once').to.equal(false);
    });

    it('release frees a running claim (for its token only); a completed record is never released', async () => {
      await store().claim(claimOf(orgA()));
      expect(await store().release(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-00000000dead')).to.equal(false);
      expect(await store().release(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000001')).to.equal(true);
      expect((await store().claim(claimOf(orgA(), { token: 'a0000000-0000-4000-8000-000000000004' }))).kind).to.equal('claimed');
      await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000004', RESPONSE);
      expect(await store().release(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000004')).to.equal(false);
      expect((await store().claim(claimOf(orgA(), { token: 'a0000000-0000-4000-8000-000000000005' }))).kind).to.equal('existing');
    });

    it('an expired record is free again; a running one whose lock ended is taken over (the old token no longer completes it)', async () => {
      await store().claim(claimOf(orgA()));
      await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000001', RESPONSE);
      expect((await store().claim(claimOf(orgA(), { now: at(24 * HOUR - 1), token: 'a0000000-0000-4000-8000-000000000006' }))).kind).to.equal('existing');
      const renewed = claimOf(orgA(), { now: at(24 * HOUR), expiresAt: at(48 * HOUR), lockedUntil: at(24 * HOUR + 120_000), token: 'a0000000-0000-4000-8000-000000000007' });
      expect((await store().claim(renewed)).kind).to.equal('claimed');
      const stale = claimOf(orgA(), { now: at(24 * HOUR + 120_000), expiresAt: at(48 * HOUR), lockedUntil: at(24 * HOUR + 240_000), token: 'a0000000-0000-4000-8000-000000000008' });
      expect((await store().claim(stale)).kind).to.equal('claimed');
      expect(await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000007', RESPONSE)).to.equal(false);
      expect(await store().complete(orgA(), 'retry-abc-123', 'a0000000-0000-4000-8000-000000000008', RESPONSE)).to.equal(true);
    });

    it('of concurrent claims of one free key exactly one is claimed', async () => {
      const tokens = Array.from({ length: 8 }, (_, i) => `a0000000-0000-4000-8000-0000000001${String(i).padStart(2, '0')}`);
      const results = await Promise.all(tokens.map((token) => store().claim(claimOf(orgA(), { token }))));
      expect(results.filter((r) => r.kind === 'claimed')).to.have.length(1);
    });

    it('sweep deletes the expired records only and answers how many', async () => {
      await store().claim(claimOf(orgA(), { key: 'old', expiresAt: at(HOUR) }));
      await store().claim(claimOf(orgB(), { key: 'old', expiresAt: at(HOUR) }));
      await store().claim(claimOf(orgA(), { key: 'new', expiresAt: at(3 * HOUR) }));
      expect(await store().sweep(at(HOUR))).to.equal(2);
      expect(await store().sweep(at(HOUR))).to.equal(0);
      // The one left is still held: a claim at 2 h (before it expires, its lock long over) takes it over only because it runs.
      const left = await store().claim(claimOf(orgA(), { key: 'new', now: at(2 * HOUR), token: 'a0000000-0000-4000-8000-000000000009', fingerprint: 'd'.repeat(64) }));
      expect(left.kind).to.equal('claimed');
    });
  });
}
