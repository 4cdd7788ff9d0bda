import { expect } from 'chai';
import {
  ConflictError,
  FOREIGN_ORGANISATION_MESSAGE,
  ForbiddenError,
  ISSUE_EXTRA_FIELD,
  NotFoundError,
  namedOperator,
  OPERATOR,
  OPERATOR_REQUIRED_MESSAGE,
  ValidationError,
} from '@cos/core';
import { UNKNOWN_UUID, fieldsOf, fixture, rejectsWith } from './use-cases-fixtures.js';

describe('use case: members', () => {
  it('C-21: the operator adds a member: id from Random, createdAt from the Clock, e-mail trimmed', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const before = f.uuids.length;
    const member = await f.core.members.add(OPERATOR, org.id, { email: '  ada@example.org ' });
    expect(member).to.deep.equal({ id: f.uuids[before], organisationId: org.id, email: 'ada@example.org', createdAt: f.clock.now() });
    expect(await f.store.stores.members.list(org.id, { limit: 10, after: null })).to.deep.equal([member]);
  });

  it('C-21: adding and removing members is operator-only: keys, even platform keys, get 403', async () => {
    const f = fixture();
    const platform = await f.platform();
    const tenant = await f.tenant('acme');
    const member = await f.core.members.add(OPERATOR, tenant.org.id, { email: 'a@b.io' });
    for (const principal of [platform.principal, tenant.principal]) {
      const add = await rejectsWith(f.core.members.add(principal, tenant.org.id, { email: 'c@d.io' }), ForbiddenError);
      expect(add.message).to.equal(OPERATOR_REQUIRED_MESSAGE);
      await rejectsWith(f.core.members.remove(principal, tenant.org.id, member.id), ForbiddenError);
    }
  });

  it('C-58, C-63: add and remove write member_added / member_removed with the member (by id, never the e-mail address) and the named operator; failures write nothing', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const audit = async () => (await f.store.stores.audit.list({ organisationId: org.id }, { limit: 100, after: null })).filter((e) => e.kind.startsWith('member_'));
    const ada = namedOperator('ada');
    const m = await f.core.members.add(ada, org.id, { email: 'ada@example.org' });
    await rejectsWith(f.core.members.add(ada, org.id, { email: 'ADA@example.org' }), ConflictError);
    await f.core.members.remove(OPERATOR, org.id, m.id);
    await rejectsWith(f.core.members.remove(ada, org.id, m.id), NotFoundError);
    const entries = await audit();
    expect(entries.map((e) => ({ kind: e.kind, actor: e.actor, member: e.member, keyId: e.keyId, at: e.occurredAt }))).to.deep.equal([
      { kind: 'member_added', actor: { type: 'operator', name: 'ada' }, member: { id: m.id }, keyId: null, at: f.clock.now() },
      { kind: 'member_removed', actor: { type: 'operator' }, member: { id: m.id }, keyId: null, at: f.clock.now() },
    ]);
  });

  it('C-58: a member_removed entry that cannot be written leaves the member in place (same unit of work)', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const m = await f.core.members.add(OPERATOR, org.id, { email: 'ada@example.org' });
    const append = f.store.stores.audit.append.bind(f.store.stores.audit);
    const audit = f.store.stores.audit as { append: typeof append };
    const original = Object.getPrototypeOf(audit).append as typeof append;
    Object.getPrototypeOf(audit).append = () => Promise.reject(new Error('audit down'));
    try {
      await f.core.members.remove(OPERATOR, org.id, m.id).then(
        () => expect.fail('remove succeeded'),
        (e: Error) => expect(e.message).to.equal('audit down'),
      );
    } finally {
      Object.getPrototypeOf(audit).append = original;
    }
    expect((await f.store.stores.members.list(org.id, { limit: 10, after: null })).map((x) => x.id)).to.deep.equal([m.id]);
  });

  it('a duplicate e-mail in the organisation is ConflictError from the store', async () => {
    const f = fixture();
    const org = await f.org('acme');
    await f.core.members.add(OPERATOR, org.id, { email: 'ada@example.org' });
    await rejectsWith(f.core.members.add(OPERATOR, org.id, { email: 'ADA@example.org' }), ConflictError);
  });

  it('adding to an unknown organisation is 404; an invalid body and id are 400 together (C-11)', async () => {
    const f = fixture();
    await rejectsWith(f.core.members.add(OPERATOR, UNKNOWN_UUID, { email: 'a@b.io' }), NotFoundError);
    const e = await rejectsWith(f.core.members.add(OPERATOR, 'x', { email: 'nope', role: 'admin' }), ValidationError);
    expect(e.details).to.deep.equal([
      { field: 'org_id', issue: 'must be a UUID' },
      { field: 'email', issue: 'must be an e-mail address of at most 254 characters' },
      { field: 'role', issue: ISSUE_EXTRA_FIELD },
    ]);
  });

  it('remove: 404 when the member is not in that organisation; 400 field member_id when malformed (C-8)', async () => {
    const f = fixture();
    const a = await f.org('a');
    const b = await f.org('b');
    const member = await f.core.members.add(OPERATOR, a.id, { email: 'a@b.io' });
    await rejectsWith(f.core.members.remove(OPERATOR, b.id, member.id), NotFoundError);
    const e = await rejectsWith(f.core.members.remove(OPERATOR, a.id, 'm-1'), ValidationError);
    expect(fieldsOf(e)).to.deep.equal(['member_id']);
    await f.core.members.remove(OPERATOR, a.id, member.id.toUpperCase());
    await rejectsWith(f.core.members.remove(OPERATOR, a.id, member.id), NotFoundError);
  });

  it('spec §5.4: a standard key lists its own members page by page (C-6, C-7)', async () => {
    const f = fixture();
    const { org, principal } = await f.tenant('acme');
    const emails: string[] = [];
    for (let i = 0; i < 5; i++) {
      emails.push(`m${i}@example.org`);
      await f.core.members.add(OPERATOR, org.id, { email: emails[i] });
      f.clock.advance(10);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await f.core.members.list(principal, org.id, { limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...page.items.map((m) => m.email));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null);
    expect(seen).to.deep.equal(emails);
    expect(pages).to.equal(3);
  });

  it('C-34: a standard key listing another organisation\'s members gets 403, existing or not', async () => {
    const f = fixture();
    const { principal } = await f.tenant('acme');
    const other = await f.org('other');
    for (const id of [other.id, UNKNOWN_UUID, 'junk']) {
      const e = await rejectsWith(f.core.members.list(principal, id, {}), ForbiddenError);
      expect(e.message).to.equal(FOREIGN_ORGANISATION_MESSAGE);
    }
  });

  it('a platform key lists any organisation\'s members; an unknown organisation is 404', async () => {
    const f = fixture();
    const { principal } = await f.platform();
    const org = await f.org('acme');
    await f.core.members.add(OPERATOR, org.id, { email: 'a@b.io' });
    expect((await f.core.members.list(principal, org.id, {})).items.map((m) => m.email)).to.deep.equal(['a@b.io']);
    await rejectsWith(f.core.members.list(principal, UNKNOWN_UUID, {}), NotFoundError);
  });

  it('C-5: a bad limit on the member list is 400 field limit', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const e = await rejectsWith(f.core.members.list(OPERATOR, org.id, { limit: ['1', '2'] }), ValidationError);
    expect(fieldsOf(e)).to.deep.equal(['limit']);
  });
});
