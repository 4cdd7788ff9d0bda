/**
 * Symbolic HTTP requests for fuzzing: generated from a seed without knowing the live ids, then
 * resolved against the fixture of the running service. That keeps a seed's case sequence
 * reproducible while the ids differ from run to run.
 */
import fc from 'fast-check';

export type KeyRef = 'platform' | 'own' | 'other' | 'revoked' | 'expired' | 'unknown';
export type OrgRef = 'platform' | 'own' | 'other' | 'random' | 'upper' | { junk: string };
export type KeyIdRef = 'ownExtra' | 'otherExtra' | 'platformExtra' | 'random' | { junk: string };

export type AuthVariant =
  | { readonly kind: 'none' }
  | { readonly kind: 'exact' | 'lowerScheme' | 'upperScheme'; readonly key: KeyRef }
  | {
      readonly kind:
        | 'twoSpaces'
        | 'tab'
        | 'noSpace'
        | 'basic'
        | 'token'
        | 'truncated'
        | 'extraChar'
        | 'lowerKey'
        | 'schemeOnly'
        | 'keyOnly'
        | 'doubled'
        | 'quoted'
        | 'otherPrefix';
      readonly key: KeyRef;
    }
  | { readonly kind: 'overlong'; readonly length: number }
  | { readonly kind: 'raw'; readonly value: string };

export interface Fixture {
  readonly orgs: Record<'platform' | 'own' | 'other', string>;
  readonly keys: Record<KeyRef, string>;
  readonly extraKeyIds: Record<'ownExtra' | 'otherExtra' | 'platformExtra', readonly string[]>;
}

const sqlish = fc.constantFrom(
  "' OR '1'='1",
  "'; DROP TABLE organisations; --",
  '" OR ""="',
  '1; SELECT pg_sleep(10)',
  "admin'--",
  '%27%20OR%201=1',
  '${7*7}',
  '{{7*7}}',
  '<script>alert(1)</script>',
  '\u0000',
  '\\',
  'NaN',
  '-0',
  'null',
  '__proto__',
  'constructor',
);

/** Control characters (C0, DEL, C1; NUL first): a name or label holding one is 400 (C-11, C-13, C-23). */
export const CONTROL_CHARACTERS = ['\u0000', '\u0001', '\u0008', '\u000b', '\u001b', '\u001f', '\u007f', '\u0080', '\u0085', '\u009f', '\t', '\n', '\r'];

/** A short string with control characters somewhere inside (also at its ends). */
export const withControlCharacters = fc
  .tuple(fc.string({ maxLength: 10 }), fc.array(fc.constantFrom(...CONTROL_CHARACTERS), { minLength: 1, maxLength: 3 }), fc.string({ maxLength: 10 }))
  .map(([a, cs, b]) => `${a}${cs.join('x')}${b}`);

/** Strings that stress parsers: unicode (incl. astral and RTL), control chars, SQL-ish, long. */
export const nastyString = fc.oneof(
  { arbitrary: fc.string({ maxLength: 40 }), weight: 3 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 20 }), weight: 2 },
  { arbitrary: sqlish, weight: 3 },
  { arbitrary: withControlCharacters, weight: 2 },
  { arbitrary: fc.constantFrom('\u202Eevil', 'ﬀ', 'İ', '\uFEFF', '\uD83D\uDE00', '\uD800', 'a\u0301', ' '.repeat(10), '\t\n'), weight: 2 },
  { arbitrary: fc.integer({ min: 150, max: 70_000 }).map((n) => 'x'.repeat(n)), weight: 1 },
);

const pathSegment = fc.oneof(
  fc.webSegment(),
  sqlish.map((s) => pct(s)),
  fc.constantFrom('..', '.', '%2e%2e', '..%2f..%2fetc%2fpasswd', '%00', '%ff', '%', '%zz', 'ORGANISATIONS', 'api-keys', 'members', ''),
  fc.uuid().map((u) => u.toUpperCase()),
  fc.string({ unit: 'grapheme', maxLength: 10 }).map((s) => pct(s)),
);

