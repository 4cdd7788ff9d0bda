/**
 * The one error table (spec §7, C-9, C-10, C-15, C-17, C-51) and how every error reaches the client.
 */
import { expect } from 'chai';
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  RateLimitedError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
  decide,
  windowAt,
} from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';
import { ERROR_TABLE, HttpError, renderError } from '@cos/adapter-koa';
import { faultyStore } from './support/faults.js';
import { OpenApiDocument } from './support/openapi.js';
import { createWorld } from './support/world.js';

const rc = { requestId: 'req-42', instance: '/v1/organisations', errorsUrl: 'https://errors.example.com' };

describe('adapter-koa: errors', () => {
  describe('ERROR_TABLE', () => {
    it('spec §7, C-9, C-10: maps every code to the status the spec and the contract give it (and the idempotency codes to 422/409)', () => {
      const statuses = Object.fromEntries(Object.entries(ERROR_TABLE).map(([code, m]) => [code, m.status]));
      expect(statuses).to.deep.equal({
        VALIDATION_ERROR: 400,
        UNAUTHORIZED: 401,
        FORBIDDEN: 403,
        NOT_FOUND: 404,
        METHOD_NOT_ALLOWED: 405,
        CONFLICT: 409,
        PAYLOAD_TOO_LARGE: 413,
        UNSUPPORTED_MEDIA_TYPE: 415,
        RATE_LIMIT_EXCEEDED: 429,
        INTERNAL_ERROR: 500,
        SERVICE_UNAVAILABLE: 503,
        // Idempotency keys (beyond v1, only for requests that send Idempotency-Key).
        IDEMPOTENCY_KEY_REUSED: 422,
        IDEMPOTENCY_KEY_IN_USE: 409,
      });
    });

    it('spec §7: every code but RATE_LIMIT_EXCEEDED is application/json; 429 is application/problem+json', () => {
      for (const [code, m] of Object.entries(ERROR_TABLE)) {
        expect(m.contentType, code).to.equal(
          code === 'RATE_LIMIT_EXCEEDED' ? 'application/problem+json; charset=utf-8' : 'application/json; charset=utf-8',
        );
      }
    });

    it('covers every code of the core\'s error family and every code docs/openapi.yaml lists', () => {
      const doc = OpenApiDocument.load();
      const documented = (doc.pointer('#/components/schemas/Error/properties/error/enum') as string[]).concat('RATE_LIMIT_EXCEEDED');
      expect(Object.keys(ERROR_TABLE).sort()).to.deep.equal(documented.sort());
      const core = [
        new ValidationError([{ field: 'a', issue: 'b' }]),
        new UnauthorizedError(),
        new ForbiddenError(),
        new NotFoundError(),
        new ConflictError('c'),
        new RateLimitedError(decide(61, 60, windowAt(0), 0)),
        new UnavailableError(),
      ];
      for (const e of core) expect(ERROR_TABLE).to.have.property(e.code);
    });
  });

  describe('renderError', () => {
    it('spec §7: details are passed through for VALIDATION_ERROR and CONFLICT only', () => {
      const details = [{ field: 'slug', issue: 'already taken' }];
      expect(JSON.parse(renderError(new ValidationError(details), rc).body).details).to.deep.equal(details);
      expect(JSON.parse(renderError(new ConflictError('dup', details), rc).body).details).to.deep.equal(details);
      expect(JSON.parse(renderError(new NotFoundError(), rc).body)).to.deep.equal({ error: 'NOT_FOUND', message: 'Resource not found', details: [] });
    });

    it('C-15: anything unknown is 500 INTERNAL_ERROR naming only the request id', () => {
      for (const thrown of [new Error('ECONNRESET at pg.Client'), new TypeError('x is undefined'), 'a string', null, { status: 418 }]) {
        const out = renderError(thrown, rc);
        expect(out.status).to.equal(500);
        expect(out.unexpected).to.equal(true);
        expect(JSON.parse(out.body)).to.deep.equal({
          error: 'INTERNAL_ERROR',
          message: 'An unexpected error occurred; quote request id req-42 when reporting it',
          details: [],
        });
      }
    });

    it('C-9: an HttpError carries its headers (Allow on 405)', () => {
      const out = renderError(new HttpError('METHOD_NOT_ALLOWED', 'no', { Allow: 'GET' }), rc);
      expect(out.status).to.equal(405);
      expect(out.headers).to.deep.equal({ Allow: 'GET' });
    });

    it('C-51: a RateLimitedError renders the RFC 7807 body with Retry-After equal to retry_after', () => {
      const decision = decide(61, 60, windowAt(Date.parse('2026-06-10T12:00:15Z')), Date.parse('2026-06-10T12:00:15Z'));
      const out = renderError(new RateLimitedError(decision), rc);
      expect(out.status).to.equal(429);
      expect(out.headers).to.deep.equal({ 'Retry-After': '45' });
      expect(out.decision).to.equal(decision);
      const body = JSON.parse(out.body);
      expect(body).to.deep.equal({
        type: 'https://errors.example.com/rate-limit-exceeded',
        title: 'Rate Limit Exceeded',
        status: 429,
        detail: 'Rate limit of 60 requests per minute exceeded; retry after 45 seconds',
        svc_error_code: 'RATE_LIMIT_EXCEEDED',
        retry_after: 45,
        instance: '/v1/organisations',
      });
    });
  });

  describe('over HTTP', () => {
    it('C-15, C-52: a 500 from a failure before counting carries X-Request-Id and the source scope\'s X-RateLimit-*', async () => {
      const store = faultyStore(createInMemoryStore());
      const w = await createWorld({ store });
      try {
        store.failWith(() => new Error('disk I/O error'), ['apiKeys.findCredential']);
        const res = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
        expect(res.status).to.equal(500);
        expect(res.headers.get('x-request-id')).to.be.a('string');
        expect(res.headers.get('x-ratelimit-limit')).to.equal('60');
        expect(res.headers.get('x-ratelimit-remaining')).to.equal('60');
        expect(res.headers.get('x-ratelimit-reset')).to.equal(String(Date.parse('2026-06-10T12:01:00Z') / 1000));
      } finally {
        await w.close();
      }
    });

    it('C-15, C-52: a 500 after the rate limit carries the organisation counter in X-RateLimit-*', async () => {
      const store = faultyStore(createInMemoryStore());
      const w = await createWorld({ store });
      try {
        store.failWith(() => new RangeError('Invalid time value'), ['organisations.findById']);
        // A platform key reading another organisation: that record is read from the store (a key's
        // own organisation comes with its authentication, so it would not reach findById).
        const res = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.platform.key });
        expect(res.status).to.equal(500);
        expect(res.body.error).to.equal('INTERNAL_ERROR');
        expect(res.headers.get('x-ratelimit-remaining')).to.equal('59');
        expect(res.text).to.not.include('Invalid time value');
      } finally {
        await w.close();
      }
    });

    it('C-17: a store failure during authentication is 503 (not 401), with the rate-limit headers', async () => {
      const store = faultyStore(createInMemoryStore());
      const w = await createWorld({ store });
      try {
        store.failWith(() => new UnavailableError(), ['apiKeys.findCredential']);
        const res = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
        expect(res.status).to.equal(503);
        expect(res.body).to.deep.equal({
          error: 'SERVICE_UNAVAILABLE',
          message: 'Service temporarily unavailable; retry with exponential backoff',
          details: [],
        });
        expect(res.headers.get('x-ratelimit-limit')).to.equal('60');
        const warn = w.httpLogger.entries.find((e) => e.fields['status'] === 503)!;
        expect(warn.level).to.equal('warn');
      } finally {
        await w.close();
      }
    });
  });
});
