/**
 * Expiring keys over real HTTP (C-280..C-283, extensions beyond v1: C-56): the key list's
 * `expiring_within` filter in both spellings, its 400s, and the `api_key.expiring` event the scan
 * writes for an endpoint subscribed to it, checked against docs/openapi.yaml's `webhooks:` entry.
 * Every response is validated against docs/openapi.yaml.
 */
import { expect } from 'chai';
import { ExpiryNotices, OPERATOR, cryptoRandom } from '@cos/core';
import { createWorld, type World } from './support/world.js';

const DAY = 86_400_000;

describe('adapter-koa: expiring keys (C-280..C-283)', () => {
  let w: World;
  let path: string;
  const inDays = (days: number): string => new Date(w.tc.clock.now().getTime() + days * DAY).toISOString();

  beforeEach(async () => {
    w = await createWorld();
    path = `/v1/organisations/${w.own.orgId}/api-keys`;
  });
  afterEach(() => w.close());

  describe('GET …/api-keys?expiring_within', () => {
    it('C-283: P7D and 604800 list only the keys active now that expire within 7 days, oldest first, paged', async () => {
      // A millisecond between issues: the list's order (created_at, id) is then the order of issue.
      const soon = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'soon', expires_at: inDays(1) });
      w.tc.clock.advance(1);
      const week = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'a week', expires_at: inDays(7) });
      w.tc.clock.advance(1);
      await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'later', expires_at: inDays(8) });
      const revoked = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'revoked', expires_at: inDays(2) });
      await w.tc.core.apiKeys.revoke(OPERATOR, w.own.orgId, revoked.key.id);
      // The week key was issued 2 ms ago: 7 days from now still cover it.
      for (const value of ['P7D', '604800', 'P1W', 'P6DT24H', 'PT168H']) {
        const res = await w.api.get(`${path}?expiring_within=${value}`, { key: w.own.key });
        expect(res.status, value).to.equal(200);
        expect(res.body.data.map((k: { id: string }) => k.id), value).to.deep.equal([soon.key.id, week.key.id]);
        expect(res.body.meta.next_cursor).to.equal(null);
      }
      const first = await w.api.get(`${path}?expiring_within=P7D&limit=1`, { key: w.own.key });
      expect(first.body.data.map((k: { id: string }) => k.id)).to.deep.equal([soon.key.id]);
      const next = await w.api.get(`${path}?expiring_within=P7D&limit=1&cursor=${first.body.meta.next_cursor as string}`, { key: w.own.key });
      expect(next.body.data.map((k: { id: string }) => k.id)).to.deep.equal([week.key.id]);
      expect((await w.api.get(`${path}?expiring_within=PT1H`, { key: w.own.key })).body.data).to.deep.equal([]);
      expect((await w.api.get(path, { key: w.own.key })).body.data, 'without the filter: every key, the world\'s own three too').to.have.length(7);
    });

    it('C-283: anything else is 400 naming expiring_within (with a bad limit, both)', async () => {
      for (const value of ['7d', 'p7d', 'P', 'PT', 'P0D', '0', '-5', 'P1Y', 'P1M', 'P1.5D', 'P7DT', 'P3651D', '315360001', 'P7D%20', '1e3']) {
        const res = await w.api.get(`${path}?expiring_within=${value}`, { key: w.own.key });
        expect(res.status, value).to.equal(400);
        expect(res.body.error).to.equal('VALIDATION_ERROR');
        expect(res.body.details, value).to.deep.equal([
          { field: 'expiring_within', issue: 'must be an ISO 8601 duration such as P7D, PT12H or P1DT12H, or whole seconds, from 1 second to 3650 days' },
        ]);
      }
      const twice = await w.api.get(`${path}?expiring_within=P7D&expiring_within=P1D`, { key: w.own.key });
      expect(twice.status).to.equal(400);
      const both = await w.api.get(`${path}?expiring_within=soon&limit=0`, { key: w.own.key });
      expect(both.body.details.map((d: { field: string }) => d.field).sort()).to.deep.equal(['expiring_within', 'limit']);
      expect((await w.api.get(`${path}?expiring_within=P3650D`, { key: w.own.key })).status, 'the bound itself').to.equal(200);
    });
  });

  describe('api_key.expiring', () => {
    it('C-281: an endpoint may subscribe to it; the event the scan writes matches the webhooks: entry of docs/openapi.yaml', async () => {
      const put = await w.api.put(`/v1/organisations/${w.own.orgId}/webhook-endpoint`, {
        key: w.own.key,
        json: { url: 'https://hooks.example.com/cos', events: ['api_key.expiring'] },
      });
      expect(put.status, put.text).to.be.oneOf([200, 201]);
      expect(put.body.events).to.deep.equal(['api_key.expiring']);
      const issued = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'billing', expires_at: inDays(3) });
      const notices = new ExpiryNotices({ stores: w.tc.store.stores, unitOfWork: w.tc.store.unitOfWork, clock: w.tc.clock, random: cryptoRandom, logger: w.tc.logger });
      expect(await notices.scanOnce()).to.deep.equal({ claimed: 1, enqueued: 1 });
      const outbox = await w.tc.store.stores.outbox.list({ organisationId: w.own.orgId }, { after: null, limit: 10 });
      expect(outbox.map((n) => n.type), 'issuance is not subscribed').to.deep.equal(['api_key.expiring']);
      const event = JSON.parse(outbox[0]!.payload) as { data: Record<string, unknown> };
      expect(event.data).to.deep.equal({ organisation_id: w.own.orgId, key_id: issued.key.id, key_prefix: issued.key.keyPrefix, label: 'billing', expires_at: inDays(3) });
      const check = w.api.doc.validatorAt('#/webhooks/api_key.expiring/post/requestBody/content/application~1json/schema');
      expect(check(event), JSON.stringify(check.errors)).to.equal(true);
      expect(check({ ...event, data: { ...event.data, cause: { type: 'operator' } } }), 'no cause').to.equal(false);
      const deliveries = await w.api.get(`/v1/organisations/${w.own.orgId}/webhook-endpoint/deliveries`, { key: w.own.key });
      expect(deliveries.status, deliveries.text).to.equal(200);
      expect(deliveries.body.data.map((d: { event_type: string }) => d.event_type)).to.deep.equal(['api_key.expiring']);
    });
  });
});
