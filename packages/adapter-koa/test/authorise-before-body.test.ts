/**
 * C-33 over HTTP on the routes that take a body: authenticate (401) -> rate limit (429) ->
 * authorise (403) -> body and validation (415, 413, 400) -> act. A standard key that may not
 * perform the operation gets 403 whatever it sends; the body problems of C-10 are answered only to
 * a caller that may perform it.
 */
import { expect } from 'chai';
import { FOREIGN_ORGANISATION_MESSAGE, OPERATOR, PLATFORM_REQUIRED_MESSAGE } from '@cos/core';
import { rawRequest, type Api } from './support/http.js';
import { createWorld, MISSING_ID, type World } from './support/world.js';

const OVER_LIMIT = JSON.stringify({ name: 'x'.repeat(100 * 1024) });

interface BadBody {
  readonly name: string;
  /** Sends the bad body with `method` to `path` as `key`; returns status and parsed body. */
  send(api: Api, method: string, path: string, key: string): Promise<{ status: number; body: any }>;
  /** What a caller allowed to perform the operation gets. */
  readonly allowed: { status: number; error: string };
}

const viaFetch =
  (body: string | Uint8Array, headers: Record<string, string>) =>
  async (api: Api, method: string, path: string, key: string) => {
    const res = await api.request(method, path, { key, body, headers });
    return { status: res.status, body: res.body };
  };

