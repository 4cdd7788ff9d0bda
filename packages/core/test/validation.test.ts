import { expect } from 'chai';
import fc from 'fast-check';
import {
  AUDIT_KINDS,
  DEFAULT_LIMIT,
  ISSUE_EXPIRES_AT,
  ISSUE_EMAIL,
  ISSUE_EXTRA_FIELD,
  ISSUE_FIELD_REQUIRED,
  ISSUE_LIMIT,
  ISSUE_NAME,
  ISSUE_NOT_AN_OBJECT,
  ISSUE_SLUG,
  ValidationError,
  encodeCursor,
  validateAddMember,
  validateAuditQuery,
  validateCreateOrganisation,
  validateIssueKey,
  validateListQuery,
  validatePatchOrganisation,
  validateReplaceOrganisation,
  validateSection,
  validateUuid,
  type ErrorDetail,
} from '@cos/core';

const NOW = new Date('2026-06-10T12:00:30.000Z');

/** The ValidationError thrown by `fn`, or a failed assertion. */
function failure(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ValidationError);
    return e as ValidationError;
  }
  expect.fail('expected a ValidationError');
}

function details(fn: () => unknown): ErrorDetail[] {
  return [...failure(fn).details];
}

/** Details as a {field: issue} map, after checking there is one detail per field. */
function byField(fn: () => unknown): Record<string, string> {
  const d = details(fn);
  const fields = d.map((x) => x.field);
  expect(new Set(fields).size, `one detail per field in ${JSON.stringify(d)}`).to.equal(fields.length);
  return Object.fromEntries(d.map((x) => [x.field, x.issue]));
}

