/**
 * Rate limiting end to end (spec §8, C-50..C-54) with the in-process counter and the FakeClock of
 * createTestCore: every response validated against docs/openapi.yaml, 429s included.
 */
import { expect } from 'chai';
import type { RateCounter } from '@cos/core';
import { InMemoryRateCounter } from '@cos/core/testing';
import { createWorld, type World } from './support/world.js';
import { DeadCounter, FrozenCounter } from './support/faults.js';
import type { ApiResponse } from './support/http.js';

/** Epoch seconds of a UTC instant. */
const epoch = (iso: string): number => Math.floor(new Date(iso).getTime() / 1000);

function rateHeaders(res: ApiResponse): { limit: number; remaining: number; reset: number } {
  return {
    limit: Number(res.headers.get('x-ratelimit-limit')),
    remaining: Number(res.headers.get('x-ratelimit-remaining')),
    reset: Number(res.headers.get('x-ratelimit-reset')),
  };
}

describe('adapter-koa: rate limiting (spec §8, C-50..C-54)', () => {
  let world: World;
  let orgPath: string;
  beforeEach(async () => {
    // The seeded world stands at 2026-06-10T12:00:31Z.
    world = await createWorld();
    orgPath = `/v1/organisations/${world.own.orgId}`;
  });
  afterEach(async () => {
    await world.close();
  });

  it('C-51, C-52: requests 1..60 pass with Remaining counting down to 0; request 61 is 429 with every RFC 7807 field', async () => {
    for (let i = 1; i <= 60; i++) {
      const res = await world.api.get(orgPath, { key: world.own.key });
      expect(res.status, `request ${i}`).to.equal(200);
      expect(rateHeaders(res)).to.deep.equal({ limit: 60, remaining: 60 - i, reset: epoch('2026-06-10T12:01:00Z') });
    }
    const res = await world.api.get(`${orgPath}?x=1`, { key: world.own.key });
    expect(res.status).to.equal(429);
    expect(res.headers.get('content-type')).to.equal('application/problem+json; charset=utf-8');
    expect(res.headers.get('retry-after')).to.equal('29');
    expect(rateHeaders(res)).to.deep.equal({ limit: 60, remaining: 0, reset: epoch('2026-06-10T12:01:00Z') });
    expect(res.body).to.deep.equal({
      type: 'https://errors.example.com/rate-limit-exceeded',
      title: 'Rate Limit Exceeded',
      status: 429,
      detail: res.body.detail,
      svc_error_code: 'RATE_LIMIT_EXCEEDED',
      retry_after: 29,
      instance: orgPath,
    });
    expect(res.body.detail).to.be.a('string').and.to.include('29');
    expect(res.body.retry_after).to.equal(Number(res.headers.get('retry-after')));
  });

  it('spec §8.2: every later request of that minute is 429 too, with Retry-After shrinking to the window end', async () => {
    for (let i = 0; i < 60; i++) await world.api.get(orgPath, { key: world.own.key });
    for (const [at, retry] of [['2026-06-10T12:00:40.000Z', 20], ['2026-06-10T12:00:59.000Z', 1], ['2026-06-10T12:00:59.999Z', 1]] as const) {
      world.tc.clock.set(at);
      const res = await world.api.post(`${orgPath}/api-keys`, { key: world.own.key, json: { label: 'x' } });
      expect(res.status, at).to.equal(429);
      expect(res.body.retry_after).to.equal(retry);
      expect(res.headers.get('retry-after')).to.equal(String(retry));
      expect(res.body.instance).to.equal(`${orgPath}/api-keys`);
    }
  });

  it('C-50: a second key of the same organisation shares the counter; another organisation does not', async () => {
    const second = await world.api.post(`${orgPath}/api-keys`, { key: world.own.key, json: { label: 'second' } }); // request 1
    for (let i = 2; i <= 30; i++) await world.api.get(orgPath, { key: world.own.key });
    for (let i = 31; i <= 60; i++) {
      const res = await world.api.get(orgPath, { key: second.body.key });
      expect(res.status).to.equal(200);
      expect(rateHeaders(res).remaining).to.equal(60 - i);
    }
    expect((await world.api.get(orgPath, { key: second.body.key })).status).to.equal(429);
    expect((await world.api.get(orgPath, { key: world.own.key })).status).to.equal(429);
    const other = await world.api.get(`/v1/organisations/${world.other.orgId}`, { key: world.other.key });
    expect(other.status).to.equal(200);
    expect(rateHeaders(other).remaining).to.equal(59);
  });

  it('spec §8.1, C-50: the window is the UTC calendar minute; the counter resets at second :00', async () => {
    for (let i = 0; i < 61; i++) await world.api.get(orgPath, { key: world.own.key });
    world.tc.clock.set('2026-06-10T12:01:00.000Z');
    const res = await world.api.get(orgPath, { key: world.own.key });
    expect(res.status).to.equal(200);
    expect(rateHeaders(res)).to.deep.equal({ limit: 60, remaining: 59, reset: epoch('2026-06-10T12:02:00Z') });
  });

  it('spec §8.3: up to twice the limit is served across a window boundary', async () => {
    world.tc.clock.set('2026-06-10T12:00:59.500Z');
    for (let i = 0; i < 60; i++) expect((await world.api.get(orgPath, { key: world.own.key })).status).to.equal(200);
    world.tc.clock.set('2026-06-10T12:01:00.000Z');
    for (let i = 0; i < 60; i++) expect((await world.api.get(orgPath, { key: world.own.key })).status).to.equal(200);
    expect((await world.api.get(orgPath, { key: world.own.key })).status).to.equal(429);
  });

  it('C-50: /health and /version share one global counter, for every caller, apart from the organisation counters', async () => {
    const w = await createWorld({ http: { trustProxy: true } });
    try {
      for (let i = 1; i <= 60; i++) {
        const path = i % 2 === 0 ? '/v1/health' : '/v1/version';
        const res = await w.api.get(path, { headers: { 'x-forwarded-for': `192.0.2.${i}` } });
        expect(res.status).to.equal(200);
        expect(rateHeaders(res).remaining).to.equal(60 - i);
      }
      const health = await w.api.get('/v1/health', { headers: { 'x-forwarded-for': '198.51.100.99' } });
      expect(health.status).to.equal(429);
      expect(health.body.instance).to.equal('/v1/health');
      const version = await w.api.get('/v1/version', { key: w.platform.key });
      expect(version.status).to.equal(429);
      const authenticated = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
      expect(authenticated.status).to.equal(200);
      expect(rateHeaders(authenticated).remaining).to.equal(59);
      w.tc.clock.set('2026-06-10T12:01:00.000Z');
      expect((await w.api.get('/v1/health')).status).to.equal(200);
    } finally {
      await w.close();
    }
  });

  it('C-50: requests rejected with 401 count per source address; once over the limit that address gets 429', async () => {
    const w = await createWorld({ http: { trustProxy: true } });
    try {
      const guesser = { 'x-forwarded-for': '203.0.113.7' };
      const path = `/v1/organisations/${w.own.orgId}`;
      for (let i = 1; i <= 60; i++) {
        const res = await w.api.get(path, { authorization: `Bearer svc_live_${String(i).padStart(48, '0')}`, headers: guesser });
        expect(res.status).to.equal(401);
        expect(rateHeaders(res)).to.deep.equal({ limit: 60, remaining: 60 - i, reset: epoch('2026-06-10T12:01:00Z') });
      }
      const blocked = await w.api.get(path, { headers: guesser });
      expect(blocked.status).to.equal(429);
      expect(blocked.body.svc_error_code).to.equal('RATE_LIMIT_EXCEEDED');
      // Another address is not affected...
      const bystander = await w.api.get(path, { headers: { 'x-forwarded-for': '198.51.100.2' } });
      expect(bystander.status).to.equal(401);
      expect(rateHeaders(bystander).remaining).to.equal(59);
      // ...and a valid key from the throttled address is counted against its organisation only.
      const valid = await w.api.get(path, { key: w.own.key, headers: guesser });
      expect(valid.status).to.equal(200);
      expect(rateHeaders(valid).remaining).to.equal(59);
      // The address's 401 counter resets with the window like every other.
      w.tc.clock.set('2026-06-10T12:01:00.000Z');
      expect((await w.api.get(path, { headers: guesser })).status).to.equal(401);
    } finally {
      await w.close();
    }
  });

  it('C-33, C-50: an authenticated route calls the core\'s admission once per request and the request is counted exactly once, whatever the answer (200, 401, 429)', async () => {
    const keys: string[] = [];
    const inner = new InMemoryRateCounter();
    const counter: RateCounter = {
      hit: (key, ttlMs) => {
        keys.push(key);
        return inner.hit(key, ttlMs);
      },
    };
    const w = await createWorld({ counter, config: { rateLimitPerMinute: 2 } });
    try {
      const admission = w.tc.core.admission;
      const admit = admission.admit.bind(admission);
      let admissions = 0;
      admission.admit = (authorization, source) => {
        admissions++;
        return admit(authorization, source);
      };
      const path = `/v1/organisations/${w.own.orgId}`;
      const statuses: number[] = [];
      const counts: number[] = [];
      for (const key of [w.own.key, w.revokedKey, w.own.key, w.own.key, w.expiredKey, w.own.key]) {
        const before = keys.length;
        statuses.push((await w.api.get(path, { key })).status);
        counts.push(keys.length - before);
      }
      expect(statuses).to.deep.equal([200, 401, 200, 429, 401, 429]);
      expect(admissions).to.equal(6);
      // The organisation's counter once per admitted request until it is known over its limit (then
      // 429 without a counter call), the source address's once per 401.
      expect(counts).to.deep.equal([1, 1, 1, 1, 1, 0]);
      expect(keys.filter((k) => k.startsWith('{org:'))).to.have.length(3);
      expect(keys.filter((k) => k.startsWith('{src:'))).to.have.length(2);
    } finally {
      await w.close();
    }
  });

  it('C-50: without trustProxy, X-Forwarded-For is ignored and the socket address is the source', async () => {
    for (let i = 1; i <= 60; i++) {
      await world.api.get(orgPath, { headers: { 'x-forwarded-for': `192.0.2.${i}` } });
    }
    const res = await world.api.get(orgPath, { headers: { 'x-forwarded-for': '192.0.2.250' } });
    expect(res.status).to.equal(429);
  });

  it('C-52: every response carries X-RateLimit-*: 2xx, 204, 400, 401, 403, 404, 405, 409, 413, 415 (429 above, 500 in errors.test.ts)', async () => {
    const reset = epoch('2026-06-10T12:01:00Z');
    const cases: [ApiResponse, number, number][] = [];
    const push = async (p: Promise<ApiResponse>, limit: number, remaining: number): Promise<void> => {
      cases.push([await p, limit, remaining]);
    };
    await push(world.api.get('/v1/health'), 60, 59); // global counter
    await push(world.api.get(orgPath, { key: world.own.key }), 60, 59); // own org: 1
    await push(world.api.delete(`${orgPath}/api-keys/${world.revokedKeyId}`, { key: world.own.key }), 60, 58); // 2
    await push(world.api.get('/v1/organisations/bad', { key: world.platform.key }), 60, 59); // platform org: 1
    await push(world.api.get(orgPath), 60, 59); // 401: source address: 1
    await push(world.api.get('/v1/organisations', { key: world.own.key }), 60, 57); // 403: own org: 3
    await push(world.api.get('/v1/nowhere'), 60, 60); // 404: not counted, source scope peeked
    await push(world.api.put('/v1/health'), 60, 60); // 405: not counted
    await push(world.api.post('/v1/organisations', { key: world.platform.key, json: { name: 'A', slug: 'acme' } }), 60, 58); // 409
    await push(world.api.patch(orgPath, { key: world.own.key, json: { name: 'n'.repeat(70_000) } }), 60, 56); // 413
    await push(world.api.patch(orgPath, { key: world.own.key, body: 'x', headers: { 'content-type': 'text/plain' } }), 60, 55); // 415
    expect(cases.map(([r]) => r.status)).to.deep.equal([200, 200, 204, 400, 401, 403, 404, 405, 409, 413, 415]);
    for (const [res, limit, remaining] of cases) {
      expect(rateHeaders(res), `${res.status}`).to.deep.equal({ limit, remaining, reset });
    }
  });

  it('C-53: the limits are configurable', async () => {
    const w = await createWorld({ config: { rateLimitPerMinute: 5, unauthRateLimitPerMinute: 3 } });
    try {
      const path = `/v1/organisations/${w.own.orgId}`;
      for (let i = 1; i <= 5; i++) expect(rateHeaders(await w.api.get(path, { key: w.own.key }))).to.include({ limit: 5, remaining: 5 - i });
      expect((await w.api.get(path, { key: w.own.key })).status).to.equal(429);
      for (let i = 1; i <= 3; i++) expect(rateHeaders(await w.api.get('/v1/version'))).to.include({ limit: 3, remaining: 3 - i });
      expect((await w.api.get('/v1/health')).status).to.equal(429);
      // The per-source 401 counter uses the authenticated limit.
      expect(rateHeaders(await w.api.get(path))).to.include({ limit: 5, remaining: 4 });
    } finally {
      await w.close();
    }
  });

  it('C-51: the 429 type is built on the configured errors URL', async () => {
    const w = await createWorld({ config: { unauthRateLimitPerMinute: 1 }, http: { errorsUrl: 'https://errors.acme.test/api/' } });
    try {
      await w.api.get('/v1/health');
      const res = await w.api.get('/v1/health');
      expect(res.status).to.equal(429);
      expect(res.body.type).to.equal('https://errors.acme.test/api/rate-limit-exceeded');
    } finally {
      await w.close();
    }
  });

  it('C-54: when the counter store fails, requests are allowed, Remaining equals the limit and one warning is logged', async () => {
    const counter = new DeadCounter();
    const w = await createWorld({ counter });
    try {
      for (let i = 0; i < 70; i++) {
        const res = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
        expect(res.status).to.equal(200);
        expect(rateHeaders(res)).to.deep.include({ limit: 60, remaining: 60 });
      }
      expect(counter.calls).to.be.greaterThan(0);
      const warnings = w.tc.logger.entries.filter((e) => e.level === 'warn');
      expect(warnings).to.have.length(1); // at most once per 10 s while the counter stays down
      w.tc.clock.advance(10_000);
      await w.api.get('/v1/health');
      expect(w.tc.logger.entries.filter((e) => e.level === 'warn')).to.have.length(2);
    } finally {
      await w.close();
    }
  });

  it('C-54: a counter that never answers does not hold requests: they pass after the bounded timeout', async () => {
    const counter = new FrozenCounter();
    const w = await createWorld({ counter, config: { rateCounterTimeoutMs: 30 } });
    try {
      const started = Date.now();
      const results = await Promise.all(Array.from({ length: 10 }, () => w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })));
      expect(Date.now() - started).to.be.lessThan(2000);
      for (const res of results) {
        expect(res.status).to.equal(200);
        expect(rateHeaders(res).remaining).to.equal(60);
      }
    } finally {
      await w.close();
    }
  });
});
