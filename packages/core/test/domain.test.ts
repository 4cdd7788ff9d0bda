/** Unit tests of core's pure domain code: key format and digest, key status, rate windows, cursors, rules. */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import {
  ConflictError,
  decide,
  DOMAIN_ERROR_BRAND,
  DOMAIN_ERROR_CODES,
  IdempotencyKeyInUseError,
  IdempotencyKeyReusedError,
  isDomainErrorWithCode,
  decodeCursor,
  digestKey,
  digestsEqual,
  EMAIL_PATTERN,
  encodeCursor,
  failOpen,
  ForbiddenError,
  generateRawKey,
  isDomainError,
  isNaceSection,
  isWellFormedKey,
  KEY_ALPHABET,
  KEY_LENGTH,
  KEY_PATTERN,
  KEY_PREFIX_LENGTH,
  KEY_PREFIXES,
  keyPrefixOf,
  keyStatus,
  NACE_SECTIONS,
  NotFoundError,
  RateLimitedError,
  retryAfterSeconds,
  SLUG_PATTERN,
  UNAUTHORIZED_MESSAGE,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
  WINDOW_MS,
  windowAt,
  type Random,
} from '@cos/core';
import { seededRandom } from '@cos/core/testing';

/** A Random that serves the given byte batches in order (then fails loudly). */
function scriptedRandom(batches: number[][]): Random & { calls: number } {
  const r = {
    calls: 0,
    bytes(n: number): Uint8Array {
      const batch = batches[r.calls];
      r.calls += 1;
      if (batch === undefined) throw new Error('scriptedRandom: out of bytes');
      expect(batch.length, 'scripted batch size').to.be.at.most(n);
      return Uint8Array.from(batch);
    },
    uuid: () => '00000000-0000-4000-8000-000000000000',
  };
  return r;
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

describe('domain: API key format (spec §2, C-30, C-32)', () => {
  it('C-30: the format constants agree with the spec: 9-character prefixes, 48 random characters, 57 in all', () => {
    expect(KEY_PREFIXES).to.deep.equal({ live: 'svc_live_', test: 'svc_test_' });
    expect(KEY_PREFIXES.live).to.have.length(9);
    expect(KEY_PREFIXES.test).to.have.length(9);
    expect(KEY_LENGTH).to.equal(57);
    expect(KEY_PREFIX_LENGTH).to.equal(12);
    expect(KEY_ALPHABET).to.have.length(62);
    expect(new Set(KEY_ALPHABET).size).to.equal(62);
    expect([...KEY_ALPHABET].every((c) => /[A-Za-z0-9]/.test(c))).to.equal(true);
  });

  it('C-30: generateRawKey gives the environment prefix plus 48 alphanumerics', () => {
    const random = seededRandom(1);
    const live = generateRawKey('live', random);
    const test = generateRawKey('test', random);
    expect(live).to.match(/^svc_live_[A-Za-z0-9]{48}$/);
    expect(test).to.match(/^svc_test_[A-Za-z0-9]{48}$/);
    expect(live).to.have.length(57);
    expect(live).to.not.equal(generateRawKey('live', random));
  });

  it('C-30: characters map from bytes below 248 as ALPHABET[b % 62], in order', () => {
    const key = generateRawKey('live', scriptedRandom([range(0, 64)]));
    expect(key).to.equal(`svc_live_${KEY_ALPHABET.slice(0, 48)}`);
    const wrapped = generateRawKey('test', scriptedRandom([range(62, 62 + 48)]));
    expect(wrapped).to.equal(`svc_test_${KEY_ALPHABET.slice(0, 48)}`);
  });

  it('C-30: rejection sampling skips every byte >= 248 (no modulo bias), across as many draws as needed', () => {
    const high = range(248, 256);
    const random = scriptedRandom([
      [...high, ...high, ...high, ...high, ...high, ...high, ...high, ...high],
      high,
      [255, 0, 248, 1, 249, 247, 250, 61],
      range(2, 50),
    ]);
    const key = generateRawKey('live', random);
    expect(random.calls).to.equal(4);
    // 0 -> A, 1 -> B, 247 % 62 = 61 -> '9' (247 is the largest accepted byte), 61 -> '9', then 2.. -> C..
    expect(key).to.equal(`svc_live_AB99${KEY_ALPHABET.slice(2, 46)}`);
    expect(key).to.match(KEY_PATTERN);
  });

  it('C-30: keyPrefixOf is the first 12 characters', () => {
    const key = generateRawKey('test', seededRandom(3));
    expect(keyPrefixOf(key)).to.equal(key.slice(0, 12));
    expect(keyPrefixOf(key)).to.have.length(12);
    expect(keyPrefixOf(key).startsWith('svc_test_')).to.equal(true);
  });

  it('C-32: isWellFormedKey accepts exactly ^svc_(live|test)_[A-Za-z0-9]{48}$', () => {
    const body = 'aB3'.repeat(16);
    expect(isWellFormedKey(`svc_live_${body}`)).to.equal(true);
    expect(isWellFormedKey(`svc_test_${body}`)).to.equal(true);
    for (const bad of [
      '',
      `svc_live_${body.slice(1)}`,
      `svc_live_${body}x`,
      `svc_prod_${body}`,
      `SVC_LIVE_${body}`,
      `svc_live_${body.slice(1)}-`,
      `svc_live_${body.slice(1)}_`,
      `svc_live_${body.slice(1)}é`,
      ` svc_live_${body.slice(1)}`,
      `svc_live_${body.slice(1)}\n`,
      `svc_live_${body}\n`,
      `svc_live__${body.slice(1)}`,
      `Bearer svc_live_${body}`,
    ]) {
      expect(isWellFormedKey(bad), JSON.stringify(bad)).to.equal(false);
    }
  });
});

describe('domain: key digest (C-31)', () => {
  it('C-31: digestKey is the lower-case hex SHA-256 of the raw key', () => {
    expect(digestKey('abc')).to.equal('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const key = generateRawKey('live', seededRandom(9));
    const digest = digestKey(key);
    expect(digest).to.match(/^[0-9a-f]{64}$/);
    expect(digest).to.equal(createHash('sha256').update(key).digest('hex'));
    expect(digest).to.not.include(key.slice(9));
  });

  it('C-31: digestsEqual is true for equal digests only', () => {
    const a = digestKey('svc_live_a');
    const b = digestKey('svc_live_b');
    expect(digestsEqual(a, a)).to.equal(true);
    expect(digestsEqual(a, `${a}`)).to.equal(true);
    expect(digestsEqual(a, b)).to.equal(false);
    expect(digestsEqual(a, a.slice(0, 62))).to.equal(false);
    expect(digestsEqual(a.slice(0, 62), a)).to.equal(false);
    expect(digestsEqual('', '')).to.equal(false);
    expect(digestsEqual(a, 'not hex at all')).to.equal(false);
  });
});

describe('domain: key status (spec §3, C-22, C-36)', () => {
  const now = new Date('2026-06-10T12:00:00.000Z');
  const ms = (delta: number) => new Date(now.getTime() + delta);

  it('C-36: active with no expiry, and until the millisecond before expiresAt', () => {
    expect(keyStatus({ revokedAt: null, expiresAt: null }, now)).to.equal('active');
    expect(keyStatus({ revokedAt: null, expiresAt: ms(1) }, now)).to.equal('active');
  });

  it('C-36: expired exactly at expiresAt and after it', () => {
    expect(keyStatus({ revokedAt: null, expiresAt: now }, now)).to.equal('expired');
    expect(keyStatus({ revokedAt: null, expiresAt: ms(-1) }, now)).to.equal('expired');
  });

  it('C-36: revoked wins over expired, and is revoked whenever revokedAt is set', () => {
    expect(keyStatus({ revokedAt: ms(-10), expiresAt: ms(-5) }, now)).to.equal('revoked');
    expect(keyStatus({ revokedAt: ms(-10), expiresAt: null }, now)).to.equal('revoked');
    expect(keyStatus({ revokedAt: ms(-10), expiresAt: ms(86_400_000) }, now)).to.equal('revoked');
  });
});

describe('domain: rate windows (spec §8, C-50..C-54)', () => {
  const at = (iso: string) => new Date(iso).getTime();

  it('C-50: the window is the UTC calendar minute containing now', () => {
    expect(WINDOW_MS).to.equal(60_000);
    const w = windowAt(at('2026-06-10T12:34:56.789Z'));
    expect(new Date(w.startMs).toISOString()).to.equal('2026-06-10T12:34:00.000Z');
    expect(new Date(w.endMs).toISOString()).to.equal('2026-06-10T12:35:00.000Z');
    expect(windowAt(at('2026-06-10T12:34:00.000Z')).startMs).to.equal(at('2026-06-10T12:34:00.000Z'));
    expect(windowAt(at('2026-06-10T12:34:59.999Z')).startMs).to.equal(at('2026-06-10T12:34:00.000Z'));
    expect(windowAt(at('2026-12-31T23:59:59.999Z')).endMs).to.equal(at('2027-01-01T00:00:00.000Z'));
  });

  it('C-52: retry-after is the whole seconds until the next minute, 1..60', () => {
    const w = windowAt(at('2026-06-10T12:34:00.000Z'));
    expect(retryAfterSeconds(w, at('2026-06-10T12:34:00.000Z'))).to.equal(60);
    expect(retryAfterSeconds(w, at('2026-06-10T12:34:00.001Z'))).to.equal(60);
    expect(retryAfterSeconds(w, at('2026-06-10T12:34:30.000Z'))).to.equal(30);
    expect(retryAfterSeconds(w, at('2026-06-10T12:34:30.500Z'))).to.equal(30);
    expect(retryAfterSeconds(w, at('2026-06-10T12:34:59.000Z'))).to.equal(1);
    expect(retryAfterSeconds(w, at('2026-06-10T12:34:59.999Z'))).to.equal(1);
  });

  it('C-51: request 60 of a 60 limit is allowed with 0 remaining; request 61 and later are refused', () => {
    const now = at('2026-06-10T12:34:45.250Z');
    const w = windowAt(now);
    const first = decide(1, 60, w, now);
    expect(first).to.deep.equal({
      allowed: true,
      limit: 60,
      remaining: 59,
      resetEpochSeconds: at('2026-06-10T12:35:00.000Z') / 1000,
      retryAfterSeconds: 15,
      degraded: false,
    });
    expect(decide(60, 60, w, now)).to.include({ allowed: true, remaining: 0 });
    expect(decide(61, 60, w, now)).to.include({ allowed: false, remaining: 0, retryAfterSeconds: 15 });
    expect(decide(1_000, 60, w, now)).to.include({ allowed: false, remaining: 0 });
  });

  it('C-52: X-RateLimit-Reset is the epoch second at which the window ends', () => {
    const now = at('2026-06-10T12:34:45.250Z');
    expect(decide(1, 60, windowAt(now), now).resetEpochSeconds).to.equal(Date.UTC(2026, 5, 10, 12, 35) / 1000);
  });

  it('C-53: the limit is whatever is configured', () => {
    const now = at('2026-06-10T12:00:00.000Z');
    expect(decide(5, 5, windowAt(now), now)).to.include({ allowed: true, limit: 5, remaining: 0 });
    expect(decide(6, 5, windowAt(now), now)).to.include({ allowed: false, limit: 5 });
    expect(decide(999, 10_000, windowAt(now), now)).to.include({ allowed: true, remaining: 9_001 });
  });

  it('C-54: fail-open allows, shows Remaining equal to the limit and is marked degraded', () => {
    const now = at('2026-06-10T12:34:45.250Z');
    expect(failOpen(60, windowAt(now), now)).to.deep.equal({
      allowed: true,
      limit: 60,
      remaining: 60,
      resetEpochSeconds: at('2026-06-10T12:35:00.000Z') / 1000,
      retryAfterSeconds: 15,
      degraded: true,
    });
  });
});

describe('validation: cursors (C-6)', () => {
  const position = { createdAt: new Date('2026-03-01T09:15:42.123Z'), id: '3f2504e0-4f89-41d3-9a0c-0305e82c3301' };

  it('C-6: a cursor round-trips its keyset position at ms precision', () => {
    const cursor = encodeCursor(position);
    expect(cursor).to.match(/^[A-Za-z0-9_-]+$/);
    const decoded = decodeCursor(cursor);
    expect(decoded.createdAt.getTime()).to.equal(position.createdAt.getTime());
    expect(decoded.id).to.equal(position.id);
  });

  it('C-6: a cursor is not an offset: it carries the position, so different positions give different cursors', () => {
    const later = { ...position, createdAt: new Date(position.createdAt.getTime() + 1) };
    const other = { ...position, id: '3f2504e0-4f89-41d3-9a0c-0305e82c3302' };
    expect(new Set([encodeCursor(position), encodeCursor(later), encodeCursor(other)]).size).to.equal(3);
    expect(encodeCursor(position)).to.not.match(/^\d+$/);
  });

  function expectInvalid(cursor: string): void {
    let error: unknown;
    try {
      decodeCursor(cursor);
    } catch (e) {
      error = e;
    }
    expect(error, `cursor ${JSON.stringify(cursor)}`).to.be.instanceOf(ValidationError);
    expect((error as ValidationError).code).to.equal('VALIDATION_ERROR');
    expect((error as ValidationError).details).to.have.length(1);
    expect((error as ValidationError).details[0]!.field).to.equal('cursor');
  }

  const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8').toString('base64url');

  it('C-6: garbage is a ValidationError with field "cursor"', () => {
    for (const cursor of [
      '',
      '!!!',
      'abc def',
      'a'.repeat(513),
      '0',
      '20',
      b64('not json'),
      b64({ createdAt: '2026-03-01T09:15:42.123Z', id: 'x' }),
      b64(['2026-03-01T09:15:42.123Z']),
      b64(['2026-03-01T09:15:42.123Z', 'a', 'b']),
      b64(['2026-03-01T09:15:42.123Z', 42]),
      b64(['2026-03-01T09:15:42.123Z', '']),
      b64(['2026-03-01T09:15:42.123Z', 'x'.repeat(65)]),
      b64(['yesterday', 'x']),
      b64(['2026-03-01T09:15:42Z', 'x']),
      b64(['2026-02-30T00:00:00.000Z', 'x']),
      b64([1_772_356_542_123, 'x']),
      b64(null),
      `${encodeCursor(position)}=`,
      `${encodeCursor(position)}+`,
    ]) {
      expectInvalid(cursor);
    }
  });
});

describe('domain: organisation and member rules (C-13, C-21, C-24)', () => {
  it('C-13: slugs are 1..63 of a-z, 0-9 and "-", not starting or ending with "-"', () => {
    for (const ok of ['a', '0', 'acme', 'acme-corp', 'a-b-c', '9lives', 'x'.repeat(63), 'a--b']) {
      expect(SLUG_PATTERN.test(ok), ok).to.equal(true);
    }
    for (const bad of ['', '-a', 'a-', '-', 'Acme', 'acme_corp', 'acme corp', 'x'.repeat(64), 'é', 'acme.corp', 'acme\n']) {
      expect(SLUG_PATTERN.test(bad), JSON.stringify(bad)).to.equal(false);
    }
  });

  it('C-24: industry sections are the 21 NACE Rev. 2 letters A..U', () => {
    const letters = Object.keys(NACE_SECTIONS);
    expect(letters).to.deep.equal([...'ABCDEFGHIJKLMNOPQRSTU']);
    for (const l of letters) expect(isNaceSection(l), l).to.equal(true);
    for (const bad of ['V', 'a', 'AB', '', ' A', null, 1, undefined, 'toString', 'constructor']) {
      expect(isNaceSection(bad), String(bad)).to.equal(false);
    }
  });

  it('C-21: the e-mail check wants one @, no spaces and a dot in the domain', () => {
    for (const ok of ['a@b.c', 'Ada.Lovelace+ops@Example.COM', 'x@sub.domain.org']) expect(EMAIL_PATTERN.test(ok), ok).to.equal(true);
    for (const bad of ['', 'a', 'a@b', 'a b@c.d', 'a@b@c.d', '@b.c', 'a@.', 'a@b.c ']) {
      expect(EMAIL_PATTERN.test(bad), JSON.stringify(bad)).to.equal(false);
    }
  });
});

describe('domain: the error family', () => {
  it('every error carries its contract code, a message and details', () => {
    const decision = decide(61, 60, windowAt(0), 30_000);
    const cases = [
      [new ValidationError([{ field: 'name', issue: 'field required' }]), 'VALIDATION_ERROR'],
      [new UnauthorizedError(), 'UNAUTHORIZED'],
      [new ForbiddenError(), 'FORBIDDEN'],
      [new NotFoundError(), 'NOT_FOUND'],
      [new ConflictError('Slug already taken', [{ field: 'slug', issue: 'already taken' }]), 'CONFLICT'],
      [new RateLimitedError(decision), 'RATE_LIMIT_EXCEEDED'],
      [new UnavailableError(), 'SERVICE_UNAVAILABLE'],
      [new IdempotencyKeyReusedError(), 'IDEMPOTENCY_KEY_REUSED'],
      [new IdempotencyKeyInUseError(), 'IDEMPOTENCY_KEY_IN_USE'],
    ] as const;
    for (const [error, code] of cases) {
      expect(error.code).to.equal(code);
      expect(error).to.be.instanceOf(Error);
      expect(isDomainError(error)).to.equal(true);
      expect(error.message).to.be.a('string').and.not.equal('');
      expect(error.details).to.be.an('array');
      expect(error.name).to.equal(error.constructor.name);
    }
    expect(new UnauthorizedError().message).to.equal(UNAUTHORIZED_MESSAGE);
    expect(UNAUTHORIZED_MESSAGE).to.equal('Missing or invalid API key');
    expect(new ForbiddenError().message).to.equal('This operation requires a platform-org API key');
    expect(new ValidationError([{ field: 'limit', issue: 'x' }]).details).to.deep.equal([{ field: 'limit', issue: 'x' }]);
    expect(new NotFoundError().details).to.deep.equal([]);
    expect(new RateLimitedError(decision).decision).to.equal(decision);
    expect(new RateLimitedError(decision).message).to.include('30');
    expect(isDomainError(new Error('plain'))).to.equal(false);
    const cause = new Error('connection refused');
    expect((new UnavailableError(undefined, { cause }) as { cause?: unknown }).cause).to.equal(cause);
  });

  it('spec §7: every error carries the brand Symbol.for("cos.DomainError"), which isDomainError checks instead of instanceof', () => {
    const decision = decide(61, 60, windowAt(0), 30_000);
    const errors = [
      new ValidationError([{ field: 'name', issue: 'field required' }]),
      new UnauthorizedError(),
      new ForbiddenError(),
      new NotFoundError(),
      new ConflictError('Slug already taken', [{ field: 'slug', issue: 'already taken' }]),
      new RateLimitedError(decision),
      new UnavailableError(),
      new IdempotencyKeyReusedError(),
      new IdempotencyKeyInUseError(),
    ];
    expect(DOMAIN_ERROR_BRAND).to.equal(Symbol.for('cos.DomainError'));
    expect(errors.map((e) => e.code)).to.deep.equal([...DOMAIN_ERROR_CODES]);
    for (const e of errors) {
      expect((e as unknown as Record<symbol, unknown>)[Symbol.for('cos.DomainError')]).to.equal(true);
      expect(isDomainErrorWithCode(e, e.code)).to.equal(true);
      expect(isDomainErrorWithCode(e, e.code === 'CONFLICT' ? 'NOT_FOUND' : 'CONFLICT')).to.equal(false);
    }
    // structurally, from any module instance: the brand, a known code, a message, {field, issue} details
    const foreign = (code: string, extra: Record<string, unknown> = {}) =>
      Object.assign(new Error('m'), { [Symbol.for('cos.DomainError')]: true, code, details: [], ...extra });
    expect(isDomainError(foreign('CONFLICT'))).to.equal(true);
    expect(isDomainErrorWithCode(foreign('RATE_LIMIT_EXCEEDED', { decision }), 'RATE_LIMIT_EXCEEDED')).to.equal(true);
    expect(isDomainError(foreign('RATE_LIMIT_EXCEEDED'))).to.equal(false); // a 429 needs its decision
    expect(isDomainError(foreign('RATE_LIMIT_EXCEEDED', { decision: { ...decision, limit: '60' } }))).to.equal(false);
    expect(isDomainError(foreign('TEAPOT'))).to.equal(false);
    expect(isDomainError(foreign('CONFLICT', { details: 'slug' }))).to.equal(false);
    expect(isDomainError(foreign('CONFLICT', { details: [{ field: 'slug' }] }))).to.equal(false);
    expect(isDomainError(Object.assign(new Error('m'), { code: 'CONFLICT', details: [] }))).to.equal(false); // no brand
    expect(isDomainError(foreign('CONFLICT', { [Symbol.for('cos.DomainError')]: 'yes' }))).to.equal(false);
    for (const v of [null, undefined, 'CONFLICT', 42, {}]) expect(isDomainError(v)).to.equal(false);
  });
});
