import { expect } from 'chai';
import {
  ConflictError,
  FOREIGN_ORGANISATION_MESSAGE,
  ForbiddenError,
  ISSUE_EXTRA_FIELD,
  ISSUE_FIELD_REQUIRED,
  NotFoundError,
  OPERATOR,
  OPERATOR_REQUIRED_MESSAGE,
  PLATFORM_REQUIRED_MESSAGE,
  UnavailableError,
  ValidationError,
  createCore,
  decodeCursor,
  type Organisation,
  type PageRequest,
} from '@cos/core';
import { FakeClock, InMemoryRateCounter } from '@cos/core/testing';
import { UNKNOWN_UUID, admitted, coreWithOrganisations, fieldsOf, fixture, rejectsWith } from './use-cases-fixtures.js';

describe('use case: organisations', () => {
  describe('authorisation (C-33, C-34, spec §5.3-§5.5)', () => {
    it('C-33: a standard key listing organisations gets 403 platform-required, before the query is validated', async () => {
      const f = fixture();
      const { principal } = await f.tenant('acme');
      const e = await rejectsWith(f.core.organisations.list(principal, { limit: 'abc' }), ForbiddenError);
      expect(e.message).to.equal(PLATFORM_REQUIRED_MESSAGE);
    });

    it('C-33: a standard key creating an organisation gets 403 even with an invalid body', async () => {
      const f = fixture();
      const { principal } = await f.tenant('acme');
      const e = await rejectsWith(f.core.organisations.create(principal, { slug: 'NOT OK', industry_section: 'A' }), ForbiddenError);
      expect(e.message).to.equal(PLATFORM_REQUIRED_MESSAGE);
    });

    it('C-34: a standard key naming another existing organisation gets 403, not 404', async () => {
      const f = fixture();
      const { principal } = await f.tenant('acme');
      const other = await f.org('other');
      const e = await rejectsWith(f.core.organisations.get(principal, other.id), ForbiddenError);
      expect(e.message).to.equal(FOREIGN_ORGANISATION_MESSAGE);
      await rejectsWith(f.core.organisations.replace(principal, other.id, { name: 'x' }), ForbiddenError);
      await rejectsWith(f.core.organisations.patch(principal, other.id, {}), ForbiddenError);
    });

    it('C-34: a standard key naming an organisation that does not exist gets 403', async () => {
      const f = fixture();
      const { principal } = await f.tenant('acme');
      const e = await rejectsWith(f.core.organisations.get(principal, UNKNOWN_UUID), ForbiddenError);
      expect(e.message).to.equal(FOREIGN_ORGANISATION_MESSAGE);
    });

    it('C-34: a standard key naming a malformed organisation id gets 403, not 400', async () => {
      const f = fixture();
      const { principal } = await f.tenant('acme');
      await rejectsWith(f.core.organisations.get(principal, 'not-a-uuid'), ForbiddenError);
      await rejectsWith(f.core.organisations.patch(principal, '', { bogus: 1 }), ForbiddenError);
    });

    it('spec §5.4: a standard key reads and updates its own organisation, upper-case id accepted (C-8)', async () => {
      const f = fixture();
      const { org, principal } = await f.tenant('acme');
      expect((await f.core.organisations.get(principal, org.id.toUpperCase())).id).to.equal(org.id);
      expect((await f.core.organisations.replace(principal, org.id, { name: 'Acme Two' })).name).to.equal('Acme Two');
      expect((await f.core.organisations.patch(principal, org.id, { name: 'Acme Three' })).name).to.equal('Acme Three');
    });

    it('spec §5.5: a platform key reads any organisation, lists and creates organisations', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      f.clock.advance(1);
      const tenant = await f.org('acme');
      expect((await f.core.organisations.get(principal, tenant.id)).slug).to.equal('acme');
      f.clock.advance(1);
      const created = await f.core.organisations.create(principal, { name: 'Beta', slug: 'beta' });
      expect(created.isSystem).to.equal(false);
      expect((await f.core.organisations.list(principal, {})).items.map((o) => o.slug)).to.deep.equal(['platform', 'acme', 'beta']);
    });

    it('C-8: for a platform key a malformed organisation id is 400 field org_id', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      const e = await rejectsWith(f.core.organisations.get(principal, 'nope'), ValidationError);
      expect(e.details).to.deep.equal([{ field: 'org_id', issue: 'must be a UUID' }]);
    });

    it('an unknown organisation is 404 for a platform key and for the operator', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      await rejectsWith(f.core.organisations.get(principal, UNKNOWN_UUID), NotFoundError);
      await rejectsWith(f.core.organisations.get(OPERATOR, UNKNOWN_UUID), NotFoundError);
      await rejectsWith(f.core.organisations.replace(OPERATOR, UNKNOWN_UUID, { name: 'x' }), NotFoundError);
      await rejectsWith(f.core.organisations.patch(principal, UNKNOWN_UUID, { name: 'x' }), NotFoundError);
      await rejectsWith(f.core.organisations.patch(principal, UNKNOWN_UUID, {}), NotFoundError);
      await rejectsWith(f.core.organisations.classify(OPERATOR, UNKNOWN_UUID, 'A'), NotFoundError);
    });

    it('only the operator may create a system organisation; a platform key gets 403', async () => {
      const f = fixture();
      const { principal } = await f.platform();
      const e = await rejectsWith(
        f.core.organisations.create(principal, { name: 'Second platform', slug: 'platform-2' }, { isSystem: true }),
        ForbiddenError,
      );
      expect(e.message).to.equal(OPERATOR_REQUIRED_MESSAGE);
      const system = await f.core.organisations.create(OPERATOR, { name: 'Second', slug: 'platform-2' }, { isSystem: true });
      expect(system.isSystem).to.equal(true);
    });

    it('C-24: classify is operator-only, a platform key gets 403', async () => {
      const f = fixture();
      const { org, principal } = await f.platform();
      await rejectsWith(f.core.organisations.classify(principal, org.id, 'C'), ForbiddenError);
    });
  });

  describe('create', () => {
    it('C-41: the id comes from Random, timestamps from the Clock, and organisation_created is recorded', async () => {
      const f = fixture();
      const { principal, issued } = await f.platform();
      f.clock.advance(5_000);
      const before = f.uuids.length;
      const org = await f.core.organisations.create(principal, { name: '  Acme Ltd ', slug: 'acme' });
      expect(f.uuids.slice(before)).to.include(org.id);
      expect(org).to.deep.include({ name: 'Acme Ltd', slug: 'acme', industrySection: null, isSystem: false });
      expect(org.createdAt).to.deep.equal(f.clock.now());
      expect(org.updatedAt).to.deep.equal(f.clock.now());
      expect(await f.store.stores.organisations.findById(org.id)).to.deep.equal(org);
      const audit = await f.store.stores.audit.list({ organisationId: org.id }, { limit: 10, after: null });
      expect(audit.map(({ id: _id, seq: _seq, prevHash: _prev, hash: _hash, ...rest }) => rest)).to.deep.equal([
        {
          kind: 'organisation_created',
          occurredAt: f.clock.now(),
          organisationId: org.id,
          keyId: null,
          keyPrefix: null,
          actor: { type: 'api_key', keyId: issued.key.id },
        },
      ]);
    });

    it('C-40: the operator is recorded as {type: operator}', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const [entry] = await f.store.stores.audit.list({ organisationId: org.id }, { limit: 10, after: null });
      expect(entry?.actor).to.deep.equal({ type: 'operator' });
    });

    it('C-13: a duplicate slug is ConflictError [{slug, already taken}] and writes no audit entry', async () => {
      const f = fixture();
      await f.org('acme');
      const e = await rejectsWith(f.core.organisations.create(OPERATOR, { name: 'Other', slug: 'acme' }), ConflictError);
      expect(e.details).to.deep.equal([{ field: 'slug', issue: 'already taken' }]);
      const audit = await f.store.stores.audit.list({ kind: 'organisation_created' }, { limit: 10, after: null });
      expect(audit).to.have.length(1);
    });

    it('C-12: industry_section and is_system in the body are 400, with all failures at once (C-11)', async () => {
      const f = fixture();
      const e = await rejectsWith(
        f.core.organisations.create(OPERATOR, { slug: 'acme', industry_section: 'C', is_system: true }),
        ValidationError,
      );
      expect(e.details).to.deep.equal([
        { field: 'name', issue: ISSUE_FIELD_REQUIRED },
        { field: 'industry_section', issue: ISSUE_EXTRA_FIELD },
        { field: 'is_system', issue: ISSUE_EXTRA_FIELD },
      ]);
    });
  });

  describe('replace (PUT) and patch (PATCH)', () => {
    it('C-14: PUT requires name', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const e = await rejectsWith(f.core.organisations.replace(OPERATOR, org.id, {}), ValidationError);
      expect(e.details).to.deep.equal([{ field: 'name', issue: ISSUE_FIELD_REQUIRED }]);
    });

    it('C-12: slug in PUT or PATCH is 400 extra field, reported with a bad org id together (C-11)', async () => {
      const f = fixture();
      const org = await f.org('acme');
      const put = await rejectsWith(f.core.organisations.replace(OPERATOR, org.id, { name: 'x', slug: 'new' }), ValidationError);
      expect(put.details).to.deep.equal([{ field: 'slug', issue: ISSUE_EXTRA_FIELD }]);
      const patch = await rejectsWith(f.core.organisations.patch(OPERATOR, 'bad', { slug: 'new' }), ValidationError);
      expect(fieldsOf(patch)).to.deep.equal(['org_id', 'slug']);
    });

    it('C-14: PATCH {} returns the record unchanged and writes nothing', async () => {
      const f = fixture();
      const org = await f.org('acme');
      f.clock.advance(60_000);
      const patched = await f.core.organisations.patch(OPERATOR, org.id, {});
      expect(patched).to.deep.equal(org);
      const audit = await f.store.stores.audit.list({ kind: 'organisation_updated' }, { limit: 10, after: null });
      expect(audit).to.deep.equal([]);
    });

    it('a PATCH or PUT with the current name changes nothing and writes nothing', async () => {
      const f = fixture();
      const org = await f.org('acme', { name: 'Acme' });
      f.clock.advance(60_000);
      expect(await f.core.organisations.patch(OPERATOR, org.id, { name: ' Acme ' })).to.deep.equal(org);
      expect(await f.core.organisations.replace(OPERATOR, org.id, { name: 'Acme' })).to.deep.equal(org);
      expect(await f.store.stores.audit.list({ kind: 'organisation_updated' }, { limit: 10, after: null })).to.deep.equal([]);
    });

    it('C-41: a real change bumps updatedAt only and appends organisation_updated with the actor', async () => {
      const f = fixture();
      const { org, principal } = await f.tenant('acme');
      f.clock.advance(90_000);
      const updated = await f.core.organisations.patch(principal, org.id, { name: 'Acme Renamed' });
      expect(updated).to.deep.equal({ ...org, name: 'Acme Renamed', updatedAt: f.clock.now() });
      expect(await f.store.stores.organisations.findById(org.id)).to.deep.equal(updated);
      const audit = await f.store.stores.audit.list({ kind: 'organisation_updated' }, { limit: 10, after: null });
      expect(audit).to.have.length(1);
      expect(audit[0]).to.deep.include({ organisationId: org.id, occurredAt: f.clock.now(), keyId: null, keyPrefix: null });
      expect(audit[0]?.actor).to.deep.equal({ type: 'api_key', keyId: principal.keyId });
    });
  });

  describe('classify', () => {
    it('C-24: sections A..U in any case are stored upper-case; none clears; each change is audited', async () => {
      const f = fixture();
      const org = await f.org('acme');
      expect((await f.core.organisations.classify(OPERATOR, org.id, 'c')).industrySection).to.equal('C');
      expect((await f.core.organisations.classify(OPERATOR, org.id, 'C')).industrySection).to.equal('C');
      expect((await f.core.organisations.classify(OPERATOR, org.id, 'none')).industrySection).to.equal(null);
      const audit = await f.store.stores.audit.list({ kind: 'organisation_updated' }, { limit: 10, after: null });
      expect(audit.map((e) => e.actor)).to.deep.equal([{ type: 'operator' }, { type: 'operator' }]);
    });

    it('C-24: anything else is ValidationError field section', async () => {
      const f = fixture();
      const org = await f.org('acme');
      for (const section of ['V', 'AB', '', 'nothing']) {
        const e = await rejectsWith(f.core.organisations.classify(OPERATOR, org.id, section), ValidationError);
        expect(fieldsOf(e)).to.deep.equal(['section']);
      }
    });
  });

  describe('list (C-5, C-6, C-7)', () => {
    async function seven(): Promise<{ f: ReturnType<typeof fixture>; orgs: Organisation[] }> {
      const f = fixture();
      const orgs: Organisation[] = [];
      for (let i = 0; i < 7; i++) {
        orgs.push(await f.org(`org-${i}`));
        if (i % 2 === 0) f.clock.advance(1000); // some share a createdAt: the id breaks the tie
      }
      return { f, orgs };
    }

    it('C-6/C-7: following next_cursor visits every organisation once, oldest first, null on the last page', async () => {
      const { f, orgs } = await seven();
      const seen: string[] = [];
      const cursors: Array<string | null> = [];
      let cursor: string | undefined;
      do {
        const page = await f.core.organisations.list(OPERATOR, { limit: '3', ...(cursor ? { cursor } : {}) });
        expect(page.items.length).to.be.at.most(3);
        seen.push(...page.items.map((o) => o.id));
        cursors.push(page.nextCursor);
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      const expected = [...orgs].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id));
      expect(seen).to.deep.equal(expected.map((o) => o.id));
      expect(cursors).to.have.length(3);
      expect(cursors[2]).to.equal(null);
    });

    it('C-6: the next cursor is the keyset position of the last returned item', async () => {
      const { f } = await seven();
      const page = await f.core.organisations.list(OPERATOR, { limit: 2 });
      const last = page.items[1]!;
      expect(decodeCursor(page.nextCursor!)).to.deep.equal({ createdAt: last.createdAt, id: last.id });
    });

    it('C-6: the store is asked for limit + 1 rows, and an exact last page has a null cursor', async () => {
      const requests: PageRequest[] = [];
      const { core, clock } = coreWithOrganisations((inner) => ({
        create: (o) => inner.create(o),
        findById: (id) => inner.findById(id),
        findFirstSystem: () => inner.findFirstSystem(),
        findKeyPolicy: (id) => inner.findKeyPolicy(id),
        putKeyPolicy: (id, p, at) => inner.putKeyPolicy(id, p, at),
        update: (id, c) => inner.update(id, c),
        list: (page) => {
          requests.push(page);
          return inner.list(page);
        },
      }));
      for (const slug of ['a', 'b', 'c', 'd']) {
        await core.organisations.create(OPERATOR, { name: slug, slug });
        clock.advance(1);
      }
      const first = await core.organisations.list(OPERATOR, { limit: 2 });
      const second = await core.organisations.list(OPERATOR, { limit: 2, cursor: first.nextCursor });
      expect(requests.map((r) => r.limit)).to.deep.equal([3, 3]);
      expect(first.items.map((o) => o.slug)).to.deep.equal(['a', 'b']);
      expect(second.items.map((o) => o.slug)).to.deep.equal(['c', 'd']);
      expect(second.nextCursor).to.equal(null);
    });

    it('C-5: the default page size is 20', async () => {
      const f = fixture();
      for (let i = 0; i < 21; i++) await f.org(`org-${i}`);
      const page = await f.core.organisations.list(OPERATOR, {});
      expect(page.items).to.have.length(20);
      expect(page.nextCursor).to.be.a('string');
    });

    it('C-5/C-6: a bad limit and a bad cursor are both reported', async () => {
      const f = fixture();
      const e = await rejectsWith(f.core.organisations.list(OPERATOR, { limit: 101, cursor: 'zz!' }), ValidationError);
      expect(fieldsOf(e).sort()).to.deep.equal(['cursor', 'limit']);
    });
  });

  describe('get: the record read with the key (one read path, no state outside the request)', () => {
    /** A core whose organisation store counts findById. */
    async function counting() {
      const reads = { findById: 0 };
      const { core, store } = coreWithOrganisations((inner) => ({
        ...inner,
        create: (o) => inner.create(o),
        findById: (id) => {
          reads.findById++;
          return inner.findById(id);
        },
        findFirstSystem: () => inner.findFirstSystem(),
        findKeyPolicy: (id) => inner.findKeyPolicy(id),
        putKeyPolicy: (id, p, at) => inner.putKeyPolicy(id, p, at),
        update: (id, c) => inner.update(id, c),
        list: (page) => inner.list(page),
      }));
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
      const platformOrg = await core.organisations.create(OPERATOR, { name: 'Platform', slug: 'platform' }, { isSystem: true });
      const platformKey = await core.apiKeys.issue(OPERATOR, platformOrg.id, { label: 'p' });
      return { core, reads, org, bearer: `Bearer ${issued.rawKey}`, platformBearer: `Bearer ${platformKey.rawKey}`, store };
    }

    it('spec §5.4: the caller\'s own organisation as admit() read it is the answer, without a second store read', async () => {
      const { core, reads, org, bearer } = await counting();
      const first = await admitted(core, bearer);
      expect(first.organisation).to.deep.equal(org);
      const before = reads.findById;
      const answer = await core.organisations.get(first.principal, org.id.toUpperCase(), { authenticatedOrganisation: first.organisation });
      expect(answer).to.equal(first.organisation);
      expect(reads.findById - before, 'store reads').to.equal(0);
    });

    it('without the record, or with one that is not the caller\'s own organisation asked for, the store is read', async () => {
      const { core, reads, org, bearer, platformBearer } = await counting();
      const own = await admitted(core, bearer);
      const platform = await admitted(core, platformBearer);
      let before = reads.findById;
      expect(await core.organisations.get(own.principal, org.id)).to.deep.equal(org);
      expect(reads.findById - before).to.equal(1);
      // a platform key reading a tenant, handed the tenant's record: not its own organisation
      before = reads.findById;
      expect(await core.organisations.get(platform.principal, org.id, { authenticatedOrganisation: own.organisation })).to.deep.equal(org);
      expect(reads.findById - before).to.equal(1);
      // a platform key reading a tenant, handed its own record: not the organisation asked for
      before = reads.findById;
      expect(await core.organisations.get(platform.principal, org.id, { authenticatedOrganisation: platform.organisation })).to.deep.equal(org);
      expect(reads.findById - before).to.equal(1);
      // the operator is nobody's key
      before = reads.findById;
      expect(await core.organisations.get(OPERATOR, org.id, { authenticatedOrganisation: own.organisation })).to.deep.equal(org);
      expect(reads.findById - before).to.equal(1);
    });

    it('C-57: a change committed after an authentication is read by the next request, also through another Core in the same process', async () => {
      const { core, org, bearer, store } = await counting();
      const clock = new FakeClock();
      const other = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InMemoryRateCounter(clock), clock });
      const first = await admitted(core, bearer);
      expect(first.organisation.name).to.equal('Acme');
      await other.organisations.patch(OPERATOR, org.id, { name: 'Acme Renamed' });
      // the next request authenticates again and carries the record as it is now
      const next = await admitted(core, bearer);
      expect((await core.organisations.get(next.principal, org.id, { authenticatedOrganisation: next.organisation })).name).to.equal('Acme Renamed');
      // a principal authenticated before the change keeps nothing: without the record, the store answers
      expect((await core.organisations.get(first.principal, org.id)).name).to.equal('Acme Renamed');
    });
  });

  describe('store errors', () => {
    it('C-17: UnavailableError from the store propagates unchanged', async () => {
      const down = new UnavailableError();
      const { core } = coreWithOrganisations((inner) => ({
        ...inner,
        findById: () => Promise.reject(down),
        list: () => Promise.reject(down),
      }));
      expect(await rejectsWith(core.organisations.get(OPERATOR, UNKNOWN_UUID), UnavailableError)).to.equal(down);
      expect(await rejectsWith(core.organisations.list(OPERATOR, {}), UnavailableError)).to.equal(down);
    });
  });
});
