/**
 * Two copies of @cos/core in one process (an embedder whose node_modules holds two versions, a
 * mixed CJS/ESM or tsx graph): domain errors thrown by a store or a core built against one copy
 * reach an adapter built against the other. They are no `instanceof` this copy's classes, so the
 * adapter recognises them by their Symbol.for('cos.DomainError') brand and their code (spec §7:
 * every code keeps its status; never a 500).
 *
 * The second copy is the real thing: @cos/core's entry loaded once more through the ESM loader under
 * a query string, which makes a separate module instance with its own classes.
 */
import { expect } from 'chai';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import {
  ConflictError,
  DOMAIN_ERROR_BRAND,
  DomainError,
  UnavailableError,
  decide,
  isDomainError,
  windowAt,
  type RateDecision,
} from '@cos/core';
import { CapturingLogger, FakeClock, InMemoryRateCounter, createInMemoryStore } from '@cos/core/testing';
import { createKoaApp, renderError } from '@cos/adapter-koa';
import { faultyStore } from './support/faults.js';
import { Api, listen } from './support/http.js';
import { MISSING_ID, UNKNOWN_KEY, createWorld } from './support/world.js';

type CoreModule = typeof import('@cos/core');

/** A second, separate module instance of @cos/core (same sources, other classes). */
async function foreignCopy(): Promise<CoreModule> {
  const entry = createRequire(import.meta.url).resolve('@cos/core');
  const copy = (await import(`${pathToFileURL(entry).href}?foreign-copy`)) as CoreModule;
  // the premise of every test here: the copy's errors are not instances of this copy's classes
  expect(copy.ConflictError).not.to.equal(ConflictError);
  expect(new copy.ConflictError('x')).not.to.be.instanceOf(DomainError);
  expect(new copy.UnavailableError()).not.to.be.instanceOf(UnavailableError);
  return copy;
}

const rc = { requestId: 'req-7', instance: '/v1/organisations', errorsUrl: 'https://errors.example.com' };
const NOW = Date.parse('2026-06-10T12:00:15Z');
const decision: RateDecision = decide(61, 60, windowAt(NOW), NOW);

