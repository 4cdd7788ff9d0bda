/**
 * Scoped keys over HTTP (C-60): the matrix of scopes x operations (each operation allowed exactly
 * where its scope is held), the order of the checks, escalation refused, self-revocation, the
 * scopes and lineage (C-61) of issued and rolled keys, and a key never outliving the key that
 * issued it. Every response is validated against docs/openapi.yaml by the test client.
 */
import { expect } from 'chai';
import { ALL_BUILTIN_SCOPES, BUILTIN_SCOPES, OPERATOR, SCOPE_ESCALATION_MESSAGE, type AuditEntry } from '@cos/core';
import { createWorld, MISSING_ID, type World } from './support/world.js';

const PAGE = { limit: 1000, after: null } as const;

interface Op {
  readonly name: string;
  readonly method: string;
  /** The scope the operation needs. */
  readonly scope: string;
  /** Operations on the platform (list/create organisations, replace a key policy) are called with a platform key. */
  readonly platform: boolean;
  readonly ok: number;
  readonly path: (t: Targets) => string;
  readonly json?: (scope: string) => unknown;
}

/** Per world: the organisation the standard keys belong to and keys an operation may change. */
interface Targets {
  readonly orgId: string;
  /** A key of the organisation that DELETE revokes (never the caller). */
  readonly victimId: string;
  /** A key of the organisation that the roll replaces. */
  readonly rollableId: string;
}

