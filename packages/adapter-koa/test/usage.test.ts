/**
 * The usage routes over real HTTP (each response validated against docs/openapi.yaml): a key's
 * requests answered and refused with 429 are counted per hour, read back by hour and by UTC day,
 * for the key and summed over its organisation; bad ranges are 400 with details.
 */
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { createWorld, MISSING_ID, UNKNOWN_KEY, type World } from './support/world.js';

const HOUR = 3_600_000;

describe('adapter-koa: usage counts (GET …/api-keys/{key_id}/usage, GET …/usage)', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld({ config: { rateLimitPerMinute: 5 } });
  });
  afterEach(async () => {
    await world.close();
  });

  const keyUsagePath = (orgId: string, keyId: string, query = ''): string => `/v1/organisations/${orgId}/api-keys/${keyId}/usage${query}`;
  /** Requests of `key` to its own organisation; returns the statuses. */
  const hit = async (key: string, n: number): Promise<number[]> => {
    const statuses: number[] = [];
    for (let i = 0; i < n; i++) statuses.push((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key })).status);
    return statuses;
  };
  /** The start of the hour the clock is in. */
  const hourNow = (): number => {
    const ms = world.tc.clock.now().getTime();
    return ms - (ms % HOUR);
  };

  it('counts answered requests and 429s of the key per hour; unauthenticated requests count for no key', async () => {
    const h0 = hourNow();
    expect(await hit(world.own.key, 7)).to.deep.equal([200, 200, 200, 200, 200, 429, 429]);
    expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: UNKNOWN_KEY })).status).to.equal(401);
    world.tc.clock.advance(HOUR);
    expect(await hit(world.own.key, 2)).to.deep.equal([200, 200]);
    await world.tc.core.keyUsage.flush();

    const res = await world.api.get(keyUsagePath(world.own.orgId, world.own.keyId), { key: world.platform.key });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.deep.equal({
      data: [
        { start: new Date(h0).toISOString(), requests: 5, rate_limited: 2 },
        { start: new Date(h0 + HOUR).toISOString(), requests: 2, rate_limited: 0 },
      ],
      meta: { next_cursor: null },
    });
  });

  it('day granularity sums the hours of each UTC day; the organisation sums its keys; a key reads its own usage', async () => {
    const second = await world.tc.core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'second' });
    await hit(world.own.key, 2);
    await hit(second.rawKey, 3);
    world.tc.clock.advance(2 * HOUR);
    await hit(second.rawKey, 1);
    await world.tc.core.keyUsage.flush();
    // The fake clock started at 2026-06-10T12:00:30Z: both hours are on 10 June.
    const org = await world.api.get(`/v1/organisations/${world.own.orgId}/usage?granularity=day`, { key: world.platform.key });
    expect(org.status, org.text).to.equal(200);
    expect(org.body.data).to.deep.equal([{ start: '2026-06-10T00:00:00.000Z', requests: 6, rate_limited: 0 }]);
    const byHour = await world.api.get(`/v1/organisations/${world.own.orgId}/usage?granularity=hour`, { key: world.own.key });
    expect(byHour.status, byHour.text).to.equal(200);
    expect(byHour.body.data.map((b: { requests: number }) => b.requests)).to.deep.equal([5, 1]);
    const own = await world.api.get(keyUsagePath(world.own.orgId, second.key.id), { key: world.own.key });
    expect(own.body.data.map((b: { requests: number }) => b.requests)).to.deep.equal([3, 1]);
  });

  it('since, until and granularity: since back to the start of its bucket, until exclusive; nothing outside', async () => {
    const h0 = hourNow();
    await hit(world.own.key, 1);
    world.tc.clock.advance(3 * HOUR);
    await hit(world.own.key, 1);
    await world.tc.core.keyUsage.flush();
    const q = (since: number, until: number): string => `?since=${new Date(since).toISOString()}&until=${new Date(until).toISOString()}`;
    const mid = await world.api.get(keyUsagePath(world.own.orgId, world.own.keyId, q(h0 + 1_000, h0 + HOUR)), { key: world.platform.key });
    expect(mid.body.data).to.deep.equal([{ start: new Date(h0).toISOString(), requests: 1, rate_limited: 0 }]);
    const none = await world.api.get(keyUsagePath(world.own.orgId, world.own.keyId, q(h0 + HOUR, h0 + 3 * HOUR)), { key: world.platform.key });
    expect(none.body).to.deep.equal({ data: [], meta: { next_cursor: null } });
  });

  it('bad ranges are 400 VALIDATION_ERROR naming the field, every bad field at once', async () => {
    const bad = async (query: string): Promise<unknown> => {
      world.tc.clock.advance(60_000); // each in a minute of its own: under the rate limit of 5
      const res = await world.api.get(keyUsagePath(world.own.orgId, world.own.keyId, query), { key: world.own.key });
      expect(res.status, `${query}: ${res.text}`).to.equal(400);
      expect(res.body.error).to.equal('VALIDATION_ERROR');
      return res.body.details;
    };
    expect(await bad('?granularity=week&since=yesterday')).to.deep.equal([
      { field: 'granularity', issue: 'must be one of hour, day' },
      { field: 'since', issue: 'must be an ISO 8601 timestamp with a time zone' },
    ]);
    expect(await bad('?until=2026-06-10T12:00')).to.deep.equal([{ field: 'until', issue: 'must be an ISO 8601 timestamp with a time zone' }]);
    expect(await bad('?since=2026-06-10T12:00:00Z&until=2026-06-10T12:00:00Z')).to.deep.equal([{ field: 'until', issue: 'must be later than since' }]);
    expect(await bad('?since=2026-05-01T00:00:00Z&until=2026-06-10T00:00:00Z')).to.deep.equal([
      { field: 'since', issue: 'must be at most 31 days before until with granularity hour' },
    ]);
    expect(await bad('?granularity=day&since=2025-01-01T00:00:00Z&until=2026-06-10T00:00:00Z')).to.deep.equal([
      { field: 'since', issue: 'must be at most 366 days before until with granularity day' },
    ]);
    expect(await bad('?since=2999-01-01T00:00:00Z')).to.deep.equal([{ field: 'since', issue: 'must be in the past when until is not given' }]);
  });

  it('a key of another organisation, or none, is 404; a bad key id is 400', async () => {
    const foreign = await world.api.get(keyUsagePath(world.own.orgId, world.other.keyId), { key: world.platform.key });
    expect(foreign.status).to.equal(404);
    const missing = await world.api.get(keyUsagePath(world.own.orgId, MISSING_ID), { key: world.own.key });
    expect(missing.status).to.equal(404);
    const malformed = await world.api.get(keyUsagePath(world.own.orgId, 'not-a-uuid'), { key: world.own.key });
    expect(malformed.status).to.equal(400);
    expect(malformed.body.details).to.deep.equal([{ field: 'key_id', issue: 'must be a UUID' }]);
  });

  it('a key without api_keys:read gets 403 with the scope detail', async () => {
    const narrow = await world.tc.core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'narrow', scopes: ['organisations:read'] });
    const res = await world.api.get(`/v1/organisations/${world.own.orgId}/usage`, { key: narrow.rawKey });
    expect(res.status).to.equal(403);
    expect(res.body.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:read' }]);
  });
});
