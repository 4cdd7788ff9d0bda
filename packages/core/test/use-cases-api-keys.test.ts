import { expect } from 'chai';
import {
  ConflictError,
  FOREIGN_ORGANISATION_MESSAGE,
  ForbiddenError,
  ISSUE_EXPIRES_AT,
  ISSUE_FIELD_REQUIRED,
  KEY_PATTERN,
  NotFoundError,
  OPERATOR,
  UnauthorizedError,
  ValidationError,
  createCore,
  digestKey,
  keyStatus,
  type AuditLog,
  type OuterStores,
  type UnitOfWork,
} from '@cos/core';
import { FakeClock, InMemoryRateCounter, createInMemoryStore } from '@cos/core/testing';
import { UNKNOWN_UUID, fieldsOf, fixture, rejectsWith } from './use-cases-fixtures.js';

const page = { limit: 100, after: null } as const;

describe('use case: api keys', () => {
  describe('issue', () => {
    it('C-30/C-31: the raw key is svc_live_ + 48 alphanumerics; only its digest and 12-character prefix are stored', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const { key, rawKey } = await f.key(org.id, { label: '  deploy bot ' });
      expect(rawKey).to.match(KEY_PATTERN);
      expect(rawKey.startsWith('svc_live_')).to.equal(true);
      expect(key).to.deep.include({
        organisationId: org.id,
        label: 'deploy bot',
        keyPrefix: rawKey.slice(0, 12),
        digest: digestKey(rawKey),
        expiresAt: null,
        revokedAt: null,
      });
      expect(key.createdAt).to.deep.equal(f.clock.now());
      expect(f.uuids).to.include(key.id);
      const stored = await f.store.stores.apiKeys.findById(org.id, key.id);
      expect(stored).to.deep.equal(key);
      expect(JSON.stringify(stored)).not.to.include(rawKey);
    });

    it('C-23: environment test gives the svc_test_ prefix; expires_at in the future is kept', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const { key, rawKey } = await f.key(org.id, { label: 'ci', environment: 'test', expires_at: '2026-07-01T00:00:00Z' });
      expect(rawKey.startsWith('svc_test_')).to.equal(true);
      expect(key.expiresAt).to.deep.equal(new Date('2026-07-01T00:00:00.000Z'));
    });

    it('C-23: expires_at in the past is 400 field expires_at; label missing and a bad org id come together (C-11)', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const past = await rejectsWith(f.core.apiKeys.issue(OPERATOR, org.id, { label: 'x', expires_at: '2026-06-10T12:00:00Z' }), ValidationError);
      expect(past.details).to.deep.equal([{ field: 'expires_at', issue: ISSUE_EXPIRES_AT }]);
      const both = await rejectsWith(f.core.apiKeys.issue(OPERATOR, 'nope', {}), ValidationError);
      expect(both.details).to.deep.equal([
        { field: 'org_id', issue: 'must be a UUID' },
        { field: 'label', issue: ISSUE_FIELD_REQUIRED },
      ]);
    });

    it('C-41/C-40: issuance appends api_key_issued with the key prefix and the issuing key as actor', async () => {
      const f = fixture();
      const { org, principal } = await f.tenant('acme');
      f.clock.advance(1000);
      const issued = await f.core.apiKeys.issue(principal, org.id, { label: 'second' });
      const entries = await f.store.stores.audit.list({ organisationId: org.id, kind: 'api_key_issued' }, page);
      expect(entries).to.have.length(2);
      const { id: _id, seq: _seq, prevHash: _prev, hash: _hash, ...entry } = entries[1]!;
      expect(entry).to.deep.equal({
        kind: 'api_key_issued',
        occurredAt: f.clock.now(),
        organisationId: org.id,
        keyId: issued.key.id,
        keyPrefix: issued.key.keyPrefix,
        actor: { type: 'api_key', keyId: principal.keyId },
      });
      expect(entries[0]?.actor).to.deep.equal({ type: 'operator' });
    });

    it('C-25: one key beyond maxActiveKeysPerOrg is ConflictError saying so; revoked and expired keys do not count', async () => {
      const f = fixture({ config: { maxActiveKeysPerOrg: 2 } });
      const org = await f.org('acme');
      const first = await f.key(org.id);
      await f.key(org.id, { label: 'short-lived', expires_at: '2026-06-10T12:01:00Z' });
      const e = await rejectsWith(f.key(org.id), ConflictError);
      expect(e.message).to.match(/already has the maximum number of active (API )?keys/);
      expect(e.message).to.include('2');
      f.clock.set('2026-06-10T12:01:00Z'); // the second key expires exactly now
      const third = await f.key(org.id);
      await rejectsWith(f.key(org.id), ConflictError);
      await f.core.apiKeys.revoke(OPERATOR, org.id, first.key.id);
      await f.key(org.id);
      const issued = await f.store.stores.audit.list({ organisationId: org.id, kind: 'api_key_issued' }, page);
      expect(issued).to.have.length(4);
      expect(third.key.organisationId).to.equal(org.id);
    });

    it('an unknown organisation is 404 and nothing is written', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      await rejectsWith(f.core.apiKeys.issue(principal, UNKNOWN_UUID, { label: 'x' }), NotFoundError);
      expect(await f.store.stores.apiKeys.list(UNKNOWN_UUID, page)).to.deep.equal([]);
      expect(await f.store.stores.audit.list({ organisationId: UNKNOWN_UUID }, page)).to.deep.equal([]);
    });

    it('C-34/C-33: a standard key issuing for another organisation gets 403 before its body is validated', async () => {
      const f = fixture();
      const { principal } = await f.tenant('acme');
      const other = await f.org('other');
      const e = await rejectsWith(f.core.apiKeys.issue(principal, other.id, { nonsense: true }), ForbiddenError);
      expect(e.message).to.equal(FOREIGN_ORGANISATION_MESSAGE);
    });

    it('spec §5.5: a platform key issues keys for any organisation', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      const org = await f.org('acme');
      const issued = await f.core.apiKeys.issue(principal, org.id, { label: 'for acme' });
      const tenant = await f.principal(issued);
      expect(tenant).to.deep.include({ organisationId: org.id, isPlatform: false });
    });
  });

  describe('get and list', () => {
    it('C-34: a key id that is not in the named organisation is 404, for platform and operator', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      const a = await f.tenant('a');
      const b = await f.org('b');
      await rejectsWith(f.core.apiKeys.get(principal, b.id, a.issued.key.id), NotFoundError);
      await rejectsWith(f.core.apiKeys.get(OPERATOR, b.id, a.issued.key.id), NotFoundError);
      await rejectsWith(f.core.apiKeys.revoke(principal, b.id, a.issued.key.id), NotFoundError);
      expect((await f.core.apiKeys.get(principal, a.org.id, a.issued.key.id)).id).to.equal(a.issued.key.id);
    });

    it('C-34: a standard key naming another organisation gets 403 on get, list and revoke', async () => {
      const f = fixture();
      const a = await f.tenant('a');
      const b = await f.tenant('b');
      for (const attempt of [
        f.core.apiKeys.get(a.principal, b.org.id, b.issued.key.id),
        f.core.apiKeys.list(a.principal, b.org.id, {}),
        f.core.apiKeys.revoke(a.principal, b.org.id, b.issued.key.id),
        f.core.apiKeys.revoke(a.principal, 'garbage', 'garbage'),
      ]) {
        await rejectsWith(attempt, ForbiddenError);
      }
      expect(keyStatus((await f.store.stores.apiKeys.findById(b.org.id, b.issued.key.id))!, f.clock.now())).to.equal('active');
    });

    it('C-8: a malformed key id is 400 field key_id; upper-case ids are accepted', async () => {
      const f = fixture();
      const { org, issued, principal } = await f.tenant('acme');
      const e = await rejectsWith(f.core.apiKeys.get(principal, org.id, 'k-1'), ValidationError);
      expect(e.details).to.deep.equal([{ field: 'key_id', issue: 'must be a UUID' }]);
      const got = await f.core.apiKeys.get(principal, org.id.toUpperCase(), issued.key.id.toUpperCase());
      expect(got.id).to.equal(issued.key.id);
    });

    it('C-6/C-7: a standard key lists its own keys page by page, oldest first', async () => {
      const f = fixture();
      const { org, issued, principal } = await f.tenant('acme');
      const ids = [issued.key.id];
      for (let i = 0; i < 4; i++) {
        f.clock.advance(1000);
        ids.push((await f.key(org.id, { label: `k${i}` })).key.id);
      }
      const first = await f.core.apiKeys.list(principal, org.id, { limit: '2' });
      const second = await f.core.apiKeys.list(principal, org.id, { limit: '2', cursor: first.nextCursor });
      const third = await f.core.apiKeys.list(principal, org.id, { limit: '2', cursor: second.nextCursor });
      expect([...first.items, ...second.items, ...third.items].map((k) => k.id)).to.deep.equal(ids);
      expect(third.nextCursor).to.equal(null);
    });

    it('listing the keys of an unknown organisation is 404 for a platform key', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      await rejectsWith(f.core.apiKeys.list(principal, UNKNOWN_UUID, {}), NotFoundError);
    });
  });

  describe('revoke', () => {
    it('C-40: revocation appends api_key_revoked {organisationId, keyId, keyPrefix, actor}; the key is rejected at once (C-36)', async () => {
      const f = fixture();
      const { org, principal } = await f.tenant('acme');
      const victim = await f.key(org.id, { label: 'victim' });
      f.clock.advance(2000);
      await f.core.apiKeys.revoke(principal, org.id, victim.key.id);
      const stored = await f.store.stores.apiKeys.findById(org.id, victim.key.id);
      expect(stored?.revokedAt).to.deep.equal(f.clock.now());
      const entries = await f.store.stores.audit.list({ kind: 'api_key_revoked' }, page);
      expect(entries.map(({ id: _id, seq: _seq, prevHash: _prev, hash: _hash, ...e }) => e)).to.deep.equal([
        {
          kind: 'api_key_revoked',
          occurredAt: f.clock.now(),
          organisationId: org.id,
          keyId: victim.key.id,
          keyPrefix: victim.key.keyPrefix,
          actor: { type: 'api_key', keyId: principal.keyId },
        },
      ]);
      await rejectsWith(f.principal(victim), UnauthorizedError);
    });

    it('C-35: revoking an already revoked key succeeds and writes no second entry', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const issued = await f.key(org.id);
      await f.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
      const firstRevokedAt = (await f.store.stores.apiKeys.findById(org.id, issued.key.id))?.revokedAt;
      f.clock.advance(5000);
      await f.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
      expect(await f.store.stores.audit.list({ kind: 'api_key_revoked' }, page)).to.have.length(1);
      expect((await f.store.stores.apiKeys.findById(org.id, issued.key.id))?.revokedAt).to.deep.equal(firstRevokedAt);
    });

    it('C-35: a key may revoke itself; the operator is recorded as {type: operator}', async () => {
      const f = fixture();
      const { org, issued, principal } = await f.tenant('acme');
      await f.core.apiKeys.revoke(principal, org.id, issued.key.id);
      await rejectsWith(f.principal(issued), UnauthorizedError);
      const other = await f.key(org.id);
      await f.core.apiKeys.revoke(OPERATOR, org.id, other.key.id);
      const entries = await f.store.stores.audit.list({ kind: 'api_key_revoked' }, page);
      expect(entries.map((e) => e.actor)).to.deep.equal([{ type: 'api_key', keyId: issued.key.id }, { type: 'operator' }]);
    });

    it('an unknown key is 404 and writes nothing', async () => {
      const f = fixture();
      const org = await f.org('acme');
      await rejectsWith(f.core.apiKeys.revoke(OPERATOR, org.id, UNKNOWN_UUID), NotFoundError);
      expect(await f.store.stores.audit.list({ kind: 'api_key_revoked' }, page)).to.deep.equal([]);
    });

    it('C-40: when the audit entry cannot be written the revocation rolls back (one unit of work)', async () => {
      const store = createInMemoryStore();
      let failAudit = false;
      const withFailingAudit = <S extends OuterStores>(stores: S): S => {
        const audit: AuditLog = {
          append: (entry) => (failAudit ? Promise.reject(new Error('audit disk full')) : stores.audit.append(entry)),
          list: (filter, p) => stores.audit.list(filter, p),
          chain: (org, q) => stores.audit.chain(org, q),
          outsideChain: (org) => stores.audit.outsideChain(org),
          heads: () => stores.audit.heads(),
        };
        return { ...stores, audit };
      };
      const failingUnitOfWork: UnitOfWork = {
        run: (work) => store.unitOfWork.run((stores) => work(withFailingAudit(stores))),
        changeCredentials: (organisationIds, work) => store.unitOfWork.changeCredentials(organisationIds, (stores) => work(withFailingAudit(stores))),
      };
      const clock = new FakeClock();
      const core = createCore({
        stores: store.stores,
        unitOfWork: failingUnitOfWork,
        health: store.health,
        counter: new InMemoryRateCounter(clock),
        clock,
      });
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: 'x' });
      failAudit = true;
      let caught: unknown;
      await core.apiKeys.revoke(OPERATOR, org.id, issued.key.id).catch((e: unknown) => (caught = e));
      expect((caught as Error).message).to.equal('audit disk full');
      expect((await store.stores.apiKeys.findById(org.id, issued.key.id))?.revokedAt).to.equal(null);
      expect((await core.authenticator.authenticate(`Bearer ${issued.rawKey}`)).keyId).to.equal(issued.key.id);
    });

    it('C-8: malformed org and key ids are reported together for a platform key', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      const e = await rejectsWith(f.core.apiKeys.revoke(principal, 'x', 'y'), ValidationError);
      expect(fieldsOf(e)).to.deep.equal(['org_id', 'key_id']);
    });
  });
});