export const orgRef: fc.Arbitrary<OrgRef> = fc.oneof(
  { arbitrary: fc.constantFrom<OrgRef>('platform', 'own', 'other', 'random', 'upper'), weight: 8 },
  { arbitrary: pathSegment.map((junk): OrgRef => ({ junk })), weight: 2 },
);

export const keyIdRef: fc.Arbitrary<KeyIdRef> = fc.oneof(
  { arbitrary: fc.constantFrom<KeyIdRef>('ownExtra', 'otherExtra', 'platformExtra', 'random'), weight: 8 },
  { arbitrary: pathSegment.map((junk): KeyIdRef => ({ junk })), weight: 2 },
);

export const keyRef: fc.Arbitrary<KeyRef> = fc.oneof(
  { arbitrary: fc.constantFrom<KeyRef>('platform', 'own', 'other'), weight: 4 },
  { arbitrary: fc.constantFrom<KeyRef>('revoked', 'expired', 'unknown'), weight: 1 },
);

export const authVariant: fc.Arbitrary<AuthVariant> = fc.oneof(
  { arbitrary: fc.constant<AuthVariant>({ kind: 'none' }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constantFrom('exact' as const, 'lowerScheme' as const, 'upperScheme' as const), key: keyRef }), weight: 24 },
  {
    arbitrary: fc.record({
      kind: fc.constantFrom(
        'twoSpaces' as const,
        'tab' as const,
        'noSpace' as const,
        'basic' as const,
        'token' as const,
        'truncated' as const,
        'extraChar' as const,
        'lowerKey' as const,
        'schemeOnly' as const,
        'keyOnly' as const,
        'doubled' as const,
        'quoted' as const,
        'otherPrefix' as const,
      ),
      key: keyRef,
    }),
    weight: 5,
  },
  { arbitrary: fc.integer({ min: 58, max: 12_000 }).map((length): AuthVariant => ({ kind: 'overlong', length })), weight: 1 },
  { arbitrary: nastyString.filter((s) => s.length < 8000).map((value): AuthVariant => ({ kind: 'raw', value })), weight: 2 },
);

/**
 * Header values travel as bytes: a JS string is sent as the latin1 view of its UTF-8 bytes.
 * Control characters (other than tab) cannot be sent by any conforming client; they become '?'.
 */
export function asHeaderValue(s: string): string {
  return Buffer.from(s, 'utf8').toString('latin1').replace(/[\x00-\x08\x0a-\x1f\x7f]/g, '?');
}

