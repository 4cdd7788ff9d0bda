/**
 * GET|PUT /v1/organisations/{org_id}/key-policy over real HTTP (C-62, an extension beyond v1:
 * C-56): who may read and replace it, its validation, the `organisation_policy_updated` audit entry,
 * and the policy applied when keys are issued and rolled. Every response is validated against
 * docs/openapi.yaml (components/pathItems/KeyPolicy).
 */
import { expect } from 'chai';
import { ALL_BUILTIN_SCOPES, OPERATOR, type AuditEntry } from '@cos/core';
import { createWorld, MISSING_ID, type World } from './support/world.js';

const PAGE = { limit: 1000, after: null } as const;
const DEFAULT = { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key', expiry_notice_seconds: 604_800 };
/** A PUT body without expiry_notice_seconds: the policy answered has the default one. */
const STRICT = { max_lifetime_seconds: 86_400, allowed_environments: ['live'], exposure_response: 'revoke_key_and_descendants' };
const STRICT_ANSWER = { ...STRICT, expiry_notice_seconds: 604_800 };

const policyPath = (orgId: string): string => `/v1/organisations/${orgId}/key-policy`;

async function policyEntries(w: World, orgId: string): Promise<AuditEntry[]> {
  return w.tc.store.stores.audit.list({ organisationId: orgId, kind: 'organisation_policy_updated' }, PAGE);
}

describe('adapter-koa: organisation key policy (C-62)', () => {
  let w: World;
  beforeEach(async () => {
    w = await createWorld();
  });
  afterEach(() => w.close());

  const put = (body: unknown, key = w.platform.key, orgId = w.own.orgId) => w.api.put(policyPath(orgId), { key, json: body });

  describe('GET', () => {
    it('C-62: the default for an organisation that never set one, to its own key and to a platform key', async () => {
      for (const key of [w.own.key, w.platform.key]) {
        const res = await w.api.get(policyPath(w.own.orgId), { key });
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal(DEFAULT);
      }
    });

    it('C-62: another organisation is 403 for a standard key; an unknown one 404 for a platform key; a malformed id 400', async () => {
      expect((await w.api.get(policyPath(w.other.orgId), { key: w.own.key })).status).to.equal(403);
      expect((await w.api.get(policyPath(MISSING_ID), { key: w.platform.key })).status).to.equal(404);
      const malformed = await w.api.get(policyPath('not-a-uuid'), { key: w.platform.key });
      expect(malformed.status).to.equal(400);
      expect(malformed.body.details).to.deep.equal([{ field: 'org_id', issue: 'must be a UUID' }]);
    });
  });

  describe('PUT', () => {
    it('C-62: a platform key with organisations:write replaces the policy; GET answers it; one organisation_policy_updated entry holds old and new, in the same transaction', async () => {
      const res = await put(STRICT);
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal(STRICT_ANSWER);
      expect((await w.api.get(policyPath(w.own.orgId), { key: w.own.key })).body).to.deep.equal(STRICT_ANSWER);
      const [entry, ...more] = await policyEntries(w, w.own.orgId);
      expect(more).to.deep.equal([]);
      expect(entry).to.deep.include({
        organisationId: w.own.orgId,
        keyId: null,
        actor: { type: 'api_key', keyId: w.platform.keyId },
        keyPolicy: {
          old: { maxLifetimeSeconds: null, allowedEnvironments: ['live', 'test'], exposureResponse: 'revoke_key', expiryNoticeSeconds: 604_800 },
          new: { maxLifetimeSeconds: 86_400, allowedEnvironments: ['live'], exposureResponse: 'revoke_key_and_descendants', expiryNoticeSeconds: 604_800 },
        },
      });
      const again = await put({ ...DEFAULT, allowed_environments: ['test', 'live'] });
      expect(again.body, 'environments come back in one order').to.deep.equal(DEFAULT);
      expect((await policyEntries(w, w.own.orgId)).map((e) => e.keyPolicy?.old.maxLifetimeSeconds)).to.have.members([null, 86_400]);
      expect(await policyEntries(w, w.other.orgId)).to.deep.equal([]);
    });

    it('C-62: a standard key is 403 (platform key needed), even with every scope and an invalid body; nothing written', async () => {
      const res = await put(STRICT, w.own.key);
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.equal({ error: 'FORBIDDEN', message: 'This operation requires a platform-org API key', details: [] });
      expect((await put({ nonsense: 1 }, w.own.key)).status).to.equal(403);
      expect(await policyEntries(w, w.own.orgId)).to.deep.equal([]);
    });

    it('C-60, C-62: a platform key without organisations:write is 403 for its scope; with only organisations:write it may', async () => {
      const reader = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'reader', scopes: ['organisations:read'] });
      const res = await put(STRICT, reader.rawKey);
      expect(res.status).to.equal(403);
      expect(res.body.details).to.deep.equal([{ field: 'scope', issue: 'requires organisations:write' }]);
      const writer = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'writer', scopes: ['organisations:write'] });
      expect((await put(STRICT, writer.rawKey)).status).to.equal(200);
      expect((await w.api.get(policyPath(w.own.orgId), { key: writer.rawKey })).status, 'reading needs organisations:read').to.equal(403);
    });

    it('C-62: every field is required and checked; each failure is 400 with its field and writes nothing', async () => {
      const cases: Array<[unknown, string[]]> = [
        [{}, ['max_lifetime_seconds', 'allowed_environments', 'exposure_response']],
        [{ ...STRICT, max_lifetime_seconds: 3_599 }, ['max_lifetime_seconds']],
        [{ ...STRICT, max_lifetime_seconds: 63_072_001 }, ['max_lifetime_seconds']],
        [{ ...STRICT, max_lifetime_seconds: 3_600.5 }, ['max_lifetime_seconds']],
        [{ ...STRICT, max_lifetime_seconds: '3600' }, ['max_lifetime_seconds']],
        [{ ...STRICT, allowed_environments: [] }, ['allowed_environments']],
        [{ ...STRICT, allowed_environments: ['live', 'live'] }, ['allowed_environments']],
        [{ ...STRICT, allowed_environments: ['prod'] }, ['allowed_environments']],
        [{ ...STRICT, allowed_environments: 'live' }, ['allowed_environments']],
        [{ ...STRICT, exposure_response: 'revoke_everything' }, ['exposure_response']],
        [{ ...STRICT, extra: true }, ['extra']],
        [{ ...STRICT, expiry_notice_seconds: -1 }, ['expiry_notice_seconds']],
        [{ ...STRICT, expiry_notice_seconds: 7_776_001 }, ['expiry_notice_seconds']],
        [{ ...STRICT, expiry_notice_seconds: 60.5 }, ['expiry_notice_seconds']],
        [{ ...STRICT, expiry_notice_seconds: 'P7D' }, ['expiry_notice_seconds']],
        [{ ...STRICT, expiry_notice_seconds: null }, ['expiry_notice_seconds']],
      ];
      for (const [body, fields] of cases) {
        const res = await put(body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.details.map((d: { field: string }) => d.field).sort(), JSON.stringify(body)).to.deep.equal([...fields].sort());
      }
      expect((await put({ ...STRICT, max_lifetime_seconds: 3_600 })).status, 'the bounds themselves are allowed').to.equal(200);
      expect((await put({ ...STRICT, max_lifetime_seconds: 63_072_000 })).status).to.equal(200);
      expect(await policyEntries(w, w.own.orgId)).to.have.length(2);
    });

    it('C-280: expiry_notice_seconds is optional (absent: 7 days), 0 turns notices off, 90 days is the most; it is audited with the policy', async () => {
      const off = await put({ ...STRICT, expiry_notice_seconds: 0 });
      expect(off.status).to.equal(200);
      expect(off.body).to.deep.equal({ ...STRICT, expiry_notice_seconds: 0 });
      expect((await w.api.get(policyPath(w.own.orgId), { key: w.own.key })).body.expiry_notice_seconds).to.equal(0);
      expect((await put({ ...STRICT, expiry_notice_seconds: 7_776_000 })).body.expiry_notice_seconds).to.equal(7_776_000);
      expect((await put(STRICT)).body.expiry_notice_seconds, 'a PUT replaces the whole policy').to.equal(604_800);
      const notices = (await policyEntries(w, w.own.orgId)).map((e) => [e.keyPolicy?.old.expiryNoticeSeconds, e.keyPolicy?.new.expiryNoticeSeconds]);
      expect(notices).to.have.deep.members([
        [604_800, 0],
        [0, 7_776_000],
        [7_776_000, 604_800],
      ]);
      const events = await w.api.get(`/v1/organisations/${w.own.orgId}/audit-events?kind=organisation_policy_updated`, { key: w.own.key });
      expect(events.status).to.equal(200);
      expect(events.body.data.map((e: { detail: { key_policy: { new: { expiry_notice_seconds: number } } } }) => e.detail.key_policy.new.expiry_notice_seconds)).to.have.members([0, 7_776_000, 604_800]);
    });

    it('C-62: an unknown organisation is 404 and nothing is written', async () => {
      expect((await put(STRICT, w.platform.key, MISSING_ID)).status).to.equal(404);
      expect(await w.tc.store.stores.audit.list({ kind: 'organisation_policy_updated' }, PAGE)).to.deep.equal([]);
    });
  });

  describe('applied at issue and roll', () => {
    const keys = (orgId: string) => `/v1/organisations/${orgId}/api-keys`;
    const now = () => w.tc.clock.now().getTime();

    it('C-62: with a maximum lifetime an omitted expires_at becomes now + maximum, an earlier one is kept, a later one or null is 400 expires_at', async () => {
      await put(STRICT);
      const omitted = await w.api.post(keys(w.own.orgId), { key: w.own.key, json: { label: 'capped' } });
      expect(omitted.status).to.equal(201);
      expect(omitted.body.expires_at).to.equal(new Date(now() + 86_400_000).toISOString());
      const earlier = new Date(now() + 3_600_000).toISOString();
      expect((await w.api.post(keys(w.own.orgId), { key: w.own.key, json: { label: 'e', expires_at: earlier } })).body.expires_at).to.equal(earlier);
      const later = await w.api.post(keys(w.own.orgId), { key: w.own.key, json: { label: 'l', expires_at: new Date(now() + 86_400_001).toISOString() } });
      expect(later.status).to.equal(400);
      expect(later.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['expires_at']);
      const never = await w.api.post(keys(w.own.orgId), { key: w.own.key, json: { label: 'n', expires_at: null } });
      expect(never.status).to.equal(400);
      // The operator is held to the policy too.
      const operatorIssued = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'op' });
      expect(operatorIssued.key.expiresAt?.getTime()).to.equal(now() + 86_400_000);
      // Other organisations keep the default.
      expect((await w.api.post(keys(w.other.orgId), { key: w.other.key, json: { label: 'free' } })).body.expires_at).to.equal(null);
    });

    it('C-62: an environment the policy does not allow is 400 environment, at issue and at roll; nothing written', async () => {
      const testKey = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'test key', environment: 'test' });
      await put(STRICT);
      const countBefore = (await w.tc.core.apiKeys.list(OPERATOR, w.own.orgId, { limit: 100 })).items.length;
      const issue = await w.api.post(keys(w.own.orgId), { key: w.own.key, json: { label: 't', environment: 'test' } });
      expect(issue.status).to.equal(400);
      expect(issue.body.details).to.deep.equal([{ field: 'environment', issue: "is not allowed by the organisation's key policy" }]);
      const roll = await w.api.post(`${keys(w.own.orgId)}/${testKey.key.id}/roll`, { key: w.own.key });
      expect(roll.status).to.equal(400);
      expect(roll.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['environment']);
      expect((await w.tc.core.apiKeys.list(OPERATOR, w.own.orgId, { limit: 100 })).items.length).to.equal(countBefore);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: testKey.rawKey })).status, 'existing keys are not changed by a policy').to.equal(200);
    });

    it('C-62: a roll caps the inherited expiry at now + maximum; existing keys keep their expiry', async () => {
      const longLived = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'long', scopes: ALL_BUILTIN_SCOPES });
      await put(STRICT);
      expect((await w.tc.core.apiKeys.get(OPERATOR, w.own.orgId, longLived.key.id)).expiresAt).to.equal(null);
      const rolled = await w.api.post(`${keys(w.own.orgId)}/${longLived.key.id}/roll`, { key: w.own.key });
      expect(rolled.status).to.equal(201);
      expect(rolled.body.expires_at).to.equal(new Date(now() + 86_400_000).toISOString());
    });
  });
});
