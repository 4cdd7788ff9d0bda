/**
 * The exported authorisation rule (spec §5.3-§5.5, C-33, C-34): `authorise(principal, operation,
 * orgId?)` over its closed set of operations, and the use cases answering 403 exactly when it does
 * (they call it; there is no second copy of the rule).
 */
import { expect } from 'chai';
import {
  ALL_BUILTIN_SCOPES,
  PLATFORM_ONLY_SCOPES,
  OPERATION_SCOPES,
  authoriseRevocation,
  hasScope,
  knownScopes,
  requireScope,
  type KeyPrincipal,
  FOREIGN_ORGANISATION_MESSAGE,
  ForbiddenError,
  OPERATIONS,
  OPERATOR,
  OPERATOR_REQUIRED_MESSAGE,
  PLATFORM_REQUIRED_MESSAGE,
  authorise,
  type Core,
  type Operation,
  type OrganisationOperation,
  type Principal,
} from '@cos/core';
import { UNKNOWN_UUID, fixture } from './use-cases-fixtures.js';

const ORGANISATION_OPERATIONS: readonly OrganisationOperation[] = [
  'organisations.get',
  'organisations.replace',
  'organisations.patch',
  'members.list',
  'api_keys.list',
  'api_keys.issue',
  'api_keys.update',
  'api_keys.get',
  'api_keys.revoke',
  'organisations.key_policy.get',
  'organisations.rate_limit.get',
  'audit_events.list',
  'webhooks.read',
  'webhooks.write',
];
const PLATFORM_OPERATIONS: readonly Operation[] = ['organisations.list', 'organisations.create', 'organisations.key_policy.replace', 'organisations.rate_limit.replace', 'keys.introspect'];
const OPERATOR_OPERATIONS: readonly Operation[] = [
  'organisations.create_system',
  'organisations.classify',
  'members.add',
  'members.remove',
  'audit.list',
  'webhooks.manage',
  'notifications.manage',
];

/** The 403 message `authorise` answers with, or null when it allows the operation. */
function refusal(principal: Principal, operation: Operation, orgId: string): string | null {
  try {
    // Organisation operations read orgId; the others take none (the cast only widens the tuple type).
    (authorise as (p: Principal, o: Operation, ...rest: string[]) => void)(
      principal,
      operation,
      ...((ORGANISATION_OPERATIONS as readonly string[]).includes(operation) ? [orgId] : []),
    );
    return null;
  } catch (e) {
    expect(e).to.be.instanceOf(ForbiddenError);
    return (e as ForbiddenError).message;
  }
}