/** Percent-encodes every byte of the UTF-8 form except unreserved characters (lone surrogates too). */
export function pct(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The Authorization header value for a variant (undefined: no header). */
export function authorization(variant: AuthVariant, fixture: Fixture): string | undefined {
  switch (variant.kind) {
    case 'none':
      return undefined;
    case 'overlong':
      return `Bearer svc_live_${'A'.repeat(variant.length)}`;
    case 'raw':
      return asHeaderValue(variant.value);
    default:
  }
  const key = fixture.keys[variant.key];
  switch (variant.kind) {
    case 'exact':
      return `Bearer ${key}`;
    case 'lowerScheme':
      return `bearer ${key}`;
    case 'upperScheme':
      return `BEARER ${key}`;
    case 'twoSpaces':
      return `Bearer  ${key}`;
    case 'tab':
      return `Bearer\t${key}`;
    case 'noSpace':
      return `Bearer${key}`;
    case 'basic':
      return `Basic ${Buffer.from(`${key}:`).toString('base64')}`;
    case 'token':
      return `Token ${key}`;
    case 'truncated':
      return `Bearer ${key.slice(0, -1)}`;
    case 'extraChar':
      return `Bearer ${key}A`;
    case 'lowerKey':
      return `Bearer ${key.toLowerCase()}`;
    case 'schemeOnly':
      return 'Bearer';
    case 'keyOnly':
      return key;
    case 'doubled':
      return `Bearer ${key}, Bearer ${key}`;
    case 'quoted':
      return `Bearer "${key}"`;
    case 'otherPrefix':
      return `Bearer ${key.replace(/^svc_(live|test)_/, 'svc_prod_')}`;
  }
}

/** True when the variant must authenticate (C-32: scheme case-insensitive, exactly one space, active key). */
export function authenticates(variant: AuthVariant): boolean {
  return (
    (variant.kind === 'exact' || variant.kind === 'lowerScheme' || variant.kind === 'upperScheme') &&
    (variant.key === 'platform' || variant.key === 'own' || variant.key === 'other')
  );
}

export function resolveOrg(ref: OrgRef, fixture: Fixture, random: string): string {
  if (typeof ref === 'object') return ref.junk;
  if (ref === 'random') return random;
  if (ref === 'upper') return fixture.orgs.own.toUpperCase();
  return fixture.orgs[ref];
}

export function resolveKeyId(ref: KeyIdRef, fixture: Fixture, random: string, pick: number): string {
  if (typeof ref === 'object') return ref.junk;
  if (ref === 'random') return random;
  const pool = fixture.extraKeyIds[ref];
  return pool[pick % pool.length] ?? random;
}

/** Path templates: the twelve operations' paths, near misses and junk. */
export type PathShape =
  | { readonly kind: 'health' | 'version' | 'orgs' }
  | { readonly kind: 'org' | 'members' | 'keys'; readonly org: OrgRef }
  | { readonly kind: 'key'; readonly org: OrgRef; readonly keyId: KeyIdRef }
  | { readonly kind: 'junk'; readonly path: string };

const junkPath = fc.oneof(
  fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
  fc.constantFrom(
    '/',
    '/v1',
    '/v1/',
    '/v2/organisations',
    '/V1/ORGANISATIONS',
    '//v1//organisations',
    '/v1/organisations/',
    '/v1/organisations//api-keys',
    '/v1/../v1/organisations',
    '/v1/organisations/../health',
    '/v1/./version',
    '/v1/%2e%2e/%2e%2e/etc/passwd',
    '/v1/organisations/%2F..%2F..%2Fetc%2Fpasswd',
    '/v1/health/',
    '/v1/health/..',
    '/v1/version.json',
    '/v1/organisations.json',
    '/v1/organisations;jsessionid=1',
    '/v1/organisations%00',
    '/v1/organisations/%',
    '/favicon.ico',
    '/.env',
    '/../../../../etc/passwd',
    '/v1\\organisations',
  ),
  fc.array(pathSegment, { minLength: 1, maxLength: 6 }).map((segs) => `/v1/${segs.join('/')}`),
);

export const pathShape: fc.Arbitrary<PathShape> = fc.oneof(
  { arbitrary: fc.constantFrom<PathShape>({ kind: 'health' }, { kind: 'version' }), weight: 1 },
  { arbitrary: fc.constant<PathShape>({ kind: 'orgs' }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constantFrom('org' as const, 'members' as const, 'keys' as const), org: orgRef }), weight: 8 },
  { arbitrary: fc.record({ kind: fc.constant('key' as const), org: orgRef, keyId: keyIdRef }), weight: 4 },
  { arbitrary: junkPath.map((path): PathShape => ({ kind: 'junk', path })), weight: 3 },
);

export function resolvePath(shape: PathShape, fixture: Fixture, randomA: string, randomB: string, pick: number): string {
  switch (shape.kind) {
    case 'health':
      return '/v1/health';
    case 'version':
      return '/v1/version';
    case 'orgs':
      return '/v1/organisations';
    case 'org':
      return `/v1/organisations/${resolveOrg(shape.org, fixture, randomA)}`;
    case 'members':
      return `/v1/organisations/${resolveOrg(shape.org, fixture, randomA)}/members`;
    case 'keys':
      return `/v1/organisations/${resolveOrg(shape.org, fixture, randomA)}/api-keys`;
    case 'key':
      return `/v1/organisations/${resolveOrg(shape.org, fixture, randomA)}/api-keys/${resolveKeyId(shape.keyId, fixture, randomB, pick)}`;
    case 'junk':
      return shape.path;
  }
}