describe('validation: organisation bodies', () => {
  it('C-11: missing required fields are all reported at once as "field required"', () => {
    expect(byField(() => validateCreateOrganisation({}))).to.deep.equal({
      name: ISSUE_FIELD_REQUIRED,
      slug: ISSUE_FIELD_REQUIRED,
    });
  });

  it('C-11: every failing field at once, one detail each, unknown + missing + invalid together', () => {
    expect(byField(() => validateCreateOrganisation({ name: 42, colour: 'red', size: 3 }))).to.deep.equal({
      name: ISSUE_NAME,
      slug: ISSUE_FIELD_REQUIRED,
      colour: ISSUE_EXTRA_FIELD,
      size: ISSUE_EXTRA_FIELD,
    });
  });

  it('C-11: a name that fails several checks still yields a single detail', () => {
    expect(details(() => validateCreateOrganisation({ name: ' '.repeat(300), slug: 'ok' }))).to.deep.equal([
      { field: 'name', issue: ISSUE_NAME },
    ]);
  });

  it('C-12: industry_section and is_system in POST are extra fields', () => {
    expect(
      byField(() => validateCreateOrganisation({ name: 'Acme', slug: 'acme', industry_section: 'C', is_system: true })),
    ).to.deep.equal({ industry_section: ISSUE_EXTRA_FIELD, is_system: ISSUE_EXTRA_FIELD });
  });

  it('C-12: id in POST is an extra field too', () => {
    expect(byField(() => validateCreateOrganisation({ id: 'x', name: 'Acme', slug: 'acme' }))).to.deep.equal({
      id: ISSUE_EXTRA_FIELD,
    });
  });

  it('C-12: slug, industry_section, is_system, id in PUT are extra fields', () => {
    expect(
      byField(() =>
        validateReplaceOrganisation({ name: 'Acme', slug: 'acme', industry_section: 'C', is_system: false, id: '1' }),
      ),
    ).to.deep.equal({
      slug: ISSUE_EXTRA_FIELD,
      industry_section: ISSUE_EXTRA_FIELD,
      is_system: ISSUE_EXTRA_FIELD,
      id: ISSUE_EXTRA_FIELD,
    });
  });

  it('C-12: slug, industry_section, is_system, id in PATCH are extra fields', () => {
    for (const field of ['slug', 'industry_section', 'is_system', 'id']) {
      expect(details(() => validatePatchOrganisation({ [field]: 'x' }))).to.deep.equal([
        { field, issue: ISSUE_EXTRA_FIELD },
      ]);
    }
  });

  it('C-14: PUT requires name', () => {
    expect(details(() => validateReplaceOrganisation({}))).to.deep.equal([
      { field: 'name', issue: ISSUE_FIELD_REQUIRED },
    ]);
  });

  it('C-14: PATCH accepts the empty object', () => {
    expect(validatePatchOrganisation({})).to.deep.equal({});
  });

  it('C-13: names are trimmed and must be 1 to 200 characters', () => {
    expect(validateCreateOrganisation({ name: '  Acme Ltd \t', slug: 'acme' }).name).to.equal('Acme Ltd');
    expect(validateReplaceOrganisation({ name: 'x'.repeat(200) }).name).to.have.length(200);
    expect(validatePatchOrganisation({ name: `  ${'x'.repeat(200)}  ` }).name).to.have.length(200);
    for (const bad of ['', '   ', 'x'.repeat(201), null, 7, true, ['a'], { a: 1 }]) {
      expect(details(() => validateReplaceOrganisation({ name: bad }))).to.deep.equal([
        { field: 'name', issue: ISSUE_NAME },
      ]);
    }
  });

  it('C-13: slug is 1..63 of a-z, 0-9, "-", not starting or ending with "-"', () => {
    for (const good of ['a', '0', 'acme', 'acme-2', 'a-b-c', 'x'.repeat(63)]) {
      expect(validateCreateOrganisation({ name: 'n', slug: good }).slug).to.equal(good);
    }
    for (const bad of ['', '-acme', 'acme-', 'Acme', 'ac_me', 'ac me', 'x'.repeat(64), 'é', 5, null]) {
      expect(details(() => validateCreateOrganisation({ name: 'n', slug: bad }))).to.deep.equal([
        { field: 'slug', issue: ISSUE_SLUG },
      ]);
    }
  });

  it('a body that is not a JSON object is field "body", "must be a JSON object"', () => {
    for (const body of [null, undefined, [], [{ name: 'a' }], 'name=a', 42, true]) {
      for (const validate of [validateCreateOrganisation, validateReplaceOrganisation, validatePatchOrganisation]) {
        expect(details(() => validate(body))).to.deep.equal([{ field: 'body', issue: ISSUE_NOT_AN_OBJECT }]);
      }
      expect(details(() => validateIssueKey(body, NOW))).to.deep.equal([{ field: 'body', issue: ISSUE_NOT_AN_OBJECT }]);
      expect(details(() => validateAddMember(body))).to.deep.equal([{ field: 'body', issue: ISSUE_NOT_AN_OBJECT }]);
    }
  });

  it('prototype-pollution keys from a parsed JSON body are extra fields and pollute nothing', () => {
    const body = JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "name": "a", "slug": "a"}');
    expect(details(() => validateCreateOrganisation(body))).to.deep.equal([
      { field: '__proto__', issue: ISSUE_EXTRA_FIELD },
      { field: 'constructor', issue: ISSUE_EXTRA_FIELD },
    ]);
    expect(({} as Record<string, unknown>)['polluted']).to.equal(undefined);
  });

  it('an object without prototype is validated like any other', () => {
    const body = Object.assign(Object.create(null) as object, { name: 'Acme', slug: 'acme' });
    expect(validateCreateOrganisation(body)).to.deep.equal({ name: 'Acme', slug: 'acme' });
  });

  it('classification section: A..U in any case or "none", else field "section"', () => {
    expect(validateSection('c')).to.equal('C');
    expect(validateSection('U')).to.equal('U');
    expect(validateSection('none')).to.equal(null);
    expect(validateSection('NONE')).to.equal(null);
    for (const bad of ['V', 'Z', '', 'AB', 'null', 5, null]) {
      expect(fieldsOfError(() => validateSection(bad))).to.deep.equal(['section']);
    }
  });
});

function fieldsOfError(fn: () => unknown): string[] {
  return details(fn).map((d) => d.field);
}

