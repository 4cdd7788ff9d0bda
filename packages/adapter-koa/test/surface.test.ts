/**
 * The HTTP surface's own rules: prefix, creation, version, health, unknown paths and methods,
 * request ids, headers (C-1..C-4, C-9, C-15, C-16). Every response is validated against
 * docs/openapi.yaml by the client.
 */
import { expect } from 'chai';
import { UnavailableError } from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';
import { rawRequest } from './support/http.js';
import { faultyStore } from './support/faults.js';
import { createWorld, SERVICE_VERSION, type World } from './support/world.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('adapter-koa: HTTP surface', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld();
  });
  afterEach(async () => {
    await world.close();
  });

  describe('C-1: every operation lives under /v1', () => {
    it('C-1: /v1/health and /v1/version answer without a key', async () => {
      expect((await world.api.get('/v1/health')).status).to.equal(200);
      expect((await world.api.get('/v1/version')).status).to.equal(200);
    });

    it('C-1: the same paths without the /v1 prefix are unknown (404), with or without a key', async () => {
      for (const path of ['/health', '/version', '/organisations', `/organisations/${world.own.orgId}`, '/', '/v2/health']) {
        const res = await world.api.get(path, { key: world.platform.key });
        expect(res.status, path).to.equal(404);
        expect(res.body).to.deep.include({ error: 'NOT_FOUND', details: [] });
      }
    });
  });

  describe('C-2: creation answers 201 with Location', () => {
    it('C-2: POST /v1/organisations -> 201, Location names the new organisation and resolves to it', async () => {
      const res = await world.api.post('/v1/organisations', { key: world.platform.key, json: { name: 'Initech', slug: 'initech' } });
      expect(res.status).to.equal(201);
      expect(res.body.id).to.match(UUID);
      expect(res.headers.get('location')).to.equal(`/v1/organisations/${res.body.id}`);
      const fetched = await world.api.get(res.headers.get('location')!, { key: world.platform.key });
      expect(fetched.status).to.equal(200);
      expect(fetched.body).to.deep.equal(res.body);
    });

    it('C-2: POST /v1/organisations/{org_id}/api-keys -> 201, Location names the new key and resolves to it', async () => {
      const base = `/v1/organisations/${world.own.orgId}/api-keys`;
      const res = await world.api.post(base, { key: world.own.key, json: { label: 'deploy' } });
      expect(res.status).to.equal(201);
      expect(res.headers.get('location')).to.equal(`${base}/${res.body.id}`);
      const fetched = await world.api.get(res.headers.get('location')!, { key: world.own.key });
      expect(fetched.status).to.equal(200);
      const { key: _raw, ...withoutKey } = res.body;
      expect(fetched.body).to.deep.equal(withoutKey);
    });

    it('C-2: an upper-case org_id in the path is accepted; the record carries the canonical lower-case id', async () => {
      const upper = world.own.orgId.toUpperCase();
      const res = await world.api.post(`/v1/organisations/${upper}/api-keys`, { key: world.platform.key, json: { label: 'x' } });
      expect(res.status).to.equal(201);
      expect(res.body.organisation_id).to.equal(world.own.orgId);
    });
  });

  describe('C-3: GET /v1/version', () => {
    it('C-3: answers api_version, release, released_on and the running build\'s service_version', async () => {
      const res = await world.api.get('/v1/version');
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.equal('application/json; charset=utf-8');
      expect(res.body).to.deep.equal({
        api_version: 'v1',
        release: 'v1-stable',
        released_on: '2026-06-10',
        service_version: SERVICE_VERSION,
      });
    });
  });

  describe('C-4: GET /v1/health', () => {
    it('C-4: 200 {status:"ok", timestamp} with an ISO 8601 UTC timestamp ending in Z', async () => {
      const res = await world.api.get('/v1/health');
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ status: 'ok', timestamp: world.tc.clock.now().toISOString() });
      expect(res.body.timestamp).to.match(/Z$/);
    });

    it('C-4: 503 {status:"unavailable", timestamp} when the store probe fails, 200 again once it answers', async () => {
      const store = faultyStore(createInMemoryStore());
      const w = await createWorld({ store });
      try {
        store.failWith(() => new Error('connection refused'));
        const down = await w.api.get('/v1/health');
        expect(down.status).to.equal(503);
        expect(down.body).to.deep.equal({ status: 'unavailable', timestamp: w.tc.clock.now().toISOString() });
        store.failWith(null);
        expect((await w.api.get('/v1/health')).status).to.equal(200);
      } finally {
        await w.close();
      }
    });

    it('C-4: 503 when the store probe does not answer within the health timeout', async () => {
      const store = faultyStore(createInMemoryStore());
      const w = await createWorld({ store, config: { healthTimeoutMs: 50 } });
      try {
        // A probe that never settles: fault() returns a promise that never resolves.
        store.failWith(() => new Promise(() => undefined));
        const started = Date.now();
        const res = await w.api.get('/v1/health');
        expect(res.status).to.equal(503);
        expect(res.body.status).to.equal('unavailable');
        expect(Date.now() - started).to.be.lessThan(1000);
      } finally {
        await w.close();
      }
    });
  });

  describe('C-9: unknown paths and methods', () => {
    it('C-9: an unknown path is 404 NOT_FOUND in the standard shape, without needing a key', async () => {
      for (const path of ['/v1/nothing', '/v1/organisations/x/y/z/w', '/v1', '/v1/organisations/', `/v1/organisations/${world.own.orgId}/`, '/V1/health']) {
        const res = await world.api.get(path);
        expect(res.status, path).to.equal(404);
        expect(res.headers.get('content-type')).to.equal('application/json; charset=utf-8');
        expect(res.body.error).to.equal('NOT_FOUND');
        expect(res.body.details).to.deep.equal([]);
      }
    });

    it('C-9: a known path with another method is 405 METHOD_NOT_ALLOWED with an Allow header listing its methods', async () => {
      const cases: [string, string, string][] = [
        ['POST', '/v1/health', 'GET'],
        ['DELETE', '/v1/version', 'GET'],
        ['DELETE', '/v1/organisations', 'GET, POST'],
        ['POST', `/v1/organisations/${world.own.orgId}`, 'GET, PUT, PATCH'],
        ['PUT', `/v1/organisations/${world.own.orgId}/members`, 'GET'],
        ['DELETE', `/v1/organisations/${world.own.orgId}/api-keys`, 'GET, POST'],
        ['PUT', `/v1/organisations/${world.own.orgId}/api-keys/${world.own.keyId}`, 'GET, PATCH, DELETE'],
        ['HEAD', '/v1/health', 'GET'],
        ['OPTIONS', '/v1/organisations', 'GET, POST'],
      ];
      for (const [method, path, allow] of cases) {
        const res = await world.api.request(method, path);
        expect(res.status, `${method} ${path}`).to.equal(405);
        expect(res.headers.get('allow')).to.equal(allow);
        if (method !== 'HEAD') expect(res.body.error).to.equal('METHOD_NOT_ALLOWED');
      }
    });

    it('C-9: the Allow header of every documented path equals the methods docs/openapi.yaml lists for it', async () => {
      for (const [template, item] of Object.entries(world.api.doc.paths())) {
        // Off in this world (no scanner keys configured): an unknown path, 404 for every method.
        if (template === '/secret-scanning/alerts') {
          expect((await world.api.request('GET', `/v1${template}`)).status).to.equal(404);
          continue;
        }
        const methods = ['GET', 'PUT', 'POST', 'DELETE', 'PATCH'].filter((m) => item[m.toLowerCase()] !== undefined);
        const missing = ['GET', 'PUT', 'POST', 'DELETE', 'PATCH'].find((m) => !methods.includes(m))!;
        const path = `/v1${template.replace('{org_id}', world.own.orgId).replace('{key_id}', world.own.keyId)}`;
        const res = await world.api.request(missing, path);
        expect(res.status, `${missing} ${path}`).to.equal(405);
        expect(res.headers.get('allow')!.split(', ').sort()).to.deep.equal([...methods].sort());
      }
    });
  });

  describe('C-15: X-Request-Id', () => {
    it('C-15: a caller-supplied id of 1..128 visible ASCII characters is echoed', async () => {
      for (const id of ['a', 'req-123_ABC.def:ghi/+=~!', 'x'.repeat(128), `${'!'}${'~'.repeat(127)}`]) {
        const res = await world.api.get('/v1/health', { headers: { 'x-request-id': id } });
        expect(res.headers.get('x-request-id')).to.equal(id);
      }
    });

    it('C-15: anything else is replaced by a new UUID', async () => {
      for (const id of ['x'.repeat(129), 'has space', 'tab\there']) {
        const res = await world.api.get('/v1/health', { headers: { 'x-request-id': id } });
        expect(res.headers.get('x-request-id'), JSON.stringify(id)).to.match(UUID);
      }
      const nonAscii = await rawRequest(world.api, 'GET', '/v1/health', { 'x-request-id': Buffer.from('caf\u00e9', 'latin1').toString('latin1') });
      expect(nonAscii.headers['x-request-id']).to.match(UUID);
      const none = await world.api.get('/v1/health');
      const again = await world.api.get('/v1/health');
      expect(none.headers.get('x-request-id')).to.match(UUID);
      expect(again.headers.get('x-request-id')).to.not.equal(none.headers.get('x-request-id'));
    });

    it('C-15: every response carries X-Request-Id: 2xx, 204, 400, 401, 403, 404, 405, 409, 413 and 415 (429: rate-limit.test.ts, 500: errors.test.ts)', async () => {
      const own = `/v1/organisations/${world.own.orgId}`;
      const responses = [
        await world.api.get('/v1/health'),
        await world.api.delete(`${own}/api-keys/${world.revokedKeyId}`, { key: world.own.key }),
        await world.api.get('/v1/organisations/not-a-uuid', { key: world.platform.key }),
        await world.api.get(own),
        await world.api.get(`/v1/organisations/${world.other.orgId}`, { key: world.own.key }),
        await world.api.get('/v1/nowhere'),
        await world.api.delete('/v1/health'),
        await world.api.post('/v1/organisations', { key: world.platform.key, json: { name: 'Dup', slug: 'acme' } }),
        await world.api.patch(own, { key: world.own.key, json: { name: 'x'.repeat(70_000) } }),
        await world.api.patch(own, { key: world.own.key, body: 'name=x', headers: { 'content-type': 'text/plain' } }),
      ];
      expect(responses.map((r) => r.status)).to.deep.equal([200, 204, 400, 401, 403, 404, 405, 409, 413, 415]);
      for (const r of responses) expect(r.headers.get('x-request-id')).to.match(UUID);
    });
  });

  describe('C-16: headers', () => {
    it('C-16: no response carries X-Powered-By', async () => {
      const responses = [
        await world.api.get('/v1/health'),
        await world.api.get('/v1/organisations', { key: world.platform.key }),
        await world.api.get('/v1/organisations'),
        await world.api.get('/nowhere'),
      ];
      for (const r of responses) expect(r.headers.has('x-powered-by')).to.equal(false);
    });

    it('C-16: the key issuance response carries Cache-Control: no-store', async () => {
      const res = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: world.own.key, json: { label: 'ci' } });
      expect(res.status).to.equal(201);
      expect(res.headers.get('cache-control')).to.equal('no-store');
    });

    it('C-16: a failed issuance carries neither Cache-Control nor Location of a key that does not exist', async () => {
      const res = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: world.own.key, json: {} });
      expect(res.status).to.equal(400);
      expect(res.headers.has('location')).to.equal(false);
    });
  });

  describe('C-17: the store is down', () => {
    it('C-17: API calls answer 503 SERVICE_UNAVAILABLE in the standard shape and resume by themselves', async () => {
      const store = faultyStore(createInMemoryStore());
      const w = await createWorld({ store });
      try {
        store.failWith(() => new UnavailableError(undefined, { cause: new Error('connect ECONNREFUSED 10.0.0.5:5432') }));
        const down = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
        expect(down.status).to.equal(503);
        expect(down.body.error).to.equal('SERVICE_UNAVAILABLE');
        expect(down.body.details).to.deep.equal([]);
        expect(down.text).to.not.include('ECONNREFUSED');
        const write = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: w.platform.key, json: { label: 'x' } });
        expect(write.status).to.equal(503);
        store.failWith(null);
        const up = await w.api.get(`/v1/organisations/${w.own.orgId}/api-keys`, { key: w.own.key });
        expect(up.status).to.equal(200);
        // Nothing was half-written by the failed issuance: only the seeded keys exist.
        expect(up.body.data.map((k: { label: string }) => k.label).sort()).to.deep.equal(['acme key', 'expiring', 'to revoke']);
      } finally {
        await w.close();
      }
    });
  });
});
