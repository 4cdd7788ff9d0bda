/**
 * The authorisation matrix (spec §4, §5; C-32..C-34): every operation that takes a key (the twelve
 * of v1 and the extensions beyond it) with every
 * kind of caller, over real HTTP, each response validated against docs/openapi.yaml. Each case runs
 * in a fresh world so that rate counters and writes of one case cannot touch another.
 */
import { expect } from 'chai';
import { createWorld, MISSING_ID, UNKNOWN_KEY, type World } from './support/world.js';

/**
 * `any-key`: any valid key, no organisation in the path (GET /me). `introspect`: a platform key
 * holding keys:introspect (C-270), which no key of this matrix holds: its success is in introspect.test.ts.
 */
type Scope = 'public' | 'platform-only' | 'organisation' | 'any-key' | 'introspect';

interface Operation {
  readonly name: string;
  readonly method: string;
  readonly scope: Scope;
  /** Success status. */
  readonly ok: number;
  readonly path: (orgId: string, keyId: string) => string;
  readonly json?: unknown;
}

const OPERATIONS: readonly Operation[] = [
  { name: 'GET /health', method: 'GET', scope: 'public', ok: 200, path: () => '/v1/health' },
  { name: 'GET /version', method: 'GET', scope: 'public', ok: 200, path: () => '/v1/version' },
  { name: 'GET /me', method: 'GET', scope: 'any-key', ok: 200, path: () => '/v1/me' },
  { name: 'GET /organisations', method: 'GET', scope: 'platform-only', ok: 200, path: () => '/v1/organisations' },
  {
    name: 'POST /organisations',
    method: 'POST',
    scope: 'platform-only',
    ok: 201,
    path: () => '/v1/organisations',
    json: { name: 'Initech', slug: 'initech' },
  },
  { name: 'GET /organisations/{org_id}', method: 'GET', scope: 'organisation', ok: 200, path: (o) => `/v1/organisations/${o}` },
  {
    name: 'PUT /organisations/{org_id}',
    method: 'PUT',
    scope: 'organisation',
    ok: 200,
    path: (o) => `/v1/organisations/${o}`,
    json: { name: 'Renamed Ltd' },
  },
  {
    name: 'PATCH /organisations/{org_id}',
    method: 'PATCH',
    scope: 'organisation',
    ok: 200,
    path: (o) => `/v1/organisations/${o}`,
    json: { name: 'Patched Ltd' },
  },
  {
    name: 'GET /organisations/{org_id}/members',
    method: 'GET',
    scope: 'organisation',
    ok: 200,
    path: (o) => `/v1/organisations/${o}/members`,
  },
  {
    name: 'GET /organisations/{org_id}/api-keys',
    method: 'GET',
    scope: 'organisation',
    ok: 200,
    path: (o) => `/v1/organisations/${o}/api-keys`,
  },
  {
    name: 'POST /organisations/{org_id}/api-keys',
    method: 'POST',
    scope: 'organisation',
    ok: 201,
    path: (o) => `/v1/organisations/${o}/api-keys`,
    json: { label: 'ci pipeline' },
  },
  {
    name: 'GET /organisations/{org_id}/api-keys/{key_id}',
    method: 'GET',
    scope: 'organisation',
    ok: 200,
    path: (o, k) => `/v1/organisations/${o}/api-keys/${k}`,
  },
  {
    name: 'DELETE /organisations/{org_id}/api-keys/{key_id}',
    method: 'DELETE',
    scope: 'organisation',
    ok: 204,
    path: (o, k) => `/v1/organisations/${o}/api-keys/${k}`,
  },
  // The organisation's webhook endpoint (an extension beyond v1, C-56). The world's organisations have none, so what an
  // allowed caller gets is 404 (after 401, 429, 403), except PUT, which creates it.
  { name: 'GET /organisations/{org_id}/webhook-endpoint', method: 'GET', scope: 'organisation', ok: 404, path: (o) => `/v1/organisations/${o}/webhook-endpoint` },
  {
    name: 'PUT /organisations/{org_id}/webhook-endpoint',
    method: 'PUT',
    scope: 'organisation',
    ok: 201,
    path: (o) => `/v1/organisations/${o}/webhook-endpoint`,
    json: { url: 'https://hooks.example.com/cos' },
  },
  { name: 'DELETE /organisations/{org_id}/webhook-endpoint', method: 'DELETE', scope: 'organisation', ok: 404, path: (o) => `/v1/organisations/${o}/webhook-endpoint` },
  {
    name: 'POST /organisations/{org_id}/webhook-endpoint/rotate-secret',
    method: 'POST',
    scope: 'organisation',
    ok: 404,
    path: (o) => `/v1/organisations/${o}/webhook-endpoint/rotate-secret`,
  },
  { name: 'POST /organisations/{org_id}/webhook-endpoint/ping', method: 'POST', scope: 'organisation', ok: 404, path: (o) => `/v1/organisations/${o}/webhook-endpoint/ping` },
  {
    name: 'GET /organisations/{org_id}/webhook-endpoint/deliveries',
    method: 'GET',
    scope: 'organisation',
    ok: 404,
    path: (o) => `/v1/organisations/${o}/webhook-endpoint/deliveries`,
  },
  {
    name: 'POST /organisations/{org_id}/webhook-endpoint/deliveries/{delivery_id}/redeliver',
    method: 'POST',
    scope: 'organisation',
    ok: 404,
    path: (o, k) => `/v1/organisations/${o}/webhook-endpoint/deliveries/${k}/redeliver`,
  },
  // The key lifecycle, key policy and audit extensions (C-56). The roll names the target
  // organisation's own key (a standard key rolling itself, grace 0, is allowed).
  {
    name: 'POST /organisations/{org_id}/api-keys/{key_id}/roll',
    method: 'POST',
    scope: 'organisation',
    ok: 201,
    path: (o, k) => `/v1/organisations/${o}/api-keys/${k}/roll`,
  },
  {
    name: 'PATCH /organisations/{org_id}/api-keys/{key_id}',
    method: 'PATCH',
    scope: 'organisation',
    ok: 200,
    path: (o, k) => `/v1/organisations/${o}/api-keys/${k}`,
    json: { label: 'renamed' },
  },
  { name: 'GET /organisations/{org_id}/key-policy', method: 'GET', scope: 'organisation', ok: 200, path: (o) => `/v1/organisations/${o}/key-policy` },
  {
    name: 'PUT /organisations/{org_id}/key-policy',
    method: 'PUT',
    scope: 'platform-only',
    ok: 200,
    path: (o) => `/v1/organisations/${o}/key-policy`,
    json: { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key' },
  },
  { name: 'GET /organisations/{org_id}/audit-events', method: 'GET', scope: 'organisation', ok: 200, path: (o) => `/v1/organisations/${o}/audit-events` },
  { name: 'GET /organisations/{org_id}/rate-limit', method: 'GET', scope: 'organisation', ok: 200, path: (o) => `/v1/organisations/${o}/rate-limit` },
  {
    name: 'PUT /organisations/{org_id}/rate-limit',
    method: 'PUT',
    scope: 'platform-only',
    ok: 200,
    path: (o) => `/v1/organisations/${o}/rate-limit`,
    json: { requests_per_minute: 600 },
  },
  { name: 'POST /introspect', method: 'POST', scope: 'introspect', ok: 200, path: () => '/v1/introspect', json: { token: UNKNOWN_KEY } },
  // Usage counts (an extension beyond v1).
  {
    name: 'GET /organisations/{org_id}/api-keys/{key_id}/usage',
    method: 'GET',
    scope: 'organisation',
    ok: 200,
    path: (o, k) => `/v1/organisations/${o}/api-keys/${k}/usage`,
  },
  { name: 'GET /organisations/{org_id}/usage', method: 'GET', scope: 'organisation', ok: 200, path: (o) => `/v1/organisations/${o}/usage` },
];

/** Authenticated by the scanner's signature, not a key: its own matrix is in secret-scanning.test.ts. */
const SIGNED_OPERATIONS = ['POST /secret-scanning/alerts'];

interface Caller {
  readonly name: string;
  /** The Authorization header, or undefined for none. */
  readonly authorization: (w: World) => string | undefined;
  /** Which organisation (and key of it) the path names. */
  readonly target: (w: World) => { orgId: string; keyId: string };
  readonly expect: (op: Operation) => number;
}

const unauthenticated = (op: Operation): number => (op.scope === 'public' ? op.ok : 401);

const CALLERS: readonly Caller[] = [
  { name: 'no key', authorization: () => undefined, target: (w) => w.own, expect: unauthenticated },
  {
    name: 'a malformed key',
    authorization: (w) => `Bearer ${w.own.key.slice(0, -1)}`,
    target: (w) => w.own,
    expect: unauthenticated,
  },
  { name: 'an unknown key', authorization: () => `Bearer ${UNKNOWN_KEY}`, target: (w) => w.own, expect: unauthenticated },
  { name: 'a revoked key', authorization: (w) => `Bearer ${w.revokedKey}`, target: (w) => w.own, expect: unauthenticated },
  { name: 'an expired key', authorization: (w) => `Bearer ${w.expiredKey}`, target: (w) => w.own, expect: unauthenticated },
  {
    name: "a standard key on its own organisation",
    authorization: (w) => `Bearer ${w.own.key}`,
    target: (w) => w.own,
    expect: (op) => (op.scope === 'platform-only' || op.scope === 'introspect' ? 403 : op.ok),
  },
  {
    name: "a standard key on another organisation",
    authorization: (w) => `Bearer ${w.own.key}`,
    target: (w) => w.other,
    expect: (op) => (op.scope === 'public' || op.scope === 'any-key' ? op.ok : 403),
  },
  {
    name: 'a standard key on a non-existent organisation',
    authorization: (w) => `Bearer ${w.own.key}`,
    target: () => ({ orgId: MISSING_ID, keyId: MISSING_ID }),
    expect: (op) => (op.scope === 'public' || op.scope === 'any-key' ? op.ok : 403),
  },
  {
    name: 'a platform key',
    authorization: (w) => `Bearer ${w.platform.key}`,
    target: (w) => w.own,
    expect: (op) => (op.scope === 'introspect' ? 403 : op.ok),
  },
];

describe('adapter-koa: authorisation matrix (spec §4, §5; C-32, C-33, C-34)', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld();
  });
  afterEach(async () => {
    await world.close();
  });

  for (const op of OPERATIONS) {
    describe(op.name, () => {
      for (const caller of CALLERS) {
        const expected = caller.expect(op);
        const rule = expected === 403 && caller.name.includes('non-existent') ? 'C-34: ' : '';
        it(`${rule}${caller.name} -> ${expected}`, async () => {
          const target = caller.target(world);
          const authorization = caller.authorization(world);
          const res = await world.api.request(op.method, op.path(target.orgId, target.keyId), {
            ...(authorization !== undefined ? { authorization } : {}),
            ...(op.json !== undefined ? { json: op.json } : {}),
          });
          expect(res.status, res.text).to.equal(expected);
          if (expected === 401) {
            expect(res.body).to.deep.equal({ error: 'UNAUTHORIZED', message: 'Missing or invalid API key', details: [] });
          }
          if (expected === 403) expect(res.body.error).to.equal('FORBIDDEN');
          if (expected === 403 && (op.scope === 'platform-only' || (op.scope === 'introspect' && !caller.name.includes('platform')))) {
            expect(res.body.message).to.equal('This operation requires a platform-org API key');
          }
        });
      }
    });
  }

  it('C-34: a platform key naming a non-existent organisation gets 404, not 403', async () => {
    const paths = [
      ['GET', `/v1/organisations/${MISSING_ID}`],
      ['PUT', `/v1/organisations/${MISSING_ID}`],
      ['PATCH', `/v1/organisations/${MISSING_ID}`],
      ['GET', `/v1/organisations/${MISSING_ID}/members`],
      ['GET', `/v1/organisations/${MISSING_ID}/api-keys`],
      ['POST', `/v1/organisations/${MISSING_ID}/api-keys`],
      ['GET', `/v1/organisations/${MISSING_ID}/api-keys/${MISSING_ID}`],
      ['DELETE', `/v1/organisations/${MISSING_ID}/api-keys/${MISSING_ID}`],
      ['GET', `/v1/organisations/${MISSING_ID}/api-keys/${MISSING_ID}/usage`],
      ['GET', `/v1/organisations/${MISSING_ID}/usage`],
    ] as const;
    const bodies: Record<string, unknown> = { PUT: { name: 'x' }, PATCH: { name: 'x' }, POST: { label: 'x' } };
    for (const [method, path] of paths) {
      const res = await world.api.request(method, path, {
        key: world.platform.key,
        ...(bodies[method] !== undefined ? { json: bodies[method] } : {}),
      });
      expect(res.status, `${method} ${path}`).to.equal(404);
      expect(res.body.error).to.equal('NOT_FOUND');
    }
  });

  it("C-34: a key id that is not in the named organisation is 404 (own key, other organisation's key id)", async () => {
    const get = await world.api.get(`/v1/organisations/${world.own.orgId}/api-keys/${world.other.keyId}`, { key: world.own.key });
    expect(get.status).to.equal(404);
    const del = await world.api.delete(`/v1/organisations/${world.own.orgId}/api-keys/${world.other.keyId}`, {
      key: world.own.key,
    });
    expect(del.status).to.equal(404);
    // ... and the other organisation's key still works.
    const still = await world.api.get(`/v1/organisations/${world.other.orgId}`, { key: world.other.key });
    expect(still.status).to.equal(200);
  });

  it('every operation of docs/openapi.yaml but the signed one is in this matrix', () => {
    const documented = world.api.doc
      .operations()
      .map((o) => `${o.method} ${o.template}`)
      .filter((name) => !SIGNED_OPERATIONS.includes(name))
      .sort();
    expect(OPERATIONS.map((o) => o.name).sort()).to.deep.equal(documented);
  });
});