describe('validation: issue key body', () => {
  it('C-23: label is required, trimmed, 1..100 characters', () => {
    expect(details(() => validateIssueKey({}, NOW))).to.deep.equal([{ field: 'label', issue: ISSUE_FIELD_REQUIRED }]);
    expect(validateIssueKey({ label: '  ci  ' }, NOW).label).to.equal('ci');
    expect(validateIssueKey({ label: 'x'.repeat(100) }, NOW).label).to.have.length(100);
    for (const bad of ['', '  ', 'x'.repeat(101), 3, null]) {
      expect(fieldsOfError(() => validateIssueKey({ label: bad }, NOW))).to.deep.equal(['label']);
    }
  });

  it('C-23: environment defaults to live, accepts test, rejects anything else', () => {
    expect(validateIssueKey({ label: 'a' }, NOW)).to.deep.equal({ label: 'a', expiresAt: null, environment: 'live', scopes: null, expiresAtGiven: false, metadata: {}, rateLimitPerMinute: null });
    expect(validateIssueKey({ label: 'a', environment: 'test' }, NOW).environment).to.equal('test');
    for (const bad of ['prod', 'LIVE', '', 1, null]) {
      expect(fieldsOfError(() => validateIssueKey({ label: 'a', environment: bad }, NOW))).to.deep.equal(['environment']);
    }
  });

  it('C-23: expires_at is an ISO 8601 timestamp in the future', () => {
    expect(validateIssueKey({ label: 'a', expires_at: '2026-06-10T12:00:31Z' }, NOW).expiresAt).to.deep.equal(
      new Date('2026-06-10T12:00:31.000Z'),
    );
    expect(validateIssueKey({ label: 'a', expires_at: '2027-01-01T02:00:00.123+02:00' }, NOW).expiresAt).to.deep.equal(
      new Date('2027-01-01T00:00:00.123Z'),
    );
    expect(validateIssueKey({ label: 'a', expires_at: null }, NOW).expiresAt).to.equal(null);
    const bad = [
      '2026-06-10T12:00:30Z', // now is not the future
      '2020-01-01T00:00:00Z',
      'tomorrow',
      '2027-01-01',
      '2027-13-01T00:00:00Z',
      '',
      1893456000000,
      true,
    ];
    for (const expires_at of bad) {
      expect(details(() => validateIssueKey({ label: 'a', expires_at }, NOW))).to.deep.equal([
        { field: 'expires_at', issue: ISSUE_EXPIRES_AT },
      ]);
    }
  });

  it('C-11: unknown fields and several failures in the issuance body come together', () => {
    expect(byField(() => validateIssueKey({ expires_at: 'x', environment: 'x', key: 'x' }, NOW))).to.deep.equal({
      label: ISSUE_FIELD_REQUIRED,
      expires_at: ISSUE_EXPIRES_AT,
      environment: "must be 'live' or 'test'",
      key: ISSUE_EXTRA_FIELD,
    });
  });
});

describe('validation: member body', () => {
  it('C-21: email is required, trimmed, one "@", at most 254 characters', () => {
    expect(validateAddMember({ email: '  Ada@Example.org ' })).to.deep.equal({ email: 'Ada@Example.org' });
    expect(details(() => validateAddMember({}))).to.deep.equal([{ field: 'email', issue: ISSUE_FIELD_REQUIRED }]);
    const long = `${'a'.repeat(250)}@b.io`;
    for (const bad of ['ada', 'ada@', '@example.org', 'a b@example.org', 'ada@example', long, 5]) {
      expect(fieldsOfError(() => validateAddMember({ email: bad }))).to.deep.equal(['email']);
    }
    expect(byField(() => validateAddMember({ email: 'a@b.io', role: 'admin' }))).to.deep.equal({
      role: ISSUE_EXTRA_FIELD,
    });
  });

  it('C-121: an e-mail address holding U+0000 or another control character is refused on field "email" with its own issue', () => {
    for (const bad of ['a\u0000b@example.org', 'ab@example.org\u0000', 'a\u0001@example.org', 'a@exa\u009fmple.org']) {
      expect(byField(() => validateAddMember({ email: bad })), JSON.stringify(bad)).to.deep.equal({ email: ISSUE_EMAIL });
    }
  });
});