const queryValue = fc.oneof(
  fc.constantFrom('0', '1', '2', '20', '100', '101', '-1', '1.5', '1e2', 'abc', '', ' 5', '0x10', '99999999999999999999', 'null', '[]'),
  fc.base64String({ maxLength: 40 }).map((s) => s.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')),
  fc
    .tuple(fc.string({ maxLength: 30 }), fc.uuid())
    .map(([a, b]) => Buffer.from(JSON.stringify([a, b])).toString('base64url')),
  fc.constant(Buffer.from(JSON.stringify(['2020-01-01T00:00:00.000Z', '00000000-0000-4000-8000-000000000000'])).toString('base64url')),
  // A well-formed position whose id part holds NUL or other control characters (C-6).
  fc
    .tuple(fc.uuid(), withControlCharacters, fc.boolean())
    .map(([u, c, append]) => Buffer.from(JSON.stringify(['2020-01-01T00:00:00.000Z', append ? `${u}${c}` : c])).toString('base64url')),
  fc.constant(Buffer.from(JSON.stringify({ __proto__: { polluted: true } })).toString('base64url')),
  nastyString.filter((s) => s.length < 3000),
);

export const queryString = fc.oneof(
  { arbitrary: fc.constant(''), weight: 4 },
  {
    arbitrary: fc
      .array(
        fc.tuple(
          fc.oneof(fc.constantFrom('limit', 'cursor', 'limit', 'cursor', '__proto__', 'constructor', 'prototype', 'limit[]', '__proto__[polluted]', 'offset', 'page'), fc.string({ maxLength: 10 })),
          queryValue,
        ),
        { minLength: 1, maxLength: 4 },
      )
      .map((pairs) => `?${pairs.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&')}`),
    weight: 4,
  },
  { arbitrary: fc.webQueryParameters().map((q) => (q === '' ? '' : `?${q}`)), weight: 1 },
  { arbitrary: fc.constantFrom('?', '?&&&', '?limit', '?limit=', '?=1', '?limit=1&limit=2', '?cursor=%', '?%zz=1'), weight: 1 },
);

const fieldName = fc.oneof(
  { arbitrary: fc.constantFrom('name', 'slug', 'label', 'expires_at', 'environment'), weight: 8 },
  { arbitrary: fc.constantFrom('industry_section', 'is_system', 'id', 'key', 'key_prefix', 'digest', 'organisation_id', 'created_at', 'revoked_at', 'status', 'is_active'), weight: 3 },
  { arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'), weight: 3 },
  { arbitrary: fc.string({ maxLength: 15 }), weight: 2 },
);

const plausible = fc.oneof(
  fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,20}[a-z0-9]$/),
  fc.string({ minLength: 1, maxLength: 40 }),
  fc.constantFrom('live', 'test', 'prod', 'A', 'Z', '2099-01-01T00:00:00Z', '2000-01-01T00:00:00Z', 'tomorrow', '2099-13-45T99:99:99Z'),
  fc.date({ min: new Date('1970-01-01'), max: new Date('2200-01-01'), noInvalidDate: true }).map((d) => d.toISOString()),
);

/** A JSON value to put under a field. */
const fieldValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: plausible, weight: 6 },
  { arbitrary: nastyString, weight: 3 },
  {
    arbitrary: fc.constantFrom(
      null,
      true,
      false,
      0,
      -0,
      1,
      -1,
      1.5,
      1e308,
      -1e308,
      Number.MAX_SAFE_INTEGER + 2,
      5e-324,
      [],
      {},
      [1, 2],
      { nested: { deeper: 'x' } },
      { __proto__: { polluted: 'yes' } },
    ),
    weight: 2,
  },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 2 },
);

export type BodyShape =
  | { readonly kind: 'none' }
  | { readonly kind: 'object'; readonly fields: readonly (readonly [string, unknown])[] }
  | { readonly kind: 'json'; readonly value: unknown }
  | { readonly kind: 'deep'; readonly depth: number; readonly open: string; readonly close: string }
  | { readonly kind: 'hugeNumber'; readonly digits: number; readonly field: string }
  | { readonly kind: 'padded'; readonly total: number }
  | { readonly kind: 'raw'; readonly text: string };

