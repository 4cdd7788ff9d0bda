/**
 * Editing a key (C-261) with its metadata (C-260) and networks (C-262), the rule that restrictions
 * never widen (C-264), and what the audit chain records of it (C-265), over the in-memory adapters.
 */
import { expect } from 'chai';
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  OPERATOR,
  ValidationError,
  type ApiKeyStore,
  type ChainedAuditEntry,
  type KeyPrincipal,
} from '@cos/core';
import { UNKNOWN_UUID, fixture, rejectsWith, withStore, type Fixture } from './use-cases-fixtures.js';
import { createTestCore } from '@cos/core/testing';
import { storePorts } from '@cos/core/testing/contracts';

const ALL = { limit: 100, after: null } as const;

async function entries(f: Fixture, kind: 'api_key_updated' | 'api_key_issued'): Promise<ChainedAuditEntry[]> {
  return f.store.stores.audit.list({ kind }, ALL);
}

describe('use case: editing a key (C-260, C-261)', () => {
  it('C-261: a PATCH changes the label and merges metadata (null removes a name); one api_key_updated entry names the changed fields, never a value', async () => {
    const f = fixture();
    const { org, principal } = await f.tenant('acme');
    const { key } = await f.key(org.id, { label: 'ci', metadata: { owner: 'team-a', ticket: 'OPS-1' } });
    const updated = await f.core.apiKeys.update(principal, org.id, key.id, { label: 'ci runner', metadata: { ticket: null, env: 'prod' } });
    expect(updated).to.deep.include({ label: 'ci runner', metadata: { owner: 'team-a', env: 'prod' }, allowedCidrs: null });
    expect(await f.store.stores.apiKeys.findById(org.id, key.id)).to.deep.equal(updated);
    const [entry, ...more] = await entries(f, 'api_key_updated');
    expect(more).to.deep.equal([]);
    expect(entry).to.deep.include({ keyId: key.id, keyPrefix: key.keyPrefix, actor: { type: 'api_key', keyId: principal.keyId }, changedFields: ['label', 'metadata'] });
    expect(entry).to.not.have.property('allowedCidrs');
    const text = JSON.stringify(await f.store.stores.audit.list({}, ALL));
    for (const value of ['team-a', 'OPS-1', 'prod']) expect(text, value).to.not.include(value);
  });

  it('C-261: a PATCH that changes nothing answers the key as it is and writes nothing', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const { key } = await f.key(org.id, { label: 'ci', metadata: { a: '1' } });
    for (const body of [{}, { label: 'ci' }, { metadata: { a: '1', gone: null } }, { allowed_cidrs: null }]) {
      expect(await f.core.apiKeys.update(OPERATOR, org.id, key.id, body), JSON.stringify(body)).to.deep.equal(key);
    }
    expect(await entries(f, 'api_key_updated')).to.deep.equal([]);
  });

  it('C-261: scopes, environment and expires_at are 400 naming the field; the key is unchanged', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const { key } = await f.key(org.id);
    const e = await rejectsWith(f.core.apiKeys.update(OPERATOR, org.id, key.id, { label: 'x', scopes: ['audit:read'], expires_at: null }), ValidationError);
    expect(e.details.map((d) => d.field)).to.deep.equal(['scopes', 'expires_at']);
    expect(await f.store.stores.apiKeys.findById(org.id, key.id)).to.deep.equal(key);
  });

  it('C-260: the merged metadata may hold at most 20 names (400 metadata); removals make room in the same PATCH', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const twenty = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, 'v']));
    const { key } = await f.key(org.id, { label: 'x', metadata: twenty });
    const e = await rejectsWith(f.core.apiKeys.update(OPERATOR, org.id, key.id, { metadata: { extra: 'v' } }), ValidationError);
    expect(e.details).to.deep.equal([{ field: 'metadata', issue: 'must hold at most 20 entries' }]);
    const swapped = await f.core.apiKeys.update(OPERATOR, org.id, key.id, { metadata: { extra: 'v', k0: null } });
    expect(Object.keys(swapped.metadata!)).to.have.length(20).and.to.include('extra').and.not.include('k0');
  });

  it('C-261: a revoked or expired key is 409; an unknown key, or one of another organisation, is 404', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const other = await f.org('other');
    const revoked = (await f.key(org.id)).key;
    await f.core.apiKeys.revoke(OPERATOR, org.id, revoked.id);
    const expiring = (await f.key(org.id, { label: 'soon', expires_at: '2026-06-10T13:00:00Z' })).key;
    f.clock.set('2026-06-10T13:00:00.000Z');
    expect((await rejectsWith(f.core.apiKeys.update(OPERATOR, org.id, revoked.id, { label: 'x' }), ConflictError)).message).to.match(/revoked/);
    expect((await rejectsWith(f.core.apiKeys.update(OPERATOR, org.id, expiring.id, { label: 'x' }), ConflictError)).message).to.match(/expired/);
    await rejectsWith(f.core.apiKeys.update(OPERATOR, org.id, UNKNOWN_UUID, { label: 'x' }), NotFoundError);
    await rejectsWith(f.core.apiKeys.update(OPERATOR, other.id, expiring.id, { label: 'x' }), NotFoundError);
    expect(await entries(f, 'api_key_updated')).to.deep.equal([]);
  });

  it('C-261: a standard key may not edit another organisation\'s key, and needs api_keys:write (403 before validation)', async () => {
    const f = fixture();
    const { principal } = await f.tenant('acme');
    const other = await f.org('other');
    const { key } = await f.key(other.id);
    expect((await rejectsWith(f.core.apiKeys.update(principal, other.id, key.id, { scopes: 'bad' }), ForbiddenError)).details).to.deep.equal([]);
    const reader = await f.principal(await f.key(principal.organisationId, { label: 'reader', scopes: ['api_keys:read'] }));
    const e = await rejectsWith(f.core.apiKeys.update(reader, principal.organisationId, principal.keyId, { label: 'x' }), ForbiddenError);
    expect(e.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:write' }]);
  });

  it('C-261: concurrent PATCHes of one key each apply to what they read: no metadata change is lost', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const { key } = await f.key(org.id);
    await Promise.all(Array.from({ length: 5 }, (_, i) => f.core.apiKeys.update(OPERATOR, org.id, key.id, { metadata: { [`n${i}`]: String(i) } })));
    expect((await f.store.stores.apiKeys.findById(org.id, key.id))!.metadata).to.deep.equal({ n0: '0', n1: '1', n2: '2', n3: '3', n4: '4' });
    expect(await entries(f, 'api_key_updated')).to.have.length(5);
  });

  it('C-261: a key changed under every attempt of one update is 409 and nothing of it is written', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const { key } = await f.key(org.id);
    // A store whose compare-and-set always finds the key changed since it was read.
    const racing = (keys: ApiKeyStore): ApiKeyStore => Object.assign(Object.create(keys) as ApiKeyStore, { update: async () => false });
    const { core } = createTestCore({
      clock: f.clock,
      store: {
        ...f.store,
        stores: withStore(storePorts(f.store), 'apiKeys', racing(storePorts(f.store).apiKeys)),
        unitOfWork: {
          run: (work) => f.store.unitOfWork.run(work),
          changeCredentials: (organisationIds, work) => f.store.unitOfWork.changeCredentials(organisationIds, (s) => work(withStore(s, 'apiKeys', racing(s.apiKeys)))),
        },
      },
    });
    expect((await rejectsWith(core.apiKeys.update(OPERATOR, org.id, key.id, { label: 'x' }), ConflictError)).message).to.match(/changed by another request/);
    expect(await entries(f, 'api_key_updated')).to.deep.equal([]);
  });
});