describe('validation: list queries', () => {
  it('C-5: limit defaults to 20 and accepts integers 1..100, as numbers or query-string digits', () => {
    expect(validateListQuery({})).to.deep.equal({ limit: DEFAULT_LIMIT, after: null });
    expect(validateListQuery(undefined)).to.deep.equal({ limit: DEFAULT_LIMIT, after: null });
    expect(validateListQuery({ limit: '20' }).limit).to.equal(20);
    expect(validateListQuery({ limit: '1' }).limit).to.equal(1);
    expect(validateListQuery({ limit: 100 }).limit).to.equal(100);
    expect(validateListQuery({ limit: '100' }).limit).to.equal(100);
  });

  it('C-5: limit "abc", "1.5", 1.5, 0, 101, arrays and others are 400 field limit', () => {
    const bad: unknown[] = ['abc', '1.5', 1.5, 0, '0', 101, '101', -1, '-1', '', ' 5', '5 ', '1e1', ['1', '2'], ['5'], null, true, {}, 1e308, Number.NaN, Infinity];
    for (const limit of bad) {
      expect(details(() => validateListQuery({ limit })), JSON.stringify(limit)).to.deep.equal([
        { field: 'limit', issue: ISSUE_LIMIT },
      ]);
    }
  });

  it('C-5: unknown query parameters are ignored', () => {
    expect(validateListQuery({ limit: '5', sort: 'desc', page: ['1', '2'] })).to.deep.equal({ limit: 5, after: null });
  });

  it('C-6: a cursor made by encodeCursor decodes to its keyset position', () => {
    const position = { createdAt: new Date('2026-06-10T12:00:00.000Z'), id: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b' };
    expect(validateListQuery({ cursor: encodeCursor(position) })).to.deep.equal({ limit: 20, after: position });
  });

  it('C-6: a cursor that does not decode, or is not one string, is 400 field cursor', () => {
    const notJson = Buffer.from('not json').toString('base64url');
    const wrongShape = Buffer.from(JSON.stringify({ offset: 20 })).toString('base64url');
    for (const cursor of ['', '!!!', '20', notJson, wrongShape, ['a', 'b'], 5]) {
      expect(fieldsOfError(() => validateListQuery({ cursor }))).to.deep.equal(['cursor']);
    }
  });

  it('C-11: a bad limit and a bad cursor are reported together', () => {
    expect(fieldsOfError(() => validateListQuery({ limit: '0', cursor: '!!' })).sort()).to.deep.equal(['cursor', 'limit']);
    expect(fieldsOfError(() => validateListQuery({ limit: 'x', cursor: ['a'] })).sort()).to.deep.equal(['cursor', 'limit']);
  });

  it('audit query: org is a UUID, kind one of the audit kinds, plus limit and cursor', () => {
    const org = '6F1C2B9E-3D4A-4E5F-8A7B-9C0D1E2F3A4B';
    expect(validateAuditQuery({ org, kind: 'api_key_revoked', limit: '3' })).to.deep.equal({
      limit: 3,
      after: null,
      organisationId: org.toLowerCase(),
      kind: 'api_key_revoked',
    });
    for (const kind of AUDIT_KINDS) expect(validateAuditQuery({ kind }).kind).to.equal(kind);
    expect(fieldsOfError(() => validateAuditQuery({ org: 'nope', kind: 'deleted', limit: 0 })).sort()).to.deep.equal([
      'kind',
      'limit',
      'org',
    ]);
  });
});

describe('validation: path ids', () => {
  it('C-8: a UUID is accepted and upper case is normalised to lower case', () => {
    expect(validateUuid('6F1C2B9E-3D4A-4E5F-8A7B-9C0D1E2F3A4B', 'org_id')).to.equal('6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b');
  });

  it('C-8: anything else is 400 with the parameter name as field', () => {
    for (const field of ['org_id', 'key_id', 'member_id']) {
      for (const bad of ['', 'abc', '6f1c2b9e3d4a4e5f8a7b9c0d1e2f3a4b', '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4', ' 6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b', '../etc', undefined, 5]) {
        expect(details(() => validateUuid(bad, field))).to.deep.equal([{ field, issue: 'must be a UUID' }]);
      }
    }
  });
});

// ---------- properties: random JSON never throws anything but ValidationError ----------

const INTERESTING_KEYS = [
  'name', 'slug', 'label', 'expires_at', 'environment', 'email', 'limit', 'cursor', 'org', 'kind',
  'industry_section', 'is_system', 'id', '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf',
];

/** A JSON value, sometimes deep, sometimes with huge or tiny numbers. */
const jsonValue = fc.oneof(
  fc.jsonValue({ maxDepth: 6 }),
  fc.constantFrom(1e308, -1e308, 5e-324, Number.MAX_SAFE_INTEGER + 2, -0, 2 ** 53, '9'.repeat(400)),
  fc.integer({ min: 1, max: 2000 }).map((depth) => JSON.parse(`${'['.repeat(depth)}1${']'.repeat(depth)}`) as unknown),
  fc.string({ unit: 'binary', maxLength: 300 }),
);

/**
 * A body as an HTTP adapter would hand it over: the result of JSON.parse of a text, so keys like
 * "__proto__" become own properties exactly as they would from a real request.
 */
const parsedObject = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom(...INTERESTING_KEYS), fc.string({ maxLength: 12 })), jsonValue), { maxLength: 8 })
  .map((entries) => JSON.parse(`{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`) as unknown);

