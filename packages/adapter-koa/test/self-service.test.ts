/**
 * Self-service for organisation owners over HTTP (in-memory core; the same routes over SQLite and
 * Postgres are in system-tests/contract/self-service.test.ts): GET /v1/me. Every response is
 * validated against docs/openapi.yaml by the test client.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { OPERATOR } from '@cos/core';
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

  describe('every event carries cause, and matches its schema under `webhooks:` in docs/openapi.yaml', () => {
    it('issued (key), revoked (operator), rolled (key) with its revocation (roll), exposed and revoked (secret scanning)', async () => {
      const { core } = world.tc;
      await core.webhooks.set(OPERATOR, world.own.orgId, 'https://hooks.acme.example/cos');
      const keys = `/v1/organisations/${world.own.orgId}/api-keys`;
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'ci' } });
      await core.apiKeys.revoke(OPERATOR, world.own.orgId, issued.body.id);
      const second = await world.api.post(keys, { key: world.own.key, json: { label: 'rolling' } });
      const rolled = await world.api.post(`${keys}/${second.body.id}/roll`, { key: world.own.key, json: { grace_period_seconds: 0 } });
      expect(rolled.status).to.equal(201);
      const third = await world.api.post(keys, { key: world.own.key, json: { label: 'leaky' } });
      await core.secretScanning.report([{ token: third.body.key, type: 'cos_api_key', url: 'https://github.com/a/b', source: 'content' }]);

      const notes = await world.tc.store.stores.outbox.list({ organisationId: world.own.orgId }, { limit: 100, after: null });
      const events = notes.map((n) => JSON.parse(n.payload) as { type: string; data: { key_id: string; cause: unknown } });
      const causes = events.map((e) => [e.type, e.data.key_id, e.data.cause]);
      const byKey = { type: 'api_key', key_id: world.own.keyId };
      expect(causes).to.have.deep.members([
        ['api_key.issued', issued.body.id, byKey],
        ['api_key.revoked', issued.body.id, { type: 'operator' }],
        ['api_key.issued', second.body.id, byKey],
        ['api_key.rolled', second.body.id, byKey],
        ['api_key.revoked', second.body.id, { type: 'roll', new_key_id: rolled.body.id }],
        ['api_key.issued', third.body.id, byKey],
        ['api_key.exposed', third.body.id, { type: 'secret_scanning' }],
        ['api_key.revoked', third.body.id, { type: 'secret_scanning' }],
      ]);
      for (const event of events) {
        const check = world.api.doc.validatorAt(`#/webhooks/${event.type}/post/requestBody/content/application~1json/schema`);
        expect(check(event), `${event.type}: ${JSON.stringify(check.errors)}`).to.equal(true);
      }
      // The schema is strict: an event without cause does not match it.
      const { cause: _cause, ...withoutCause } = events[0]!.data;
      expect(world.api.doc.validatorAt('#/webhooks/api_key.issued/post/requestBody/content/application~1json/schema')({ ...events[0], data: withoutCause })).to.equal(false);
    });
  });
});
