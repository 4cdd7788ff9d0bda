/**
 * Self-service for organisation owners over HTTP (in-memory core; the same routes over SQLite and
 * Postgres are in system-tests/contract/self-service.test.ts): GET /v1/me. Every response is
 * validated against docs/openapi.yaml by the test client.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { createWorld, type World } from './support/world.js';

describe('adapter-koa: self-service (issue 28)', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld({ config: { rateLimitPerMinute: 5 } });
  });
  afterEach(async () => {
    await world.close();
  });

  describe('GET /v1/me', () => {
    it('answers the calling key record and its organisation record, never the raw key or its digest', async () => {
      const res = await world.api.get('/v1/me', { key: world.own.key });
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['api_key', 'organisation']);
      expect(res.body.api_key).to.deep.include({ id: world.own.keyId, organisation_id: world.own.orgId, status: 'active', label: 'acme key' });
      expect(res.body.organisation).to.deep.include({ id: world.own.orgId, slug: 'acme', is_system: false });
      expect(res.text).to.not.include(world.own.key);
      expect(res.text).to.not.include(createHash('sha256').update(world.own.key).digest('hex'));
      const org = await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key });
      expect(res.body.organisation).to.deep.equal(org.body);
    });

    it('answers a platform key with the system organisation', async () => {
      const res = await world.api.get('/v1/me', { key: world.platform.key });
      expect(res.status).to.equal(200);
      expect(res.body.api_key.id).to.equal(world.platform.keyId);
      expect(res.body.organisation).to.deep.include({ id: world.platform.orgId, is_system: true });
    });

    it('C-32: a revoked, expired or missing key gets 401', async () => {
      for (const key of [world.revokedKey, world.expiredKey]) expect((await world.api.get('/v1/me', { key })).status).to.equal(401);
      expect((await world.api.get('/v1/me')).status).to.equal(401);
    });

    it('C-52: counted against the organisation like every authenticated request', async () => {
      const first = await world.api.get('/v1/me', { key: world.own.key });
      expect(first.headers.get('x-ratelimit-remaining')).to.equal('4');
      await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key });
      const third = await world.api.get('/v1/me', { key: world.own.key });
      expect(third.headers.get('x-ratelimit-remaining')).to.equal('2');
      for (let i = 0; i < 2; i++) await world.api.get('/v1/me', { key: world.own.key });
      expect((await world.api.get('/v1/me', { key: world.own.key })).status).to.equal(429);
    });
  });
});
