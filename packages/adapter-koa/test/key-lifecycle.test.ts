/**
 * The key lifecycle over real HTTP (extensions beyond v1, C-56): POST .../api-keys/{key_id}/roll and the
 * `last_used_at` field. Every exchange is validated against docs/openapi.yaml, where the roll is
 * the always-on extension `components/pathItems/RollApiKey` (x-path) and the key records carry the
 * two added fields. A FakeClock drives the grace period and the 60 s flush interval.
 */
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { MISSING_ID, createWorld, type World } from './support/world.js';

const GRACE = 120;

describe('adapter-koa: key lifecycle, roll and last_used_at (C-56, C-58)', () => {
  let world: World;
  let keys: string;
  beforeEach(async () => {
    world = await createWorld();
    keys = `/v1/organisations/${world.own.orgId}/api-keys`;
  });
  afterEach(async () => {
    await world.tc.core.keyUsage.stop();
    await world.close();
  });

  const issue = async (label: string) => (await world.api.post(keys, { key: world.own.key, json: { label } })).body as { id: string; key: string; key_prefix: string };

  describe('POST .../api-keys/{key_id}/roll', () => {
    it('201: the new key record with its raw key once, rolled_from, Location of the new key, Cache-Control: no-store', async () => {
      const old = await issue('deploy');
      const res = await world.api.post(`${keys}/${old.id}/roll`, { key: world.own.key, json: { grace_period_seconds: GRACE } });
      expect(res.status).to.equal(201);
      expect(res.headers.get('cache-control')).to.equal('no-store');
      expect(res.headers.get('location')).to.equal(`${keys}/${res.body.id}`);
      expect(res.body).to.deep.include({ label: 'deploy', rolled_from: old.id, status: 'active', last_used_at: null, revoked_at: null });
      expect(res.body.key).to.match(/^svc_live_[A-Za-z0-9]{48}$/);
      const got = await world.api.get(`${keys}/${res.body.id}`, { key: world.own.key });
      expect(got.body.rolled_from).to.equal(old.id);
      expect(got.text).to.not.include(res.body.key);
    });

    it('with a grace period: the old key answers 200 until the grace ends, then 401 on the very next request', async () => {
      const old = await issue('rotating');
      const rolled = await world.api.post(`${keys}/${old.id}/roll`, { key: old.key, json: { grace_period_seconds: GRACE, label: 'rotated' } });
      expect(rolled.status).to.equal(201);
      expect(rolled.body.label).to.equal('rotated');
      const org = `/v1/organisations/${world.own.orgId}`;
      world.tc.clock.advance(GRACE * 1000 - 1);
      expect((await world.api.get(org, { key: old.key })).status).to.equal(200);
      world.tc.clock.advance(1);
      expect((await world.api.get(org, { key: old.key })).status).to.equal(401);
      expect((await world.api.get(org, { key: rolled.body.key })).status).to.equal(200);
      const oldRecord = await world.api.get(`${keys}/${old.id}`, { key: rolled.body.key });
      expect(oldRecord.body).to.deep.include({ status: 'expired', is_active: false, revoked_at: null });
    });

    it('no body at all is grace 0: the old key is revoked at once (401), with api_key_rolled and api_key_revoked entries', async () => {
      const old = await issue('now');
      const res = await world.api.post(`${keys}/${old.id}/roll`, { key: world.own.key });
      expect(res.status).to.equal(201);
      expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: old.key })).status).to.equal(401);
      const entries = (await world.tc.core.audit.list(OPERATOR, { limit: '100' })).items.filter((e) => e.keyId === old.id);
      expect(entries.map((e) => e.kind)).to.include.members(['api_key_rolled', 'api_key_revoked']);
      expect(entries.find((e) => e.kind === 'api_key_rolled')?.roll).to.deep.equal({ toKeyId: res.body.id, gracePeriodSeconds: 0 });
    });

    it('C-33, C-34: another organisation\'s key is 403 (not 404), even with a bad body, and nothing changes', async () => {
      const theirs = `/v1/organisations/${world.other.orgId}/api-keys/${world.other.keyId}/roll`;
      expect((await world.api.post(theirs, { key: world.own.key, json: {} })).status).to.equal(403);
      expect((await world.api.post(theirs, { key: world.own.key, json: { bogus: true } })).status).to.equal(403);
      expect((await world.api.post(`/v1/organisations/${world.other.orgId}/api-keys/${MISSING_ID}/roll`, { key: world.own.key })).status).to.equal(403);
      expect((await world.api.get(`/v1/organisations/${world.other.orgId}`, { key: world.other.key })).status).to.equal(200);
      const platform = await world.api.post(theirs, { key: world.platform.key, json: { grace_period_seconds: 60 } });
      expect(platform.status, 'a platform key may roll any organisation\'s key').to.equal(201);
    });

    it('409 for a revoked or an expired key, 404 for an unknown key, 401 without a key', async () => {
      const revoked = await world.api.post(`${keys}/${world.revokedKeyId}/roll`, { key: world.own.key });
      expect(revoked.status).to.equal(409);
      expect(revoked.body).to.deep.equal({ error: 'CONFLICT', message: 'This API key is revoked and cannot be rolled; issue a new key instead', details: [] });
      const expired = await world.api.post(`${keys}/${world.expiredKeyId}/roll`, { key: world.own.key });
      expect(expired.status).to.equal(409);
      expect(expired.body.message).to.match(/expired and cannot be rolled/);
      expect((await world.api.post(`${keys}/${MISSING_ID}/roll`, { key: world.own.key })).status).to.equal(404);
      expect((await world.api.post(`${keys}/${world.own.keyId}/roll`)).status).to.equal(401);
    });

    it('C-10, C-11: strict validation in the standard shape; nothing changes', async () => {
      const path = `${keys}/${world.own.keyId}/roll`;
      const extra = await world.api.post(path, { key: world.own.key, json: { grace_period_seconds: 60, rolled_from: world.own.keyId } });
      expect(extra.status).to.equal(400);
      expect(extra.body.details).to.deep.equal([{ field: 'rolled_from', issue: 'extra fields not permitted' }]);
      const range = await world.api.post(path, { key: world.own.key, json: { grace_period_seconds: 604_801 } });
      expect(range.body.details).to.deep.equal([{ field: 'grace_period_seconds', issue: 'must be an integer from 0 to 604800' }]);
      expect((await world.api.post(path, { key: world.own.key, body: '{"grace', headers: { 'content-type': 'application/json' } })).status).to.equal(400);
      expect((await world.api.post(path, { key: world.own.key, body: 'grace=5', headers: { 'content-type': 'text/plain' } })).status).to.equal(415);
      expect((await world.api.post(`${keys}/not-a-uuid/roll`, { key: world.own.key })).body.details).to.deep.equal([{ field: 'key_id', issue: 'must be a UUID' }]);
      expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key })).status, 'the key still works').to.equal(200);
    });

    it('C-9: the roll path takes POST only (405 with Allow)', async () => {
      const res = await world.api.get(`${keys}/${world.own.keyId}/roll`, { key: world.own.key });
      expect(res.status).to.equal(405);
      expect(res.headers.get('allow')).to.equal('POST');
    });
  });

  describe('last_used_at', () => {
    it('is null until used; shows a successful request within the 60 s interval; a failed one changes nothing', async () => {
      const k = await issue('watched');
      const first = await world.api.get(`${keys}/${k.id}`, { key: world.own.key });
      expect(first.body.last_used_at).to.equal(null);
      world.tc.clock.advance(60_000);
      await world.tc.core.keyUsage.flushIfDue(); // the world's own requests so far
      const usedAt = world.tc.clock.now().toISOString();
      expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: k.key })).status).to.equal(200);
      world.tc.clock.advance(60_000);
      await world.tc.core.keyUsage.flushIfDue();
      const list = await world.api.get(keys, { key: world.own.key });
      const listed = list.body.data.find((r: { id: string }) => r.id === k.id);
      expect(listed.last_used_at).to.equal(usedAt);
      // A 403 is still a successful authentication; a revoked key's 401 is not.
      expect((await world.api.get(`/v1/organisations/${world.other.orgId}`, { key: world.revokedKey })).status).to.equal(401);
      world.tc.clock.advance(60_000);
      await world.tc.core.keyUsage.flushIfDue();
      const revoked = await world.api.get(`${keys}/${world.revokedKeyId}`, { key: world.own.key });
      expect(revoked.body.last_used_at).to.equal(null);
    });
  });
});
