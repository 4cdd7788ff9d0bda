/**
 * Store-level behaviour of @cos/store-sql on every dialect, beyond the core's contract suites:
 * exact round trips (ms timestamps, booleans, nulls), unique violations as ConflictError with the
 * in-memory store's details, keyset pagination, the one-query credential lookup, and the unit of work.
 */
import { ConflictError, NotFoundError, type AuditEntry, type ChainedAuditEntry, type Stores } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { at, auditEntry, issuedKey, member, organisation } from './support/fixtures.js';
import { forEachTarget } from './support/targets.js';
import { rejection } from '@cos/test-support/rejection';
import { storePorts } from '@cos/core/testing/contracts';

/** Entries without their chain fields (seq, prevHash, hash; the chain has tests of its own). */
function unchained(entries: readonly ChainedAuditEntry[]): AuditEntry[] {
  return entries.map(({ seq: _s, prevHash: _p, hash: _h, ...e }) => e);
}

forEachTarget('SQL stores', (target) => {
  let store: SqlStore;
  let stores: Stores;
  beforeEach(async () => {
    store = await target.open();
    stores = storePorts(store);
  });
  afterEach(() => store.close());

  describe('organisations', () => {
    it('C-20: round-trips every field, booleans as booleans, timestamps to the millisecond', async () => {
      const o = organisation({
        industrySection: 'K',
        isSystem: true,
        createdAt: new Date('2026-06-10T08:00:00.001Z'),
        updatedAt: new Date('2026-06-10T08:00:00.999Z'),
      });
      await stores.organisations.create(o);
      const back = await stores.organisations.findById(o.id);
      expect(back).to.deep.equal(o);
      expect(back!.isSystem).to.equal(true);
      expect(back!.createdAt.toISOString()).to.equal('2026-06-10T08:00:00.001Z');
      const plain = organisation();
      await stores.organisations.create(plain);
      const plainBack = await stores.organisations.findById(plain.id);
      expect(plainBack!.isSystem).to.equal(false);
      expect(plainBack!.industrySection).to.equal(null);
    });

    it('C-6: timestamps keep their instant far from the epoch (before 1970, year 9999)', async () => {
      const old = organisation({ createdAt: new Date('1969-12-31T23:59:59.999Z'), updatedAt: new Date('9999-12-31T23:59:59.999Z') });
      await stores.organisations.create(old);
      const back = await stores.organisations.findById(old.id);
      expect(back!.createdAt.getTime()).to.equal(old.createdAt.getTime());
      expect(back!.updatedAt.getTime()).to.equal(old.updatedAt.getTime());
    });

    it('findById of an unknown id is null', async () => {
      expect(await stores.organisations.findById('00000000-0000-4000-8000-000000000000')).to.equal(null);
      expect(await stores.organisations.findById('not-a-uuid')).to.equal(null);
    });

    it('C-13: a duplicate slug is ConflictError with details [{field:"slug", issue:"already taken"}]', async () => {
      const first = organisation({ slug: 'acme' });
      await stores.organisations.create(first);
      const e = await rejection(stores.organisations.create(organisation({ slug: 'acme' })));
      expect(e).to.be.instanceOf(ConflictError);
      expect((e as ConflictError).details).to.deep.equal([{ field: 'slug', issue: 'already taken' }]);
      const page = await stores.organisations.list({ limit: 10, after: null });
      expect(page.map((o) => o.id)).to.deep.equal([first.id]);
    });

    it('update changes only what is given and returns the record; null for an unknown id', async () => {
      const o = organisation({ industrySection: 'C' });
      await stores.organisations.create(o);
      const renamed = await stores.organisations.update(o.id, { name: 'Renamed', updatedAt: at(5) });
      expect(renamed).to.deep.equal({ ...o, name: 'Renamed', updatedAt: at(5) });
      const cleared = await stores.organisations.update(o.id, { industrySection: null, updatedAt: at(6) });
      expect(cleared).to.deep.equal({ ...o, name: 'Renamed', industrySection: null, updatedAt: at(6) });
      expect(await stores.organisations.findById(o.id)).to.deep.equal(cleared);
      expect(await stores.organisations.update('00000000-0000-4000-8000-000000000000', { name: 'x', updatedAt: at(7) })).to.equal(null);
    });

    it('findFirstSystem returns the oldest system organisation, null when there is none', async () => {
      expect(await stores.organisations.findFirstSystem()).to.equal(null);
      await stores.organisations.create(organisation({ createdAt: at(0) }));
      const later = organisation({ isSystem: true, createdAt: at(20) });
      const earlier = organisation({ isSystem: true, createdAt: at(10) });
      await stores.organisations.create(later);
      await stores.organisations.create(earlier);
      expect(await stores.organisations.findFirstSystem()).to.deep.equal(earlier);
    });

    it('C-7: lists oldest first, ties on created_at broken by id; C-6: strictly after the keyset position', async () => {
      const ids = ['c', 'a', 'b', 'e', 'd'].map((c) => `0000000${c}-0000-4000-8000-000000000000`);
      const sameInstant = ids.map((id) => organisation({ id, createdAt: at(1) }));
      const older = organisation({ createdAt: at(0) });
      for (const o of [...sameInstant, older]) await stores.organisations.create(o);
      const all = await stores.organisations.list({ limit: 100, after: null });
      expect(all.map((o) => o.id)).to.deep.equal([older.id, ...[...ids].sort()]);
      const after = await stores.organisations.list({ limit: 2, after: { createdAt: at(1), id: [...ids].sort()[1]! } });
      expect(after.map((o) => o.id)).to.deep.equal([...ids].sort().slice(2, 4));
    });
  });

  describe('members', () => {
    it('C-21: add, list in (created_at, id) order, remove', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const a = member(o.id, { createdAt: at(2) });
      const b = member(o.id, { createdAt: at(1), email: 'Mixed.Case@Example.COM' });
      await stores.members.add(a);
      await stores.members.add(b);
      expect(await stores.members.list(o.id, { limit: 10, after: null })).to.deep.equal([b, a]);
      expect(await stores.members.list(o.id, { limit: 10, after: { createdAt: b.createdAt, id: b.id } })).to.deep.equal([a]);
      expect(await stores.members.remove(o.id, b.id)).to.equal(true);
      expect(await stores.members.remove(o.id, b.id)).to.equal(false);
      expect(await stores.members.list(o.id, { limit: 10, after: null })).to.deep.equal([a]);
    });

    it('C-21: the same e-mail in another case in one organisation is ConflictError (field "email"); another organisation may use it', async () => {
      const o1 = organisation();
      const o2 = organisation();
      await stores.organisations.create(o1);
      await stores.organisations.create(o2);
      await stores.members.add(member(o1.id, { email: 'Ana@Example.com' }));
      const e = await rejection(stores.members.add(member(o1.id, { email: 'ana@EXAMPLE.COM' })));
      expect(e).to.be.instanceOf(ConflictError);
      expect((e as ConflictError).details).to.deep.equal([{ field: 'email', issue: 'already taken' }]);
      await stores.members.add(member(o2.id, { email: 'ana@example.com' }));
      // Case folding is JavaScript's on both dialects (SQLite's lower() would fold ASCII only).
      await stores.members.add(member(o1.id, { email: 'ÉLODIE@example.com' }));
      const e2 = await rejection(stores.members.add(member(o1.id, { email: 'élodie@example.com' })));
      expect(e2).to.be.instanceOf(ConflictError);
    });

    it('remove of a member of another organisation is false and keeps it', async () => {
      const o1 = organisation();
      const o2 = organisation();
      await stores.organisations.create(o1);
      await stores.organisations.create(o2);
      const m = member(o1.id);
      await stores.members.add(m);
      expect(await stores.members.remove(o2.id, m.id)).to.equal(false);
      expect(await stores.members.list(o1.id, { limit: 10, after: null })).to.deep.equal([m]);
    });

    it('a member of an organisation that does not exist is NotFoundError (foreign key)', async () => {
      const e = await rejection(stores.members.add(member('00000000-0000-4000-8000-00000000dead')));
      expect(e).to.be.instanceOf(NotFoundError);
    });
  });

  describe('api keys', () => {
    it('C-22: round-trips a key with expiry and revocation to the millisecond', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const { key } = issuedKey(o.id, { expiresAt: new Date('2027-01-01T00:00:00.007Z'), createdAt: at(3), revokedAt: null });
      await stores.apiKeys.insert(key);
      expect(await stores.apiKeys.findById(o.id, key.id)).to.deep.equal(key);
      expect(await stores.apiKeys.revoke(o.id, key.id, new Date('2026-06-10T09:00:00.042Z'))).to.equal(true);
      const back = await stores.apiKeys.findById(o.id, key.id);
      expect(back!.revokedAt!.toISOString()).to.equal('2026-06-10T09:00:00.042Z');
    });

    it('C-34: findById of a key in another organisation is null', async () => {
      const o1 = organisation();
      const o2 = organisation();
      await stores.organisations.create(o1);
      await stores.organisations.create(o2);
      const { key } = issuedKey(o1.id);
      await stores.apiKeys.insert(key);
      expect(await stores.apiKeys.findById(o2.id, key.id)).to.equal(null);
    });

    it('C-31: findCredential finds the key and its organisation by digest in one query', async () => {
      const o = organisation({ isSystem: true, industrySection: 'J' });
      await stores.organisations.create(o);
      const { key } = issuedKey(o.id);
      await stores.apiKeys.insert(key);
      const queries: string[] = [];
      const stop = store.onStatement((q) => void queries.push(q.sql));
      try {
        expect(await stores.apiKeys.findCredential(key.digest)).to.deep.equal({ key, organisation: o });
      } finally {
        stop();
      }
      expect(queries).to.have.length(1);
      expect(await stores.apiKeys.findCredential('0'.repeat(64))).to.equal(null);
    });

    it('C-31: a duplicate digest is ConflictError', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const { key } = issuedKey(o.id);
      await stores.apiKeys.insert(key);
      const e = await rejection(stores.apiKeys.insert({ ...key, id: '00000000-0000-4000-8000-00000000beef' }));
      expect(e).to.be.instanceOf(ConflictError);
    });

    it('C-31: the schema accepts only a lower-case hex SHA-256 as digest, never a raw key', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const { key, raw } = issuedKey(o.id);
      const e = await rejection(stores.apiKeys.insert({ ...key, digest: raw }));
      expect(e).to.be.instanceOf(Error);
      expect(e).not.to.be.instanceOf(ConflictError);
      expect(await stores.apiKeys.list(o.id, { limit: 10, after: null })).to.deep.equal([]);
    });

    it('C-35: revoke is true once, then false; false for another organisation or an unknown key', async () => {
      const o1 = organisation();
      const o2 = organisation();
      await stores.organisations.create(o1);
      await stores.organisations.create(o2);
      const { key } = issuedKey(o1.id);
      await stores.apiKeys.insert(key);
      expect(await stores.apiKeys.revoke(o2.id, key.id, at(1))).to.equal(false);
      expect(await stores.apiKeys.revoke(o1.id, '00000000-0000-4000-8000-000000000000', at(1))).to.equal(false);
      expect(await stores.apiKeys.revoke(o1.id, key.id, at(1))).to.equal(true);
      expect(await stores.apiKeys.revoke(o1.id, key.id, at(2))).to.equal(false);
      expect((await stores.apiKeys.findById(o1.id, key.id))!.revokedAt).to.deep.equal(at(1));
    });

    it('C-25: countActive counts neither revoked keys nor keys expired at "now" (expiry is exact)', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const active = issuedKey(o.id).key;
      const expiresLater = issuedKey(o.id, { expiresAt: at(1001) }).key;
      const expiresNow = issuedKey(o.id, { expiresAt: at(1000) }).key;
      const revoked = issuedKey(o.id, { revokedAt: at(5) }).key;
      for (const k of [active, expiresLater, expiresNow, revoked]) await stores.apiKeys.insert(k);
      expect(await stores.apiKeys.countActive(o.id, at(1000))).to.equal(2);
      expect(await stores.apiKeys.countActive(o.id, at(999))).to.equal(3);
      const other = organisation();
      await stores.organisations.create(other);
      expect(await stores.apiKeys.countActive(other.id, at(0))).to.equal(0);
    });

    it('C-6/C-7: lists one organisation\'s keys by (created_at, id), strictly after the cursor', async () => {
      const o = organisation();
      const other = organisation();
      await stores.organisations.create(o);
      await stores.organisations.create(other);
      const keys = [3, 1, 2, 2, 0].map((ms) => issuedKey(o.id, { createdAt: at(ms) }).key);
      for (const k of keys) await stores.apiKeys.insert(k);
      await stores.apiKeys.insert(issuedKey(other.id, { createdAt: at(1) }).key);
      const expected = [...keys].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1));
      const seen = [];
      let after = null;
      for (;;) {
        const page: Awaited<ReturnType<Stores['apiKeys']['list']>> = await stores.apiKeys.list(o.id, { limit: 2, after });
        if (page.length === 0) break;
        seen.push(...page);
        const last = page[page.length - 1]!;
        after = { createdAt: last.createdAt, id: last.id };
      }
      expect(seen).to.deep.equal(expected);
    });
  });

  describe('audit log', () => {
    it('C-40/C-41: appends entries with both actor kinds and lists them by (occurred_at, id) with filters', async () => {
      const o1 = organisation();
      const o2 = organisation();
      await stores.organisations.create(o1);
      await stores.organisations.create(o2);
      const { key } = issuedKey(o1.id);
      const e1 = auditEntry(o1.id, { occurredAt: at(2), kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix, actor: { type: 'api_key', keyId: key.id } });
      const e2 = auditEntry(o1.id, { occurredAt: at(1), kind: 'organisation_created' });
      const e3 = auditEntry(o2.id, { occurredAt: at(3), kind: 'api_key_issued', keyId: key.id, keyPrefix: key.keyPrefix });
      for (const e of [e1, e2, e3]) await stores.audit.append(e);
      expect(unchained(await stores.audit.list({}, { limit: 10, after: null }))).to.deep.equal([e2, e1, e3]);
      expect(unchained(await stores.audit.list({ organisationId: o1.id }, { limit: 10, after: null }))).to.deep.equal([e2, e1]);
      expect(unchained(await stores.audit.list({ kind: 'api_key_revoked' }, { limit: 10, after: null }))).to.deep.equal([e1]);
      expect(unchained(await stores.audit.list({ organisationId: o2.id, kind: 'api_key_revoked' }, { limit: 10, after: null }))).to.deep.equal([]);
      expect(unchained(await stores.audit.list({}, { limit: 10, after: { createdAt: e1.occurredAt, id: e1.id } }))).to.deep.equal([e3]);
      expect(unchained(await stores.audit.list({ organisationId: o1.id }, { limit: 1, after: { createdAt: e2.occurredAt, id: e2.id } }))).to.deep.equal([e1]);
    });
  });

  describe('unit of work', () => {
    it('C-40: a revocation and its audit entry commit together', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const { key } = issuedKey(o.id);
      await stores.apiKeys.insert(key);
      const entry = auditEntry(o.id, { kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix });
      const result = await store.unitOfWork.changeCredentials([o.id], async (tx) => {
        const revoked = await tx.apiKeys.revoke(o.id, key.id, at(9));
        await tx.audit.append(entry);
        return revoked;
      });
      expect(result).to.equal(true);
      expect((await stores.apiKeys.findById(o.id, key.id))!.revokedAt).to.deep.equal(at(9));
      expect(unchained(await stores.audit.list({}, { limit: 10, after: null }))).to.deep.equal([entry]);
    });

    it('C-40: a failure between the revocation and its audit entry leaves neither', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const { key } = issuedKey(o.id);
      await stores.apiKeys.insert(key);
      const boom = new Error('injected failure');
      const e = await rejection(
        store.unitOfWork.changeCredentials([o.id], async (tx) => {
          expect(await tx.apiKeys.revoke(o.id, key.id, at(9))).to.equal(true);
          throw boom;
        }),
      );
      expect(e).to.equal(boom);
      expect((await stores.apiKeys.findById(o.id, key.id))!.revokedAt).to.equal(null);
      expect(unchained(await stores.audit.list({}, { limit: 10, after: null }))).to.deep.equal([]);
    });

    it('C-40: a failing audit append (duplicate id) rolls the revocation back and surfaces ConflictError', async () => {
      const o = organisation();
      await stores.organisations.create(o);
      const { key } = issuedKey(o.id);
      await stores.apiKeys.insert(key);
      const existing = auditEntry(o.id);
      await stores.audit.append(existing);
      const e = await rejection(
        store.unitOfWork.changeCredentials([o.id], async (tx) => {
          await tx.apiKeys.revoke(o.id, key.id, at(9));
          await tx.audit.append({ ...existing, kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix });
        }),
      );
      expect(e).to.be.instanceOf(ConflictError);
      expect((await stores.apiKeys.findById(o.id, key.id))!.revokedAt).to.equal(null);
      expect(unchained(await stores.audit.list({}, { limit: 10, after: null }))).to.deep.equal([existing]);
    });

    it('reads inside a unit of work see its own uncommitted writes', async () => {
      const o = organisation();
      const seen = await store.unitOfWork.run(async (tx) => {
        await tx.organisations.create(o);
        return tx.organisations.findById(o.id);
      });
      expect(seen).to.deep.equal(o);
    });
  });

  describe('health', () => {
    it('C-4: ping resolves while the store answers', async () => {
      await store.health.ping();
    });
  });

  it('close() is idempotent', async () => {
    await store.close();
    await store.close();
    store = await target.open();
  });

});
