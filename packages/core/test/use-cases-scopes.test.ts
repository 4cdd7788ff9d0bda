/**
 * Scopes an embedding service declares (C-60): they join the closed set of their process only,
 * keys can hold them, inherit them and never escalate to them; the operator's default stays the
 * eight built-in scopes.
 */
import { expect } from 'chai';
import { ALL_BUILTIN_SCOPES, ForbiddenError, OPERATOR, SCOPE_ESCALATION_MESSAGE, ValidationError, requireScope } from '@cos/core';
import { createTestCore } from '@cos/core/testing';

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}

describe('use case: scopes declared by an embedding service (C-60)', () => {
  it('C-60: a declared scope can be held, inherited and required; an undeclared one is 400 scopes; the operator default is the eight built-in scopes', async () => {
    const { core } = createTestCore({ scopes: ['reports:read', 'reports:write'] });
    expect(core.scopes).to.deep.equal([...ALL_BUILTIN_SCOPES, 'keys:introspect', 'reports:read', 'reports:write'].sort());
    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const plain = await core.apiKeys.issue(OPERATOR, org.id, { label: 'plain' });
    expect(plain.key.scopes).to.deep.equal([...ALL_BUILTIN_SCOPES]);
    const reporter = await core.apiKeys.issue(OPERATOR, org.id, { label: 'reporter', scopes: ['reports:read', 'api_keys:write'] });
    const principal = await core.authenticator.authenticate(`Bearer ${reporter.rawKey}`);
    expect(principal.scopes).to.deep.equal(['api_keys:write', 'reports:read']);
    expect(() => requireScope(principal, 'reports:read')).to.not.throw();
    const child = await core.apiKeys.issue(principal, org.id, { label: 'child' });
    expect(child.key.scopes, 'inherited from the issuing key').to.deep.equal(['api_keys:write', 'reports:read']);
    const escalation = await rejection(core.apiKeys.issue(principal, org.id, { label: 'more', scopes: ['reports:write'] }));
    expect(escalation).to.be.instanceOf(ForbiddenError);
    expect(escalation.message).to.equal(SCOPE_ESCALATION_MESSAGE);
    const undeclared = await rejection(core.apiKeys.issue(OPERATOR, org.id, { label: 'x', scopes: ['invoices:read'] }));
    expect(undeclared).to.be.instanceOf(ValidationError);
    expect((undeclared as ValidationError).details.map((d) => d.field)).to.deep.equal(['scopes']);
  });

  it('C-60: another process that did not declare the scope refuses it (the set is closed per process)', async () => {
    const { core } = createTestCore();
    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const refused = await rejection(core.apiKeys.issue(OPERATOR, org.id, { label: 'x', scopes: ['reports:read'] }));
    expect(refused).to.be.instanceOf(ValidationError);
  });

  it('C-60: a declared name that is malformed or repeats a built-in one fails createCore', () => {
    expect(() => createTestCore({ scopes: ['api_keys:read'] })).to.throw(TypeError);
    expect(() => createTestCore({ scopes: ['Reports'] })).to.throw(TypeError);
  });
});