describe('adapter-koa: domain errors from another copy of @cos/core', () => {
  let copy: CoreModule;
  before(async () => {
    copy = await foreignCopy();
  });

  it('spec §7, C-13, C-17, C-51: renderError gives every error of the other copy its own status, not 500', () => {
    const slug = [{ field: 'slug', issue: 'already taken' }];
    const cases: Array<[unknown, number, string]> = [
      [new copy.ValidationError([{ field: 'name', issue: 'field required' }]), 400, 'VALIDATION_ERROR'],
      [new copy.UnauthorizedError(), 401, 'UNAUTHORIZED'],
      [new copy.ForbiddenError(), 403, 'FORBIDDEN'],
      [new copy.NotFoundError(), 404, 'NOT_FOUND'],
      [new copy.ConflictError('Slug already taken', slug), 409, 'CONFLICT'],
      [new copy.RateLimitedError(decision), 429, 'RATE_LIMIT_EXCEEDED'],
      [new copy.UnavailableError(), 503, 'SERVICE_UNAVAILABLE'],
    ];
    for (const [error, status, code] of cases) {
      expect(isDomainError(error), code).to.equal(true);
      const out = renderError(error, rc);
      expect(out.status, code).to.equal(status);
      expect(out.code).to.equal(code);
      expect(out.unexpected).to.equal(false);
    }
    expect(JSON.parse(renderError(new copy.ConflictError('Slug already taken', slug), rc).body)).to.deep.equal({
      error: 'CONFLICT',
      message: 'Slug already taken',
      details: slug,
    });
    // C-51: the foreign 429 is the RFC 7807 body with Retry-After, its decision read structurally
    const limited = renderError(new copy.RateLimitedError(decision), rc);
    expect(limited.contentType).to.equal('application/problem+json; charset=utf-8');
    expect(limited.headers).to.deep.equal({ 'Retry-After': '45' });
    expect(limited.decision).to.deep.equal(decision);
    expect(JSON.parse(limited.body)).to.include({ status: 429, svc_error_code: 'RATE_LIMIT_EXCEEDED', retry_after: 45 });
  });

  it('spec §7, C-51: a domain error of another version (a plain class carrying the brand, no shared prototype) is recognised by brand and code', () => {
    /** What another release of @cos/core might build: not derived from this copy's DomainError. */
    const brand: unique symbol = Symbol.for('cos.DomainError');
    class OtherVersionError extends Error {
      readonly [brand] = true;
      constructor(
        readonly code: string,
        message: string,
        readonly details: ReadonlyArray<{ field: string; issue: string }> = [],
        readonly decision?: RateDecision,
      ) {
        super(message);
      }
    }
    expect(brand).to.equal(DOMAIN_ERROR_BRAND);
    expect(renderError(new OtherVersionError('CONFLICT', 'dup', [{ field: 'slug', issue: 'already taken' }]), rc).status).to.equal(409);
    expect(renderError(new OtherVersionError('SERVICE_UNAVAILABLE', 'down'), rc).status).to.equal(503);
    const limited = renderError(new OtherVersionError('RATE_LIMIT_EXCEEDED', 'slow down', [], decision), rc);
    expect(limited.status).to.equal(429);
    expect(limited.headers).to.deep.equal({ 'Retry-After': '45' });

    // C-15: without the brand, with a code this family does not have, or a 429 without its decision: 500
    const notOurs: unknown[] = [
      Object.assign(new Error('dup'), { code: 'CONFLICT', details: [] }),
      new OtherVersionError('TEAPOT', 'no such code'),
      new OtherVersionError('RATE_LIMIT_EXCEEDED', 'no decision'),
      new OtherVersionError('CONFLICT', 'bad details', [{ field: 'slug' } as { field: string; issue: string }]),
    ];
    for (const thrown of notOurs) {
      expect(isDomainError(thrown)).to.equal(false);
      const out = renderError(thrown, rc);
      expect(out.status).to.equal(500);
      expect(out.unexpected).to.equal(true);
    }
  });

  it('C-13, C-17 over HTTP: a store built against the other copy throws its ConflictError (409) and UnavailableError (503)', async () => {
    const store = faultyStore(createInMemoryStore());
    const w = await createWorld({ store });
    try {
      store.failWith(() => new copy.ConflictError('Slug already taken', [{ field: 'slug', issue: 'already taken' }]), ['organisations.create']);
      const conflict = await w.api.post('/v1/organisations', { key: w.platform.key, json: { name: 'Initech', slug: 'initech' } });
      expect(conflict.status).to.equal(409);
      expect(conflict.body).to.deep.equal({ error: 'CONFLICT', message: 'Slug already taken', details: [{ field: 'slug', issue: 'already taken' }] });

      store.failWith(() => new copy.UnavailableError(), ['apiKeys.findCredential']);
      const unavailable = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
      expect(unavailable.status).to.equal(503);
      expect(unavailable.body.error).to.equal('SERVICE_UNAVAILABLE');
      expect(unavailable.headers.get('x-ratelimit-limit')).to.equal('60');
    } finally {
      await w.close();
    }
  });

  it('C-32, C-33, C-50, C-51 over HTTP: a core from the other copy mounted in this adapter answers 401, 404, 400 and 429 (counting the 401s per source), never 500', async () => {
    const clock = new FakeClock('2026-06-10T12:00:00.000Z');
    const store = createInMemoryStore();
    const core = copy.createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: new InMemoryRateCounter(clock),
      clock,
      logger: new CapturingLogger(),
      config: { rateLimitPerMinute: 5 },
    });
    const org = await core.organisations.create(copy.OPERATOR, { name: 'Acme', slug: 'acme' }, { isSystem: true });
    const issued = await core.apiKeys.issue(copy.OPERATOR, org.id, { label: 'k' });
    const listening = await listen(createKoaApp({ core, logger: new CapturingLogger() }, { serviceVersion: '1.0.0' }).callback());
    const api = new Api(listening.baseUrl);
    try {
      // 401 from the other copy's Authenticator, counted in the source scope: the 6th is a 429 (C-50)
      for (let i = 1; i <= 5; i++) expect((await api.get(`/v1/organisations/${org.id}`, { key: UNKNOWN_KEY })).status).to.equal(401);
      const throttled = await api.get(`/v1/organisations/${org.id}`, { key: UNKNOWN_KEY });
      expect(throttled.status).to.equal(429);
      expect(throttled.headers.get('content-type')).to.equal('application/problem+json; charset=utf-8');

      expect((await api.get(`/v1/organisations/${MISSING_ID}`, { key: issued.rawKey })).status).to.equal(404);
      const invalid = await api.post('/v1/organisations', { key: issued.rawKey, json: { slug: 'x' } });
      expect(invalid.status).to.equal(400);
      expect(invalid.body.details).to.deep.include({ field: 'name', issue: 'field required' });
      const duplicate = await api.post('/v1/organisations', { key: issued.rawKey, json: { name: 'Again', slug: 'acme' } });
      expect(duplicate.status).to.equal(409);
      // 5 authenticated requests per minute: the organisation's 4th and 5th pass, the 6th is 429 (C-51)
      for (let i = 0; i < 2; i++) expect((await api.get(`/v1/organisations/${org.id}`, { key: issued.rawKey })).status).to.equal(200);
      const limited = await api.get(`/v1/organisations/${org.id}`, { key: issued.rawKey });
      expect(limited.status).to.equal(429);
      expect(limited.headers.get('retry-after')).to.equal('60');
      expect(limited.body).to.include({ svc_error_code: 'RATE_LIMIT_EXCEEDED', retry_after: 60 });
    } finally {
      await listening.close();
    }
  });
});

