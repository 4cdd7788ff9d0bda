/**
 * Tenant isolation (C-34, spec §4 rule 2, §5.3-5.4): a standard key that names any organisation
 * but its own gets 403, whether that organisation exists, is the platform, or is not even a well
 * formed id; a key id that is not in the named (own) organisation is 404; platform-only
 * operations are 403; and whatever was targeted is unchanged afterwards (every table compared).
 * Authorisation comes before validation (C-33), so invalid bodies change nothing either.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { FOREIGN_ORGANISATION_MESSAGE, PLATFORM_REQUIRED_MESSAGE } from '@cos/core';
import { startStack, type Stack, type Tenant } from '../support/stack.js';
import { createCast, type Cast } from '../support/fixture.js';
import { snapshot, diffSnapshots } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { openApiProblems } from '../support/openapi.js';
import { announceSeed, fuzzParameters } from '../support/fuzz-seed.js';
import type { Incoming } from '../support/http.js';

interface OrgOperation {
  readonly name: string;
  readonly method: string;
  readonly path: (orgId: string, keyId: string) => string;
  readonly validBody?: unknown;
  readonly invalidBody?: unknown;
}

/** The eight operations that name an organisation, and the key update beyond v1 (C-261), before the revocation. */
const ORG_OPERATIONS: readonly OrgOperation[] = [
  { name: 'get organisation', method: 'GET', path: (o) => `/v1/organisations/${o}` },
  { name: 'replace organisation', method: 'PUT', path: (o) => `/v1/organisations/${o}`, validBody: { name: 'Taken over' }, invalidBody: { slug: 'x', industry_section: 'A' } },
  { name: 'patch organisation', method: 'PATCH', path: (o) => `/v1/organisations/${o}`, validBody: { name: 'Taken over' }, invalidBody: { is_system: true } },
  { name: 'list members', method: 'GET', path: (o) => `/v1/organisations/${o}/members` },
  { name: 'list keys', method: 'GET', path: (o) => `/v1/organisations/${o}/api-keys` },
  { name: 'issue key', method: 'POST', path: (o) => `/v1/organisations/${o}/api-keys`, validBody: { label: 'intruder' }, invalidBody: { label: '' } },
  { name: 'get key', method: 'GET', path: (o, k) => `/v1/organisations/${o}/api-keys/${k}` },
  {
    name: 'update key',
    method: 'PATCH',
    path: (o, k) => `/v1/organisations/${o}/api-keys/${k}`,
    validBody: { label: 'taken over', allowed_cidrs: ['203.0.113.0/24'] },
    invalidBody: { scopes: ['audit:read'] },
  },
  { name: 'revoke key', method: 'DELETE', path: (o, k) => `/v1/organisations/${o}/api-keys/${k}` },
];

function problemsOf(r: Incoming): string[] {
  return [...checkResponse(r), ...openApiProblems(r)];
}

