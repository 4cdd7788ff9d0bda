/**
 * A key's own rate limit over real HTTP (C-290..C-293, an extension beyond v1): `rate_limit_per_minute`
 * on issue and PATCH (validation, the organisation's limit as its ceiling, the audit entries), and
 * admission against both windows: the key's refuses without using the organisation's, the 429 says
 * which window refused it, and X-RateLimit-* describe the window with fewer requests remaining.
 * Every response is validated against docs/openapi.yaml.
 */
import { expect } from 'chai';
import type { AuditEntry } from '@cos/core';
import { createWorld, type World } from './support/world.js';
import type { ApiResponse } from './support/http.js';

const PAGE = { limit: 1000, after: null } as const;
const ABOVE_DEFAULT = "must not be above the organisation's limit of 60 requests per minute";
const BAD_VALUE = 'must be null or an integer from 1 to 1000000';

const headers = (res: ApiResponse): [number, number] => [Number(res.headers.get('x-ratelimit-limit')), Number(res.headers.get('x-ratelimit-remaining'))];

describe('adapter-koa: a key’s own rate limit (C-290..C-293)', () => {
  let w: World;
  beforeEach(async () => {
    // The seeded world stands at 2026-06-10T12:00:31Z, with the default limit of 60 per minute.
    w = await createWorld();
  });
  afterEach(() => w.close());

  const keysPath = (orgId = w.own.orgId): string => `/v1/organisations/${orgId}/api-keys`;
  const issue = (body: Record<string, unknown>) => w.api.post(keysPath(), { key: w.own.key, json: { label: 'ci', ...body } });
  const patch = (keyId: string, body: unknown) => w.api.patch(`${keysPath()}/${keyId}`, { key: w.own.key, json: body });
  const entries = (kind: AuditEntry['kind']): Promise<AuditEntry[]> => w.tc.store.stores.audit.list({ organisationId: w.own.orgId, kind }, PAGE);
  const orgGet = (key: string) => w.api.get(`/v1/organisations/${w.own.orgId}`, { key });

  describe('issue and PATCH', () => {
    it('C-290: issue with a limit: the record holds it (null without one); api_key_issued records it as {old: null, new}', async () => {
      const limited = await issue({ rate_limit_per_minute: 30 });
      expect(limited.status).to.equal(201);
      expect(limited.body.rate_limit_per_minute).to.equal(30);
      expect((await w.api.get(`${keysPath()}/${limited.body.id}`, { key: w.own.key })).body.rate_limit_per_minute).to.equal(30);
      const plain = await issue({ rate_limit_per_minute: null });
      expect(plain.body.rate_limit_per_minute).to.equal(null);
      expect((await issue({})).body.rate_limit_per_minute).to.equal(null);
      const issued = await entries('api_key_issued');
      expect(issued.find((e) => e.keyId === limited.body.id)?.rateLimit).to.deep.equal({ old: null, new: 30 });
      expect(issued.find((e) => e.keyId === plain.body.id)?.rateLimit, 'no limit, nothing recorded').to.equal(undefined);
    });

    it('C-290, C-291: a value that is not an integer from 1 to 1,000,000 is 400 naming rate_limit_per_minute; above the organisation limit too; nothing issued', async () => {
      const before = (await w.tc.store.stores.apiKeys.list(w.own.orgId, PAGE)).length;
      for (const value of [0, -1, 1_000_001, 1.5, '30', true]) {
        const res = await issue({ rate_limit_per_minute: value });
        expect(res.status, JSON.stringify(value)).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field: 'rate_limit_per_minute', issue: BAD_VALUE }]);
      }
      const above = await issue({ rate_limit_per_minute: 61 });
      expect(above.status).to.equal(400);
      expect(above.body).to.deep.equal({ error: 'VALIDATION_ERROR', message: above.body.message, details: [{ field: 'rate_limit_per_minute', issue: ABOVE_DEFAULT }] });
      expect((await w.tc.store.stores.apiKeys.list(w.own.orgId, PAGE)).length).to.equal(before);
      expect((await issue({ rate_limit_per_minute: 60 })).status, "the organisation's limit itself is allowed").to.equal(201);
    });

    it("C-291: the ceiling is the organisation's own plan when it has one", async () => {
      const plan = await w.api.put(`/v1/organisations/${w.own.orgId}/rate-limit`, { key: w.platform.key, json: { requests_per_minute: 500 } });
      expect(plan.status).to.equal(200);
      expect((await issue({ rate_limit_per_minute: 500 })).status).to.equal(201);
      const above = await issue({ rate_limit_per_minute: 501 });
      expect(above.body.details).to.deep.equal([{ field: 'rate_limit_per_minute', issue: "must not be above the organisation's limit of 500 requests per minute" }]);
    });

    it('C-261, C-290: PATCH sets, changes and removes the limit; api_key_updated names the field with old and new; the same value writes nothing; above the ceiling is 400', async () => {
      const key = (await issue({})).body;
      const set = await patch(key.id, { rate_limit_per_minute: 10 });
      expect(set.status).to.equal(200);
      expect(set.body.rate_limit_per_minute).to.equal(10);
      expect((await patch(key.id, { rate_limit_per_minute: 10 })).status).to.equal(200);
      w.tc.clock.advance(1);
      expect((await patch(key.id, { rate_limit_per_minute: null, label: 'renamed' })).body).to.include({ rate_limit_per_minute: null, label: 'renamed' });
      const above = await patch(key.id, { rate_limit_per_minute: 61 });
      expect(above.status).to.equal(400);
      expect(above.body.details).to.deep.equal([{ field: 'rate_limit_per_minute', issue: ABOVE_DEFAULT }]);
      const bad = await patch(key.id, { rate_limit_per_minute: 0 });
      expect(bad.body.details).to.deep.equal([{ field: 'rate_limit_per_minute', issue: BAD_VALUE }]);
      const updated = await entries('api_key_updated');
      expect(updated.map((e) => [e.changedFields, e.rateLimit])).to.deep.equal([
        [['rate_limit_per_minute'], { old: null, new: 10 }],
        [['label', 'rate_limit_per_minute'], { old: 10, new: null }],
      ]);
      const trail = await w.api.get(`/v1/organisations/${w.own.orgId}/audit-events?kind=api_key_updated`, { key: w.own.key });
      expect(trail.body.data.map((e: { detail: unknown }) => e.detail)).to.deep.equal([
        { changed_fields: ['rate_limit_per_minute'], rate_limit: { old: null, new: 10 } },
        { changed_fields: ['label', 'rate_limit_per_minute'], rate_limit: { old: 10, new: null } },
      ]);
    });
  });

  describe('admission', () => {
    it('C-292, C-293: a key limited to 3: three requests (headers of the key window, fewer remaining), then 429 limit_scope "key"; its refusals leave the organisation window alone', async () => {
      const limited = await issue({ rate_limit_per_minute: 3 });
      const raw = limited.body.key as string;
      const seen: [number, number][] = [];
      for (let i = 0; i < 3; i++) {
        const res = await orgGet(raw);
        expect(res.status).to.equal(200);
        seen.push(headers(res));
      }
      expect(seen).to.deep.equal([
        [3, 2],
        [3, 1],
        [3, 0],
      ]);
      for (let i = 0; i < 3; i++) {
        const refused = await orgGet(raw);
        expect(refused.status).to.equal(429);
        expect(refused.body).to.include({ svc_error_code: 'RATE_LIMIT_EXCEEDED', status: 429, limit_scope: 'key' });
        expect(headers(refused)).to.deep.equal([3, 0]);
      }
      // The organisation's window: the issue, three admitted requests and this one (60 - 5), none of the refused ones.
      const other = await orgGet(w.own.key);
      expect(headers(other)).to.deep.equal([60, 55]);
      expect(other.body, 'the v1 body of a key without its own limit').to.not.have.property('limit_scope');
    });

    it('C-292, C-293: the organisation window exhausted first: 429 limit_scope "organisation", with its headers; a key without a limit of its own gets the v1 429 body', async () => {
      expect((await w.api.put(`/v1/organisations/${w.own.orgId}/rate-limit`, { key: w.platform.key, json: { requests_per_minute: 6 } })).status).to.equal(200);
      const raw = (await issue({ rate_limit_per_minute: 5 })).body.key as string; // the organisation's 1st request
      expect(headers(await orgGet(w.own.key))).to.deep.equal([6, 4]);
      // Key 1 of 5, organisation 3 of 6: the organisation has fewer remaining.
      expect(headers(await orgGet(raw))).to.deep.equal([6, 3]);
      expect(headers(await orgGet(raw))).to.deep.equal([6, 2]);
      expect(headers(await orgGet(w.own.key))).to.deep.equal([6, 1]);
      expect(headers(await orgGet(raw))).to.deep.equal([6, 0]);
      const refused = await orgGet(raw);
      expect(refused.status).to.equal(429);
      expect(refused.body.limit_scope).to.equal('organisation');
      expect(headers(refused)).to.deep.equal([6, 0]);
      const plain = await orgGet(w.own.key);
      expect(plain.status).to.equal(429);
      expect(plain.body).to.not.have.property('limit_scope');
    });

    it('C-292: with the key window wider than the organisation has left, the headers follow the fewer remaining, then the key', async () => {
      const raw = (await issue({ rate_limit_per_minute: 2 })).body.key as string;
      const [first, second] = [await orgGet(raw), await orgGet(raw)];
      expect([headers(first), headers(second)]).to.deep.equal([
        [2, 1],
        [2, 0],
      ]);
    });

    it('C-242, C-292: a limit raised or removed applies on the next request', async () => {
      const limited = (await issue({ rate_limit_per_minute: 1 })).body;
      expect((await orgGet(limited.key)).status).to.equal(200);
      expect((await orgGet(limited.key)).status).to.equal(429);
      expect((await patch(limited.id, { rate_limit_per_minute: 3 })).status).to.equal(200);
      const raised = await orgGet(limited.key);
      expect(raised.status, 'counted again under the raised limit').to.equal(200);
      expect(headers(raised)).to.deep.equal([3, 0]);
      expect((await patch(limited.id, { rate_limit_per_minute: null })).status).to.equal(200);
      const removed = await orgGet(limited.key);
      expect(removed.status).to.equal(200);
      expect(headers(removed)[0], "the organisation's window alone").to.equal(60);
    });
  });
});