const OPS: readonly Op[] = [
  { name: 'GET /organisations', method: 'GET', scope: 'organisations:read', platform: true, ok: 200, path: () => '/v1/organisations' },
  {
    name: 'POST /organisations',
    method: 'POST',
    scope: 'organisations:write',
    platform: true,
    ok: 201,
    path: () => '/v1/organisations',
    json: () => ({ name: 'Initech', slug: 'initech' }),
  },
  { name: 'GET /organisations/{id}', method: 'GET', scope: 'organisations:read', platform: false, ok: 200, path: (t) => `/v1/organisations/${t.orgId}` },
  {
    name: 'PUT /organisations/{id}',
    method: 'PUT',
    scope: 'organisations:write',
    platform: false,
    ok: 200,
    path: (t) => `/v1/organisations/${t.orgId}`,
    json: () => ({ name: 'Renamed Ltd' }),
  },
  {
    name: 'PATCH /organisations/{id}',
    method: 'PATCH',
    scope: 'organisations:write',
    platform: false,
    ok: 200,
    path: (t) => `/v1/organisations/${t.orgId}`,
    json: () => ({ name: 'Patched Ltd' }),
  },
  { name: 'GET .../members', method: 'GET', scope: 'members:read', platform: false, ok: 200, path: (t) => `/v1/organisations/${t.orgId}/members` },
  { name: 'GET .../api-keys', method: 'GET', scope: 'api_keys:read', platform: false, ok: 200, path: (t) => `/v1/organisations/${t.orgId}/api-keys` },
  {
    name: 'POST .../api-keys',
    method: 'POST',
    scope: 'api_keys:write',
    platform: false,
    ok: 201,
    path: (t) => `/v1/organisations/${t.orgId}/api-keys`,
    json: () => ({ label: 'ci' }),
  },
  {
    name: 'GET .../api-keys/{key_id}',
    method: 'GET',
    scope: 'api_keys:read',
    platform: false,
    ok: 200,
    path: (t) => `/v1/organisations/${t.orgId}/api-keys/${t.victimId}`,
  },
  {
    name: 'POST .../api-keys/{key_id}/roll',
    method: 'POST',
    scope: 'api_keys:write',
    platform: false,
    ok: 201,
    path: (t) => `/v1/organisations/${t.orgId}/api-keys/${t.rollableId}/roll`,
    json: (scope) => ({ scopes: [scope] }),
  },
  {
    name: 'DELETE .../api-keys/{key_id} (another key)',
    method: 'DELETE',
    scope: 'api_keys:write',
    platform: false,
    ok: 204,
    path: (t) => `/v1/organisations/${t.orgId}/api-keys/${t.victimId}`,
  },
  { name: 'GET .../key-policy', method: 'GET', scope: 'organisations:read', platform: false, ok: 200, path: (t) => `/v1/organisations/${t.orgId}/key-policy` },
  {
    name: 'PUT .../key-policy',
    method: 'PUT',
    scope: 'organisations:write',
    platform: true,
    ok: 200,
    path: (t) => `/v1/organisations/${t.orgId}/key-policy`,
    json: () => ({ max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key' }),
  },
];

async function issueRaw(w: World, orgId: string, scopes: readonly string[], extra: Record<string, unknown> = {}): Promise<{ key: string; id: string }> {
  const issued = await w.tc.core.apiKeys.issue(OPERATOR, orgId, { label: `scoped ${scopes.length}`, scopes, ...extra });
  return { key: issued.rawKey, id: issued.key.id };
}

async function auditOf(w: World, orgId: string): Promise<AuditEntry[]> {
  return w.tc.store.stores.audit.list({ organisationId: orgId }, PAGE);
}

describe('adapter-koa: scoped keys (C-60, C-61)', () => {
  describe('C-60: the matrix of scopes x operations: each operation is allowed exactly where its scope is held', () => {
    for (const scope of BUILTIN_SCOPES) {
      it(`C-60: a key holding only ${scope}`, async () => {
        const w = await createWorld();
        try {
          const standard = await issueRaw(w, w.own.orgId, [scope]);
          const platform = await issueRaw(w, w.platform.orgId, [scope]);
          const targets: Targets = {
            orgId: w.own.orgId,
            victimId: (await issueRaw(w, w.own.orgId, ALL_BUILTIN_SCOPES)).id,
            rollableId: (await issueRaw(w, w.own.orgId, [scope])).id,
          };
          for (const op of OPS) {
            const caller = op.platform ? platform : standard;
            const res = await w.api.request(op.method, op.path(targets), {
              key: caller.key,
              ...(op.json !== undefined ? { json: op.json(scope) } : {}),
            });
            if (op.scope === scope) {
              expect(res.status, `${op.name} with ${scope}: ${res.text}`).to.equal(op.ok);
            } else {
              expect(res.status, `${op.name} with ${scope}: ${res.text}`).to.equal(403);
              expect(res.body, op.name).to.deep.include({ error: 'FORBIDDEN', details: [{ field: 'scope', issue: `requires ${op.scope}` }] });
            }
          }
        } finally {
          await w.close();
        }
      });
    }

    it('C-56, C-60: a key issued without scopes (all eight) reaches every operation, as in v1', async () => {
      const w = await createWorld();
      try {
        const targets: Targets = {
          orgId: w.own.orgId,
          victimId: (await issueRaw(w, w.own.orgId, ALL_BUILTIN_SCOPES)).id,
          rollableId: (await issueRaw(w, w.own.orgId, ALL_BUILTIN_SCOPES)).id,
        };
        for (const op of OPS) {
          const res = await w.api.request(op.method, op.path(targets), {
            key: op.platform ? w.platform.key : w.own.key,
            ...(op.json !== undefined ? { json: op.name.includes('roll') ? {} : op.json('') } : {}),
          });
          expect(res.status, `${op.name}: ${res.text}`).to.equal(op.ok);
        }
      } finally {
        await w.close();
      }
    });
  });

  describe('C-60: the order of the checks', () => {
    let w: World;
    beforeEach(async () => {
      w = await createWorld();
    });
    afterEach(() => w.close());

    it('C-60: 403 platform / other organisation comes before 403 scope, which has no details then', async () => {
      const reader = await issueRaw(w, w.own.orgId, ['organisations:read']);
      const foreign = await w.api.delete(`/v1/organisations/${w.other.orgId}/api-keys/${w.other.keyId}`, { key: reader.key });
      expect(foreign.status).to.equal(403);
      expect(foreign.body).to.deep.equal({ error: 'FORBIDDEN', message: "This API key cannot access another organisation's resources", details: [] });
      const platformOnly = await w.api.post('/v1/organisations', { key: reader.key, json: { name: 'x', slug: 'x' } });
      expect(platformOnly.body).to.deep.equal({ error: 'FORBIDDEN', message: 'This operation requires a platform-org API key', details: [] });
    });

    it('C-60: 403 scope comes before 400: an invalid body, an invalid id or a missing organisation is never looked at', async () => {
      const reader = await issueRaw(w, w.own.orgId, ['organisations:read']);
      const invalid = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: reader.key, json: { label: '', nonsense: true } });
      expect(invalid.status).to.equal(403);
      expect(invalid.body.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:write' }]);
      const notJson = await w.api.request('PATCH', `/v1/organisations/${w.own.orgId}`, {
        key: reader.key,
        body: 'not json',
        headers: { 'content-type': 'text/plain' },
      });
      expect(notJson.status, 'before the body is read: no 415').to.equal(403);
      const platformReader = await issueRaw(w, w.platform.orgId, ['organisations:read']);
      const missing = await w.api.get(`/v1/organisations/${MISSING_ID}/api-keys`, { key: platformReader.key });
      expect(missing.status, 'no 404 either').to.equal(403);
      expect(missing.body.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:read' }]);
    });

    it('C-60: 401 comes before 403 scope: a revoked scoped key is 401', async () => {
      const reader = await issueRaw(w, w.own.orgId, ['organisations:read']);
      await w.tc.core.apiKeys.revoke(OPERATOR, w.own.orgId, reader.id);
      const res = await w.api.get(`/v1/organisations/${w.own.orgId}/members`, { key: reader.key });
      expect(res.status).to.equal(401);
    });
  });

  describe('C-60: self-revocation', () => {
    let w: World;
    beforeEach(async () => {
      w = await createWorld();
    });
    afterEach(() => w.close());

    it('C-60: a key without api_keys:write may revoke itself (204, audited), and is 401 at once; it may not revoke another key', async () => {
      const reader = await issueRaw(w, w.own.orgId, ['organisations:read']);
      const other = await w.api.delete(`/v1/organisations/${w.own.orgId}/api-keys/${w.own.keyId}`, { key: reader.key });
      expect(other.status).to.equal(403);
      expect(other.body.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:write' }]);
      const self = await w.api.delete(`/v1/organisations/${w.own.orgId}/api-keys/${reader.id.toUpperCase()}`, { key: reader.key });
      expect(self.status).to.equal(204);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: reader.key })).status).to.equal(401);
      const revoked = (await auditOf(w, w.own.orgId)).filter((e) => e.kind === 'api_key_revoked' && e.keyId === reader.id);
      expect(revoked.map((e) => e.actor)).to.deep.equal([{ type: 'api_key', keyId: reader.id }]);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status, 'the other key still works').to.equal(200);
    });

    it('C-60: a platform key without api_keys:write may revoke itself too', async () => {
      const platformReader = await issueRaw(w, w.platform.orgId, ['members:read']);
      const self = await w.api.delete(`/v1/organisations/${w.platform.orgId}/api-keys/${platformReader.id}`, { key: platformReader.key });
      expect(self.status).to.equal(204);
    });
  });

  describe('C-60: issuing and rolling scoped keys; lineage (C-61)', () => {
    let w: World;
    beforeEach(async () => {
      w = await createWorld();
    });
    afterEach(() => w.close());

    it('C-60, C-61: scopes given are stored sorted; omitted, the issuer\'s; created_by_key_id names the issuing key', async () => {
      const writer = await issueRaw(w, w.own.orgId, ['api_keys:write', 'organisations:read', 'api_keys:read']);
      const given = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, {
        key: writer.key,
        json: { label: 'reader', scopes: ['organisations:read', 'api_keys:read'] },
      });
      expect(given.status).to.equal(201);
      expect(given.body.scopes).to.deep.equal(['api_keys:read', 'organisations:read']);
      expect(given.body.created_by_key_id).to.equal(writer.id);
      const inherited = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: writer.key, json: { label: 'same as me' } });
      expect(inherited.body.scopes).to.deep.equal(['api_keys:read', 'api_keys:write', 'organisations:read']);
      const read = await w.api.get(`/v1/organisations/${w.own.orgId}/api-keys/${given.body.id}`, { key: writer.key });
      expect(read.body).to.deep.include({ scopes: ['api_keys:read', 'organisations:read'], created_by_key_id: writer.id });
      // The new key can do what its scopes allow, and nothing else.
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: given.body.key })).status).to.equal(200);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}/members`, { key: given.body.key })).status).to.equal(403);
    });

    it('C-60: an operator-issued key without scopes holds all eight and no creator', async () => {
      const res = await w.api.get(`/v1/organisations/${w.own.orgId}/api-keys/${w.own.keyId}`, { key: w.own.key });
      expect(res.body).to.deep.include({ scopes: [...ALL_BUILTIN_SCOPES], created_by_key_id: null });
    });

    it('C-60: escalation is refused (403, nothing written) at issue and at roll, also when a roll would keep scopes the caller lacks', async () => {
      const writer = await issueRaw(w, w.own.orgId, ['api_keys:write']);
      const keysBefore = await w.tc.core.apiKeys.list(OPERATOR, w.own.orgId, { limit: 100 });
      const auditBefore = (await auditOf(w, w.own.orgId)).length;
      const issue = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, {
        key: writer.key,
        json: { label: 'more', scopes: ['api_keys:write', 'organisations:write'] },
      });
      expect(issue.status).to.equal(403);
      expect(issue.body).to.deep.equal({ error: 'FORBIDDEN', message: SCOPE_ESCALATION_MESSAGE, details: [] });
      const roll = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${writer.id}/roll`, {
        key: writer.key,
        json: { scopes: ['members:read'] },
      });
      expect(roll.status).to.equal(403);
      expect(roll.body.message).to.equal(SCOPE_ESCALATION_MESSAGE);
      const keepAll = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${w.own.keyId}/roll`, { key: writer.key });
      expect(keepAll.status, "rolling the all-scopes key keeps its scopes, which the caller lacks").to.equal(403);
      expect(keepAll.body.message).to.equal(SCOPE_ESCALATION_MESSAGE);
      // Nothing written but the writer key's own use (last_used_at, written in the background).
      const withoutUse = (keys: readonly { lastUsedAt?: Date | null }[]) => keys.map(({ lastUsedAt: _, ...k }) => k);
      expect(withoutUse((await w.tc.core.apiKeys.list(OPERATOR, w.own.orgId, { limit: 100 })).items)).to.deep.equal(withoutUse(keysBefore.items));
      expect((await auditOf(w, w.own.orgId)).length).to.equal(auditBefore);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status, 'the all-scopes key was not rolled').to.equal(200);
    });

    it('C-60, C-61: a roll keeps the old key\'s scopes unless given; created_by_key_id names the rolling key, rolled_from the old one', async () => {
      const target = await issueRaw(w, w.own.orgId, ['members:read', 'organisations:read']);
      const kept = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${target.id}/roll`, { key: w.own.key });
      expect(kept.status).to.equal(201);
      expect(kept.body).to.deep.include({ scopes: ['members:read', 'organisations:read'], created_by_key_id: w.own.keyId, rolled_from: target.id });
      const narrowed = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${kept.body.id}/roll`, {
        key: w.own.key,
        json: { scopes: ['members:read'] },
      });
      expect(narrowed.body).to.deep.include({ scopes: ['members:read'], rolled_from: kept.body.id });
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: narrowed.body.key })).status).to.equal(403);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}/members`, { key: narrowed.body.key })).status).to.equal(200);
    });

    it('C-60: scopes that are unknown, duplicated, empty or not an array of strings are 400 with a detail for scopes; nothing written', async () => {
      const auditBefore = (await auditOf(w, w.own.orgId)).length;
      const path = `/v1/organisations/${w.own.orgId}/api-keys`;
      for (const scopes of [['organisations:delete'], ['members:read', 'members:read'], [], 'members:read', [1], null, ['reports:read']]) {
        const res = await w.api.post(path, { key: w.own.key, json: { label: 'x', scopes } });
        expect(res.status, JSON.stringify(scopes)).to.equal(400);
        expect(res.body.details.map((d: { field: string }) => d.field), JSON.stringify(scopes)).to.deep.equal(['scopes']);
        const roll = await w.api.post(`${path}/${w.own.keyId}/roll`, { key: w.own.key, json: { scopes } });
        expect(roll.status, `roll ${JSON.stringify(scopes)}`).to.equal(400);
      }
      expect((await auditOf(w, w.own.orgId)).length).to.equal(auditBefore);
    });
  });

  describe('C-60: a key never outlives the key that issues or rolls it', () => {
    let w: World;
    beforeEach(async () => {
      w = await createWorld();
    });
    afterEach(() => w.close());

    it('C-60: omitted expires_at becomes the issuer\'s; a later one or null is 400 expires_at; an earlier one is kept', async () => {
      const issuerEnd = new Date(w.tc.clock.now().getTime() + 30 * 60_000).toISOString();
      const shortLived = await issueRaw(w, w.own.orgId, ALL_BUILTIN_SCOPES, { expires_at: issuerEnd });
      const path = `/v1/organisations/${w.own.orgId}/api-keys`;
      const omitted = await w.api.post(path, { key: shortLived.key, json: { label: 'child' } });
      expect(omitted.status).to.equal(201);
      expect(omitted.body.expires_at).to.equal(issuerEnd);
      const later = await w.api.post(path, { key: shortLived.key, json: { label: 'later', expires_at: new Date(Date.parse(issuerEnd) + 1).toISOString() } });
      expect(later.status).to.equal(400);
      // C-161: the detail names the bound that refused it: here the issuing key's expiry (no policy is set).
      expect(later.body.details).to.deep.equal([{ field: 'expires_at', issue: `must not be later than ${issuerEnd} (the issuing key's own expiry)` }]);
      const never = await w.api.post(path, { key: shortLived.key, json: { label: 'never', expires_at: null } });
      expect(never.status).to.equal(400);
      const earlier = new Date(Date.parse(issuerEnd) - 60_000).toISOString();
      expect((await w.api.post(path, { key: shortLived.key, json: { label: 'earlier', expires_at: earlier } })).body.expires_at).to.equal(earlier);
      // A key without expiry issues keys without one, as before.
      expect((await w.api.post(path, { key: w.own.key, json: { label: 'forever' } })).body.expires_at).to.equal(null);
    });

    it('C-60: a roll by a key with an expiry caps the new key at that expiry', async () => {
      const issuerEnd = new Date(w.tc.clock.now().getTime() + 30 * 60_000).toISOString();
      const shortLived = await issueRaw(w, w.own.orgId, ALL_BUILTIN_SCOPES, { expires_at: issuerEnd });
      const target = await issueRaw(w, w.own.orgId, ['members:read']);
      const rolled = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${target.id}/roll`, { key: shortLived.key });
      expect(rolled.status).to.equal(201);
      expect(rolled.body.expires_at).to.equal(issuerEnd);
    });
  });
});