describe('system: tenant isolation, every operation against every foreign organisation (C-34, C-33)', function () {
  this.timeout(120_000);
  let stack: Stack;
  let cast: Cast;

  before(async () => {
    announceSeed();
    stack = await startStack({ config: { rateLimitPerMinute: 1_000_000, unauthRateLimitPerMinute: 1_000_000 } });
    cast = await createCast(stack.core, { spares: 2, expiringMs: 250 });
  });
  after(async () => {
    await stack?.close();
  });

  /** Sends the request and checks the answer and that no table changed. */
  async function attempt(key: string, method: string, path: string, body: unknown, expected: number, message?: string): Promise<void> {
    const before = await snapshot(stack.store.knex);
    const r = await stack.client.call(method, path, { key, ...(body !== undefined ? { body } : {}) });
    const what = `${method} ${path} ${JSON.stringify(body) ?? ''} -> ${r.status} ${r.text}`;
    expect(r.status, what).to.equal(expected);
    expect(problemsOf(r), what).to.deep.equal([]);
    if (message !== undefined) expect(r.json<{ message: string }>().message, what).to.equal(message);
    expect(diffSnapshots(before, await snapshot(stack.store.knex)), `target changed by ${what}`).to.deep.equal([]);
  }

  function foreignTargets(actor: Tenant): { label: string; orgId: string; keyId: string }[] {
    const other = actor.id === cast.own.id ? cast.other : cast.own;
    const otherSpare = (actor.id === cast.own.id ? cast.extraKeyIds.otherExtra[0] : cast.extraKeyIds.ownExtra[0]) as string;
    return [
      { label: 'the other tenant, its key', orgId: other.id, keyId: other.keyId },
      { label: 'the other tenant, its spare key', orgId: other.id, keyId: otherSpare },
      { label: 'the other tenant, an own key id', orgId: other.id, keyId: actor.keyId },
      { label: 'the platform organisation', orgId: cast.platform.id, keyId: cast.platform.keyId },
      { label: 'the other tenant, id in upper case', orgId: other.id.toUpperCase(), keyId: other.keyId },
      { label: 'an organisation that does not exist', orgId: '6f1c0a52-3b7d-4e8f-9a01-2b3c4d5e6f70', keyId: '0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f' },
      { label: 'an id that is not a UUID', orgId: 'not-a-uuid', keyId: 'nope' },
    ];
  }

  for (const actorName of ['own', 'other'] as const) {
    for (const op of ORG_OPERATIONS) {
      it(`C-34: a standard key (${actorName}) doing "${op.name}" on any other organisation gets 403 FORBIDDEN, valid body or not, and nothing changes`, async () => {
        const actor = cast[actorName];
        for (const target of foreignTargets(actor)) {
          const bodies = op.validBody === undefined ? [undefined] : [op.validBody, op.invalidBody];
          for (const body of bodies) await attempt(actor.key, op.method, op.path(target.orgId, target.keyId), body, 403, FOREIGN_ORGANISATION_MESSAGE);
        }
      });
    }
  }

  it('C-34: 200 random (operation, organisation id, key id, body) cases with a standard key: always 403, nothing changes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ORG_OPERATIONS), fc.uuid({ version: 4 }), fc.uuid(), fc.boolean(), async (op, orgId, keyId, valid) => {
        const body = op.validBody === undefined ? undefined : valid ? op.validBody : op.invalidBody;
        await attempt(cast.own.key, op.method, op.path(orgId, keyId), body, 403, FOREIGN_ORGANISATION_MESSAGE);
      }),
      fuzzParameters(200, 10),
    );
  });

  it('spec §5.3: a standard key listing or creating organisations (platform-only) gets 403 "This operation requires a platform-org API key", valid body or not', async () => {
    for (const actor of [cast.own, cast.other]) {
      await attempt(actor.key, 'GET', '/v1/organisations', undefined, 403, PLATFORM_REQUIRED_MESSAGE);
      await attempt(actor.key, 'GET', '/v1/organisations?limit=100', undefined, 403, PLATFORM_REQUIRED_MESSAGE);
      await attempt(actor.key, 'POST', '/v1/organisations', { name: 'Rogue', slug: 'rogue' }, 403, PLATFORM_REQUIRED_MESSAGE);
      await attempt(actor.key, 'POST', '/v1/organisations', { name: 'Rogue', slug: 'rogue', is_system: true }, 403, PLATFORM_REQUIRED_MESSAGE);
    }
  });

  it('C-34: a key id that is not in the named own organisation (another tenant\'s, the platform\'s, unknown) is 404 NOT_FOUND for get and revoke, and that key keeps working', async () => {
    const foreignKeys = [cast.other.keyId, cast.extraKeyIds.otherExtra[1] as string, cast.platform.keyId, '9d5e1f7a-1111-4222-8333-944455556666'];
    for (const keyId of foreignKeys) {
      await attempt(cast.own.key, 'GET', `/v1/organisations/${cast.own.id}/api-keys/${keyId}`, undefined, 404);
      await attempt(cast.own.key, 'DELETE', `/v1/organisations/${cast.own.id}/api-keys/${keyId}`, undefined, 404);
    }
    // The targeted keys still authenticate.
    const r1 = await stack.client.call('GET', `/v1/organisations/${cast.other.id}`, { key: cast.other.key });
    expect(r1.status).to.equal(200);
    const r2 = await stack.client.call('GET', '/v1/organisations?limit=1', { key: cast.platform.key });
    expect(r2.status).to.equal(200);
  });

  it('C-34: positive control: the same operations on its own organisation succeed for the standard key, and a platform key may act on any organisation', async () => {
    const own = cast.own;
    const spare = cast.extraKeyIds.ownExtra[1] as string;
    for (const op of ORG_OPERATIONS) {
      const r = await stack.client.call(op.method, op.path(own.id, spare), { key: own.key, ...(op.validBody !== undefined ? { body: op.validBody } : {}) });
      expect(r.status, `${op.name} ${r.text}`).to.be.within(200, 299);
      expect(problemsOf(r), op.name).to.deep.equal([]);
    }
    const otherSpare = cast.extraKeyIds.otherExtra[1] as string;
    for (const op of ORG_OPERATIONS) {
      const r = await stack.client.call(op.method, op.path(cast.other.id, otherSpare), { key: cast.platform.key, ...(op.validBody !== undefined ? { body: op.validBody } : {}) });
      expect(r.status, `platform ${op.name} ${r.text}`).to.be.within(200, 299);
    }
  });

  it('C-36: the other tenant\'s revoked key no longer reaches even its own organisation (401), and never another one', async () => {
    const revokedKey = cast.keys.revoked;
    for (const orgId of [cast.own.id, cast.other.id]) {
      const r = await stack.client.call('GET', `/v1/organisations/${orgId}`, { key: revokedKey });
      expect(r.status).to.equal(401);
    }
  });
});