describe('core: authorise (C-33, C-34, spec §5.3-§5.5)', () => {
  const ownOrg = '0b9e5a1c-2f4d-4e6a-8b7c-9d0e1f2a3b4c';
  const foreignOrg = '7c6d5e4f-3a2b-4c1d-9e8f-0a1b2c3d4e5f';
  const standard: Principal = { kind: 'api_key', keyId: 'k1', keyPrefix: 'svc_live_abc', organisationId: ownOrg, isPlatform: false, scopes: ALL_BUILTIN_SCOPES };
  const platform: Principal = { kind: 'api_key', keyId: 'k2', keyPrefix: 'svc_live_def', organisationId: foreignOrg, isPlatform: true, scopes: [...ALL_BUILTIN_SCOPES, ...PLATFORM_ONLY_SCOPES] };

  it('C-33: the operation names are a closed set, each given exactly one access rule', () => {
    expect([...OPERATIONS].sort()).to.deep.equal(
      [...ORGANISATION_OPERATIONS, ...PLATFORM_OPERATIONS, ...OPERATOR_OPERATIONS].sort(),
    );
    expect(Object.isFrozen(OPERATIONS)).to.equal(true);
  });

  it('spec §5.5: the operator may do everything; a platform key everything but the operator-only operations', () => {
    for (const op of OPERATIONS) {
      expect(refusal(OPERATOR, op, foreignOrg), `operator ${op}`).to.equal(null);
      const expected = OPERATOR_OPERATIONS.includes(op) ? OPERATOR_REQUIRED_MESSAGE : null;
      expect(refusal(platform, op, ownOrg), `platform ${op}`).to.equal(expected);
    }
  });

  it('spec §5.3, §5.4: a standard key may use its own organisation only, and no platform or operator operation', () => {
    for (const op of ORGANISATION_OPERATIONS) {
      expect(refusal(standard, op, ownOrg), `own ${op}`).to.equal(null);
      expect(refusal(standard, op, ownOrg.toUpperCase()), `own upper-case ${op}`).to.equal(null);
      expect(refusal(standard, op, foreignOrg), `foreign ${op}`).to.equal(FOREIGN_ORGANISATION_MESSAGE);
    }
    for (const op of PLATFORM_OPERATIONS) expect(refusal(standard, op, ownOrg), op).to.equal(PLATFORM_REQUIRED_MESSAGE);
    for (const op of OPERATOR_OPERATIONS) expect(refusal(standard, op, ownOrg), op).to.equal(OPERATOR_REQUIRED_MESSAGE);
  });

  it('C-34: a standard key naming a missing, malformed, empty or absent organisation id is refused (403), never validated', () => {
    for (const id of [UNKNOWN_UUID, 'not-a-uuid', '', ' ' + ownOrg, `${ownOrg}/`]) {
      expect(() => authorise(standard, 'organisations.patch', id), JSON.stringify(id)).to.throw(ForbiddenError, FOREIGN_ORGANISATION_MESSAGE);
    }
    // From plain JavaScript the id may be missing or not a string at all.
    const loose = authorise as (p: Principal, o: string, ...rest: unknown[]) => void;
    for (const id of [undefined, null, 42, { toLowerCase: () => ownOrg }]) {
      expect(() => loose(standard, 'api_keys.issue', id), String(id)).to.throw(ForbiddenError, FOREIGN_ORGANISATION_MESSAGE);
    }
  });

  it('C-33: an unknown operation name is an error, never a grant, even one Object.prototype has', () => {
    const loose = authorise as (p: Principal, o: string, ...rest: unknown[]) => void;
    for (const name of ['toString', '__proto__', 'constructor', 'organisations.delete', '']) {
      expect(() => loose(OPERATOR, name), name).to.throw(TypeError, 'unknown operation');
      expect(() => loose(standard, name, ownOrg), name).to.throw(TypeError, 'unknown operation');
    }
  });

  it('C-60: every operation a key reaches needs exactly its scope: held, allowed; missing, 403 with {field: "scope", issue: "requires <scope>"}', () => {
    const keyOps = [...ORGANISATION_OPERATIONS, ...PLATFORM_OPERATIONS] as (keyof typeof OPERATION_SCOPES)[];
    expect(Object.keys(OPERATION_SCOPES).sort()).to.deep.equal([...keyOps].sort());
    for (const op of keyOps) {
      const needed = OPERATION_SCOPES[op];
      for (const held of [...ALL_BUILTIN_SCOPES, ...PLATFORM_ONLY_SCOPES]) {
        const principal: Principal = { ...(platform as KeyPrincipal), scopes: [held] };
        let error: unknown = null;
        try {
          (authorise as (p: Principal, o: Operation, ...rest: string[]) => void)(principal, op, ownOrg);
        } catch (e) {
          error = e;
        }
        if (held === needed) expect(error, `${op} with ${held}`).to.equal(null);
        else {
          expect(error, `${op} with ${held}`).to.be.instanceOf(ForbiddenError);
          expect((error as ForbiddenError).details).to.deep.equal([{ field: 'scope', issue: `requires ${needed}` }]);
        }
      }
    }
    // The operator holds every scope; a key with none reaches nothing but its own revocation.
    for (const op of keyOps) expect(refusal(OPERATOR, op, ownOrg)).to.equal(null);
    const none: KeyPrincipal = { ...(standard as KeyPrincipal), scopes: [] };
    expect(() => authoriseRevocation(none, ownOrg, none.keyId)).to.not.throw();
    expect(() => authoriseRevocation(none, ownOrg, 'another-key')).to.throw(ForbiddenError);
    expect(() => authoriseRevocation(none, foreignOrg, none.keyId), 'its own id in another organisation').to.throw(ForbiddenError, FOREIGN_ORGANISATION_MESSAGE);
  });

  it('C-60: requireScope and hasScope serve an embedder\'s own scope names', () => {
    const reporter: KeyPrincipal = { ...(standard as KeyPrincipal), scopes: ['reports:read'] };
    expect(hasScope(reporter, 'reports:read')).to.equal(true);
    expect(() => requireScope(reporter, 'reports:read')).to.not.throw();
    expect(() => requireScope(reporter, 'reports:write')).to.throw(ForbiddenError).with.property('details').that.deep.equals([{ field: 'scope', issue: 'requires reports:write' }]);
    expect(() => requireScope(OPERATOR, 'reports:write')).to.not.throw();
  });

  it('C-60: declared scope names join the closed set once, checked at start-up', () => {
    expect(knownScopes(['reports:read'])).to.deep.equal([...ALL_BUILTIN_SCOPES, ...PLATFORM_ONLY_SCOPES, 'reports:read'].sort());
    for (const bad of [['organisations:read'], ['keys:introspect'], ['reports:read', 'reports:read'], ['Reports:read'], ['reports'], ['reports:read write'], [''], [7 as unknown as string]]) {
      expect(() => knownScopes(bad), JSON.stringify(bad)).to.throw(TypeError);
    }
  });

  it('C-33: the use cases refuse exactly when authorise does, with the same message (one rule)', async () => {
    const f = fixture();
    const own = await f.tenant('acme');
    const other = await f.org('globex');
    const system = await f.platform();
    // Every operation, called through its use case with inputs that write nothing once authorised
    // (invalid bodies, unknown ids): the Record type makes the list as closed as Operation itself.
    const calls: Record<Operation, (core: Core, p: Principal, orgId: string) => Promise<unknown>> = {
      'organisations.list': (c, p) => c.organisations.list(p, {}),
      'organisations.create': (c, p) => c.organisations.create(p, {}),
      'organisations.create_system': (c, p) => c.organisations.create(p, {}, { isSystem: true }),
      'organisations.classify': (c, p, id) => c.organisations.classify(p, id, 'not a section'),
      'organisations.get': (c, p, id) => c.organisations.get(p, id),
      'organisations.replace': (c, p, id) => c.organisations.replace(p, id, {}),
      'organisations.patch': (c, p, id) => c.organisations.patch(p, id, {}),
      'members.list': (c, p, id) => c.members.list(p, id, {}),
      'members.add': (c, p, id) => c.members.add(p, id, {}),
      'members.remove': (c, p, id) => c.members.remove(p, id, UNKNOWN_UUID),
      'api_keys.list': (c, p, id) => c.apiKeys.list(p, id, {}),
      'api_keys.issue': (c, p, id) => c.apiKeys.issue(p, id, {}),
      'api_keys.update': (c, p, id) => c.apiKeys.update(p, id, UNKNOWN_UUID, {}),
      'api_keys.get': (c, p, id) => c.apiKeys.get(p, id, UNKNOWN_UUID),
      'api_keys.revoke': (c, p, id) => c.apiKeys.revoke(p, id, UNKNOWN_UUID),
      'audit.list': (c, p) => c.audit.list(p, {}),
      'organisations.key_policy.get': (c, p, id) => c.keyPolicies.get(p, id),
      'organisations.key_policy.replace': (c, p, id) => c.keyPolicies.replace(p, id, {}),
      'organisations.rate_limit.get': (c, p, id) => c.rateLimits.get(p, id),
      'organisations.rate_limit.replace': (c, p, id) => c.rateLimits.replace(p, id, {}),
      'audit_events.list': (c, p, id) => c.audit.events(p, id, {}),
      'webhooks.manage': (c, p) => c.webhooks.reencryptSecrets(p),
      'webhooks.read': (c, p, id) => c.webhooks.show(p, id),
      'webhooks.write': (c, p, id) => c.webhooks.put(p, id, {}),
      'notifications.manage': (c, p) => c.notifications.retry(p, 'not-a-uuid'),
      'keys.introspect': (c, p) => c.introspection.introspect(p, {}),
    };
    const auditBefore = (await f.core.audit.list(OPERATOR, { limit: 100 })).items.length;
    let refused = 0;
    for (const op of OPERATIONS) {
      for (const principal of [OPERATOR, system.principal, own.principal]) {
        for (const orgId of [own.org.id, other.id, 'not-a-uuid']) {
          const expected = refusal(principal, op, orgId);
          let actual: string | null = null;
          try {
            await calls[op](f.core, principal, orgId);
          } catch (e) {
            if (e instanceof ForbiddenError) actual = e.message;
          }
          expect(actual, `${op} as ${principal.kind === 'operator' ? 'operator' : principal.isPlatform ? 'platform' : 'standard'} on ${orgId}`).to.equal(expected);
          if (expected !== null) refused++;
        }
      }
    }
    expect(refused).to.be.greaterThan(0);
    expect((await f.core.audit.list(OPERATOR, { limit: 100 })).items.length).to.equal(auditBefore);
  });
});