describe('use case: network restrictions never widen (C-262, C-264, C-265)', () => {
  async function restricted(f: Fixture, cidrs: string[]): Promise<{ orgId: string; principal: KeyPrincipal; keyId: string }> {
    const org = await f.org(`org-${Math.random().toString(36).slice(2, 8)}`);
    const issued = await f.key(org.id, { label: 'restricted', allowed_cidrs: cidrs });
    return { orgId: org.id, principal: await f.principal(issued), keyId: issued.key.id };
  }

  it('C-262, C-265: networks given at issue are normalised, shown in the key and recorded in api_key_issued; an unrestricted key records none', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const { key } = await f.key(org.id, { label: 'x', allowed_cidrs: ['2001:DB8::/32', '10.0.0.0/8'] });
    expect(key.allowedCidrs).to.deep.equal(['2001:db8::/32', '10.0.0.0/8']);
    const plain = (await f.key(org.id)).key;
    const issued = await entries(f, 'api_key_issued');
    expect(issued.find((e) => e.keyId === key.id)!.allowedCidrs).to.deep.equal(['2001:db8::/32', '10.0.0.0/8']);
    expect(issued.find((e) => e.keyId === plain.id)).to.not.have.property('allowedCidrs');
  });

  it('C-264: a key issued by a restricted key inherits its networks, or gets a subset; wider (null included) is 403 allowed_cidrs', async () => {
    const f = fixture();
    const { orgId, principal } = await restricted(f, ['10.0.0.0/8', '192.0.2.0/24']);
    expect((await f.core.apiKeys.issue(principal, orgId, { label: 'child' })).key.allowedCidrs).to.deep.equal(['10.0.0.0/8', '192.0.2.0/24']);
    expect((await f.core.apiKeys.issue(principal, orgId, { label: 'narrower', allowed_cidrs: ['10.1.0.0/16'] })).key.allowedCidrs).to.deep.equal(['10.1.0.0/16']);
    for (const wider of [null, ['10.0.0.0/7'], ['10.0.0.0/8', '203.0.113.0/24']]) {
      const e = await rejectsWith(f.core.apiKeys.issue(principal, orgId, { label: 'wider', allowed_cidrs: wider }), ForbiddenError);
      expect(e.details, JSON.stringify(wider)).to.deep.equal([{ field: 'allowed_cidrs', issue: "must lie within the calling key's allowed_cidrs" }]);
    }
    expect(await f.store.stores.apiKeys.countActive(orgId, f.clock.now())).to.equal(3);
  });

  it('C-264: a restricted key may narrow another key by PATCH, never widen one, itself included', async () => {
    const f = fixture();
    const { orgId, principal, keyId } = await restricted(f, ['10.0.0.0/8']);
    const open = (await f.key(orgId)).key;
    const narrowed = await f.core.apiKeys.update(principal, orgId, open.id, { allowed_cidrs: ['10.2.0.0/16'] });
    expect(narrowed.allowedCidrs).to.deep.equal(['10.2.0.0/16']);
    await rejectsWith(f.core.apiKeys.update(principal, orgId, open.id, { allowed_cidrs: null }), ForbiddenError);
    await rejectsWith(f.core.apiKeys.update(principal, orgId, keyId, { allowed_cidrs: ['0.0.0.0/0'] }), ForbiddenError);
    // The operator is not limited.
    expect((await f.core.apiKeys.update(OPERATOR, orgId, keyId, { allowed_cidrs: null })).allowedCidrs).to.equal(null);
    const updated = await entries(f, 'api_key_updated');
    // Both at the same instant: listed by id.
    expect(updated.map((e) => [e.keyId, e.changedFields, e.allowedCidrs])).to.have.deep.members([
      [open.id, ['allowed_cidrs'], ['10.2.0.0/16']],
      [keyId, ['allowed_cidrs'], null],
    ]);
  });

  it('C-264: a roll keeps the old key\'s metadata and networks; a restricted key may not roll a key wider than itself', async () => {
    const f = fixture();
    const { orgId, principal } = await restricted(f, ['10.0.0.0/8']);
    const inside = (await f.key(orgId, { label: 'inside', metadata: { owner: 'a' }, allowed_cidrs: ['10.9.0.0/16'] })).key;
    const open = (await f.key(orgId, { label: 'open' })).key;
    const rolled = await f.core.apiKeys.roll(principal, orgId, inside.id, {});
    expect(rolled.key).to.deep.include({ metadata: { owner: 'a' }, allowedCidrs: ['10.9.0.0/16'] });
    await rejectsWith(f.core.apiKeys.roll(principal, orgId, open.id, {}), ForbiddenError);
    expect((await f.store.stores.apiKeys.findById(orgId, open.id))!.revokedAt).to.equal(null);
  });
});
