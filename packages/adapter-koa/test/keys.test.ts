/**
 * API keys over HTTP: the record (C-22), authentication (spec §5, C-32), revocation and expiry
 * (spec §3, C-35, C-36), and the audit event of a revocation (spec §6, C-40).
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { OPERATOR } from '@cos/core';
import { rawRequest } from './support/http.js';
import { createWorld, type World } from './support/world.js';

// C-22's fields plus last_used_at and rolled_from, added by the key lifecycle (C-56: fields may be added, never removed).
const KEY_RECORD_FIELDS = ['created_at', 'expires_at', 'id', 'is_active', 'key_prefix', 'label', 'last_used_at', 'organisation_id', 'revoked_at', 'rolled_from', 'status', 'scopes', 'created_by_key_id', 'metadata', 'allowed_cidrs', 'rate_limit_per_minute'].sort();

describe('adapter-koa: API keys', () => {
  let world: World;
  let keys: string;
  beforeEach(async () => {
    world = await createWorld();
    keys = `/v1/organisations/${world.own.orgId}/api-keys`;
  });
  afterEach(async () => {
    await world.close();
  });

  describe('C-22: the key record', () => {
    it('C-22: issuance answers the record plus the raw key; key_prefix is its first 12 characters', async () => {
      const res = await world.api.post(keys, { key: world.own.key, json: { label: 'deploy' } });
      expect(Object.keys(res.body).sort()).to.deep.equal([...KEY_RECORD_FIELDS, 'key'].sort());
      expect(res.body.key).to.have.length(57);
      expect(res.body.key_prefix).to.equal(res.body.key.slice(0, 12));
      expect(res.body).to.deep.include({
        organisation_id: world.own.orgId,
        label: 'deploy',
        is_active: true,
        status: 'active',
        expires_at: null,
        revoked_at: null,
        created_at: world.tc.clock.now().toISOString(),
      });
      // The new key works at once.
      expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: res.body.key })).status).to.equal(200);
    });

    it('C-22, spec §5.6: list and get never contain the raw key or its digest', async () => {
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'secret' } });
      const digest = createHash('sha256').update(issued.body.key).digest('hex');
      const list = await world.api.get(keys, { key: world.own.key });
      const one = await world.api.get(`${keys}/${issued.body.id}`, { key: world.own.key });
      for (const text of [list.text, one.text]) {
        expect(text).to.not.include(issued.body.key);
        expect(text).to.not.include(digest);
        expect(text).to.not.include(world.own.key);
      }
      for (const record of [...list.body.data, one.body]) expect(Object.keys(record).sort()).to.deep.equal(KEY_RECORD_FIELDS);
    });

    it('C-22: status and is_active follow the lifecycle: active, revoked, expired', async () => {
      const list = await world.api.get(keys, { key: world.own.key });
      const byLabel = Object.fromEntries(list.body.data.map((k: { label: string }) => [k.label, k]));
      expect(byLabel['acme key']).to.deep.include({ status: 'active', is_active: true, revoked_at: null });
      expect(byLabel['to revoke']).to.deep.include({ status: 'revoked', is_active: false });
      expect(byLabel['to revoke'].revoked_at).to.be.a('string');
      expect(byLabel['expiring']).to.deep.include({ status: 'expired', is_active: false, revoked_at: null });
    });
  });

  describe('C-32: the Authorization header', () => {
    it('C-32: the scheme is case-insensitive', async () => {
      for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
        const res = await world.api.get(`/v1/organisations/${world.own.orgId}`, { authorization: `${scheme} ${world.own.key}` });
        expect(res.status, scheme).to.equal(200);
      }
    });

    it('C-32: anything but exactly "Bearer <key>" is 401 "Missing or invalid API key"', async () => {
      const k = world.own.key;
      for (const authorization of [`Bearer  ${k}`, `Token ${k}`, `Basic ${k}`, k, `Bearer ${k}x`, `Bearer ${k.slice(0, 56)}`, `Bearer ${k.replace('svc_live_', 'svc_prod_')}`, 'Bearer', '']) {
        const res = await world.api.get(`/v1/organisations/${world.own.orgId}`, { authorization });
        expect(res.status, JSON.stringify(authorization)).to.equal(401);
        expect(res.body.message).to.equal('Missing or invalid API key');
      }
    });

    it('C-32: a tab as separator is 401; blanks around the whole value are trimmed by HTTP itself (sent raw, fetch would normalise them)', async () => {
      const k = world.own.key;
      for (const authorization of [`Bearer\t${k}`, `Bearer ${k} `, ` Bearer ${k}`]) {
        const res = await rawRequest(world.api, 'GET', `/v1/organisations/${world.own.orgId}`, { authorization });
        // Node trims leading/trailing blanks of header values (RFC 9110 §5.5), so those two arrive as the exact form.
        const expected = authorization.trim() === `Bearer ${k}` ? 200 : 401;
        expect(res.status, JSON.stringify(authorization)).to.equal(expected);
      }
    });
  });

  describe('spec §3, C-35, C-36: revocation and expiry', () => {
    it('spec §3, C-36: a revoked key is rejected on the very next request; the record is kept', async () => {
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'short-lived' } });
      const k = issued.body.key as string;
      expect((await world.api.get(keys, { key: k })).status).to.equal(200);
      const del = await world.api.delete(`${keys}/${issued.body.id}`, { key: world.own.key });
      expect(del.status).to.equal(204);
      expect(del.text).to.equal('');
      expect(del.headers.has('content-type')).to.equal(false);
      expect((await world.api.get(keys, { key: k })).status).to.equal(401);
      const record = await world.api.get(`${keys}/${issued.body.id}`, { key: world.own.key });
      expect(record.body).to.deep.include({ status: 'revoked', is_active: false, revoked_at: world.tc.clock.now().toISOString() });
    });

    it('C-35: DELETE of an already revoked key answers 204 again and writes no second api_key_revoked event', async () => {
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'twice' } });
      expect((await world.api.delete(`${keys}/${issued.body.id}`, { key: world.own.key })).status).to.equal(204);
      expect((await world.api.delete(`${keys}/${issued.body.id}`, { key: world.own.key })).status).to.equal(204);
      const events = await world.tc.core.audit.list(OPERATOR, { kind: 'api_key_revoked', org: world.own.orgId, limit: 100 });
      const forKey = events.items.filter((e) => e.keyId === issued.body.id);
      expect(forKey).to.have.length(1);
    });

    it('C-35, C-40: revoking the key that authenticates the request is allowed, the event names it as actor', async () => {
      const res = await world.api.delete(`${keys}/${world.own.keyId}`, { key: world.own.key });
      expect(res.status).to.equal(204);
      expect((await world.api.get(keys, { key: world.own.key })).status).to.equal(401);
      const events = await world.tc.core.audit.list(OPERATOR, { kind: 'api_key_revoked', org: world.own.orgId, limit: 100 });
      const entry = events.items.find((e) => e.keyId === world.own.keyId)!;
      expect(entry.actor).to.deep.equal({ type: 'api_key', keyId: world.own.keyId });
      expect(entry.keyPrefix).to.equal(world.own.key.slice(0, 12));
    });

    it('C-36: a key with expires_at is accepted until that instant and rejected from it on', async () => {
      const expiresAt = new Date(world.tc.clock.now().getTime() + 5000);
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'timed', expires_at: expiresAt.toISOString() } });
      world.tc.clock.set(new Date(expiresAt.getTime() - 1));
      expect((await world.api.get(keys, { key: issued.body.key })).status).to.equal(200);
      world.tc.clock.set(expiresAt);
      expect((await world.api.get(keys, { key: issued.body.key })).status).to.equal(401);
    });

    it('spec §5.7: there is no way to undo a revocation over HTTP (no method re-activates a key)', async () => {
      const path = `${keys}/${world.revokedKeyId}`;
      for (const method of ['PUT', 'POST']) {
        const res = await world.api.request(method, path, { key: world.own.key, json: { is_active: true } });
        expect(res.status, method).to.equal(405);
      }
      // PATCH changes label, metadata and networks only (C-261): the status is not among them.
      const patch = await world.api.patch(path, { key: world.own.key, json: { is_active: true, revoked_at: null } });
      expect(patch.status).to.equal(400);
      expect(patch.body.details.map((d: { issue: string }) => d.issue)).to.deep.equal(['extra fields not permitted', 'extra fields not permitted']);
      expect((await world.api.get(keys, { key: world.revokedKey })).status).to.equal(401);
    });
  });
});
