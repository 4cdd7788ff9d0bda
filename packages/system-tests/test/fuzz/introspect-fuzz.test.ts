/**
 * Fuzzing the body of POST /v1/introspect (C-273, C-272) against a live service (Koa over SQLite in
 * memory, real sockets): JSON of any shape, form-encoded bodies, form and JSON mixed (each under the
 * other's content type), huge and odd tokens, and content types that are neither. Invariants, for
 * every case:
 *   - never a 5xx: 200, 400 or 413 only, each in its documented shape (docs/openapi.yaml);
 *   - a content type that is neither JSON nor a form is 400 naming `Content-Type` (RFC 7662's
 *     invalid_request);
 *   - a 200 only for a body that is one (a JSON object, or a form, with a `token` of 1 to 512
 *     characters, a boolean `count`, an address as `source_address`, nothing else), and then either
 *     exactly `{"active": false}` or the record of the key the token is;
 *   - a 400 names a field, and nothing is stored after any of them (every table compared).
 * Seeded like the other fuzz suites: FUZZ_SEED=<seed> replays a run.
 */
import { isIP } from 'node:net';
import fc from 'fast-check';
import { OPERATOR } from '@cos/core';
import { startStack, type Stack } from '../support/stack.js';
import { createCast, type Cast } from '../support/fixture.js';
import { StateProbe } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { openApiProblems } from '../support/openapi.js';
import { announceSeed, fuzzParameters, scaledRuns } from '../support/fuzz-seed.js';

const JSON_TYPE = 'application/json';
const FORM_TYPE = 'application/x-www-form-urlencoded';

interface Case {
  /** The body as sent. */
  readonly body: string;
  /** The Content-Type sent, or none. */
  readonly contentType: string | undefined;
  /** The fields the service should see, when the body is one it reads (JSON object or form); null otherwise. */
  readonly fields: Record<string, unknown> | null;
  /** True when the Content-Type is neither JSON nor a form (or absent with a body): 400 naming it. */
  readonly wrongType?: boolean;
}

/** Tokens: the cast's own keys (active, revoked, expired), near misses, odd characters, huge ones. */
function tokenArbitrary(cast: Cast): fc.Arbitrary<unknown> {
  const keys = [cast.own.key, cast.other.key, cast.platform.key, ...cast.rawKeys];
  return fc.oneof(
    fc.constantFrom(...keys),
    fc.constantFrom(...keys).map((k) => k.slice(0, -1)),
    fc.constantFrom(...keys).map((k) => `${k} `),
    fc.string({ maxLength: 80 }),
    fc.string({ unit: 'binary', maxLength: 80 }),
    fc.integer({ min: 500, max: 4_000 }).map((n) => 'svc_live_'.padEnd(n, 'A')),
    fc.constant(''),
    fc.jsonValue({ maxDepth: 2 }),
  );
}

function fieldsArbitrary(cast: Cast): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
    {
      token: tokenArbitrary(cast),
      count: fc.oneof(fc.boolean(), fc.constantFrom('true', 'false', 1, 0, null, 'yes')),
      source_address: fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('10.0.0.0/8', '203.0.113', '::ffff:1.2.3.4', 'localhost', ''), fc.string({ maxLength: 20 })),
      token_type_hint: fc.oneof(fc.constant('api_key'), fc.string({ maxLength: 10 })),
      scope: fc.string({ maxLength: 10 }),
    },
    { requiredKeys: [] },
  );
}

/** A form of the fields: values as text, a field repeated now and then. */
function formOf(fields: Record<string, unknown>, repeat: boolean): { body: string; seen: Record<string, unknown> | null } {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) params.append(name, typeof value === 'string' ? value : JSON.stringify(value));
  const first = Object.keys(fields)[0];
  if (repeat && first !== undefined) params.append(first, 'again');
  const seen: Record<string, unknown> = {};
  for (const [name, value] of new URLSearchParams(params.toString())) seen[name] = name === 'count' && (value === 'true' || value === 'false') ? value === 'true' : value;
  return { body: params.toString(), seen: repeat && first !== undefined ? null : seen };
}

function caseArbitrary(cast: Cast): fc.Arbitrary<Case> {
  const fields = fieldsArbitrary(cast);
  const oddType = fc.constantFrom(undefined, 'text/plain', 'application/xml', 'multipart/form-data; boundary=x', `${JSON_TYPE}; charset=latin1`, `${FORM_TYPE}; charset=utf-16`, 'application/json, application/x-www-form-urlencoded', '', ';;;');
  // Bodies that are one (most fields drawn above are not): their answers are checked too.
  const wellFormed = fc.record(
    { token: fc.oneof(fc.constantFrom(cast.own.key, cast.other.key, cast.platform.key, ...cast.rawKeys), fc.string({ minLength: 1, maxLength: 512 })), count: fc.boolean(), source_address: fc.oneof(fc.ipV4(), fc.ipV6()) },
    { requiredKeys: ['token'] },
  );
  return fc.oneof(
    wellFormed.map((f): Case => ({ body: JSON.stringify(f), contentType: JSON_TYPE, fields: f })),
    wellFormed.map((f): Case => {
      const form = formOf(f, false);
      return { body: form.body, contentType: FORM_TYPE, fields: form.seen };
    }),
    // JSON objects under a JSON type.
    fields.map((f): Case => ({ body: JSON.stringify(f), contentType: fc.sample(fc.constantFrom(JSON_TYPE, `${JSON_TYPE}; charset=utf-8`, 'application/vnd.api+json'), 1)[0], fields: f })),
    // Forms under the form type, a field repeated now and then.
    fc.tuple(fields, fc.boolean()).map(([f, repeat]): Case => {
      const form = formOf(f, repeat);
      return { body: form.body, contentType: FORM_TYPE, fields: form.seen };
    }),
    // Mixed: a form under the JSON type, JSON under the form type.
    fields.map((f): Case => ({ body: formOf(f, false).body, contentType: JSON_TYPE, fields: null })),
    fields.map((f): Case => {
      const json = JSON.stringify(f);
      return { body: json, contentType: FORM_TYPE, fields: Object.keys(f).length === 0 ? {} : formOf(Object.fromEntries(new URLSearchParams(json)), false).seen };
    }),
    // Any JSON value, and bytes that are not JSON.
    fc.jsonValue({ maxDepth: 3 }).map((v): Case => ({ body: JSON.stringify(v), contentType: JSON_TYPE, fields: typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null })),
    fc.string({ unit: 'binary', maxLength: 200 }).map((s): Case => ({ body: s, contentType: fc.sample(fc.constantFrom(JSON_TYPE, FORM_TYPE), 1)[0], fields: null })),
    // Any body under a type that is neither.
    fc.tuple(fields, oddType).map(([f, type]): Case => ({ body: JSON.stringify(f), contentType: type, fields: null, wrongType: true })),
  );
}

