/**
 * GET|PUT /v1/organisations/{org_id}/rate-limit over real HTTP (C-240..C-243, an extension beyond
 * v1): who may read and set an organisation's plan, its validation and audit entry, and the limit
 * applied to the organisation's requests (X-RateLimit-Limit, exactly N allowed then 429 with the v1
 * body, a change applied within the window). Every response is validated against docs/openapi.yaml.
 */
import { expect } from 'chai';
import { OPERATOR, RateLimitedError, type AuditEntry } from '@cos/core';
import { createWorld, MISSING_ID, type World } from './support/world.js';
import type { ApiResponse } from './support/http.js';

const PAGE = { limit: 1000, after: null } as const;
const limitPath = (orgId: string): string => `/v1/organisations/${orgId}/rate-limit`;

async function limitEntries(w: World, orgId: string): Promise<AuditEntry[]> {
  return w.tc.store.stores.audit.list({ organisationId: orgId, kind: 'organisation_rate_limit_changed' }, PAGE);
}

const limitHeader = (res: ApiResponse): number => Number(res.headers.get('x-ratelimit-limit'));

describe('adapter-koa: organisation rate limit, the plan (C-240..C-243)', () => {
  let w: World;
  beforeEach(async () => {
    // The seeded world stands at 2026-06-10T12:00:31Z, with the default limit of 60 per minute.
    w = await createWorld();
  });
  afterEach(() => w.close());

  const put = (body: unknown, key = w.platform.key, orgId = w.own.orgId, headers?: Record<string, string>) =>
    w.api.put(limitPath(orgId), { key, json: body, ...(headers !== undefined ? { headers } : {}) });
  const get = (key = w.own.key, orgId = w.own.orgId) => w.api.get(limitPath(orgId), { key });

  describe('GET', () => {
    it('C-240: the default for an organisation without its own limit, to its own key and to a platform key', async () => {
      for (const key of [w.own.key, w.platform.key]) {
        const res = await get(key);
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal({ requests_per_minute: 60, source: 'default' });
      }
    });

    it('C-241: another organisation is 403 for a standard key; an unknown one 404 for a platform key; a malformed id 400; organisations:read is needed', async () => {
      expect((await get(w.own.key, w.other.orgId)).status).to.equal(403);
      expect((await get(w.platform.key, MISSING_ID)).status).to.equal(404);
      const malformed = await get(w.platform.key, 'not-a-uuid');
      expect(malformed.status).to.equal(400);
      expect(malformed.body.details).to.deep.equal([{ field: 'org_id', issue: 'must be a UUID' }]);
      const writer = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'writer', scopes: ['organisations:write'] });
      const res = await get(writer.rawKey);
      expect(res.status).to.equal(403);
      expect(res.body.details).to.deep.equal([{ field: 'scope', issue: 'requires organisations:read' }]);
    });
  });

  describe('PUT', () => {
    it('C-240, C-241: a platform key sets the limit; GET answers it; X-RateLimit-Limit reports it; one entry holds old and new; the same value again writes nothing; null returns to the default', async () => {
      const res = await put({ requests_per_minute: 600 });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ requests_per_minute: 600, source: 'organisation' });
      const read = await get();
      expect(read.body).to.deep.equal({ requests_per_minute: 600, source: 'organisation' });
      expect(limitHeader(read), 'the organisation\'s own requests').to.equal(600);
      expect(limitHeader(await w.api.get(`/v1/organisations/${w.other.orgId}`, { key: w.other.key })), 'another organisation keeps the default').to.equal(60);
      const [entry, ...more] = await limitEntries(w, w.own.orgId);
      expect(more).to.deep.equal([]);
      expect(entry).to.deep.include({ organisationId: w.own.orgId, keyId: null, actor: { type: 'api_key', keyId: w.platform.keyId }, rateLimit: { old: null, new: 600 } });

      expect((await put({ requests_per_minute: 600 })).body).to.deep.equal({ requests_per_minute: 600, source: 'organisation' });
      expect(await limitEntries(w, w.own.orgId), 'the same value writes no entry').to.have.length(1);

      w.tc.clock.advance(1); // entries are listed by time, then id: the second one comes later
      const reset = await put({ requests_per_minute: null });
      expect(reset.body).to.deep.equal({ requests_per_minute: 60, source: 'default' });
      expect((await limitEntries(w, w.own.orgId)).map((e) => e.rateLimit)).to.deep.equal([
        { old: null, new: 600 },
        { old: 600, new: null },
      ]);
      expect(limitHeader(await get())).to.equal(60);
      const trail = await w.api.get(`/v1/organisations/${w.own.orgId}/audit-events?kind=organisation_rate_limit_changed`, { key: w.platform.key });
      expect(trail.body.data.map((e: { detail: unknown }) => e.detail)).to.deep.equal([{ rate_limit: { old: null, new: 600 } }, { rate_limit: { old: 600, new: null } }]);
    });

    it('C-241: a standard key is 403 (platform key needed), even for its own organisation with every scope and an invalid body; nothing written', async () => {
      const res = await put({ requests_per_minute: 1_000 }, w.own.key);
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.equal({ error: 'FORBIDDEN', message: 'This operation requires a platform-org API key', details: [] });
      expect((await put({ nonsense: 1 }, w.own.key)).status).to.equal(403);
      expect(await limitEntries(w, w.own.orgId)).to.deep.equal([]);
      expect((await get()).body.source).to.equal('default');
    });

    it('C-60, C-241: a platform key without organisations:write is 403 for its scope; with only organisations:write it may', async () => {
      const reader = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'reader', scopes: ['organisations:read'] });
      const res = await put({ requests_per_minute: 5 }, reader.rawKey);
      expect(res.status).to.equal(403);
      expect(res.body.details).to.deep.equal([{ field: 'scope', issue: 'requires organisations:write' }]);
      const writer = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'writer', scopes: ['organisations:write'] });
      expect((await put({ requests_per_minute: 5 }, writer.rawKey)).status).to.equal(200);
    });

    it('C-241: requests_per_minute is required and must be null or an integer from 1 to 1,000,000; each failure is 400 naming it and writes nothing', async () => {
      const issue = 'must be null or an integer from 1 to 1000000';
      const cases: Array<[unknown, Array<{ field: string; issue: string }>]> = [
        [{}, [{ field: 'requests_per_minute', issue: 'field required' }]],
        [{ requests_per_minute: 0 }, [{ field: 'requests_per_minute', issue }]],
        [{ requests_per_minute: -5 }, [{ field: 'requests_per_minute', issue }]],
        [{ requests_per_minute: 1_000_001 }, [{ field: 'requests_per_minute', issue }]],
        [{ requests_per_minute: 10.5 }, [{ field: 'requests_per_minute', issue }]],
        [{ requests_per_minute: '600' }, [{ field: 'requests_per_minute', issue }]],
        [{ requests_per_minute: true }, [{ field: 'requests_per_minute', issue }]],
        [{ requests_per_minute: 600, plan: 'gold' }, [{ field: 'plan', issue: 'extra fields not permitted' }]],
      ];
      for (const [body, details] of cases) {
        const res = await put(body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error).to.equal('VALIDATION_ERROR');
        expect(res.body.details, JSON.stringify(body)).to.deep.equal(details);
      }
      expect(await limitEntries(w, w.own.orgId)).to.deep.equal([]);
      expect((await put({ requests_per_minute: 1 })).status, 'the bounds themselves are allowed').to.equal(200);
      expect((await put({ requests_per_minute: 1_000_000 })).status).to.equal(200);
      expect(await limitEntries(w, w.own.orgId)).to.have.length(2);
    });

    it('C-241: an unknown organisation is 404 and nothing is written', async () => {
      expect((await put({ requests_per_minute: 10 }, w.platform.key, MISSING_ID)).status).to.equal(404);
      expect(await w.tc.store.stores.audit.list({ kind: 'organisation_rate_limit_changed' }, PAGE)).to.deep.equal([]);
    });

    it('an Idempotency-Key repeat replays the answer and changes nothing again; the same key with another body is 422', async () => {
      const first = await put({ requests_per_minute: 900 }, w.platform.key, w.own.orgId, { 'idempotency-key': 'plan-1' });
      expect(first.status).to.equal(200);
      await put({ requests_per_minute: 100 });
      const again = await put({ requests_per_minute: 900 }, w.platform.key, w.own.orgId, { 'idempotency-key': 'plan-1' });
      expect(again.status).to.equal(200);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect((await get()).body.requests_per_minute, 'the replay did not set 900 again').to.equal(100);
      expect((await put({ requests_per_minute: 901 }, w.platform.key, w.own.orgId, { 'idempotency-key': 'plan-1' })).status).to.equal(422);
      expect(await limitEntries(w, w.own.orgId)).to.have.length(2);
    });
  });

  describe('the limit applied', () => {
    const orgGet = () => w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });

    it('C-240: an organisation at limit 5 gets exactly 5 requests in a minute, then 429 with the v1 body; the next minute 5 again', async () => {
      await put({ requests_per_minute: 5 });
      for (let i = 1; i <= 5; i++) {
        const res = await orgGet();
        expect(res.status, `request ${i}`).to.equal(200);
        expect(limitHeader(res)).to.equal(5);
        expect(Number(res.headers.get('x-ratelimit-remaining'))).to.equal(5 - i);
      }
      const refused = await orgGet();
      expect(refused.status).to.equal(429);
      expect(limitHeader(refused)).to.equal(5);
      expect(Object.keys(refused.body).sort()).to.deep.equal(['detail', 'instance', 'retry_after', 'status', 'svc_error_code', 'title', 'type']);
      expect(refused.body).to.deep.include({ type: 'https://errors.example.com/rate-limit-exceeded', title: 'Rate Limit Exceeded', status: 429, svc_error_code: 'RATE_LIMIT_EXCEEDED' });
      expect((await w.api.get(`/v1/organisations/${w.other.orgId}`, { key: w.other.key })).status, 'another organisation is not limited by it').to.equal(200);
      w.tc.clock.set('2026-06-10T12:01:00.000Z');
      for (let i = 1; i <= 5; i++) expect((await orgGet()).status, `next minute, request ${i}`).to.equal(200);
      expect((await orgGet()).status).to.equal(429);
    });

    it('C-242: a limit raised within the minute lets the organisation in at once; a lowered one refuses it once the count is past it', async () => {
      await put({ requests_per_minute: 3 });
      for (let i = 1; i <= 3; i++) expect((await orgGet()).status).to.equal(200);
      expect((await orgGet()).status).to.equal(429);
      expect((await orgGet()).status, 'known over its limit').to.equal(429);
      await put({ requests_per_minute: 8 });
      // The first refusal was counted (4 so far); the second was answered from the limiter's memory
      // without a count. Under 8, requests 5 to 8 are allowed, the 9th is not.
      const fifth = await orgGet();
      expect(fifth.status).to.equal(200);
      expect(limitHeader(fifth)).to.equal(8);
      expect(Number(fifth.headers.get('x-ratelimit-remaining'))).to.equal(3);
      for (let i = 6; i <= 8; i++) expect((await orgGet()).status, `request ${i}`).to.equal(200);
      expect((await orgGet()).status).to.equal(429);
      await put({ requests_per_minute: null });
      expect((await orgGet()).status, 'back to the default of 60').to.equal(200);
      await put({ requests_per_minute: 2 });
      const lowered = await orgGet();
      expect(lowered.status).to.equal(429);
      expect(limitHeader(lowered)).to.equal(2);
    });

    it('C-243: an embedder\'s rateLimiter.enforce with the organisation id alone counts against the organisation\'s own limit', async () => {
      const scope = { kind: 'organisation', organisationId: w.other.orgId } as const;
      await w.tc.core.rateLimits.replace(OPERATOR, w.other.orgId, { requests_per_minute: 2 });
      const first = await w.tc.core.rateLimiter.enforce(scope);
      expect(first).to.deep.include({ allowed: true, limit: 2, remaining: 1 });
      await w.tc.core.rateLimiter.enforce(scope);
      const refused = await w.tc.core.rateLimiter.enforce(scope).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).to.be.instanceOf(RateLimitedError);
      expect((refused as RateLimitedError).decision.limit).to.equal(2);
      await w.tc.core.rateLimits.replace(OPERATOR, w.other.orgId, { requests_per_minute: null });
      expect(await w.tc.core.rateLimiter.enforce(scope)).to.deep.include({ allowed: true, limit: 60, remaining: 56 });
    });
  });
});