export const bodyShape: fc.Arbitrary<BodyShape> = fc.oneof(
  { arbitrary: fc.constant<BodyShape>({ kind: 'none' }), weight: 3 },
  {
    arbitrary: fc
      .array(fc.tuple(fieldName, fieldValue), { maxLength: 5 })
      .map((fields): BodyShape => ({ kind: 'object', fields })),
    weight: 10,
  },
  { arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value): BodyShape => ({ kind: 'json', value })), weight: 2 },
  {
    arbitrary: fc
      .record({ depth: fc.integer({ min: 50, max: 20_000 }), brace: fc.boolean() })
      .map(({ depth, brace }): BodyShape => (brace ? { kind: 'deep', depth, open: '{"name":', close: '}' } : { kind: 'deep', depth, open: '[', close: ']' })),
    weight: 1,
  },
  {
    arbitrary: fc
      .record({ digits: fc.integer({ min: 20, max: 5000 }), field: fc.constantFrom('name', 'label', 'slug', 'expires_at') })
      .map(({ digits, field }): BodyShape => ({ kind: 'hugeNumber', digits, field })),
    weight: 1,
  },
  { arbitrary: fc.integer({ min: 65_000, max: 66_000 }).map((total): BodyShape => ({ kind: 'padded', total })), weight: 1 },
  {
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          '{',
          '}',
          '{"name":}',
          '{"name":"a",}',
          "{'name':'a'}",
          'null',
          '[]',
          '"name"',
          '1',
          'true',
          '\uFEFF{}',
          '{"name":"a","name":"b"}',
          '{"__proto__":{"polluted":"yes"},"name":"x"}',
          '{"constructor":{"prototype":{"polluted":"yes"}}}',
          'name=a&slug=b',
          '',
          ' ',
          '{"name":"\\ud800"}',
          '{"name":NaN}',
          '{"name":1e999}',
        ),
        fc.string({ maxLength: 50 }),
      )
      .map((text): BodyShape => ({ kind: 'raw', text })),
    weight: 3,
  },
);