const anyBody = fc.oneof(parsedObject, jsonValue);

function onlyValidationErrors(fn: () => unknown): void {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    expect(e.details.length).to.be.greaterThan(0);
    const fields = e.details.map((d) => d.field);
    expect(new Set(fields).size).to.equal(fields.length);
    for (const d of e.details) {
      expect(d.field).to.be.a('string');
      expect(d.issue).to.be.a('string').and.not.equal('');
    }
  }
  expect(({} as Record<string, unknown>)['polluted']).to.equal(undefined);
}

describe('validation: properties over random JSON (fast-check)', () => {
  const validators: Array<[string, (input: unknown) => unknown]> = [
    ['create organisation', validateCreateOrganisation],
    ['replace organisation', validateReplaceOrganisation],
    ['patch organisation', validatePatchOrganisation],
    ['issue key', (b) => validateIssueKey(b, NOW)],
    ['add member', validateAddMember],
    ['list query', (q) => validateListQuery(q as Record<string, unknown>)],
    ['audit query', (q) => validateAuditQuery(q as Record<string, unknown>)],
    ['org_id', (v) => validateUuid(v, 'org_id')],
    ['section', validateSection],
  ];
  for (const [name, validate] of validators) {
    it(`C-11: random JSON into ${name} throws nothing but ValidationError, one detail per field`, () => {
      fc.assert(fc.property(anyBody, (body) => onlyValidationErrors(() => validate(body))), { numRuns: 400 });
    });
  }

  it('C-11: every unknown key of an otherwise valid create body is reported as an extra field', () => {
    const extraKey = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => k !== 'name' && k !== 'slug');
    fc.assert(
      fc.property(fc.uniqueArray(extraKey, { minLength: 1, maxLength: 5 }), (extras) => {
        const text = `{"name":"Acme","slug":"acme",${extras.map((k) => `${JSON.stringify(k)}:1`).join(',')}}`;
        const body = JSON.parse(text) as unknown;
        // Integer-like keys ("0") come first in JavaScript's key order: compare as a set.
        const got = details(() => validateCreateOrganisation(body));
        expect(got).to.have.length(extras.length);
        expect(got).to.have.deep.members(extras.map((field) => ({ field, issue: ISSUE_EXTRA_FIELD })));
      }),
    );
  });

  it('C-5: every integer limit is accepted exactly when it lies in 1..100, as number or string', () => {
    fc.assert(
      fc.property(fc.integer({ min: -1000, max: 1000 }), fc.boolean(), (n, asString) => {
        const query = { limit: asString ? String(n) : n };
        if (n >= 1 && n <= 100) expect(validateListQuery(query).limit).to.equal(n);
        else expect(fieldsOfError(() => validateListQuery(query))).to.deep.equal(['limit']);
      }),
    );
  });
});