const BAD_BODIES: readonly BadBody[] = [
  { name: 'malformed JSON', send: viaFetch('{"name": ', { 'content-type': 'application/json' }), allowed: { status: 400, error: 'VALIDATION_ERROR' } },
  { name: 'JSON that is not an object', send: viaFetch('[1,2]', { 'content-type': 'application/json' }), allowed: { status: 400, error: 'VALIDATION_ERROR' } },
  { name: 'no body at all', send: viaFetch('', { 'content-type': 'application/json' }), allowed: { status: 400, error: 'VALIDATION_ERROR' } },
  { name: 'a non-JSON content type', send: viaFetch('{"name":"x"}', { 'content-type': 'text/plain' }), allowed: { status: 415, error: 'UNSUPPORTED_MEDIA_TYPE' } },
  { name: 'a body without a content type', send: viaFetch(new TextEncoder().encode('{"name":"x"}'), {}), allowed: { status: 415, error: 'UNSUPPORTED_MEDIA_TYPE' } },
  { name: 'a body over 64 KiB', send: viaFetch(OVER_LIMIT, { 'content-type': 'application/json' }), allowed: { status: 413, error: 'PAYLOAD_TOO_LARGE' } },
  {
    name: 'a chunked body that grows past 64 KiB',
    send: async (api, method, path, key) => {
      const res = await rawRequest(
        api,
        method,
        path,
        { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        Buffer.from(OVER_LIMIT),
      );
      return { status: res.status, body: JSON.parse(res.text) };
    },
    allowed: { status: 413, error: 'PAYLOAD_TOO_LARGE' },
  },
];

describe('adapter-koa: authorise before reading the body (C-33, C-10, C-34, spec §5.3)', () => {
  let world: World;
  beforeEach(async () => {
    // Many requests per test: a limit high enough that no 429 hides the answer under test.
    world = await createWorld({ config: { rateLimitPerMinute: 10_000 } });
  });
  afterEach(async () => {
    await world.close();
  });

  const organisationCount = async (): Promise<number> =>
    (await world.tc.core.organisations.list(OPERATOR, { limit: 100 })).items.length;
  const auditCount = async (): Promise<number> => (await world.tc.core.audit.list(OPERATOR, { limit: 100 })).items.length;

  it('C-33: a standard key sending a bad body to POST /v1/organisations (platform only) gets 403, not 400/415/413', async () => {
    const [orgs, entries] = [await organisationCount(), await auditCount()];
    for (const bad of BAD_BODIES) {
      const res = await bad.send(world.api, 'POST', '/v1/organisations', world.own.key);
      expect(res.status, bad.name).to.equal(403);
      expect(res.body, bad.name).to.deep.include({ error: 'FORBIDDEN', message: PLATFORM_REQUIRED_MESSAGE, details: [] });
    }
    expect(await organisationCount()).to.equal(orgs);
    expect(await auditCount()).to.equal(entries);
  });

  it('C-33: a standard key sending a bad body to PUT, PATCH or POST .../api-keys of a foreign organisation gets 403', async () => {
    const entries = await auditCount();
    const foreign = [world.other.orgId, world.platform.orgId, MISSING_ID, 'not-a-uuid'];
    for (const orgId of foreign) {
      const targets: [string, string][] = [
        ['PUT', `/v1/organisations/${orgId}`],
        ['PATCH', `/v1/organisations/${orgId}`],
        ['POST', `/v1/organisations/${orgId}/api-keys`],
      ];
      for (const [method, path] of targets) {
        for (const bad of BAD_BODIES) {
          const res = await bad.send(world.api, method, path, world.own.key);
          expect(res.status, `${method} ${path} with ${bad.name}`).to.equal(403);
          expect(res.body).to.deep.include({ error: 'FORBIDDEN', message: FOREIGN_ORGANISATION_MESSAGE, details: [] });
        }
      }
    }
    expect(await auditCount()).to.equal(entries);
  });

  it('C-33, C-10: a platform key sending a bad body to POST /v1/organisations gets the body error (400, 415, 413)', async () => {
    for (const bad of BAD_BODIES) {
      const res = await bad.send(world.api, 'POST', '/v1/organisations', world.platform.key);
      expect(res.status, bad.name).to.equal(bad.allowed.status);
      expect(res.body.error, bad.name).to.equal(bad.allowed.error);
    }
    const malformed = await world.api.post('/v1/organisations', {
      key: world.platform.key,
      body: '{',
      headers: { 'content-type': 'application/json' },
    });
    expect(malformed.status).to.equal(400);
    expect(malformed.body).to.deep.include({ error: 'VALIDATION_ERROR', details: [{ field: 'body', issue: 'malformed JSON' }] });
  });

  it('C-33, C-10: a platform key on any organisation, and a standard key on its own, get the body error', async () => {
    const callers: [string, string][] = [
      [world.platform.key, world.other.orgId],
      [world.own.key, world.own.orgId],
      [world.own.key, world.own.orgId.toUpperCase()],
    ];
    for (const [key, orgId] of callers) {
      for (const [method, path] of [
        ['PUT', `/v1/organisations/${orgId}`],
        ['PATCH', `/v1/organisations/${orgId}`],
        ['POST', `/v1/organisations/${orgId}/api-keys`],
      ] as const) {
        for (const bad of BAD_BODIES) {
          const res = await bad.send(world.api, method, path, key);
          expect(res.status, `${method} ${path} with ${bad.name}`).to.equal(bad.allowed.status);
          expect(res.body.error).to.equal(bad.allowed.error);
        }
      }
    }
  });

  it('C-33: authentication (401) and the rate limit (429) still come before the 403 of a bad body', async () => {
    const noKey = await world.api.post('/v1/organisations', { body: '{', headers: { 'content-type': 'application/json' } });
    expect(noKey.status).to.equal(401);
    const revoked = await world.api.request('PATCH', `/v1/organisations/${world.other.orgId}`, {
      key: world.revokedKey,
      body: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(revoked.status).to.equal(401);
    const w = await createWorld({ config: { rateLimitPerMinute: 1 } });
    try {
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      const limited = await w.api.post('/v1/organisations', { key: w.own.key, body: '{', headers: { 'content-type': 'application/json' } });
      expect(limited.status).to.equal(429);
      const limitedForeign = await w.api.put(`/v1/organisations/${w.other.orgId}`, { key: w.own.key, body: OVER_LIMIT, headers: { 'content-type': 'application/json' } });
      expect(limitedForeign.status).to.equal(429);
    } finally {
      await w.close();
    }
  });

  it('C-33: a refused request with a body leaves the connection usable for the next request', async () => {
    // The 403 is answered without reading the body; the next request on the same client still works.
    for (let i = 0; i < 3; i++) {
      const refused = await world.api.post('/v1/organisations', { key: world.own.key, body: OVER_LIMIT, headers: { 'content-type': 'application/json' } });
      expect(refused.status).to.equal(403);
      const ok = await world.api.patch(`/v1/organisations/${world.own.orgId}`, { key: world.own.key, json: { name: `Acme ${i}` } });
      expect(ok.status).to.equal(200);
      expect(ok.body.name).to.equal(`Acme ${i}`);
    }
  });
});