export function renderBody(shape: BodyShape): string | undefined {
  switch (shape.kind) {
    case 'none':
      return undefined;
    case 'object': {
      // Build the text by hand so that "__proto__" stays an own key in the JSON.
      const parts = shape.fields.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`);
      return `{${parts.join(',')}}`;
    }
    case 'json':
      return JSON.stringify(shape.value) ?? 'null';
    case 'deep':
      return shape.open.repeat(shape.depth) + '1' + shape.close.repeat(shape.depth);
    case 'hugeNumber':
      return `{${JSON.stringify(shape.field)}:${'9'.repeat(shape.digits)}}`;
    case 'padded': {
      const prefix = '{"name":"';
      const suffix = '","slug":"padded"}';
      return prefix + 'p'.repeat(Math.max(0, shape.total - prefix.length - suffix.length)) + suffix;
    }
    case 'raw':
      return shape.text;
  }
}

export const contentType = fc.oneof(
  { arbitrary: fc.constant<string | undefined>('application/json'), weight: 10 },
  {
    arbitrary: fc.constantFrom<string | undefined>(
      undefined,
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/problem+json',
      'application/merge-patch+json',
      'text/plain',
      'text/json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
      'application/json; charset=latin1',
      '*/*',
      '',
      'application/jsonx',
    ),
    weight: 3,
  },
);

/**
 * Methods Node's HTTP parser knows (http.METHODS; case-sensitive). Others ("FOO", "get") never
 * reach the service: the parser rejects them, see the http-layer tests.
 */
export const method = fc.oneof(
  { arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'), weight: 12 },
  { arbitrary: fc.constantFrom('HEAD', 'OPTIONS', 'PROPFIND', 'PURGE', 'M-SEARCH', 'LINK', 'REPORT', 'SEARCH', 'QUERY'), weight: 2 },
);

export const extraHeaders = fc.record(
  {
    'x-request-id': fc.oneof(fc.uuid(), fc.string({ maxLength: 200 }).map(asHeaderValue), fc.constant('a'.repeat(129))),
    accept: fc.constantFrom('*/*', 'application/json', 'text/html', 'application/xml', ''),
    'accept-encoding': fc.constantFrom('gzip', 'br', 'identity', 'x-unknown'),
    'x-forwarded-for': fc.constantFrom('1.2.3.4', '127.0.0.1, 10.0.0.1', 'garbage', '::1'),
    'x-http-method-override': fc.constantFrom('DELETE', 'PUT'),
    'content-encoding': fc.constantFrom('gzip', 'deflate', 'identity', 'x-unknown'),
  },
  { requiredKeys: [] },
);

export interface RequestShape {
  readonly method: string;
  readonly path: PathShape;
  readonly query: string;
  readonly auth: AuthVariant;
  readonly contentType: string | undefined;
  readonly body: BodyShape;
  readonly headers: Record<string, string>;
  readonly randomA: string;
  readonly randomB: string;
  readonly pick: number;
}

/** Methods each path kind answers (so most cases get past routing: C-9 answers 404/405 first). */
const METHODS_OF: Record<PathShape['kind'], readonly string[]> = {
  health: ['GET'],
  version: ['GET'],
  orgs: ['GET', 'POST'],
  org: ['GET', 'PUT', 'PATCH'],
  members: ['GET'],
  keys: ['GET', 'POST'],
  key: ['GET', 'PATCH', 'DELETE'],
  junk: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
};

/** A request that is, with luck, close to valid: the right fields with plausible values, one twist. */
const nearValidBody: fc.Arbitrary<(which: 'org' | 'key' | 'rename') => BodyShape> = fc
  .record({
    // A small pool of slugs makes duplicates (409, C-13) as likely as fresh ones.
    slug: fc.oneof(fc.stringMatching(/^[a-z0-9][a-z0-9-]{2,20}[a-z0-9]$/), fc.constantFrom('dup-a', 'dup-b', 'dup-c')),
    name: fc.oneof({ arbitrary: fc.string({ minLength: 1, maxLength: 30 }).filter((x) => x.trim() !== ''), weight: 3 }, { arbitrary: nastyString, weight: 1 }, { arbitrary: withControlCharacters, weight: 1 }),
    label: fc.oneof({ arbitrary: fc.string({ minLength: 1, maxLength: 30 }).filter((x) => x.trim() !== ''), weight: 3 }, { arbitrary: nastyString, weight: 1 }, { arbitrary: withControlCharacters, weight: 1 }),
    env: fc.option(fc.constantFrom('live', 'test', 'prod'), { nil: undefined }),
    expires: fc.option(fc.constantFrom('2099-01-01T00:00:00Z', '2000-01-01T00:00:00Z', 'soon'), { nil: undefined }),
    twist: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 2 },
      { arbitrary: fc.tuple(fieldName, fieldValue), weight: 1 },
    ),
  })
  .map(({ name, slug, label, env, expires, twist }) => (which: 'org' | 'key' | 'rename'): BodyShape => {
    const fields: [string, unknown][] =
      which === 'org' ? [['name', name], ['slug', slug]] : which === 'key' ? [['label', label]] : [['name', name]];
    if (which === 'key' && env !== undefined) fields.push(['environment', env]);
    if (which === 'key' && expires !== undefined) fields.push(['expires_at', expires]);
    if (twist !== undefined) fields.push(twist);
    return { kind: 'object', fields };
  });

export const requestShape: fc.Arbitrary<RequestShape> = fc.record({
  path: pathShape,
  methodPick: fc.oneof({ arbitrary: fc.constant<'fit' | 'any'>('fit'), weight: 4 }, { arbitrary: fc.constant<'fit' | 'any'>('any'), weight: 1 }),
  methodIndex: fc.nat(10),
  anyMethod: method,
  nearValid: fc.boolean(),
  validBody: nearValidBody,
  query: queryString,
  auth: authVariant,
  contentType,
  body: bodyShape,
  headers: extraHeaders,
  randomA: fc.uuid(),
  randomB: fc.uuid(),
  pick: fc.nat(1000),
}).map(({ path, methodPick, methodIndex, anyMethod, nearValid, validBody, body, ...rest }): RequestShape => {
  const fitting = METHODS_OF[path.kind];
  const m = methodPick === 'fit' ? (fitting[methodIndex % fitting.length] ?? 'GET') : anyMethod;
  const writes = m === 'POST' || m === 'PUT' || m === 'PATCH';
  const which = path.kind === 'orgs' ? 'org' : path.kind === 'keys' || path.kind === 'key' ? 'key' : 'rename';
  return { ...rest, path, method: m, body: writes && nearValid ? validBody(which) : body };
});

/**
 * An organisation's creation as a client that reads the contract sends it: POST with the platform
 * key, JSON, a near-valid body (its slug often one of a small pool, so duplicates come too). The
 * HTTP fuzz mixes it into its further rounds, drawn only while an outcome of a valid creation (201,
 * 409) is unseen: requestShape alone makes a valid creation in about one case in a thousand, and a
 * duplicate in fewer.
 */
export const creationShape: fc.Arbitrary<RequestShape> = fc
  .record({ validBody: nearValidBody, randomA: fc.uuid(), randomB: fc.uuid(), pick: fc.nat(1000) })
  .map(({ validBody, ...rest }): RequestShape => ({
    ...rest,
    method: 'POST',
    path: { kind: 'orgs' },
    query: '',
    auth: { kind: 'exact', key: 'platform' },
    contentType: 'application/json',
    body: validBody('org'),
    headers: {},
  }));

/**
 * HTTP framing no well-behaved client sends: a Transfer-Encoding other than chunked,
 * malformed chunks, an Expect other than 100-continue, no or an empty Host. Sent as raw bytes.
 */
export interface FramingShape {
  readonly transferEncoding: string | undefined;
  /** With chunked: the body as one good chunk, or followed by a malformed one. */
  readonly badChunk: boolean;
  readonly expect: string | undefined;
  readonly host: 'present' | 'absent' | 'empty';
}

export const framingShape: fc.Arbitrary<FramingShape> = fc.record({
  transferEncoding: fc.constantFrom(undefined, 'chunked', 'identity', 'gzip', 'foo', 'gzip, chunked', 'chunked, identity', 'CHUNKED'),
  badChunk: fc.boolean(),
  expect: fc.constantFrom(undefined, undefined, '100-continue', 'foo', '200-ok'),
  host: fc.constantFrom<'present' | 'absent' | 'empty'>('present', 'present', 'absent', 'empty'),
});

/** The request as raw bytes: request line, headers (the framing's, then the rest), body. */
export function renderRaw(o: { method: string; path: string; headers?: Readonly<Record<string, string>>; body?: string | Buffer }, f: FramingShape): string {
  const lines = [`${o.method} ${o.path} HTTP/1.1`];
  if (f.host === 'present') lines.push('Host: localhost');
  if (f.host === 'empty') lines.push('Host: ');
  if (f.expect !== undefined) lines.push(`Expect: ${f.expect}`);
  for (const [k, v] of Object.entries(o.headers ?? {})) lines.push(`${k}: ${v}`);
  const body = o.body === undefined ? '' : Buffer.from(o.body).toString('latin1');
  let payload = '';
  if (f.transferEncoding !== undefined) {
    lines.push(`Transfer-Encoding: ${f.transferEncoding}`);
    const chunk = body.length > 0 ? `${body.length.toString(16)}\r\n${body}\r\n` : '';
    payload = f.badChunk ? `${chunk}zz\r\n` : `${chunk}0\r\n\r\n`;
  } else if (body.length > 0) {
    lines.push(`Content-Length: ${body.length}`);
    payload = body;
  }
  lines.push('Connection: close');
  return `${lines.join('\r\n')}\r\n\r\n${payload}`;
}