/** True when the service must answer 200 for these fields (C-273). */
function acceptable(fields: Record<string, unknown>): boolean {
  const allowed = new Set(['token', 'count', 'source_address', 'token_type_hint']);
  if (Object.keys(fields).some((k) => !allowed.has(k))) return false;
  const { token, count, source_address: address, token_type_hint: hint } = fields;
  if (typeof token !== 'string' || token.length === 0 || token.length > 512) return false;
  if (count !== undefined && typeof count !== 'boolean') return false;
  if (address !== undefined && (typeof address !== 'string' || isIP(address) === 0)) return false;
  if (hint !== undefined && (typeof hint !== 'string' || hint.length > 512)) return false;
  return true;
}

describe('system: fuzzing the body of POST /v1/introspect (C-272, C-273)', function () {
  this.timeout(300_000);
  let stack: Stack;
  let cast: Cast;
  let probe: StateProbe;
  let gateway: string;
  const statuses = new Map<number, number>();

  before(async () => {
    announceSeed();
    stack = await startStack({ config: { rateLimitPerMinute: 1_000_000_000, introspectionRateLimitPerMinute: 1_000_000_000 } });
    cast = await createCast(stack.core);
    gateway = (await stack.core.apiKeys.issue(OPERATOR, cast.platform.id, { label: 'gateway', scopes: ['keys:introspect'] })).rawKey;
    probe = new StateProbe(stack.store.knex);
  });
  after(async () => {
    await stack?.close();
  });

  it(`${scaledRuns(1500)} bodies (bad JSON, huge tokens, form and JSON mixed, wrong content types): 200, 400 or 413, never a 5xx, and nothing stored`, async () => {
    const active = new Set([cast.own.key, cast.other.key, cast.platform.key]);
    await fc.assert(
      fc.asyncProperty(caseArbitrary(cast), async (c) => {
        await probe.mark();
        const headers: Record<string, string> = { authorization: `Bearer ${gateway}` };
        if (c.contentType !== undefined) headers['content-type'] = c.contentType;
        const r = await stack.client.send({ method: 'POST', path: '/v1/introspect', headers, body: c.body });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        // checkResponse knows the success shapes of the twelve v1 operations only: a 200 is checked against docs/openapi.yaml.
        const problems = [...(r.status === 200 ? [] : checkResponse(r)), ...openApiProblems(r)];
        if (![200, 400, 413].includes(r.status)) problems.push(`status ${r.status}`);
        if (c.wrongType === true && (r.status !== 400 || r.json<{ details: { field?: string }[] }>().details[0]?.field !== 'Content-Type')) problems.push('a wrong content type not answered 400 Content-Type');
        const readable = c.fields !== null && (c.contentType === FORM_TYPE || (c.contentType ?? '').startsWith(JSON_TYPE) || c.contentType === 'application/vnd.api+json');
        const expectOk = readable && c.fields !== null && acceptable(c.fields);
        if (expectOk && r.status !== 200) problems.push(`expected 200, got ${r.status}`);
        if (!expectOk && r.status === 200) problems.push('200 for a body that is not one');
        if (r.status === 200) {
          const body = r.json<{ active: boolean; key_prefix?: string }>();
          const token = c.fields?.['token'];
          if (typeof token === 'string' && active.has(token)) {
            if (body.active !== true || body.key_prefix !== token.slice(0, 12)) problems.push(`an active key answered ${r.text}`);
          } else if (r.text !== '{"active":false}' && !(typeof token === 'string' && cast.rawKeys.includes(token))) problems.push(`not a key, answered ${r.text}`);
        }
        if (r.status === 400 && r.json<{ details: { field?: string }[] }>().details.some((d) => typeof d.field !== 'string')) problems.push('400 detail without a field');
        const diff = await probe.diff();
        if (diff.length > 0) problems.push(`state changed: ${diff.slice(0, 3).join(' | ')}`);
        if (problems.length > 0) throw new Error(`${problems.join('\n')}\n  ${c.contentType} ${JSON.stringify(c.body.slice(0, 300))} -> ${r.status} ${r.text.slice(0, 300)}`);
      }),
      fuzzParameters(1500, 40),
    );
    const histogram = [...statuses.entries()].sort(([a], [b]) => a - b).map(([k, v]) => `${k}:${v}`);
    console.log(`      statuses ${histogram.join(' ')}`);
    for (const status of [200, 400]) if ((statuses.get(status) ?? 0) === 0) throw new Error(`status ${status} never seen`);
  });
});
